"""Settings: LLM endpoint, device, model folders, sampling rate, camera per folder, UI prefs.

Everything lives in a QSettings store the caller passes in (tests give a temporary INI file). The
LLM API key is never stored there: it comes from ``STRIVED_LLM_API_KEY``/``OPENAI_API_KEY`` or the
system keyring (``strived.llm.config``); the dialog can write it to the keyring only.
"""

from __future__ import annotations

import html
import json
import os

from strived import api
from strived.api import RuleLibrary, RuleLibraryError

from PySide6.QtCore import QSettings, Qt, Signal
from PySide6.QtWidgets import (QComboBox, QDialog, QDialogButtonBox, QDoubleSpinBox, QFileDialog,
                               QFormLayout, QGroupBox, QHBoxLayout, QLabel, QLineEdit, QPushButton,
                               QSizePolicy, QVBoxLayout, QWidget)

from .workers import Worker

DEVICES = ("auto", "cpu", "cuda")
DEFAULT_CAMERA = {"focal_px": 0.0, "height_m": 1.4, "pitch_deg": 0.0}   # 0 focal = estimate
HISTORY_MAX = 50


class AppSettings:
    """Typed access to the app's QSettings (config and UI preferences; never secrets)."""

    def __init__(self, qsettings: QSettings | None = None):
        self.q = qsettings or QSettings("STRIVE-D", "strived-app")

    def _get(self, key, default, kind=str):
        v = self.q.value(key, default)
        if v is None:
            return default
        try:
            if kind is bool:
                return v if isinstance(v, bool) else str(v).lower() in ("1", "true", "yes")
            return kind(v)
        except (TypeError, ValueError):
            return default

    # -- engine configuration
    llm_base_url = property(lambda s: s._get("llm/base_url", ""),
                            lambda s, v: s.q.setValue("llm/base_url", v.strip()))
    llm_model = property(lambda s: s._get("llm/model", "default"),
                         lambda s, v: s.q.setValue("llm/model", v.strip() or "default"))
    device = property(lambda s: s._get("engine/device", "auto") if s._get("engine/device", "auto")
                      in DEVICES else "auto", lambda s, v: s.q.setValue("engine/device", v))
    detector_dir = property(lambda s: s._get("models/detector_dir", ""),
                            lambda s, v: s.q.setValue("models/detector_dir", v))
    embedder_dir = property(lambda s: s._get("models/embedder_dir", ""),
                            lambda s, v: s.q.setValue("models/embedder_dir", v))
    sample_fps = property(lambda s: s._get("indexing/sample_fps", 10.0, float),
                          lambda s, v: s.q.setValue("indexing/sample_fps", float(v)))
    # a rule library JSON (`strived calibrate`) searches use instead of the shipped ones; "" = shipped
    rule_library_path = property(lambda s: s._get("search/rule_library", ""),
                                 lambda s, v: s.q.setValue("search/rule_library", str(v or "")))

    def camera(self, folder: str) -> dict:
        raw = self._get(f"camera/{_folder_key(folder)}", "")
        try:
            cam = dict(DEFAULT_CAMERA, **json.loads(raw)) if raw else dict(DEFAULT_CAMERA)
        except ValueError:
            cam = dict(DEFAULT_CAMERA)
        return cam

    def set_camera(self, folder: str, camera: dict) -> None:
        self.q.setValue(f"camera/{_folder_key(folder)}", json.dumps(camera, sort_keys=True))

    def llm_config(self):
        """The engine's LLMConfig: file/env as the CLI reads them, overridden by the app's fields."""
        over = {}
        if self.llm_base_url:
            over.update(base_url=self.llm_base_url, model=self.llm_model, enabled=True)
        return api.load_llm_config(**over)

    # -- UI preferences
    def history(self) -> list[str]:
        raw = self._get("ui/history", "[]")
        try:
            return [str(x) for x in json.loads(raw)][:HISTORY_MAX]
        except ValueError:
            return []

    def add_history(self, query: str) -> list[str]:
        h = [q for q in self.history() if q != query]
        h.insert(0, query)
        self.q.setValue("ui/history", json.dumps(h[:HISTORY_MAX]))
        return h[:HISTORY_MAX]

    last_library = property(lambda s: s._get("ui/last_library", ""),
                            lambda s, v: s.q.setValue("ui/last_library", v))

    def pending_index(self, library: str) -> str:
        return self._get(f"pending_index/{_folder_key(library)}", "")

    def set_pending_index(self, library: str, folder: str | None) -> None:
        key = f"pending_index/{_folder_key(library)}"
        if folder:
            self.q.setValue(key, folder)
        else:
            self.q.remove(key)

    def sync(self) -> None:
        self.q.sync()


def _folder_key(folder: str) -> str:
    import hashlib

    return hashlib.sha1(os.path.abspath(str(folder)).encode()).hexdigest()[:16]


def load_rule_library(path: str):
    """The RuleLibrary at ``path``; raises RuleLibraryError (a readable message) when it is not
    one (missing, not JSON, not a rule library, an invalid rule)."""
    try:
        return RuleLibrary.load(path)
    except RuleLibraryError:
        raise
    except (OSError, UnicodeDecodeError) as e:
        raise RuleLibraryError(f"rule library {path} cannot be read: {e}") from None
    except Exception as e:  # noqa: BLE001 - any other defect of the file, in words
        raise RuleLibraryError(f"rule library {path} is not usable: {type(e).__name__}: {e}") from None


def rule_library_summary(lib) -> str:
    """One line about a loaded rule library: events, how many calibrated, version, corpus."""
    n = len(lib.entries)
    cal = sum(1 for e in lib.entries.values() if e.calibrated)
    corpus = (lib.provenance or {}).get("corpus")
    bits = [f"{n} events ({cal} calibrated)", f"version {lib.version}"]
    if corpus:
        bits.append(f"calibrated on {corpus}")
    if lib.created:
        bits.append(f"created {lib.created}")
    if (lib.provenance or {}).get("version_mismatch"):
        bits.append(f"note: {lib.provenance['version_mismatch']}")
    return " · ".join(bits)


def key_source() -> str:
    """Where the API key would come from (never the key itself)."""
    if os.environ.get("STRIVED_LLM_API_KEY"):
        return "environment (STRIVED_LLM_API_KEY)"
    if os.environ.get("OPENAI_API_KEY"):
        return "environment (OPENAI_API_KEY)"
    try:
        import keyring  # noqa: F401
    except ImportError:
        return "none (set STRIVED_LLM_API_KEY; the keyring module is not installed)"
    return "system keyring (service 'strived', user 'llm') if set"


class SettingsDialog(QDialog):
    """Edits AppSettings; tests the LLM endpoint in a worker; never shows or stores a key."""

    applied = Signal()

    def __init__(self, settings: AppSettings, folder: str = "", parent: QWidget | None = None):
        super().__init__(parent)
        self.setWindowTitle("Settings")
        self.settings, self.folder = settings, folder
        self._worker = None
        self._make_llm_widgets(settings)
        self._make_indexing_widgets(settings, folder)
        self._make_rule_library_widgets(settings)
        boxes = (self._llm_box(), self._indexing_box(), self._search_box(), self._camera_box(folder))
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok
                                   | QDialogButtonBox.StandardButton.Cancel, self)
        buttons.accepted.connect(self._on_accepted)
        buttons.rejected.connect(self.reject)
        lay = QVBoxLayout(self)
        for w in boxes:
            lay.addWidget(w)
        lay.addWidget(buttons)

    def _make_llm_widgets(self, s: AppSettings) -> None:
        """The LLM endpoint's fields, the key's source and keyring entry, and the connection test."""
        self.base_url = QLineEdit(s.llm_base_url, self, placeholderText="http://127.0.0.1:8080/v1 (empty = offline)")
        self.model = QLineEdit(s.llm_model, self)
        self.key_label = QLabel(key_source(), self)
        self.key_label.setObjectName("dim")
        self.key_edit = QLineEdit(self, placeholderText="store a key in the system keyring")
        self.key_edit.setEchoMode(QLineEdit.EchoMode.Password)
        try:
            import keyring  # noqa: F401
        except ImportError:
            self.key_edit.setEnabled(False)
            self.key_edit.setPlaceholderText("keyring module not installed: use STRIVED_LLM_API_KEY")
        self.test_button = QPushButton("Test connection", self)
        self.test_button.clicked.connect(self._on_test_clicked)
        self.test_result = QLabel("", self)
        self.test_result.setObjectName("testResult")
        self.test_result.setWordWrap(True)
        self.test_result.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.test_result.setSizePolicy(QSizePolicy.Policy.Preferred,
                                       QSizePolicy.Policy.MinimumExpanding)

    def _make_indexing_widgets(self, s: AppSettings, folder: str) -> None:
        """Device, model folders, sampling rate and the folder's camera (defaults without a folder)."""
        self.device = QComboBox(self)
        self.device.addItems(["auto", "cpu", "cuda"])
        self.device.setCurrentText(s.device)
        self.detector_dir = QLineEdit(s.detector_dir, self, placeholderText="embedded NanoDet-g (default)")
        self.embedder_dir = QLineEdit(s.embedder_dir, self, placeholderText="embedded MiniLM / none")
        self.sample_fps = QDoubleSpinBox(self, minimum=0.5, maximum=60.0, decimals=1, suffix=" fps")
        self.sample_fps.setValue(s.sample_fps)
        cam = s.camera(folder) if folder else dict(DEFAULT_CAMERA)
        self.focal = QDoubleSpinBox(self, minimum=0.0, maximum=20000.0, decimals=1, suffix=" px",
                                    specialValueText="estimate from the image")
        self.focal.setValue(cam["focal_px"])
        self.cam_height = QDoubleSpinBox(self, minimum=0.3, maximum=5.0, decimals=2, suffix=" m")
        self.cam_height.setValue(cam["height_m"])
        self.pitch = QDoubleSpinBox(self, minimum=-30.0, maximum=30.0, decimals=1, suffix=" °")
        self.pitch.setValue(cam["pitch_deg"])

    def _make_rule_library_widgets(self, s: AppSettings) -> None:
        """The rule library's path, its Choose / shipped buttons and what it is."""
        # the rule library searches use: chosen with "Choose…" (checked at once; a bad file keeps
        # the previous choice), back to the shipped ones with "Use the shipped rules"
        self.rule_library = QLineEdit(s.rule_library_path, self, objectName="ruleLibraryPath",
                                      placeholderText="the shipped, calibrated rule libraries")
        self.rule_library.setReadOnly(True)
        self.rule_library_choose = QPushButton("Choose…", self, objectName="chooseRuleLibrary")
        self.rule_library_choose.clicked.connect(self._on_choose_rule_library)
        self.rule_library_reset = QPushButton("Use the shipped rules", self,
                                              objectName="shippedRuleLibrary")
        self.rule_library_reset.clicked.connect(self._on_shipped_rule_library)
        self.rule_library_info = QLabel("", self, objectName="ruleLibraryInfo")
        self.rule_library_info.setWordWrap(True)
        self.rule_library_info.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self._describe_rule_library(s.rule_library_path)

    def _llm_box(self) -> QGroupBox:
        """The LLM endpoint group."""
        llm = QGroupBox("LLM endpoint (OpenAI-compatible; optional)", self)
        f = QFormLayout(llm)
        f.addRow("Base URL", self.base_url)
        f.addRow("Model", self.model)
        f.addRow("API key from", self.key_label)
        f.addRow("Keyring", self.key_edit)
        row = QHBoxLayout()
        row.addWidget(self.test_button)
        row.addStretch(1)
        f.addRow(row)
        f.addRow(self.test_result)          # its own full-width row: long verdicts wrap, never cut
        return llm

    def _indexing_box(self) -> QGroupBox:
        """The indexing group."""
        eng = QGroupBox("Indexing", self)
        f2 = QFormLayout(eng)
        f2.addRow("Device", self.device)
        f2.addRow("Detector model folder", self._with_browse(self.detector_dir))
        f2.addRow("Embedder model folder", self._with_browse(self.embedder_dir))
        f2.addRow("Sampling rate", self.sample_fps)
        return eng

    def _search_box(self) -> QGroupBox:
        """The search group: the rule library."""
        search_box = QGroupBox("Search", self)
        f4 = QFormLayout(search_box)
        rl = QWidget(self)
        h = QHBoxLayout(rl)
        h.setContentsMargins(0, 0, 0, 0)
        h.addWidget(self.rule_library, 1)
        h.addWidget(self.rule_library_choose)
        h.addWidget(self.rule_library_reset)
        f4.addRow("Rule library", rl)
        f4.addRow(self.rule_library_info)
        return search_box

    def _camera_box(self, folder: str) -> QGroupBox:
        """The camera group of ``folder`` (disabled without one)."""
        cam_box = QGroupBox(f"Camera for {folder or '(no folder)'}", self)
        cam_box.setEnabled(bool(folder))
        f3 = QFormLayout(cam_box)
        f3.addRow("Focal length", self.focal)
        f3.addRow("Mount height", self.cam_height)
        f3.addRow("Pitch", self.pitch)
        return cam_box

    def _with_browse(self, edit: QLineEdit) -> QWidget:
        w = QWidget(self)
        h = QHBoxLayout(w)
        h.setContentsMargins(0, 0, 0, 0)
        h.addWidget(edit, 1)
        b = QPushButton("…", w)
        b.setFixedWidth(28)
        b.clicked.connect(lambda: edit.setText(QFileDialog.getExistingDirectory(self, "Model folder",
                                                                               edit.text()) or edit.text()))
        h.addWidget(b)
        return w

    def _describe_rule_library(self, path: str, error: str = "") -> None:
        self._rule_library_text(path, error)
        self._fit_label(self.rule_library_info)

    def _rule_library_text(self, path: str, error: str = "") -> None:
        lab = self.rule_library_info
        if error:
            lab.setText(f"<span style='color:#ff6b6b'>✗ {html.escape(error)}</span><br>"
                        f"Kept: {html.escape(path or 'the shipped rules')}.")
            return
        if not path:
            lab.setText("Searches use the shipped rule libraries (one per calibration profile: "
                        "imported tracks, our own perception).")
            return
        try:
            lab.setText(f"✓ {html.escape(rule_library_summary(load_rule_library(path)))}. Every "
                        "search uses it for every video (no per-profile rules).")
        except Exception as e:  # noqa: BLE001 - a file that went bad since it was chosen
            lab.setText(f"<span style='color:#ff6b6b'>✗ {html.escape(str(e))}</span><br>"
                        "Searches use the shipped rules until it is fixed or another is chosen.")

    def choose_rule_library(self, path: str) -> bool:
        """Check ``path`` and take it (True), or say why not and keep the previous choice."""
        try:
            load_rule_library(path)
        except Exception as e:  # noqa: BLE001 - RuleLibraryError and anything else, in words
            self._describe_rule_library(self.rule_library.text(), error=str(e))
            return False
        self.rule_library.setText(path)
        self._describe_rule_library(path)
        return True

    def _on_choose_rule_library(self) -> None:
        start = self.rule_library.text() or os.path.expanduser("~")
        path, _ = QFileDialog.getOpenFileName(self, "Rule library (written by strived calibrate)",
                                              start, "Rule library (*.json);;All files (*)")
        if path:
            self.choose_rule_library(path)

    def _on_shipped_rule_library(self) -> None:
        self.rule_library.setText("")
        self._describe_rule_library("")

    def apply(self) -> None:
        s = self.settings
        url = self.base_url.text().strip()
        if url and not url.startswith(("http://", "https://")):
            raise ValueError(f"the base URL must start with http:// or https:// (got {url!r})")
        s.llm_base_url = url
        s.llm_model = self.model.text()
        s.device = self.device.currentText()
        s.detector_dir = self.detector_dir.text().strip()
        s.embedder_dir = self.embedder_dir.text().strip()
        s.sample_fps = self.sample_fps.value()
        s.rule_library_path = self.rule_library.text().strip()
        if self.folder:
            s.set_camera(self.folder, {"focal_px": self.focal.value(),
                                       "height_m": self.cam_height.value(),
                                       "pitch_deg": self.pitch.value()})
        if self.key_edit.isEnabled() and self.key_edit.text():
            import keyring

            keyring.set_password(api.KEYRING_SERVICE, api.KEYRING_USER, self.key_edit.text())
            self.key_edit.clear()
        s.sync()
        self.applied.emit()

    def _on_accepted(self) -> None:
        try:
            self.apply()
        except ValueError as e:
            self._show_result(f"<span style='color:#ff6b6b'>{html.escape(str(e))}</span>")
            return
        self.accept()

    def _on_test_clicked(self) -> None:
        url, model = self.base_url.text().strip(), self.model.text().strip() or "default"
        self._show_result("testing…")
        self.test_button.setEnabled(False)
        self._worker = Worker(check_llm_endpoint, url, model, pass_progress=False, pass_cancel=False)
        self._worker.signals.finished.connect(self._on_test_finished)
        self._worker.signals.errored.connect(lambda exc, _tb: self._on_test_finished(f"✗ {exc}"))
        self._worker.start()

    def _on_test_finished(self, message: str) -> None:
        self.test_button.setEnabled(True)
        ok = message.startswith("✓")
        self._show_result(f"<span style='color:{'#7bd88f' if ok else '#ff6b6b'}'>"
                          f"{html.escape(message)}</span>")

    def _show_result(self, rich: str) -> None:
        """Show a verdict whole: the label gets the height its wrapped text needs and the dialog
        grows to fit it (a top-level window does not grow by itself for a wrapped label)."""
        self.test_result.setText(rich)
        self._fit_label(self.test_result)

    def _fit_label(self, lab: QLabel) -> None:
        """Give a wrapped label the height its text needs and grow the dialog to fit it."""
        if self.layout() is None:            # still being built: the first layout sizes it
            return
        lab.setMinimumHeight(0)
        self.layout().activate()
        need = lab.heightForWidth(max(lab.width(), 200))
        lab.setMinimumHeight(need)
        self.layout().activate()
        hint = self.layout().totalHeightForWidth(self.width()) if self.layout().hasHeightForWidth() \
            else self.sizeHint().height()
        if self.height() < hint:
            self.resize(self.width(), hint)


def check_llm_endpoint(base_url: str, model: str, timeout_s: float = 5.0) -> str:
    """Ask the endpoint for a tiny JSON object; a readable one-line verdict (runs in a worker)."""
    if not base_url:
        return "✗ no base URL: the app works offline (library matcher and adapter)"
    try:
        cfg = api.load_llm_config(base_url=base_url, model=model, enabled=True, timeout_s=timeout_s)
        client = api.LLMClient(cfg, cache=False)
        client.complete_json("Answer with JSON.", 'Reply {"ok": true}.',
                             {"type": "object", "properties": {"ok": {"type": "boolean"}},
                              "required": ["ok"]}, stage="app.test", use_cache=False)
    except api.LLMError as e:
        return f"✗ {e}: searches will use the offline matcher and say so"
    return f"✓ {base_url} answered (model {model})"

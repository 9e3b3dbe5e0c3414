"""Library → Cameras…: the cameras the library's videos came from (issue 32). Each group with
its evidence (frame size, rate, codec, file naming), its videos, the camera values estimated
from its clips (with the clips and how) and the values the user gave; the user names and
confirms a group, gives or clears known values (checked at the field), splits videos off and
merges groups. Every database call runs on the library worker (``library_job``), never on the UI
thread: estimating a large group's values reads each of its videos' records."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPlainTextEdit,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from strived import api

from .connections import library_job
from .workers import Worker

#: The known values a user may give: (engine key, label, unit).
FIELDS = (("focal_px", "Focal length", "px"), ("hfov_deg", "Horizontal field of view", "°"),
          ("camera_height_m", "Height above the road", "m"),
          ("horizon_frac", "Horizon (row / frame height)", ""))
COLUMNS = ("Group", "Videos", "Size", "fps", "Codec", "Name pattern", "Confirmed", "Known values")
INDEX_WORDS = "index of their folder (File → Index folder…)"


def _first(evidence: dict, key: str) -> str:
    """The value most of a group's videos show, with the others counted ("unknown" when none)."""
    vals = evidence.get(key) or {}
    if not vals:
        return "unknown"
    top = next(iter(vals))
    return top if len(vals) == 1 else f"{top} (+{len(vals) - 1} other)"


def known_text(known: dict) -> str:
    return ", ".join(f"{k}={v:g}" for k, v in known.items()) or "none given"


def details_text(info: dict) -> str:
    """A group's evidence and estimated values, as `strived camera show` prints them."""
    lines = ["Evidence (value: videos):"]
    lines += [f"  {k}: " + ", ".join(f"{v} ({n})" for v, n in vals.items())
              for k, vals in info["evidence"].items()]
    lines.append("Known values: " + known_text(info["known"]))
    lines.append("Estimated from its clips:")
    for k, e in info["estimated"].items():
        val = e["note"] if e["value"] is None else \
            f"{e['value']:g} (median of {len(e['clips'])} clip(s): {', '.join(e['clips'])})"
        how = ", ".join(f"{s} ({n})" for s, n in e["sources"].items()) or "no clip has one"
        lines.append(f"  {k}: {val}; how: {how}")
    return "\n".join(lines)


# -- jobs (library worker thread): each returns what the dialog shows next ----------------------
def _view(lib, cid: int | None) -> tuple[list[dict], dict | None]:
    groups = api.camera_groups(lib)
    if cid not in {g["id"] for g in groups}:
        cid = groups[0]["id"] if groups else None
    return groups, (api.camera_group(lib, cid) if cid is not None else None)


def load_job(lib, cid):
    return "", *_view(lib, cid)


def set_job(lib, cid: int, changes: dict):
    c, again = api.set_camera_group(lib, cid, **changes)
    note = f"Camera group {cid} saved ({c['name']}; known: {known_text(c['known'])})."
    if again is not None:
        more = api.reperceive_note(again, INDEX_WORDS)
        note += f" {more[0].upper()}{more[1:]}."
    return note, *_view(lib, cid)


def split_job(lib, cid: int, video_ids: list[str]):
    new = api.split_camera_group(lib, cid, video_ids)
    n = len(video_ids)
    return (f"{n} video{'s' if n != 1 else ''} split off camera group {cid} into a new group "
            f"{new}.", *_view(lib, new))


def merge_job(lib, into: int, others: list[int]):
    c = api.merge_camera_groups(lib, into, others)
    return (f"Camera groups {', '.join(map(str, others))} merged into {into}: "
            f"{len(c['videos'])} videos.", *_view(lib, into))


class CamerasDialog(QDialog):
    """The library's camera groups; ``shown`` is emitted each time a job's result is shown."""

    shown = Signal()

    def __init__(self, conns, jobs, presenter, readonly_reason: str = "", parent=None):
        super().__init__(parent)
        self.setWindowTitle("Cameras")
        self.setObjectName("camerasDialog")
        self.conns, self.jobs, self.presenter = conns, jobs, presenter
        self.readonly_reason = readonly_reason
        self.groups: list[dict] = []
        self.info: dict | None = None
        self.worker: Worker | None = None
        lay = QVBoxLayout(self)
        self.readonly_label = QLabel(self)
        self.readonly_label.setWordWrap(True)
        self.readonly_label.setVisible(bool(readonly_reason))
        self.readonly_label.setText(f"This library is read-only ({readonly_reason}): its camera "
                                    "groups are shown as last stored, and cannot be changed.")
        lay.addWidget(self.readonly_label)
        body = QHBoxLayout()
        body.addLayout(self._build_groups(), 3)
        body.addLayout(self._build_group_side(), 2)
        lay.addLayout(body, 1)
        self.notice = QLabel(self)
        self.notice.setObjectName("cameraNotice")
        self.notice.setWordWrap(True)
        self.notice.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        lay.addWidget(self.notice)
        bb = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        bb.rejected.connect(self.close)
        lay.addWidget(bb)
        self.resize(1200, 680)
        self._set_enabled()
        self._run(load_job, None)

    def _build_groups(self) -> QVBoxLayout:
        """The groups table, the details of the selected group and Merge."""
        col = QVBoxLayout()
        self.table = QTableWidget(0, len(COLUMNS), self)
        self.table.setObjectName("cameraGroups")
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().setVisible(False)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.itemSelectionChanged.connect(self._on_selection_changed)
        col.addWidget(self.table, 2)
        self.merge_button = QPushButton("Merge selected groups into the first", self)
        self.merge_button.setToolTip("Select two groups or more (Ctrl+click): the videos of the "
                                     "others join the first one, with their signatures")
        self.merge_button.clicked.connect(self.merge_selected)
        col.addWidget(self.merge_button, 0, Qt.AlignmentFlag.AlignLeft)
        self.details = QPlainTextEdit(self)
        self.details.setObjectName("cameraDetails")
        self.details.setReadOnly(True)
        col.addWidget(self.details, 2)
        return col

    def _build_group_side(self) -> QVBoxLayout:
        """The selected group's form (name, confirmed, known values) and its videos with Split."""
        col = QVBoxLayout()
        form = QFormLayout()
        self.name_edit = QLineEdit(self)
        self.name_edit.setObjectName("cameraName")
        form.addRow("Name", self.name_edit)
        self.confirmed_box = QCheckBox("The grouping is right (confirmed)", self)
        form.addRow("", self.confirmed_box)
        self.fields: dict[str, QLineEdit] = {}
        self.errors: dict[str, QLabel] = {}
        for key, label, unit in FIELDS:
            lo, hi = api.CAMERA_VALUE_RANGES[key]
            edit = QLineEdit(self)
            edit.setObjectName(key)
            edit.setPlaceholderText(f"unknown: estimated ({lo:g} to {hi:g}{' ' + unit if unit else ''})")
            edit.setToolTip("A value you know for this camera; leave empty to forget it")
            edit.returnPressed.connect(self.apply)
            err = QLabel(self)
            err.setObjectName(f"{key}_error")
            err.setStyleSheet("color: #d9534f;")
            err.setWordWrap(True)
            err.hide()
            box = QWidget(self)
            bl = QVBoxLayout(box)
            bl.setContentsMargins(0, 0, 0, 0)
            bl.addWidget(edit)
            bl.addWidget(err)
            form.addRow(f"{label}{f' ({unit})' if unit else ''}", box)
            self.fields[key], self.errors[key] = edit, err
        col.addLayout(form)
        self.apply_button = QPushButton("Apply", self)
        self.apply_button.setDefault(False)
        self.apply_button.setAutoDefault(False)
        self.apply_button.clicked.connect(self.apply)
        col.addWidget(self.apply_button, 0, Qt.AlignmentFlag.AlignRight)
        col.addWidget(QLabel("Videos of this group (select some to split them off):", self))
        self.videos = QListWidget(self)
        self.videos.setObjectName("cameraVideos")
        self.videos.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.videos.itemSelectionChanged.connect(self._set_enabled)
        col.addWidget(self.videos, 1)
        self.split_button = QPushButton("Split selected videos into a new group", self)
        self.split_button.clicked.connect(self.split_selected)
        col.addWidget(self.split_button, 0, Qt.AlignmentFlag.AlignLeft)
        return col

    # ------------------------------------------------------------------ jobs
    @property
    def busy(self) -> bool:
        return self.worker is not None and not self.worker.is_done

    def _run(self, job, *args) -> None:
        """``job(library, *args)`` on the library worker; its (notice, groups, details) shown."""
        if self.conns is None or self.busy:
            return
        w = Worker(library_job, self.conns, job, *args, pass_progress=False, pass_cancel=False,
                   name="cameras")
        w.signals.finished.connect(lambda res, w=w: self._on_finished(w, res))
        w.signals.errored.connect(lambda exc, tb, w=w: self._on_errored(w, exc, tb))
        w.signals.cancelled.connect(lambda w=w: self._on_errored(w, api.Cancelled(
            "the library was closed"), ""))
        self.worker = self.jobs.submit(w)
        self._set_enabled()

    def _on_finished(self, w: Worker, res) -> None:
        if w is not self.worker:
            return
        note, self.groups, self.info = res
        self.worker = None
        self._show_groups()
        self._show_info()
        if note:
            self.notice.setText(note)
        self._set_enabled()
        self.shown.emit()

    def _on_errored(self, w: Worker, exc, tb: str) -> None:
        if w is not self.worker:
            return
        self.worker = None
        if isinstance(exc, api.Cancelled):
            self.notice.setText("The library was closed.")
        elif isinstance(exc, api.StrivedError):   # a change refused (CameraError): nothing changed
            self.notice.setText(f"Not changed: {exc}")
        else:
            self.presenter.present("Cameras", exc, tb)
        self._set_enabled()
        self.shown.emit()

    # ------------------------------------------------------------------ showing
    def _show_groups(self) -> None:
        cur = self.info["id"] if self.info else None
        self.table.blockSignals(True)
        self.table.clearSelection()
        self.table.setRowCount(len(self.groups))
        for r, g in enumerate(self.groups):
            ev = g["evidence"]
            cells = (f"{g['id']}: {g['name']}", str(len(g["videos"])), _first(ev, "size"),
                     _first(ev, "fps"), _first(ev, "codec"), _first(ev, "name_pattern"),
                     "yes" if g["confirmed"] else "no", known_text(g["known"]))
            for c, text in enumerate(cells):
                it = QTableWidgetItem(text)
                it.setData(Qt.ItemDataRole.UserRole, g["id"])
                self.table.setItem(r, c, it)
            if g["id"] == cur:
                self.table.selectRow(r)
        self.table.blockSignals(False)
        if not self.groups:
            self.notice.setText("No videos in this library: no camera groups.")

    def _show_info(self) -> None:
        info = self.info
        self.details.setPlainText(details_text(info) if info else "")
        self.name_edit.setText(info["name"] if info else "")
        self.confirmed_box.setChecked(bool(info and info["confirmed"]))
        for key, edit in self.fields.items():
            v = (info or {}).get("known", {}).get(key)
            edit.setText("" if v is None else f"{v:g}")
            self.errors[key].hide()
        self.videos.clear()
        for v in (info or {}).get("videos", []):
            it = QListWidgetItem(v["id"] + (" (moved here by you)" if v["grouped_by"] == "user" else ""))
            it.setData(Qt.ItemDataRole.UserRole, v["id"])
            self.videos.addItem(it)

    def selected_groups(self) -> list[int]:
        rows = sorted({i.row() for i in self.table.selectedIndexes()})
        return [self.groups[r]["id"] for r in rows if r < len(self.groups)]

    def _set_enabled(self) -> None:
        can = not self.readonly_reason and not self.busy and self.info is not None
        for wdg in (self.name_edit, self.confirmed_box, self.apply_button, *self.fields.values()):
            wdg.setEnabled(can)
        self.split_button.setEnabled(can and bool(self.videos.selectedItems()))
        self.merge_button.setEnabled(can and len(self.selected_groups()) > 1)

    def _on_selection_changed(self) -> None:
        sel = self.selected_groups()
        if len(sel) == 1 and (self.info is None or sel[0] != self.info["id"]):
            self._run(load_job, sel[0])
        self._set_enabled()

    # ------------------------------------------------------------------ changes
    def field_values(self) -> tuple[dict, list[str]] | None:
        """(values to set, keys to clear) from the fields, each checked by the engine; None (the
        message shown under each field in error) when one is not a valid value."""
        known, clear, bad = {}, [], False
        had = (self.info or {}).get("known", {})
        for key, edit in self.fields.items():
            text, err = edit.text().strip(), self.errors[key]
            err.hide()
            if not text:
                if key in had:
                    clear.append(key)
                continue
            try:
                known.update(api.check_camera_values({key: text}))
            except api.CameraError as exc:
                err.setText(str(exc))
                err.show()
                bad = True
        return None if bad else (known, clear)

    def apply(self) -> None:
        """Apply: the name, confirmation and known values of the selected group."""
        if self.info is None or self.readonly_reason or self.busy:
            return
        values = self.field_values()
        if values is None:
            self.notice.setText("Nothing was changed: correct the value marked below its field.")
            return
        known, clear = values
        changes = {"known": known, "clear": clear}
        name = self.name_edit.text().strip()
        if name and name != self.info["name"]:
            changes["name"] = name
        if self.confirmed_box.isChecked() != self.info["confirmed"]:
            changes["confirmed"] = self.confirmed_box.isChecked()
        self._run(set_job, self.info["id"], changes)

    def split_selected(self) -> None:
        ids = [it.data(Qt.ItemDataRole.UserRole) for it in self.videos.selectedItems()]
        if self.info is not None and ids and not self.readonly_reason:
            self._run(split_job, self.info["id"], ids)

    def merge_selected(self) -> None:
        sel = self.selected_groups()
        if len(sel) > 1 and not self.readonly_reason:
            self._run(merge_job, sel[0], sel[1:])

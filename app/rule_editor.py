"""The rule behind a query, as a form (``rule_form.RuleForm``: entity, gates, soft scores with field
pickers, units and the library's statistics; a sequence rule's steps, gaps and negations) and as
JSON for experts, both editing one document:
live validation by the engine's schema with errors shown where they are (by JSON pointer: on the
form's widget, on the JSON's line), the schema's description of the key under the cursor, re-rank
instantly, save to the library.

The JSON text is the one document: a form edit writes it (one undoable edit), a JSON edit (or
undo, reset, a new search) loads it into the form. A rule the form cannot show (an unknown key...)
opens in the JSON tab, and the form tab says why, instead of a form."""

from __future__ import annotations

import json
import re
from json.decoder import scanstring

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QColor, QFont, QKeySequence, QShortcut, QTextCharFormat, QTextCursor
from PySide6.QtWidgets import (QHBoxLayout, QInputDialog, QLabel, QListWidget, QListWidgetItem,
                               QPlainTextEdit, QPushButton, QSplitter, QTabWidget, QTextEdit,
                               QVBoxLayout, QWidget)

from strived import api
from strived.api import RuleError, field_hints, parse_rule, rule_schema

from .connections import library_job
from .rule_form import WARNING_COLOR, RuleForm
from .workers import Worker

_SCALAR = re.compile(r"-?\d+(\.\d+)?([eE][+-]?\d+)?|true|false|null")


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def locate_pointers(text: str) -> dict[str, tuple[int, int]]:
    """Map each JSON pointer of a valid JSON ``text`` to (start, end) character offsets.

    For object members the range starts at the key, so an error is shown on the key's line.
    """
    out: dict[str, tuple[int, int]] = {}
    n = len(text)

    def ws(i: int) -> int:
        while i < n and text[i] in " \t\r\n":
            i += 1
        return i

    def value(i: int, ptr: str, start: int | None = None) -> int:
        i = ws(i)
        s = i if start is None else start
        c = text[i]
        if c == "{":
            i = ws(i + 1)
            if text[i] == "}":
                i += 1
            else:
                while True:
                    k0 = ws(i)
                    key, i = scanstring(text, k0 + 1)
                    i = ws(i)
                    i = value(i + 1, f"{ptr}/{_escape(key)}", k0)
                    i = ws(i)
                    if text[i] == ",":
                        i += 1
                        continue
                    i += 1
                    break
        elif c == "[":
            i = ws(i + 1)
            k = 0
            if text[i] == "]":
                i += 1
            else:
                while True:
                    i = value(i, f"{ptr}/{k}")
                    k += 1
                    i = ws(i)
                    if text[i] == ",":
                        i += 1
                        continue
                    i += 1
                    break
        elif c == '"':
            _, i = scanstring(text, i + 1)
        else:
            m = _SCALAR.match(text, i)
            i = m.end() if m else i + 1
        out[ptr] = (s, i)
        return i

    value(0, "")
    return out


def nearest_range(ranges: dict[str, tuple[int, int]], pointer: str) -> tuple[int, int]:
    """The range of ``pointer`` or of its longest existing parent (a missing key's object)."""
    p = pointer
    while p and p not in ranges:
        p = p.rsplit("/", 1)[0]
    return ranges.get(p, (0, 0))


def schema_at(schema: dict, pointer: str) -> dict:
    node = schema
    for part in [p for p in pointer.split("/") if p]:
        if "properties" in node and part in node["properties"]:
            node = node["properties"][part]
        elif "items" in node and part.isdigit():
            node = node["items"]
        else:
            return {}
    return node


def hints_job(library) -> tuple[int, dict]:
    """(content version, field statistics) of ``library`` for the form's hints (a worker job; the
    worker thread's scorer is the one its searches use, so its columns are not read twice)."""
    ver = library.content_version
    return ver, field_hints(api.scorer_for(library), library.availability())


class RuleEditor(QWidget):
    """Form and JSON editor of a rule validated against the engine's one schema (strived.rules)."""

    rule_applied = Signal(dict)         # a valid rule to re-rank with
    rule_saved = Signal(str, dict)      # name, rule
    validity_changed = Signal(bool)
    reset_requested = Signal()          # Reset: the search's own rule (and its ranking) back

    def __init__(self, parent=None):
        super().__init__(parent)
        self.text = QPlainTextEdit(self)
        f = QFont("DejaVu Sans Mono")
        f.setStyleHint(QFont.StyleHint.Monospace)
        f.setPointSize(10)
        self.text.setFont(f)
        self.text.setTabStopDistance(24)
        self.errors = QListWidget(self)
        self.errors.setObjectName("ruleErrors")
        self.hint = QLabel("", self)
        self.hint.setObjectName("dim")
        self.hint.setWordWrap(True)
        self.status = QLabel("", self)
        self.apply_button = QPushButton("Re-rank", self, toolTip="Search again with this rule (Ctrl+Enter)")
        self.save_button = QPushButton("Save to library…", self)
        self.reset_button = QPushButton("Reset", self, toolTip="Back to the rule the search used")
        self.apply_button.setDefault(True)
        row = QHBoxLayout()
        row.addWidget(self.status, 1)
        row.addWidget(self.reset_button)
        row.addWidget(self.save_button)
        row.addWidget(self.apply_button)
        self.form = RuleForm(self)
        self.form.setObjectName("ruleForm")
        self.tabs = QTabWidget(self)
        self.tabs.setObjectName("ruleEditorTabs")
        self.tabs.setDocumentMode(True)
        self.tabs.addTab(self.form, "Form")
        self.tabs.addTab(self.text, "JSON")
        self.tabs.setTabToolTip(0, "The rule as a form: who, what must hold, what is scored")
        self.tabs.setTabToolTip(1, "The rule as JSON (the schema: strived schema)")
        split = QSplitter(Qt.Orientation.Vertical, self)
        split.addWidget(self.tabs)
        split.addWidget(self.errors)
        split.setStretchFactor(0, 1)
        split.setStretchFactor(1, 0)
        split.setSizes([460, 56])
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addWidget(split, 1)
        lay.addWidget(self.hint)
        lay.addLayout(row)
        self._timer = QTimer(self, singleShot=True, interval=150)
        self._timer.timeout.connect(self.validate)
        self.text.textChanged.connect(self._timer.start)
        self.text.cursorPositionChanged.connect(self._on_cursor_position_changed)
        self.errors.itemActivated.connect(self._on_error_activated)
        self.errors.itemClicked.connect(self._on_error_activated)
        self.apply_button.clicked.connect(self._on_apply_clicked)
        self.save_button.clicked.connect(self._on_save_clicked)
        self.reset_button.clicked.connect(self.reset)
        for keys in ("Ctrl+Return", "Ctrl+Enter"):
            QShortcut(QKeySequence(keys), self, self._on_apply_clicked)
        self.form.edited.connect(self._on_form_edited)
        self.tabs.tabBarClicked.connect(self._on_tab_clicked)
        self.tabs.currentChanged.connect(self._on_tab_changed)
        self._form_text: str | None = None     # the text the form wrote last (not loaded back)
        self._auto_json = False                # the JSON tab was chosen for the user, not by them
        self._conns = self._jobs = None
        self._hints_version: int | None = None
        self._hints_worker = None
        self.original: dict | None = None
        self.rule: dict | None = None
        self.error_list: list[tuple[str, str, int]] = []     # pointer, message, offset
        self.warning_list: list[tuple[str, str, int]] = []   # the valid rule's warnings, likewise
        self._ranges: dict[str, tuple[int, int]] = {}
        self._schema = None
        self.set_rule(None)

    def schema(self) -> dict:
        if self._schema is None:
            self._schema = rule_schema()
        return self._schema

    # ------------------------------------------------------------------ the library's statistics
    def set_library(self, connections, jobs) -> None:
        """The open library's connections and job queue (the form's statistics are computed there,
        when the form is shown); None, None when the library closes."""
        self._conns, self._jobs = connections, jobs
        self._hints_version = None
        self._hints_worker = None
        self.form.set_hints(None)
        self._request_hints()

    def _request_hints(self) -> None:
        """Compute the field statistics of the library's current content, once, when the form is
        on screen (at 10k videos the first computation takes seconds: only users of the form pay
        it, on the library worker)."""
        if self._conns is None or self._jobs is None or not self.form.isVisible():
            return
        try:
            ver = self._conns.get().content_version
        except Exception:  # noqa: BLE001 - a closed library: no statistics
            return
        if ver == self._hints_version or (self._hints_worker is not None
                                          and getattr(self._hints_worker, "version", None) == ver
                                          and not self._hints_worker.is_done):
            return
        w = Worker(library_job, self._conns, hints_job, pass_progress=False, pass_cancel=False,
                   name="rule-form-hints")
        w.version = ver
        w.signals.finished.connect(lambda res, w=w: self._on_hints(w, res))
        self._hints_worker = self._jobs.submit(w)

    def _on_hints(self, worker, result) -> None:
        if worker is not self._hints_worker:
            return
        self._hints_version, hints = result
        self.form.set_hints(hints)

    def showEvent(self, ev) -> None:  # noqa: N802 - Qt API
        super().showEvent(ev)
        self._request_hints()

    # ------------------------------------------------------------------ the rule
    def set_rule(self, rule: dict | None) -> None:
        """The rule a new search used: it becomes the one Reset returns to."""
        self.original = rule
        self._replace_text(json.dumps(rule, indent=2) if rule else "")
        self.validate()
        self._choose_tab()
        self._request_hints()

    def _choose_tab(self) -> None:
        """A rule the form cannot show opens in JSON (the form tab says why); the next one it can
        show goes back to the form, unless the user chose the JSON tab themselves."""
        if self.form.reason is not None and self.text.toPlainText().strip():
            if self.tabs.currentWidget() is self.form:
                self.tabs.setCurrentWidget(self.text)
                self._auto_json = True
        elif self._auto_json:
            self.tabs.setCurrentWidget(self.form)
            self._auto_json = False

    def _on_tab_changed(self, _index: int) -> None:
        self.hint.setVisible(self.tabs.currentWidget() is self.text)   # the JSON key's schema
        self._request_hints()

    def _on_tab_clicked(self, _index: int) -> None:
        self._auto_json = False

    def _on_form_edited(self) -> None:
        """A form edit: the form's document becomes the text (one undoable edit), validated now."""
        text = json.dumps(self.form.document(), indent=2, ensure_ascii=False)
        self._form_text = text
        self._replace_text(text)
        self.validate()

    def rule_reranked(self, rule: dict | None) -> None:
        """A re-rank with the edited rule finished: keep the text (and its undo history) and the
        search's original rule for Reset."""
        if self.validate() and self.rule == rule:
            return
        self._replace_text(json.dumps(rule, indent=2) if rule else "")
        self.validate()

    def _replace_text(self, text: str) -> None:
        """Replace the whole text as one undoable edit (setPlainText would clear the history)."""
        if self.text.toPlainText() == text:
            return
        cur = QTextCursor(self.text.document())
        cur.beginEditBlock()
        cur.select(QTextCursor.SelectionType.Document)
        cur.insertText(text)
        cur.endEditBlock()

    def reset(self) -> None:
        """Back to the rule the search used (Ctrl+Z undoes the reset)."""
        self._replace_text(json.dumps(self.original, indent=2) if self.original else "")
        self.validate()
        self._choose_tab()
        self.reset_requested.emit()

    def validate(self) -> bool:
        """Parse + validate now; show errors at their place. Returns validity."""
        self._timer.stop()
        src = self.text.toPlainText()
        errs: list[tuple[str, str, int]] = []
        warns: list[tuple[str, str, int]] = []
        doc = None
        self.rule = None
        self._ranges = {}
        from_form = src == self._form_text      # the form wrote this text: it shows it already
        self._form_text = None
        if not src.strip():
            errs = []
            self.form.load(None)
        else:
            try:
                doc = json.loads(src)
            except json.JSONDecodeError as e:
                errs.append(("", f"not valid JSON: {e.msg} (line {e.lineno}, column {e.colno})", e.pos))
                self.form.refuse(f"the JSON has a syntax error (line {e.lineno}, column {e.colno})")
            else:
                if not from_form:
                    self.form.load(doc)
                self._ranges = locate_pointers(src)
                try:
                    rule = parse_rule(doc)
                except RuleError as e:
                    for ptr, msg in e.errors:
                        errs.append((ptr, msg, nearest_range(self._ranges, ptr)[0]))
                else:
                    self.rule = rule.to_dict()
                    warns = [(ptr, msg, nearest_range(self._ranges, ptr)[0])
                             for ptr, msg in rule.warnings]
        self.error_list = errs
        self.warning_list = warns
        self._show_errors(src)
        self.form.show_errors([(p, m) for p, m, _o in errs])
        self.form.show_warnings([(p, m) for p, m, _o in warns], doc)
        ok = self.rule is not None
        self.apply_button.setEnabled(ok)
        self.save_button.setEnabled(ok)
        if not src.strip():
            self.status.setText("No rule yet: run a search.")
        elif ok and warns:
            self.status.setText(f"<span style='color:#7bd88f'>✓ valid rule</span> <span "
                                f"style='color:{WARNING_COLOR}'>· ⚠ {len(warns)} warning(s)</span>")
        elif ok:
            self.status.setText("<span style='color:#7bd88f'>✓ valid rule</span>")
        else:
            self.status.setText(f"<span style='color:#ff6b6b'>✗ {len(errs)} problem(s)</span>")
        self.validity_changed.emit(ok)
        return ok

    def _show_errors(self, src: str) -> None:
        self.errors.clear()
        sels = []
        doc = self.text.document()
        for (ptr, msg, off), warn in [(e, False) for e in self.error_list] + \
                [(e, True) for e in self.warning_list]:
            block = doc.findBlock(min(off, max(0, len(src) - 1)))
            line = block.blockNumber() + 1
            it = QListWidgetItem(f"{'⚠ ' if warn else ''}line {line}   {ptr or '/'}   {msg}")
            it.setData(Qt.ItemDataRole.UserRole, off)
            it.setData(Qt.ItemDataRole.UserRole + 1, ptr)
            it.setForeground(QColor(WARNING_COLOR if warn else "#ff8a8a"))
            self.errors.addItem(it)
            sel = QTextEdit.ExtraSelection()
            fmt = QTextCharFormat()
            fmt.setBackground(QColor(249, 199, 79, 50) if warn else QColor(255, 80, 80, 60))
            fmt.setProperty(QTextCharFormat.Property.FullWidthSelection, True)
            fmt.setToolTip(msg)
            sel.format = fmt
            cur = QTextCursor(block)
            sel.cursor = cur
            sels.append(sel)
        self.text.setExtraSelections(sels)

    def _on_error_activated(self, item: QListWidgetItem) -> None:
        if self.tabs.currentWidget() is self.form and self.form.reason is None:
            ptr = item.data(Qt.ItemDataRole.UserRole + 1) or ""
            w = self.form.widget_for(ptr)
        else:
            w = None
        cur = self.text.textCursor()
        cur.setPosition(int(item.data(Qt.ItemDataRole.UserRole)))
        self.text.setTextCursor(cur)          # the JSON's place too, for a switch to it
        if w is not None:
            self.form.scroll.ensureWidgetVisible(w)
            w.setFocus()
            return
        self.tabs.setCurrentWidget(self.text)
        self.text.setFocus()

    def _on_cursor_position_changed(self) -> None:
        if not self._ranges:
            return
        pos = self.text.textCursor().position()
        best = ""
        for ptr, (s, e) in self._ranges.items():
            if s <= pos <= e and len(ptr) > len(best):
                best = ptr
        if not best:
            self.hint.setText("")
            return
        try:
            node = schema_at(self.schema(), re.sub(r"/\d+(?=/|$)", "/0", best))
        except Exception:  # noqa: BLE001 - a hint, never an error
            node = {}
        desc = node.get("description") or ""
        enum = node.get("enum")
        extra = f"  one of: {', '.join(map(str, enum))}" if enum else ""
        self.hint.setText(f"{best}: {desc}{extra}" if (desc or extra) else best)

    def _on_apply_clicked(self) -> None:
        if self.validate():
            self.rule_applied.emit(self.rule)

    def _on_save_clicked(self) -> None:
        if not self.validate():
            return
        default = (self.rule or {}).get("event") or "my_rule"
        name, ok = QInputDialog.getText(self, "Save rule", "Name in the library:", text=default)
        if ok and name.strip():
            self.rule_saved.emit(name.strip(), self.rule)

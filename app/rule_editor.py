"""The rule behind a query as JSON: live validation with errors shown where they are, the schema's
description of the key under the cursor, re-rank instantly, save to the library."""

from __future__ import annotations

import json
import re
from json.decoder import scanstring

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QColor, QFont, QKeySequence, QShortcut, QTextCharFormat, QTextCursor
from PySide6.QtWidgets import (QHBoxLayout, QInputDialog, QLabel, QListWidget, QListWidgetItem,
                               QPlainTextEdit, QPushButton, QSplitter, QTextEdit, QVBoxLayout,
                               QWidget)

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


class RuleEditor(QWidget):
    """JSON editor of a rule validated against the engine's one schema (strived.rules)."""

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
        split = QSplitter(Qt.Orientation.Vertical, self)
        split.addWidget(self.text)
        split.addWidget(self.errors)
        split.setSizes([400, 90])
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
        QShortcut(QKeySequence("Ctrl+Return"), self.text, self._on_apply_clicked)
        self.original: dict | None = None
        self.rule: dict | None = None
        self.error_list: list[tuple[str, str, int]] = []     # pointer, message, offset
        self._ranges: dict[str, tuple[int, int]] = {}
        self._schema = None
        self.set_rule(None)

    def schema(self) -> dict:
        if self._schema is None:
            from strived.rules.model import rule_schema

            self._schema = rule_schema()
        return self._schema

    def set_rule(self, rule: dict | None) -> None:
        """The rule a new search used: it becomes the one Reset returns to."""
        self.original = rule
        self._replace_text(json.dumps(rule, indent=2) if rule else "")
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
        self.reset_requested.emit()

    def validate(self) -> bool:
        """Parse + validate now; show errors at their place. Returns validity."""
        from strived.errors import RuleError
        from strived.rules.model import parse_rule

        self._timer.stop()
        src = self.text.toPlainText()
        errs: list[tuple[str, str, int]] = []
        self.rule = None
        self._ranges = {}
        if not src.strip():
            errs = []
        else:
            try:
                doc = json.loads(src)
            except json.JSONDecodeError as e:
                errs.append(("", f"not valid JSON: {e.msg} (line {e.lineno}, column {e.colno})", e.pos))
            else:
                self._ranges = locate_pointers(src)
                try:
                    rule = parse_rule(doc)
                except RuleError as e:
                    for ptr, msg in e.errors:
                        errs.append((ptr, msg, nearest_range(self._ranges, ptr)[0]))
                else:
                    self.rule = rule.to_dict()
        self.error_list = errs
        self._show_errors(src)
        ok = self.rule is not None
        self.apply_button.setEnabled(ok)
        self.save_button.setEnabled(ok)
        if not src.strip():
            self.status.setText("No rule yet: run a search.")
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
        for ptr, msg, off in self.error_list:
            block = doc.findBlock(min(off, max(0, len(src) - 1)))
            line = block.blockNumber() + 1
            it = QListWidgetItem(f"line {line}   {ptr or '/'}   {msg}")
            it.setData(Qt.ItemDataRole.UserRole, off)
            it.setForeground(QColor("#ff8a8a"))
            self.errors.addItem(it)
            sel = QTextEdit.ExtraSelection()
            fmt = QTextCharFormat()
            fmt.setBackground(QColor(255, 80, 80, 60))
            fmt.setProperty(QTextCharFormat.Property.FullWidthSelection, True)
            fmt.setToolTip(msg)
            sel.format = fmt
            cur = QTextCursor(block)
            sel.cursor = cur
            sels.append(sel)
        self.text.setExtraSelections(sels)

    def _on_error_activated(self, item: QListWidgetItem) -> None:
        cur = self.text.textCursor()
        cur.setPosition(int(item.data(Qt.ItemDataRole.UserRole)))
        self.text.setTextCursor(cur)
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

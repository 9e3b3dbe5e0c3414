"""The rule as a form, for people who do not write JSON (issues 14 and 34).

A single-pattern rule is one fragment (`app.rule_fragment`): who (the entity: other road users
of some classes, or the ego vehicle), what must hold (hard gates: field, operator, value in the
field's unit) and how strongly it scores (soft scores: a change within a window, or a steady
trend; direction, threshold, weight). A sequence rule is its steps in order, the gaps between
them and its scoped negations, each step and negation a fragment (`app.rule_form_sequence`).
Beside each value, the library's statistics of that field ("in this library: median 22 m, 5–95 %:
3 to 90 m; unknown in 4 of 27 videos", from `strived.rules.stats.field_hints`); the widgets are in
`app.rule_form_rows`.

The form never validates on its own: it writes the rule document (what the user typed, numbers as
numbers and anything else as the text typed) and the engine's schema (`strived.rules.parse_rule`)
says what is wrong, by JSON pointer; `show_errors` puts each message on the widget its pointer
names and under the row, step or part that holds it. The engine's warnings (a valid rule that
probably matches nothing: an unknown class) go on their widgets the same way, in amber
(`show_warnings`). A document the form cannot show as it is (an unknown key, a value that is
neither a number nor a text...) is refused with a one-line reason by `load`: the form then shows
only "This rule can be edited in JSON only: <why>", never the previous rule's form.
"""

from __future__ import annotations

from typing import Any

import shiboken6
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QFrame, QGroupBox, QLabel, QScrollArea, QVBoxLayout, QWidget

from .rule_form_rows import INVALID_STYLE, META_KEYS, WARNING_COLOR, dim
from .rule_form_sequence import SequenceEditor, sequence_reason
from .rule_fragment import FragmentEditor, fragment_reason

__all__ = ["RuleForm", "representable", "WARNING_COLOR"]


def representable(doc: Any) -> str | None:
    """None when the form can show ``doc`` exactly, else a one-line reason why not."""
    if not isinstance(doc, dict):
        return "the rule is not a JSON object"
    if "sequence" in doc:
        extra = sorted(set(doc) - set(META_KEYS) - {"sequence", "absent"})
        if extra:
            return (f"key '{extra[0]}' is not part of a sequence rule the form knows (each step has "
                    "its own entity, gates and scores)")
        return sequence_reason(doc)
    if "absent" in doc:
        return "negations ('absent') without a 'sequence': a negation's window is around a step"
    extra = sorted(set(doc) - set(META_KEYS) - {"entity", "hard_gates", "soft_scores"})
    if extra:
        return f"key '{extra[0]}' is not part of a rule the form knows"
    return fragment_reason(doc)


class RuleForm(QWidget):
    """A single-pattern rule (``single``: one fragment) or a sequence rule (``seq``: steps and
    negations) as widgets (see the module doc)."""

    edited = Signal()               # the user changed something: read `document()`

    def __init__(self, parent=None):
        super().__init__(parent)
        self.hints: dict | None = None
        self.no_hints = "library statistics: open a library to see them"
        self.reason: str | None = None
        self.is_sequence = False
        self._loading = False
        self._meta: dict = {}
        self._pointer_widgets: dict[str, QWidget] = {}
        self._marked: list[QWidget] = []

        self.banner = QLabel("", self)
        self.banner.setObjectName("ruleFormReason")
        self.banner.setWordWrap(True)
        self.banner.setStyleSheet("color: #f9c74f;")
        self.banner.hide()
        self.title = dim("", self)
        body = QWidget(self)
        self.body = body
        self.single = FragmentEditor(self, body)
        self.seq = SequenceEditor(self, body)
        self.seq.hide()
        bl = QVBoxLayout(body)
        bl.setContentsMargins(0, 0, 0, 0)
        bl.addWidget(self.single)
        bl.addWidget(self.seq)
        bl.addStretch(1)
        self.scroll = QScrollArea(self)
        self.scroll.setWidgetResizable(True)
        self.scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded)
        self.scroll.setFrameShape(QFrame.Shape.NoFrame)
        self.scroll.setWidget(body)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(2, 2, 2, 2)
        lay.addWidget(self.banner)
        lay.addWidget(self.title)
        lay.addWidget(self.scroll, 1)
        self.load(None)

    # the single-pattern fragment's parts, by their names of before the split
    gate_rows = property(lambda self: self.single.gate_rows)
    soft_rows = property(lambda self: self.single.soft_rows)
    classes = property(lambda self: self.single.classes)
    warning = property(lambda self: self.single.warning)
    role = property(lambda self: self.single.role)
    add_gate = property(lambda self: self.single.add_gate)
    add_soft = property(lambda self: self.single.add_soft)

    def fragments(self) -> list[tuple[str, FragmentEditor]]:
        """(JSON pointer, fragment editor) of each fragment the form shows now."""
        return self.seq.fragments() if self.is_sequence else [("", self.single)]

    # ------------------------------------------------------------------ loading
    def load(self, doc: dict | None) -> str | None:
        """Show ``doc``; returns None, or why the form cannot show it (the form then says so and
        shows nothing else). None/empty: "No rule yet"."""
        reason = None if doc is None else representable(doc)
        self.reason = reason
        if doc is None or reason is not None:
            self._hide_form("" if doc is None else f"This rule can be edited in JSON only: {reason}.")
            self.title.setText("No rule yet: run a search." if doc is None else "")
            return reason
        self._loading = True
        try:
            self.banner.hide()
            self.scroll.show()
            self._meta = {k: doc[k] for k in doc if k in META_KEYS}
            ev = doc.get("event")
            self.is_sequence = "sequence" in doc
            n = len(doc.get("sequence") or [])
            kind = f" · a sequence of {n} step(s)" if self.is_sequence else ""
            self.title.setText(f"Rule for: {ev}{kind}" if ev else kind.lstrip(" ·"))
            self.single.setVisible(not self.is_sequence)
            self.seq.setVisible(self.is_sequence)
            (self.seq if self.is_sequence else self.single).load(doc)
            self._map_pointers()
        finally:
            self._loading = False
        return None

    def refuse(self, reason: str) -> None:
        """The text is not a rule document at all (e.g. a JSON syntax error): say so, and show no
        form (not the last one that parsed)."""
        self.reason = reason
        self._hide_form(f"Not shown as a form: {reason}. Fix it in the JSON tab.")

    def _hide_form(self, text: str) -> None:
        self.banner.setText(text)
        self.banner.setVisible(bool(text))
        self.scroll.hide()
        self._pointer_widgets = {}

    def reload_part(self, part: dict) -> None:
        """The sequence editor's own restructuring (a step added, moved, removed): its lists again."""
        self._loading = True
        try:
            self.seq.load(part)
        finally:
            self._loading = False
        self._map_pointers()
        n = len(part.get("sequence") or [])
        ev = self._meta.get("event")
        self.title.setText(f"Rule for: {ev} · a sequence of {n} step(s)" if ev else
                           f"a sequence of {n} step(s)")

    def emit_edited(self, *_a) -> None:
        """A fragment, step or negation was edited by the user (not by a load)."""
        if not self._loading:
            self.edited.emit()

    def set_hints(self, hints: dict | None) -> None:
        """The library's field statistics (`strived.rules.stats.field_hints`); None: none known."""
        self.hints = hints
        for _base, f in [("", self.single)] + self.seq.fragments():
            f.refresh_hints()

    # ------------------------------------------------------------------ the document
    def document(self) -> dict:
        """The rule document the form shows (what the user typed, errors included)."""
        d = dict(self._meta)
        d.update(self.seq.document() if self.is_sequence else self.single.document())
        self._map_pointers()
        return d

    def _map_pointers(self) -> None:
        """JSON pointer -> the widget that shows it (for the engine's errors)."""
        self._pointer_widgets = self.seq.pointer_widgets() if self.is_sequence else \
            self.single.pointer_widgets("")

    def widget_for(self, pointer: str) -> QWidget | None:
        """The widget a JSON pointer names (or its nearest parent's)."""
        if not self._pointer_widgets and self.reason is None:
            self._map_pointers()
        p = pointer
        while p and p not in self._pointer_widgets:
            p = p.rsplit("/", 1)[0]
        return self._pointer_widgets.get(p)

    def _holders(self) -> list[QWidget]:
        return self.single.error_holders() + self.seq.error_holders()

    def _holder_of(self, w: QWidget, holders: dict[int, QWidget]) -> QWidget | None:
        """The nearest row, step, gap line or part at or above ``w`` with an error line."""
        x = w
        while x is not None and x is not self:
            if id(x) in holders:
                return x
            x = x.parentWidget()
        return None

    def show_errors(self, errors: list[tuple[str, str]]) -> None:
        """The engine's (pointer, message) errors on their widgets: a red outline with the message
        as its tooltip, and the messages under the row, step or part that holds the widget."""
        for w in self._marked:
            if not shiboken6.isValid(w):          # its row was removed meanwhile
                continue
            w.setStyleSheet("")
            w.setToolTip(w.property("plainTip") or "")
        self._marked = []
        holders = {id(h): h for h in self._holders()}
        for h in holders.values():
            h.error.hide()
            h.error.setText("")
        if self.reason is not None:
            return
        lines: dict[int, list[str]] = {}
        for ptr, msg in errors:
            w = self.widget_for(ptr)
            if w is None:
                continue
            holder = self._holder_of(w, holders)
            if holder is not None:
                key = "" if holder is w else ptr.rsplit("/", 1)[-1]
                lines.setdefault(id(holder), []).append(f"{key}: {msg}" if key else msg)
                holder.error.setText("\n".join(lines[id(holder)]))
                holder.error.show()
            if id(w) not in holders and not isinstance(w, QGroupBox):
                if w.property("plainTip") is None:
                    w.setProperty("plainTip", w.toolTip())
                w.setStyleSheet(INVALID_STYLE)
                w.setToolTip(msg)
                self._marked.append(w)

    def show_warnings(self, warnings: list[tuple[str, str]], doc: dict | None) -> None:
        """The engine's (pointer, message) warnings of a valid rule (``Rule.warnings``: an unknown
        class, which probably matches no track) in amber, on the fragment each names: on the
        class in its picker (its tooltip says why) and under its classes; ``doc`` is the rule
        document they refer to."""
        shown = self.reason is None
        for base, frag in self.fragments():
            part = doc
            for key in base.split("/")[1:]:
                part = part[int(key)] if isinstance(part, list) and key.isdigit() and \
                    int(key) < len(part) else part.get(key) if isinstance(part, dict) else None
            mine = [(p[len(base):], m) for p, m in warnings if p.startswith(f"{base}/")]
            frag.show_warnings(mine, part, shown)

"""The rule form's building blocks (issue 14): the pickers and number boxes, and one row per
hard gate or soft score, each with the library's statistics of its field as a hint and the
engine's errors under it. A row belongs to a fragment editor (`app.rule_fragment`), which gives it
the statistics and hears its edits.

Number boxes never validate: `number_value` writes a number when the text is one and the text
itself otherwise (the engine's schema then says what is wrong); `set_text` changes a box only when
its text differs, so reloading the same document keeps each box's own undo history (Ctrl+Z).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (QComboBox, QFrame, QGroupBox, QHBoxLayout, QLabel, QLineEdit,
                               QToolButton, QVBoxLayout, QWidget)

from strived.api import EGO_FIELDS, FIELD_UNITS, OBJECT_FIELDS, OPS, hint_text

if TYPE_CHECKING:
    from .rule_fragment import FragmentEditor

#: What each rule field is (docs/formats.md, docs/rules.md), for the pickers' tooltips.
FIELD_TEXT = {
    "distance": "forward distance to the road user",
    "loc_x": "lateral offset of the road user (+ = right of the ego vehicle)",
    "loc_z": "forward depth of the road user",
    "lane_rel": "lane of the road user relative to ours (0 = our lane, +1 = one to the right)",
    "bbox_area": "area of the road user's box in the image",
    "score": "detector confidence of the road user",
    "abs_loc_x": "lateral offset from either side, |loc_x|",
    "loc_x_road": ("lateral offset relative to the road: loc_x with the ego's own turning taken out "
                   "(unknown through a turn of more than 20°)"),
    "abs_loc_x_road": "|loc_x_road|: lateral offset relative to the road, from either side",
    "speed": "ego vehicle speed",
    "yaw_rate": "ego yaw rate (+ = turning left)",
    "accel": "ego acceleration",
    "heading": "ego heading: the integral of the yaw rate (+ = left)",
    "jolt": "camera jolt: sudden, unexplained camera rotation (impacts, hard bumps)",
}
OP_ITEMS = [("lt", "<"), ("le", "≤"), ("gt", ">"), ("ge", "≥")]
TYPE_ITEMS = [("temporal_change", "changes within a window"), ("monotonic_trend", "steady trend")]
DIRECTIONS = {"temporal_change": [(None, "either way"), ("positive", "increases (+)"),
                                  ("negative", "decreases (−)")],
              "monotonic_trend": [("increasing", "increasing"), ("decreasing", "decreasing")]}
ROLE_ITEMS = [("object", "other road users"), ("ego", "the ego vehicle")]
SELECTION_ITEMS = [("any", "any"), ("closest", "the closest")]
AGG_ITEMS = [("any", "best track"), ("consensus", "best and mean")]

META_KEYS = ("event", "description", "confidence", "scoring_notes")
ENTITY_KEYS = {"role", "class_filter", "selection", "agg_mode"}
GATE_KEYS = {"field", "op", "value", "min_time_fraction", "min_seconds"}
#: the gate's number boxes, by document key
GATE_NUMBERS = ("value", "min_time_fraction", "min_seconds")
SOFT_KEYS = {"temporal_change": {"type", "field", "window_seconds", "magnitude", "min_delta",
                                 "direction", "weight", "min_fraction"},
             "monotonic_trend": {"type", "field", "direction", "min_duration_seconds", "weight",
                                 "min_fraction"}}

INVALID_STYLE = "border: 1px solid #ff6b6b; border-radius: 3px;"
WARNING_COLOR = "#f9c74f"        # the engine's warnings (a valid rule that may match nothing)


def number_value(text: str) -> Any:
    """What a number box puts in the document: None when empty (the key is left out), an int or a
    float when the text is one, else the text itself (the schema then says it must be a number)."""
    s = text.strip()
    if not s:
        return None
    try:
        return int(s)
    except ValueError:
        pass
    try:
        return float(s)
    except ValueError:
        return s


def number_text(v: Any) -> str:
    """A document's number as the box shows it (exact: what it shows is what it writes back)."""
    if v is None:
        return ""
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, float):
        return repr(v) if math.isfinite(v) else str(v)
    return str(v)


def exact_number(v: Any) -> bool:
    """Whether a number box shows ``v`` exactly, so that writing it back changes nothing."""
    if v is None or isinstance(v, (int, float)) and not isinstance(v, bool):
        return True
    return isinstance(v, str) and v.strip() == v and number_value(v) == v



def set_text(edit: QLineEdit, text: str) -> None:
    """Show ``text`` in ``edit``; the same text leaves it alone (setText would clear its undo
    history, so Ctrl+Z in a box would do nothing after the document is reloaded)."""
    if edit.text() != text:
        edit.setText(text)


def combo(items, parent, tip: str = "") -> QComboBox:
    c = QComboBox(parent)
    for value, text in items:
        c.addItem(text, value)
    if tip:
        c.setToolTip(tip)
    c.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
    return c


def set_combo(c: QComboBox, value, label=None) -> None:
    """Select ``value``; a value the combo does not list is added, marked, so nothing is lost (the
    schema reports it)."""
    k = c.findData(value)
    if k < 0:
        c.addItem(label or f"{value} (not valid)", value)
        k = c.count() - 1
        c.setItemData(k, QColor("#ff8a8a"), Qt.ItemDataRole.ForegroundRole)
    c.setCurrentIndex(k)


def field_combo(parent) -> QComboBox:
    c = QComboBox(parent)
    c.setObjectName("fieldPicker")
    for group, fields in (("road user", OBJECT_FIELDS), ("ego vehicle", EGO_FIELDS)):
        for f in fields:
            unit = FIELD_UNITS.get(f, "")
            c.addItem(f"{f} ({unit})" if unit else f, f)
            c.setItemData(c.count() - 1, f"{group}: {FIELD_TEXT.get(f, f)}",
                          Qt.ItemDataRole.ToolTipRole)
    c.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
    return c


def num_edit(parent, placeholder: str = "", tip: str = "", width: int = 70) -> QLineEdit:
    e = QLineEdit(parent)
    e.setPlaceholderText(placeholder)
    e.setToolTip(tip)
    e.setFixedWidth(width)
    e.setAlignment(Qt.AlignmentFlag.AlignRight)
    return e


def dim(text: str, parent) -> QLabel:
    lab = QLabel(text, parent)
    lab.setObjectName("dim")
    return lab


def error_label(parent) -> QLabel:
    """The line under a part of the form that shows the engine's messages about it."""
    lab = QLabel("", parent)
    lab.setObjectName("ruleFormError")
    lab.setStyleSheet("color: #ff8a8a;")
    lab.setWordWrap(True)
    lab.hide()
    return lab


class Box(QGroupBox):
    """A titled part of the form (the gates, the soft scores, the steps...): its layout ``lay``
    and its ``error`` line, for the engine's messages about the part as a whole (e.g. the weights
    sum to zero). Rows go before the error line, buttons after it."""

    def __init__(self, title: str, parent):
        super().__init__(title, parent)
        self.lay = QVBoxLayout(self)
        self.lay.setSpacing(4)
        self.error = error_label(self)
        self.lay.addWidget(self.error)


class Row(QFrame):
    """A gate or soft score row: its widgets by document key, a statistics hint, its errors.
    ``extension``: the widgets of the keys a sequence step or negation does not take (its gates
    hold at one time), hidden there unless the document gives them (the engine then says why)."""

    def __init__(self, form: "FragmentEditor"):
        super().__init__(form)
        self.form = form
        self.setObjectName("ruleFormRow")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.widgets: dict[str, QWidget] = {}
        self.extension: list[QWidget] = []
        self.extension_keys: tuple[str, ...] = ()
        self.hint = dim("", self)
        self.hint.setObjectName("ruleFormHint")
        self.hint.setWordWrap(True)
        self.error = error_label(self)
        self.remove = QToolButton(self)
        self.remove.setText("✕")
        self.remove.setAutoRaise(True)
        self.remove.clicked.connect(lambda: form.remove_row(self))

    def _edited(self, *_a) -> None:
        self.update_hint()
        self.form.emit_edited()

    def _wire(self) -> None:
        for w in self.widgets.values():
            if isinstance(w, QLineEdit):
                w.textEdited.connect(self._edited)
            elif isinstance(w, QComboBox):
                w.activated.connect(self._edited)

    def show_extension(self) -> None:
        shown = not self.form.in_sequence or any(self.widgets[k].text() for k in self.extension_keys)
        for w in self.extension:
            w.setVisible(shown)

    def update_hint(self) -> None:  # overridden
        pass


class GateRow(Row):
    """One hard gate: [field] [op] [value] unit, optionally "in ≥ x of the frames" or "held for
    ≥ s s" (an unbroken run of that many seconds; the schema refuses both at once)."""

    def __init__(self, form: "FragmentEditor"):
        super().__init__(form)
        self.remove.setToolTip("Remove this gate")
        f, op = field_combo(self), combo(OP_ITEMS, self, "operator")
        op.setObjectName("opPicker")
        op.setMinimumWidth(52)
        val = num_edit(self, "value", "the value in the field's unit", 80)
        val.setObjectName("gateValue")
        self.unit = QLabel("", self)
        frac = num_edit(self, "any", "extension: the condition must hold in at least this "
                                      "fraction (0–1] of the track's frames; empty = in one "
                                      "frame at least", 50)
        secs = num_edit(self, "–", "extension: the condition must hold over an unbroken run of "
                                    "at least this many seconds (a duration, in a clip of any "
                                    "length; a frame without a value breaks the run); empty = in "
                                    "one frame at least. Not together with the fraction", 50)
        secs.setObjectName("gateSeconds")
        self.widgets = {"field": f, "op": op, "value": val, "min_time_fraction": frac,
                        "min_seconds": secs}
        top = QHBoxLayout()
        top.setContentsMargins(0, 0, 0, 0)
        top.addWidget(f)
        top.addWidget(op)
        top.addWidget(val)
        top.addWidget(self.unit)
        top.addSpacing(12)
        self.extension = [dim("in ≥", self), frac, dim("of its frames", self),
                          dim("or held for ≥", self), secs, dim("s", self)]
        self.extension_keys = ("min_time_fraction", "min_seconds")
        for w in self.extension:
            top.addWidget(w)
        top.addStretch(1)
        top.addWidget(self.remove)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(6, 4, 6, 4)
        lay.setSpacing(2)
        lay.addLayout(top)
        lay.addWidget(self.hint)
        lay.addWidget(self.error)
        self._wire()

    def load(self, g: dict) -> None:
        set_combo(self.widgets["field"], g.get("field", "distance"))
        set_combo(self.widgets["op"], OPS.get(g.get("op"), g.get("op", "lt")))
        for k in GATE_NUMBERS:
            set_text(self.widgets[k], number_text(g.get(k)))
        self.show_extension()
        self.update_hint()

    def document(self) -> dict:
        d: dict[str, Any] = {"field": self.widgets["field"].currentData(),
                             "op": self.widgets["op"].currentData()}
        for k in GATE_NUMBERS:
            v = number_value(self.widgets[k].text())
            if v is not None:
                d[k] = v
        return d

    def update_hint(self) -> None:
        f = self.widgets["field"].currentData()
        self.unit.setText(FIELD_UNITS.get(f, "") or "")
        self.hint.setText(hint_text(self.form.hints, f) if self.form.hints else self.form.no_hints)


class SoftRow(Row):
    """One soft score: a change of [field] [direction] reaching [threshold] within [window] s, or
    a steady [direction] trend of [field] for [duration] s; its weight."""

    def __init__(self, form: "FragmentEditor"):
        super().__init__(form)
        self.remove.setToolTip("Remove this soft score")
        typ = combo(TYPE_ITEMS, self, "how the field is scored")
        typ.setObjectName("softType")
        f = field_combo(self)
        dirc = QComboBox(self)
        dirc.setObjectName("softDirection")
        thr = num_edit(self, "", "the change that scores 1 (full score); half of it scores 0.5")
        thr.setObjectName("softThreshold")
        self.unit = QLabel("", self)
        win = num_edit(self, "seconds", "the window the change happens within, in seconds", 60)
        win.setObjectName("softWindow")
        dur = num_edit(self, "seconds", "the steady run that scores 0.5 (twice as long scores 1), "
                                         "in seconds", 60)
        dur.setObjectName("softDuration")
        weight = num_edit(self, "1", "relative weight of this score (default 1)", 50)
        weight.setObjectName("softWeight")
        frac = num_edit(self, "any", "optional: the score counts for a video only when at least "
                                      "this fraction (0–1) of its candidate tracks reach 0.5", 50)
        self.widgets = {"type": typ, "field": f, "direction": dirc, "threshold": thr,
                        "window_seconds": win, "min_duration_seconds": dur, "weight": weight,
                        "min_fraction": frac}
        self.thr_key = "magnitude"
        self.thr_label = dim("full score at a change of", self)
        self.win_label = dim("within", self)
        self.win_unit = dim("s", self)
        self.dur_label = dim("half score after", self)
        self.dur_unit = dim("s", self)
        top = QHBoxLayout()
        top.setContentsMargins(0, 0, 0, 0)
        top.addWidget(f)
        top.addWidget(typ)
        top.addWidget(dirc)
        top.addStretch(1)
        top.addWidget(dim("weight", self))
        top.addWidget(weight)
        top.addWidget(self.remove)
        mid = QHBoxLayout()
        mid.setContentsMargins(0, 0, 0, 0)
        for w in (self.thr_label, thr, self.unit, self.win_label, win, self.win_unit,
                  self.dur_label, dur, self.dur_unit):
            mid.addWidget(w)
        mid.addStretch(1)
        self.extension = [dim("needs ≥", self), frac, dim("of the tracks", self)]
        self.extension_keys = ("min_fraction",)
        for w in self.extension:
            mid.addWidget(w)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(6, 4, 6, 4)
        lay.setSpacing(2)
        lay.addLayout(top)
        lay.addLayout(mid)
        lay.addWidget(self.hint)
        lay.addWidget(self.error)
        self._wire()
        typ.activated.connect(self._on_type)
        self._set_type("temporal_change", None)

    def _set_type(self, typ: str, direction) -> None:
        d = self.widgets["direction"]
        d.clear()
        for value, text in DIRECTIONS.get(typ, []):
            d.addItem(text, value)
        set_combo(d, direction)
        change = typ == "temporal_change"
        for w in (self.thr_label, self.widgets["threshold"], self.unit, self.win_label,
                  self.widgets["window_seconds"], self.win_unit):
            w.setVisible(change)
        for w in (self.dur_label, self.widgets["min_duration_seconds"], self.dur_unit):
            w.setVisible(not change)

    def _on_type(self, *_a) -> None:
        typ = self.widgets["type"].currentData()
        self._set_type(typ, DIRECTIONS[typ][0][0] if typ in DIRECTIONS else None)
        self._edited()

    def load(self, s: dict) -> None:
        typ = {"max_change": "temporal_change"}.get(s.get("type"), s.get("type"))
        set_combo(self.widgets["type"], typ)
        set_combo(self.widgets["field"], s.get("field", "distance"))
        self._set_type(typ, s.get("direction"))       # a trend without one: shown as not valid
        self.thr_key = "min_delta" if "min_delta" in s else "magnitude"
        self.thr_label.setText("half score at a change of" if self.thr_key == "min_delta"
                               else "full score at a change of")
        set_text(self.widgets["threshold"], number_text(s.get(self.thr_key)))
        for k in ("window_seconds", "min_duration_seconds", "weight", "min_fraction"):
            set_text(self.widgets[k], number_text(s.get(k)))
        self.show_extension()
        self.update_hint()

    def document(self) -> dict:
        typ = self.widgets["type"].currentData()
        d: dict[str, Any] = {"type": typ, "field": self.widgets["field"].currentData()}
        keys = ([("window_seconds", "window_seconds"), ("threshold", self.thr_key)]
                if typ == "temporal_change" else [("min_duration_seconds", "min_duration_seconds")])
        for w, k in keys:
            v = number_value(self.widgets[w].text())
            if v is not None:
                d[k] = v
        d["direction"] = self.widgets["direction"].currentData()
        for k in ("weight", "min_fraction"):
            v = number_value(self.widgets[k].text())
            if v is not None:
                d[k] = v
        return d

    def pointer_widgets(self, base: str) -> dict[str, QWidget]:
        out = {f"{base}/{k}": w for k, w in self.widgets.items() if k != "threshold"}
        out[f"{base}/magnitude"] = out[f"{base}/min_delta"] = self.widgets["threshold"]
        return out

    def update_hint(self) -> None:
        f = self.widgets["field"].currentData()
        self.unit.setText(FIELD_UNITS.get(f, "") or "")
        if not self.form.hints:
            self.hint.setText(self.form.no_hints)
            return
        w = None
        if self.widgets["type"].currentData() == "temporal_change":
            v = number_value(self.widgets["window_seconds"].text())
            w = float(v) if isinstance(v, (int, float)) and math.isfinite(v) else 4.0
        self.hint.setText(hint_text(self.form.hints, f, window_s=w))


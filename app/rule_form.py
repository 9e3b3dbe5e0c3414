"""The rule as a form, for people who do not write JSON (issue 14).

Who (the entity: other road users of some classes, or the ego vehicle), what must hold (hard
gates: field, operator, value in the field's unit) and how strongly it scores (soft scores: a
change within a window, or a steady trend; direction, threshold, weight). Beside each value, the
library's statistics of that field ("in this library: median 22 m, 5–95 %: 3 to 90 m; unknown in
4 of 27 videos", from `strived.rules.stats.field_hints`).

The form never validates on its own: it writes the rule document (what the user typed, numbers as
numbers and anything else as the text typed) and the engine's schema (`strived.rules.parse_rule`)
says what is wrong, by JSON pointer; `show_errors` puts each message on the widget its pointer
names. The engine's warnings (a valid rule that probably matches nothing: an unknown class) go
on their widgets the same way, in amber (`show_warnings`). A document the form cannot show as it
is (a sequence, a negation, an unknown key...) is refused with a one-line reason by `load`, and
the rule stays in the JSON view.
"""

from __future__ import annotations

import math
from typing import Any

import shiboken6
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (QCheckBox, QComboBox, QFrame, QGridLayout, QGroupBox, QHBoxLayout,
                               QLabel, QLineEdit, QListView, QListWidget, QListWidgetItem,
                               QPushButton, QScrollArea, QSizePolicy, QToolButton, QVBoxLayout,
                               QWidget)

from strived.rules.model import (EGO_FIELDS, FIELD_UNITS, KNOWN_CLASSES, OBJECT_FIELDS,
                                 OPS)

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

_INVALID_STYLE = "border: 1px solid #ff6b6b; border-radius: 3px;"
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


def _exact(v: Any) -> bool:
    """Whether a number box shows ``v`` exactly, so that writing it back changes nothing."""
    if v is None or isinstance(v, (int, float)) and not isinstance(v, bool):
        return True
    return isinstance(v, str) and v.strip() == v and number_value(v) == v


def representable(doc: Any) -> str | None:
    """None when the form can show ``doc`` exactly, else a one-line reason why not."""
    if not isinstance(doc, dict):
        return "the rule is not a JSON object"
    if "sequence" in doc or "absent" in doc:
        return ("a sequence rule (steps in order, negations): the form shows single-pattern rules "
                "only")
    extra = sorted(set(doc) - set(META_KEYS) - {"entity", "hard_gates", "soft_scores"})
    if extra:
        return f"key '{extra[0]}' is not part of a rule the form knows"
    ent = doc.get("entity", {})
    if not isinstance(ent, dict):
        return "'entity' is not an object"
    if set(ent) - ENTITY_KEYS:
        return f"entity key '{sorted(set(ent) - ENTITY_KEYS)[0]}' is not one the form knows"
    cf = ent.get("class_filter")
    if cf is not None and (not isinstance(cf, list) or not all(isinstance(c, str) for c in cf)):
        return "the class filter is not a list of class names"
    for k in ("role", "selection", "agg_mode"):
        if k in ent and not isinstance(ent[k], str):
            return f"entity '{k}' is not a text"
    for key in ("hard_gates", "soft_scores"):
        lst = doc.get(key, [])
        if not isinstance(lst, list):
            return f"'{key}' is not a list"
        for i, item in enumerate(lst):
            if not isinstance(item, dict):
                return f"{key}[{i}] is not an object"
    for i, g in enumerate(doc.get("hard_gates", [])):
        if set(g) - GATE_KEYS:
            return f"gate {i + 1} has key '{sorted(set(g) - GATE_KEYS)[0]}', which a gate does not take"
        for k in ("field", "op"):
            if k in g and not isinstance(g[k], str):
                return f"gate {i + 1}'s {k} is not a text"
        for k in GATE_NUMBERS:
            if k in g and not _exact(g[k]):
                return f"gate {i + 1}'s {k} is not a number the form can show"
    for i, s in enumerate(doc.get("soft_scores", [])):
        typ = {"max_change": "temporal_change"}.get(s.get("type"), s.get("type"))
        if typ not in SOFT_KEYS:
            return f"soft score {i + 1} has type {s.get('type')!r}, not one the form knows"
        if set(s) - SOFT_KEYS[typ]:
            return (f"soft score {i + 1} has key '{sorted(set(s) - SOFT_KEYS[typ])[0]}', which a "
                    f"{typ} does not take")
        if "magnitude" in s and "min_delta" in s:
            return f"soft score {i + 1} gives both magnitude and min_delta"
        if "field" in s and not isinstance(s["field"], str):
            return f"soft score {i + 1}'s field is not a text"
        if s.get("direction") is not None and not isinstance(s.get("direction"), str):
            return f"soft score {i + 1}'s direction is not a text"
        for k in ("window_seconds", "magnitude", "min_delta", "min_duration_seconds", "weight",
                  "min_fraction"):
            if k in s and not _exact(s[k]):
                return f"soft score {i + 1}'s {k} is not a number the form can show"
    return None


def _combo(items, parent, tip: str = "") -> QComboBox:
    c = QComboBox(parent)
    for value, text in items:
        c.addItem(text, value)
    if tip:
        c.setToolTip(tip)
    c.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
    return c


def _set_combo(c: QComboBox, value, label=None) -> None:
    """Select ``value``; a value the combo does not list is added, marked, so nothing is lost (the
    schema reports it)."""
    k = c.findData(value)
    if k < 0:
        c.addItem(label or f"{value} (not valid)", value)
        k = c.count() - 1
        c.setItemData(k, QColor("#ff8a8a"), Qt.ItemDataRole.ForegroundRole)
    c.setCurrentIndex(k)


def _field_combo(parent) -> QComboBox:
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


def _num_edit(parent, placeholder: str = "", tip: str = "", width: int = 70) -> QLineEdit:
    e = QLineEdit(parent)
    e.setPlaceholderText(placeholder)
    e.setToolTip(tip)
    e.setFixedWidth(width)
    e.setAlignment(Qt.AlignmentFlag.AlignRight)
    return e


def _dim(text: str, parent) -> QLabel:
    lab = QLabel(text, parent)
    lab.setObjectName("dim")
    return lab


class _Row(QFrame):
    """A gate or soft score row: its widgets by document key, a statistics hint, its errors."""

    def __init__(self, form: "RuleForm"):
        super().__init__(form)
        self.form = form
        self.setObjectName("ruleFormRow")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.widgets: dict[str, QWidget] = {}
        self.hint = _dim("", self)
        self.hint.setObjectName("ruleFormHint")
        self.hint.setWordWrap(True)
        self.error = QLabel("", self)
        self.error.setObjectName("ruleFormError")
        self.error.setStyleSheet("color: #ff8a8a;")
        self.error.setWordWrap(True)
        self.error.hide()
        self.remove = QToolButton(self)
        self.remove.setText("✕")
        self.remove.setAutoRaise(True)
        self.remove.clicked.connect(lambda: form._remove_row(self))

    def _edited(self, *_a) -> None:
        self.update_hint()
        self.form._emit_edited()

    def _wire(self) -> None:
        for w in self.widgets.values():
            if isinstance(w, QLineEdit):
                w.textEdited.connect(self._edited)
            elif isinstance(w, QComboBox):
                w.activated.connect(self._edited)

    def update_hint(self) -> None:  # overridden
        pass


class GateRow(_Row):
    """One hard gate: [field] [op] [value] unit, optionally "in ≥ x of the frames" or "held for
    ≥ s s" (an unbroken run of that many seconds; the schema refuses both at once)."""

    def __init__(self, form: "RuleForm"):
        super().__init__(form)
        self.remove.setToolTip("Remove this gate")
        f, op = _field_combo(self), _combo(OP_ITEMS, self, "operator")
        op.setObjectName("opPicker")
        op.setMinimumWidth(52)
        val = _num_edit(self, "value", "the value in the field's unit", 80)
        val.setObjectName("gateValue")
        self.unit = QLabel("", self)
        frac = _num_edit(self, "any", "extension: the condition must hold in at least this "
                                      "fraction (0–1] of the track's frames; empty = in one "
                                      "frame at least", 50)
        secs = _num_edit(self, "–", "extension: the condition must hold over an unbroken run of "
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
        top.addWidget(_dim("in ≥", self))
        top.addWidget(frac)
        top.addWidget(_dim("of its frames", self))
        top.addSpacing(8)
        top.addWidget(_dim("or held for ≥", self))
        top.addWidget(secs)
        top.addWidget(_dim("s", self))
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
        _set_combo(self.widgets["field"], g.get("field", "distance"))
        _set_combo(self.widgets["op"], OPS.get(g.get("op"), g.get("op", "lt")))
        self.widgets["value"].setText(number_text(g.get("value")))
        self.widgets["min_time_fraction"].setText(number_text(g.get("min_time_fraction")))
        self.widgets["min_seconds"].setText(number_text(g.get("min_seconds")))
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
        from strived.rules.stats import hint_text

        f = self.widgets["field"].currentData()
        self.unit.setText(FIELD_UNITS.get(f, "") or "")
        self.hint.setText(hint_text(self.form.hints, f) if self.form.hints else self.form.no_hints)


class SoftRow(_Row):
    """One soft score: a change of [field] [direction] reaching [threshold] within [window] s, or
    a steady [direction] trend of [field] for [duration] s; its weight."""

    def __init__(self, form: "RuleForm"):
        super().__init__(form)
        self.remove.setToolTip("Remove this soft score")
        typ = _combo(TYPE_ITEMS, self, "how the field is scored")
        typ.setObjectName("softType")
        f = _field_combo(self)
        dirc = QComboBox(self)
        dirc.setObjectName("softDirection")
        thr = _num_edit(self, "", "the change that scores 1 (full score); half of it scores 0.5")
        thr.setObjectName("softThreshold")
        self.unit = QLabel("", self)
        win = _num_edit(self, "seconds", "the window the change happens within, in seconds", 60)
        win.setObjectName("softWindow")
        dur = _num_edit(self, "seconds", "the steady run that scores 0.5 (twice as long scores 1), "
                                         "in seconds", 60)
        dur.setObjectName("softDuration")
        weight = _num_edit(self, "1", "relative weight of this score (default 1)", 50)
        weight.setObjectName("softWeight")
        frac = _num_edit(self, "any", "optional: the score counts for a video only when at least "
                                      "this fraction (0–1) of its candidate tracks reach 0.5", 50)
        self.widgets = {"type": typ, "field": f, "direction": dirc, "threshold": thr,
                        "window_seconds": win, "min_duration_seconds": dur, "weight": weight,
                        "min_fraction": frac}
        self.thr_key = "magnitude"
        self.thr_label = _dim("full score at a change of", self)
        self.win_label = _dim("within", self)
        self.win_unit = _dim("s", self)
        self.dur_label = _dim("half score after", self)
        self.dur_unit = _dim("s", self)
        top = QHBoxLayout()
        top.setContentsMargins(0, 0, 0, 0)
        top.addWidget(f)
        top.addWidget(typ)
        top.addWidget(dirc)
        top.addStretch(1)
        top.addWidget(_dim("weight", self))
        top.addWidget(weight)
        top.addWidget(self.remove)
        mid = QHBoxLayout()
        mid.setContentsMargins(0, 0, 0, 0)
        for w in (self.thr_label, thr, self.unit, self.win_label, win, self.win_unit,
                  self.dur_label, dur, self.dur_unit):
            mid.addWidget(w)
        mid.addStretch(1)
        mid.addWidget(_dim("needs ≥", self))
        mid.addWidget(frac)
        mid.addWidget(_dim("of the tracks", self))
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
        _set_combo(d, direction)
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
        _set_combo(self.widgets["type"], typ)
        _set_combo(self.widgets["field"], s.get("field", "distance"))
        self._set_type(typ, s.get("direction"))       # a trend without one: shown as not valid
        self.thr_key = "min_delta" if "min_delta" in s else "magnitude"
        self.thr_label.setText("half score at a change of" if self.thr_key == "min_delta"
                               else "full score at a change of")
        self.widgets["threshold"].setText(number_text(s.get(self.thr_key)))
        for k in ("window_seconds", "min_duration_seconds", "weight", "min_fraction"):
            self.widgets[k].setText(number_text(s.get(k)))
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
        from strived.rules.stats import hint_text

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


class RuleForm(QWidget):
    """Entity, gates and soft scores of a single-pattern rule as widgets (see the module doc)."""

    edited = Signal()               # the user changed something: read `document()`

    def __init__(self, parent=None):
        super().__init__(parent)
        self.hints: dict | None = None
        self.no_hints = "library statistics: open a library to see them"
        self.reason: str | None = None
        self._loading = False
        self._meta: dict = {}
        self._class_order: list[str] = []
        self.gate_rows: list[GateRow] = []
        self.soft_rows: list[SoftRow] = []
        self._pointer_widgets: dict[str, QWidget] = {}
        self._marked: list[QWidget] = []
        self._class_warnings: dict[str, str] = {}    # class name -> the engine's warning

        self.banner = QLabel("", self)
        self.banner.setObjectName("ruleFormReason")
        self.banner.setWordWrap(True)
        self.banner.setStyleSheet("color: #f9c74f;")
        self.banner.hide()
        self.title = _dim("", self)

        body = QWidget(self)
        self.body = body
        # who
        who = QGroupBox("Who", body)
        self.role = _combo(ROLE_ITEMS, who, "whose signals the rule reads")
        self.role.setObjectName("rolePicker")
        self.selection = _combo(SELECTION_ITEMS, who, "closest = only the track with the smallest "
                                                      "mean distance")
        self.agg = _combo(AGG_ITEMS, who, "how tracks make the video's score: the best track, or "
                                          "the mean of the best and the average track")
        self.any_class = QCheckBox("any class", who)
        self.any_class.setObjectName("anyClass")
        self.classes = QListWidget(who)
        self.classes.setObjectName("classPicker")
        self.classes.setFlow(QListView.Flow.LeftToRight)
        self.classes.setWrapping(True)
        self.classes.setResizeMode(QListView.ResizeMode.Adjust)
        self.classes.setSpacing(2)
        self.classes.setMaximumHeight(78)
        self.classes.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        self.class_note = _dim("", who)
        self.warning = QLabel("", who)                 # the engine's warnings about this part
        self.warning.setObjectName("ruleFormWarning")
        self.warning.setStyleSheet(f"color: {WARNING_COLOR};")
        self.warning.setWordWrap(True)
        self.warning.hide()
        g = QGridLayout(who)
        g.setVerticalSpacing(4)
        top = QHBoxLayout()
        top.setSpacing(8)
        for wdg in (self.role, _dim("tracks:", who), self.selection,
                    _dim("video score:", who), self.agg):
            top.addWidget(wdg)
        top.addStretch(1)
        g.addWidget(QLabel("Road users", who), 0, 0)
        g.addLayout(top, 0, 1, 1, 2)
        g.addWidget(QLabel("Classes", who), 1, 0, Qt.AlignmentFlag.AlignTop)
        g.addWidget(self.any_class, 1, 1, Qt.AlignmentFlag.AlignTop)
        g.addWidget(self.classes, 1, 2)
        g.addWidget(self.class_note, 2, 2)
        g.addWidget(self.warning, 3, 1, 1, 2)
        g.setColumnStretch(2, 1)
        # gates
        self.gates_box = QGroupBox("Must hold (hard gates: a video is kept only if some track "
                                   "meets each one, in some frame)", body)
        self.gates_lay = QVBoxLayout(self.gates_box)
        self.gates_lay.setSpacing(4)
        self.add_gate = QPushButton("+ Add a gate", self.gates_box)
        self.add_gate.setObjectName("addGate")
        self.gates_lay.addWidget(self.add_gate, 0, Qt.AlignmentFlag.AlignLeft)
        # soft scores
        self.softs_box = QGroupBox("Scored (soft scores, weighted: how strongly it happens)", body)
        self.softs_lay = QVBoxLayout(self.softs_box)
        self.softs_lay.setSpacing(4)
        self.softs_error = QLabel("", self.softs_box)
        self.softs_error.setStyleSheet("color: #ff8a8a;")
        self.softs_error.setWordWrap(True)
        self.softs_error.hide()
        self.add_soft = QPushButton("+ Add a soft score", self.softs_box)
        self.add_soft.setObjectName("addSoft")
        self.softs_lay.addWidget(self.softs_error)
        self.softs_lay.addWidget(self.add_soft, 0, Qt.AlignmentFlag.AlignLeft)
        bl = QVBoxLayout(body)
        bl.setContentsMargins(0, 0, 0, 0)
        bl.addWidget(who)
        bl.addWidget(self.gates_box)
        bl.addWidget(self.softs_box)
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

        self.role.activated.connect(self._on_role)
        self.selection.activated.connect(self._emit_edited)
        self.agg.activated.connect(self._emit_edited)
        self.any_class.clicked.connect(self._on_any_class)
        self.classes.itemChanged.connect(self._on_class_item)
        self.add_gate.clicked.connect(self._on_add_gate)
        self.add_soft.clicked.connect(self._on_add_soft)
        self._fill_classes([])
        self.load(None)

    # ------------------------------------------------------------------ loading
    def load(self, doc: dict | None) -> str | None:
        """Show ``doc``; returns None, or why the form cannot show it (the form is then disabled
        and says so). None/empty: an empty form, disabled until a rule comes."""
        reason = None if doc is None else representable(doc)
        self.reason = reason
        if doc is None or reason is not None:
            self.banner.setText("" if doc is None else f"Not shown as a form: {reason}. Edit it in "
                                                       "the JSON tab.")
            self.banner.setVisible(doc is not None)
            self.title.setText("No rule yet: run a search." if doc is None else "")
            self.body.setEnabled(False)
            return reason
        self._loading = True
        try:
            self.banner.hide()
            self.body.setEnabled(True)
            self._meta = {k: doc[k] for k in doc if k in META_KEYS}
            ev = doc.get("event")
            self.title.setText(f"Rule for: {ev}" if ev else "")
            ent = doc.get("entity") or {}
            role = ent.get("role", "object")
            _set_combo(self.role, role)
            _set_combo(self.selection, ent.get("selection", "any"))
            _set_combo(self.agg, ent.get("agg_mode", "any"))
            cf = ent.get("class_filter")
            self._class_order = list(cf or [])
            self.any_class.setChecked(cf is None)
            self._fill_classes(self._class_order)
            self._sync_rows(self.gate_rows, doc.get("hard_gates") or [], GateRow, self.gates_lay)
            self._sync_rows(self.soft_rows, doc.get("soft_scores") or [], SoftRow, self.softs_lay)
            self._update_enabled()
            self._map_pointers()
        finally:
            self._loading = False
        return None

    def refuse(self, reason: str) -> None:
        """The text is not a rule document at all (e.g. a JSON syntax error): say so, disabled."""
        self.reason = reason
        self.banner.setText(f"Not shown as a form: {reason}. Fix it in the JSON tab.")
        self.banner.show()
        self.body.setEnabled(False)

    def _sync_rows(self, rows: list, docs: list[dict], cls, lay) -> None:
        """Reuse the rows there are (focus and cursor stay), add or remove the difference."""
        while len(rows) > len(docs):
            r = rows.pop()
            lay.removeWidget(r)
            r.hide()                  # gone now, not when the deferred delete runs
            r.deleteLater()
        while len(rows) < len(docs):
            r = cls(self)
            lay.insertWidget(len(rows), r)          # before the add button (and the note)
            r.show()
            rows.append(r)
        for r, d in zip(rows, docs):
            r.load(d)

    def _fill_classes(self, chosen: list[str]) -> None:
        """The library's classes (most tracks first), the rule's own, then the other known ones."""
        self._loading, was = True, self._loading
        try:
            self.classes.clear()
            lib = [(c["name"], c) for c in (self.hints or {}).get("classes", [])]
            names = [n for n, _ in lib] + [c for c in chosen if c not in dict(lib)] + \
                [c for c in KNOWN_CLASSES if c not in dict(lib) and c not in chosen]
            info = dict(lib)
            for n in names:
                it = QListWidgetItem(n)
                it.setData(Qt.ItemDataRole.UserRole, n)
                it.setFlags(Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsUserCheckable)
                it.setCheckState(Qt.CheckState.Checked if n in chosen else Qt.CheckState.Unchecked)
                if n in info:
                    c = info[n]
                    it.setText(f"{n} · {c['tracks']}")
                    it.setToolTip(f"{c['tracks']} track(s) in {c['videos']} video(s) of this library")
                else:
                    it.setForeground(QColor("#7d848e"))
                    it.setToolTip("no track of this class in this library" if self.hints else
                                  "a class the records format or the detector uses")
                if n in self._class_warnings:
                    it.setText(f"⚠ {it.text()}")
                    it.setForeground(QColor(WARNING_COLOR))
                    it.setToolTip(self._class_warnings[n])
                self.classes.addItem(it)
            n_lib = len(lib)
            self.class_note.setText(f"{n_lib} class(es) in this library (number = tracks); grey: none "
                                    "in it" if self.hints else "")
        finally:
            self._loading = was

    def set_hints(self, hints: dict | None) -> None:
        """The library's field statistics (`strived.rules.stats.field_hints`); None: none known."""
        self.hints = hints
        self._fill_classes(self._chosen_classes())
        self.class_note.setVisible(bool(self.hints))
        for r in self.gate_rows + self.soft_rows:
            r.update_hint()

    # ------------------------------------------------------------------ the document
    def _chosen_classes(self) -> list[str]:
        checked = set()
        for k in range(self.classes.count()):
            it = self.classes.item(k)
            if it.checkState() == Qt.CheckState.Checked:
                checked.add(it.data(Qt.ItemDataRole.UserRole))
        order = [c for c in self._class_order if c in checked]
        listed = [self.classes.item(k).data(Qt.ItemDataRole.UserRole)
                  for k in range(self.classes.count())]
        return order + [c for c in listed if c in checked and c not in order]

    def document(self) -> dict:
        """The rule document the form shows (what the user typed, errors included)."""
        d = dict(self._meta)
        role = self.role.currentData()
        ego = role == "ego"
        d["entity"] = {"role": role,
                       "class_filter": None if ego or self.any_class.isChecked()
                       else self._chosen_classes(),
                       "selection": "any" if ego else self.selection.currentData(),
                       "agg_mode": "any" if ego else self.agg.currentData()}
        d["hard_gates"] = [r.document() for r in self.gate_rows]
        d["soft_scores"] = [r.document() for r in self.soft_rows]
        self._map_pointers()
        return d

    def _map_pointers(self) -> None:
        """JSON pointer -> the widget that shows it (for the engine's errors)."""
        pw: dict[str, QWidget] = {"/entity/role": self.role, "/entity/class_filter": self.classes,
                                  "/entity/selection": self.selection,
                                  "/entity/agg_mode": self.agg, "/entity": self.role,
                                  "/hard_gates": self.gates_box, "/soft_scores": self.softs_box}
        for i, r in enumerate(self.gate_rows):
            pw[f"/hard_gates/{i}"] = r
            pw.update({f"/hard_gates/{i}/{k}": w for k, w in r.widgets.items()})
        for i, r in enumerate(self.soft_rows):
            pw[f"/soft_scores/{i}"] = r
            pw.update(r.pointer_widgets(f"/soft_scores/{i}"))
        self._pointer_widgets = pw

    def widget_for(self, pointer: str) -> QWidget | None:
        """The widget a JSON pointer names (or its nearest parent's)."""
        if not self._pointer_widgets:
            self._map_pointers()
        p = pointer
        while p and p not in self._pointer_widgets:
            p = p.rsplit("/", 1)[0]
        return self._pointer_widgets.get(p)

    def show_errors(self, errors: list[tuple[str, str]]) -> None:
        """The engine's (pointer, message) errors on their widgets: a red outline with the message
        as its tooltip, and the messages under their row."""
        for w in self._marked:
            if not shiboken6.isValid(w):          # its row was removed meanwhile
                continue
            w.setStyleSheet("")
            w.setToolTip(w.property("plainTip") or "")
        self._marked = []
        for r in self.gate_rows + self.soft_rows:
            r.error.hide()
            r.error.setText("")
        self.softs_error.hide()
        if self.reason is not None:
            return
        per_row: dict[int, list[str]] = {}
        for ptr, msg in errors:
            w = self.widget_for(ptr)
            if w is None:
                continue
            key = ptr.rsplit("/", 1)[-1] if ptr.count("/") >= 3 else ""
            row = w if isinstance(w, _Row) else w.parentWidget() if isinstance(w.parentWidget(), _Row) \
                else None
            if row is not None:
                per_row.setdefault(id(row), []).append(f"{key}: {msg}" if key else msg)
                row.error.setText("\n".join(per_row[id(row)]))
                row.error.show()
            elif w is self.softs_box:               # e.g. the weights sum to zero
                self.softs_error.setText(msg)
                self.softs_error.show()
            if not isinstance(w, (_Row, QGroupBox)):
                if w.property("plainTip") is None:
                    w.setProperty("plainTip", w.toolTip())
                w.setStyleSheet(_INVALID_STYLE)
                w.setToolTip(msg)
                self._marked.append(w)

    def show_warnings(self, warnings: list[tuple[str, str]], doc: dict | None) -> None:
        """The engine's (pointer, message) warnings of a valid rule (``Rule.warnings``: an unknown
        class, which probably matches no track) in amber: on the class it names in the picker
        (its tooltip says why) and under the classes; ``doc`` is the rule document they refer to."""
        cf = ((doc or {}).get("entity") or {}).get("class_filter") if isinstance(doc, dict) else None
        by_class, lines = {}, []
        for ptr, msg in warnings:
            parts = ptr.split("/")
            if len(parts) == 4 and parts[1:3] == ["entity", "class_filter"] and parts[3].isdigit() \
                    and isinstance(cf, list) and int(parts[3]) < len(cf):
                by_class[str(cf[int(parts[3])])] = msg
            lines.append(msg)
        shown = self.reason is None and bool(lines)
        if by_class != self._class_warnings:
            self._class_warnings = by_class
            self._fill_classes(self._chosen_classes())
        self.warning.setText("\n".join(f"⚠ {m}" for m in lines))
        self.warning.setVisible(shown)

    # ------------------------------------------------------------------ user edits
    def _emit_edited(self, *_a) -> None:
        if not self._loading:
            self.edited.emit()

    def _update_enabled(self) -> None:
        ego = self.role.currentData() == "ego"
        self.selection.setEnabled(not ego)
        self.agg.setEnabled(not ego)
        self.any_class.setEnabled(not ego)
        self.classes.setEnabled(not ego and not self.any_class.isChecked())
        self.classes.setToolTip("the ego vehicle has no class" if ego else
                                "tick the classes the rule considers")

    def _on_role(self, *_a) -> None:
        self._update_enabled()
        self._emit_edited()

    def _on_any_class(self, *_a) -> None:
        self._update_enabled()
        self._emit_edited()

    def _on_class_item(self, it: QListWidgetItem) -> None:
        if self._loading:
            return
        n = it.data(Qt.ItemDataRole.UserRole)
        if it.checkState() == Qt.CheckState.Checked and n not in self._class_order:
            self._class_order.append(n)
        self._emit_edited()

    def _stat(self, field: str, key: str, window: str | None = None):
        e = ((self.hints or {}).get("fields") or {}).get(field) or {}
        src = e.get("windows", {}).get(window) if window else e.get("value")
        v = (src or {}).get(key)
        return None if v is None or not math.isfinite(v) else float(f"{v:.3g}")

    def _on_add_gate(self) -> None:
        """A new gate on distance, its value the library's median when known."""
        r = GateRow(self)
        self.gates_lay.insertWidget(len(self.gate_rows), r)
        r.show()
        self.gate_rows.append(r)
        med = self._stat("distance", "P50")
        r.load({"field": "distance", "op": "lt", **({"value": med} if med is not None else {})})
        self._emit_edited()
        r.widgets["value"].setFocus()

    def _on_add_soft(self) -> None:
        """A new soft score: a change of distance within 4 s; full score at the library's 90th
        percentile of that change when known."""
        r = SoftRow(self)
        self.softs_lay.insertWidget(len(self.soft_rows), r)
        r.show()
        self.soft_rows.append(r)
        p90 = self._stat("distance", "P90", "4s")
        r.load({"type": "temporal_change", "field": "distance", "window_seconds": 4.0,
                "direction": None, **({"magnitude": p90} if p90 else {})})
        self._emit_edited()
        r.widgets["threshold"].setFocus()

    def _remove_row(self, row: _Row) -> None:
        rows, lay = (self.gate_rows, self.gates_lay) if row in self.gate_rows else \
            (self.soft_rows, self.softs_lay)
        rows.remove(row)
        lay.removeWidget(row)
        row.hide()
        row.deleteLater()
        self._emit_edited()

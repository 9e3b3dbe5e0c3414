"""A sequence rule as a form (issue 34): its steps in order, the gaps between them, and its scoped
negations (``absent``), each step and each negation a fragment (`app.rule_fragment`).

A step: its name, weight, who, gates and soft scores. Between two steps, a gap line: the time from
the previous step's anchor to this one's (``gap.min_seconds`` to ``gap.max_seconds``) and whether
the same track realises both (``same_track``); these belong to the place between the steps, so
moving a step up or down moves its fragment and leaves the gaps where they are (the first step has
none). A negation: its name, the step its window is around (``step``; empty: the last step), the
seconds before and after that step's anchor, and the fragment that must not hold there (its gates
are the spatial scope). A negation anchored to a removed step falls back to the last step.

As in the rest of the form, nothing is validated here: the widgets write what was typed and the
engine's schema says what is wrong, by JSON pointer (`pointer_widgets`).
"""

from __future__ import annotations

import copy
from typing import Any

import shiboken6
from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import (QCheckBox, QFrame, QHBoxLayout, QLabel, QLineEdit, QPushButton,
                               QToolButton, QVBoxLayout, QWidget)

from .rule_form_rows import (Box, combo, dim, error_label, exact_number, num_edit, number_text,
                             number_value, set_combo, set_text)
from .rule_fragment import FragmentEditor, fragment_reason

STEP_KEYS = {"name", "entity", "hard_gates", "soft_scores", "weight", "gap", "same_track"}
ABSENT_KEYS = {"name", "entity", "hard_gates", "soft_scores", "step", "before_seconds",
               "after_seconds"}
#: the keys of a step that belong to the place between it and the previous step
BOUNDARY_KEYS = ("gap", "same_track")
NEW_ENTITY = {"role": "object", "class_filter": None, "selection": "any", "agg_mode": "any"}


def sequence_reason(doc: dict) -> str | None:
    """None when the form can show the sequence rule ``doc`` exactly, else a one-line reason."""
    steps, absent = doc.get("sequence"), doc.get("absent", [])
    if not isinstance(steps, list) or not all(isinstance(s, dict) for s in steps):
        return "'sequence' is not a list of steps"
    if not isinstance(absent, list) or not all(isinstance(a, dict) for a in absent):
        return "'absent' is not a list of negations"
    for k, s in enumerate(steps):
        where = f"step {k + 1}: "
        if set(s) - STEP_KEYS:
            return f"{where}key '{sorted(set(s) - STEP_KEYS)[0]}' is not one a step takes"
        gap = s.get("gap", {})
        if not isinstance(gap, dict) or set(gap) - {"min_seconds", "max_seconds"} or \
                not all(exact_number(v) for v in gap.values()):
            return f"{where}the gap is not an object of min_seconds and max_seconds"
        if not isinstance(s.get("same_track", False), bool):
            return f"{where}same_track is not true or false"
        reason = _named_reason(s, ("weight",), where) or fragment_reason(s, where)
        if reason:
            return reason
    for n, a in enumerate(absent):
        where = f"negation {n + 1}: "
        if set(a) - ABSENT_KEYS:
            return f"{where}key '{sorted(set(a) - ABSENT_KEYS)[0]}' is not one a negation takes"
        if "step" in a and (not isinstance(a["step"], int) or isinstance(a["step"], bool)):
            return f"{where}its step is not a step number"
        reason = _named_reason(a, ("before_seconds", "after_seconds"), where) or \
            fragment_reason(a, where)
        if reason:
            return reason
    return None


def _named_reason(d: dict, numbers: tuple[str, ...], where: str) -> str | None:
    if d.get("name") is not None and not isinstance(d["name"], str):
        return f"{where}its name is not a text"
    for k in numbers:
        if k in d and not exact_number(d[k]):
            return f"{where}{k} is not a number the form can show"
    return None


def _put_number(d: dict, key: str, edit: QLineEdit) -> None:
    v = number_value(edit.text())
    if v is not None:
        d[key] = v


class GapRow(QFrame):
    """Between step k-1 and step k: "then [min] to [max] s later, [ ] the same track"."""

    def __init__(self, seq: "SequenceEditor"):
        super().__init__(seq.steps_box)
        self.setObjectName("ruleFormGap")
        self.min = num_edit(self, "0", "the least time from the previous step's anchor, in seconds "
                                       "(empty: 0)", 55)
        self.min.setObjectName("gapMin")
        self.max = num_edit(self, "seconds", "the most time from the previous step's anchor, in "
                                             "seconds (required)", 55)
        self.max.setObjectName("gapMax")
        self.same = QCheckBox("by the same track", self)
        self.same.setObjectName("sameTrack")
        self.same.setToolTip("this step must be realised by the same track as the previous one")
        self.error = error_label(self)
        self.had_same = False
        top = QHBoxLayout()
        top.setContentsMargins(0, 0, 0, 0)
        for w in (dim("↓ then,", self), self.min, dim("to", self), self.max,
                  dim("s later", self)):
            top.addWidget(w)
        top.addSpacing(12)
        top.addWidget(self.same)
        top.addStretch(1)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(24, 0, 6, 0)
        lay.setSpacing(2)
        lay.addLayout(top)
        lay.addWidget(self.error)
        for e in (self.min, self.max):
            e.textEdited.connect(seq.edited)
        self.same.clicked.connect(seq.edited)

    def load(self, sd: dict, first: bool) -> None:
        gap = sd.get("gap") or {}
        set_text(self.min, number_text(gap.get("min_seconds")))
        set_text(self.max, number_text(gap.get("max_seconds")))
        self.same.setChecked(bool(sd.get("same_track", False)))
        self.had_same = "same_track" in sd
        # the first step has no gap: shown only when the document gives one (the engine says why)
        self.setVisible(not first or "gap" in sd or bool(sd.get("same_track")))

    def write(self, d: dict) -> None:
        """The gap keys of the step document ``d`` (none for a first step that shows none)."""
        if self.isHidden():
            return
        gap: dict[str, Any] = {}
        _put_number(gap, "min_seconds", self.min)
        _put_number(gap, "max_seconds", self.max)
        if gap:
            d["gap"] = gap
        if self.same.isChecked() or self.had_same:
            d["same_track"] = self.same.isChecked()

    def pointer_widgets(self, base: str) -> dict[str, QWidget]:
        return {f"{base}/gap": self.max, f"{base}/gap/min_seconds": self.min,
                f"{base}/gap/max_seconds": self.max, f"{base}/same_track": self.same}


class StepBox(QFrame):
    """One step: "Step k", its name, weight, ▲ ▼ ✕, and its fragment; its gap line (``gap``) sits
    above it in the list."""

    def __init__(self, seq: "SequenceEditor"):
        super().__init__(seq.steps_box)
        self.setObjectName("ruleFormStep")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.gap = GapRow(seq)
        self.label = QLabel("", self)
        self.label.setStyleSheet("font-weight: bold;")
        self.name = QLineEdit(self)
        self.name.setObjectName("stepName")
        self.name.setPlaceholderText("name (optional)")
        self.weight = num_edit(self, "1", "the step's weight in the weighted geometric mean of the "
                                          "steps' scores (default 1)", 50)
        self.weight.setObjectName("stepWeight")
        self.up, self.down, self.remove = (QToolButton(self) for _ in range(3))
        for b, text, tip in ((self.up, "▲", "Move this step earlier"),
                             (self.down, "▼", "Move this step later"),
                             (self.remove, "✕", "Remove this step")):
            b.setText(text)
            b.setToolTip(tip)
            b.setAutoRaise(True)
        self.up.setObjectName("stepUp")
        self.down.setObjectName("stepDown")
        self.remove.setObjectName("stepRemove")
        self.fragment = FragmentEditor(seq.owner, self, in_sequence=True)
        self.error = error_label(self)
        self.had_name = False
        top = QHBoxLayout()
        top.setContentsMargins(0, 0, 0, 0)
        for w in (self.label, self.name, dim("weight", self), self.weight):
            top.addWidget(w)
        top.addStretch(1)
        for b in (self.up, self.down, self.remove):
            top.addWidget(b)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(3, 4, 3, 4)
        lay.setSpacing(2)
        lay.addLayout(top)
        lay.addWidget(self.error)
        lay.addWidget(self.fragment)
        self.name.textEdited.connect(seq.name_edited)
        self.weight.textEdited.connect(seq.edited)
        self.up.clicked.connect(lambda: seq.move_step(self, -1))
        self.down.clicked.connect(lambda: seq.move_step(self, 1))
        self.remove.clicked.connect(lambda: seq.remove_step(self))

    def load(self, sd: dict) -> None:
        set_text(self.name, sd.get("name") or "")
        self.had_name = "name" in sd
        set_text(self.weight, number_text(sd.get("weight")))
        self.fragment.load(sd)

    def document(self) -> dict:
        d: dict[str, Any] = {"name": self.name.text()} if self.name.text() or self.had_name else {}
        d.update(self.fragment.document())
        _put_number(d, "weight", self.weight)
        self.gap.write(d)
        return d

    def pointer_widgets(self, base: str) -> dict[str, QWidget]:
        pw: dict[str, QWidget] = {base: self, f"{base}/name": self.name, f"{base}/weight": self.weight}
        pw.update(self.gap.pointer_widgets(base))
        pw.update(self.fragment.pointer_widgets(base))
        return pw


class AbsentBox(QFrame):
    """One scoped negation: "Not: [name]", "from [before] s before to [after] s after [step]", ✕,
    and the fragment that must not hold in that window."""

    def __init__(self, seq: "SequenceEditor"):
        super().__init__(seq.absent_box)
        self.setObjectName("ruleFormAbsent")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.name = QLineEdit(self)
        self.name.setObjectName("absentName")
        self.name.setPlaceholderText("name (optional)")
        self.anchor = combo([], self, "the step whose anchor time the window is around")
        self.anchor.setObjectName("absentStep")
        self.before = num_edit(self, "0", "seconds before the step's anchor time (empty: 0)", 55)
        self.before.setObjectName("absentBefore")
        self.after = num_edit(self, "0", "seconds after the step's anchor time (empty: 0)", 55)
        self.after.setObjectName("absentAfter")
        self.remove = QToolButton(self)
        self.remove.setText("✕")
        self.remove.setToolTip("Remove this negation")
        self.remove.setAutoRaise(True)
        self.fragment = FragmentEditor(seq.owner, self, in_sequence=True)
        self.error = error_label(self)
        self.had_name = False
        top = QHBoxLayout()
        top.setContentsMargins(0, 0, 0, 0)
        lab = QLabel("Not:", self)
        lab.setStyleSheet("font-weight: bold;")
        top.addWidget(lab)
        top.addWidget(self.name)
        top.addStretch(1)
        top.addWidget(self.remove)
        scope = QHBoxLayout()
        scope.setContentsMargins(0, 0, 0, 0)
        for w in (dim("from", self), self.before, dim("s before to", self), self.after,
                  dim("s after the time of", self), self.anchor):
            scope.addWidget(w)
        scope.addStretch(1)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(3, 4, 3, 4)
        lay.setSpacing(2)
        lay.addLayout(top)
        lay.addLayout(scope)
        lay.addWidget(self.error)
        lay.addWidget(self.fragment)
        for e in (self.name, self.before, self.after):
            e.textEdited.connect(seq.edited)
        self.anchor.activated.connect(seq.edited)
        self.remove.clicked.connect(lambda: seq.remove_absent(self))

    def set_steps(self, labels: list[str], value: Any) -> None:
        """The anchor picker: the last step (no ``step`` key), then each step; ``value`` chosen."""
        self.anchor.clear()
        self.anchor.addItem("the last step", None)
        for k, text in enumerate(labels):
            self.anchor.addItem(text, k)
        set_combo(self.anchor, value, None if value is None else f"step {value + 1} (not valid)")

    def load(self, ad: dict, labels: list[str]) -> None:
        set_text(self.name, ad.get("name") or "")
        self.had_name = "name" in ad
        self.set_steps(labels, ad.get("step"))
        set_text(self.before, number_text(ad.get("before_seconds")))
        set_text(self.after, number_text(ad.get("after_seconds")))
        self.fragment.load(ad)

    def document(self) -> dict:
        d: dict[str, Any] = {"name": self.name.text()} if self.name.text() or self.had_name else {}
        d.update(self.fragment.document())
        if self.anchor.currentData() is not None:
            d["step"] = self.anchor.currentData()
        _put_number(d, "before_seconds", self.before)
        _put_number(d, "after_seconds", self.after)
        return d

    def pointer_widgets(self, base: str) -> dict[str, QWidget]:
        pw: dict[str, QWidget] = {base: self, f"{base}/name": self.name, f"{base}/step": self.anchor,
                                  f"{base}/before_seconds": self.before,
                                  f"{base}/after_seconds": self.after}
        pw.update(self.fragment.pointer_widgets(base))
        return pw


class SequenceEditor(QWidget):
    """The steps and the negations of a sequence rule (see the module doc); ``owner`` is the
    `RuleForm`, which hears every edit."""

    def __init__(self, owner, parent=None):
        super().__init__(parent)
        self.owner = owner
        self.steps: list[StepBox] = []
        self.absents: list[AbsentBox] = []
        self.had_absent = False
        self.steps_box = Box("Steps, in order", self)
        self.steps_box.setToolTip("each step is realised by one road user, or the ego vehicle, at "
                                  "one time; the sequence scores the best such assignment")
        self.add_step = QPushButton("+ Add a step", self.steps_box)
        self.add_step.setObjectName("addStep")
        self.steps_box.lay.addWidget(self.add_step, 0, Qt.AlignmentFlag.AlignLeft)
        self.absent_box = Box("Must not happen around a step (negations)", self)
        self.absent_box.setToolTip("scoped negations: the sequence's score is multiplied by 1 - how "
                                   "strongly the negation's fragment happens in its window")
        self.add_absent = QPushButton("+ Add a negation", self.absent_box)
        self.add_absent.setObjectName("addAbsent")
        self.absent_box.lay.addWidget(self.add_absent, 0, Qt.AlignmentFlag.AlignLeft)
        for box in (self.steps_box, self.absent_box):
            box.lay.setContentsMargins(2, 4, 2, 4)           # nested frames: keep the width
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.steps_box)
        lay.addWidget(self.absent_box)
        self.add_step.clicked.connect(self._on_add_step)
        self.add_absent.clicked.connect(self._on_add_absent)

    # ------------------------------------------------------------------ the document
    def load(self, doc: dict) -> None:
        steps, absent = doc.get("sequence") or [], doc.get("absent") or []
        self.had_absent = "absent" in doc
        while len(self.steps) > len(steps):
            b = self.steps.pop()
            for w in (b.gap, b):
                self.steps_box.lay.removeWidget(w)
                w.hide()
                w.deleteLater()
        while len(self.steps) < len(steps):
            b = StepBox(self)
            k = 2 * len(self.steps)
            self.steps_box.lay.insertWidget(k, b.gap)        # before the error line and the button
            self.steps_box.lay.insertWidget(k + 1, b)
            b.show()
            self.steps.append(b)
        for k, (b, sd) in enumerate(zip(self.steps, steps)):
            b.label.setText(f"Step {k + 1}")
            b.gap.load(sd, first=k == 0)
            b.load(sd)
            b.up.setEnabled(k > 0)
            b.down.setEnabled(k < len(steps) - 1)
            b.remove.setEnabled(len(steps) > 1)
        while len(self.absents) > len(absent):
            a = self.absents.pop()
            self.absent_box.lay.removeWidget(a)
            a.hide()
            a.deleteLater()
        while len(self.absents) < len(absent):
            a = AbsentBox(self)
            self.absent_box.lay.insertWidget(len(self.absents), a)
            a.show()
            self.absents.append(a)
        for a, ad in zip(self.absents, absent):
            a.load(ad, self.step_labels())

    def document(self) -> dict:
        """``sequence`` (and ``absent``, when there are negations or the rule had the key)."""
        d: dict[str, Any] = {"sequence": [b.document() for b in self.steps]}
        if self.absents or self.had_absent:
            d["absent"] = [a.document() for a in self.absents]
        return d

    def step_labels(self) -> list[str]:
        return [f"step {k + 1}" + (f" · {b.name.text()}" if b.name.text() else "")
                for k, b in enumerate(self.steps)]

    def fragments(self) -> list[tuple[str, FragmentEditor]]:
        """(JSON pointer, fragment editor) of every step and negation."""
        return [(f"/sequence/{k}", b.fragment) for k, b in enumerate(self.steps)] + \
            [(f"/absent/{n}", a.fragment) for n, a in enumerate(self.absents)]

    def pointer_widgets(self) -> dict[str, QWidget]:
        pw: dict[str, QWidget] = {"/sequence": self.steps_box, "/absent": self.absent_box}
        for k, b in enumerate(self.steps):
            pw.update(b.pointer_widgets(f"/sequence/{k}"))
        for n, a in enumerate(self.absents):
            pw.update(a.pointer_widgets(f"/absent/{n}"))
        return pw

    def error_holders(self) -> list[QWidget]:
        out: list[QWidget] = [self.steps_box, self.absent_box]
        for x in self.steps + self.absents:
            out += [x, *x.fragment.error_holders()]
            if isinstance(x, StepBox):
                out.append(x.gap)
        return out

    # ------------------------------------------------------------------ user edits
    def edited(self, *_a) -> None:
        self.owner.emit_edited()

    def name_edited(self, *_a) -> None:
        """A step's new name: the negations' step pickers say it too."""
        for a in self.absents:
            a.set_steps(self.step_labels(), a.anchor.currentData())
        self.edited()

    def _restructure(self, steps: list[dict], absent: list[dict], focus=None) -> None:
        """Show the changed lists (as a load would) and tell the owner."""
        self.owner.reload_part({"sequence": steps, **({"absent": absent} if absent or self.had_absent
                                                      else {})})
        self.edited()
        if focus is not None:
            widget = focus()
            widget.setFocus()
            # scrolled to once laid out (a box added just now has no geometry yet)
            QTimer.singleShot(0, lambda: shiboken6.isValid(widget)
                              and self.owner.scroll.ensureWidgetVisible(widget))

    def move_step(self, box: StepBox, delta: int) -> None:
        """Step k's fragment (name, weight, who, gates, scores) swaps places with its neighbour's;
        the gaps stay between the places; negations anchored to either follow their step."""
        k = self.steps.index(box)
        to = k + delta
        if not 0 <= to < len(self.steps):
            return
        docs = [b.document() for b in self.steps]
        frags = [{key: v for key, v in d.items() if key not in BOUNDARY_KEYS} for d in docs]
        frags[k], frags[to] = frags[to], frags[k]
        steps = [{**f, **{key: d[key] for key in BOUNDARY_KEYS if key in d}}
                 for f, d in zip(frags, docs)]
        absent = [a.document() for a in self.absents]
        for ad in absent:
            if ad.get("step") in (k, to):
                ad["step"] = to if ad["step"] == k else k

        def button():                             # the moved step's own arrow, or the other one
            moved = self.steps[to]
            first = moved.up if delta < 0 else moved.down
            return first if first.isEnabled() else moved.down if delta < 0 else moved.up

        self._restructure(steps, absent, button)

    def remove_step(self, box: StepBox) -> None:
        k = self.steps.index(box)
        steps = [b.document() for b in self.steps]
        del steps[k]
        if k == 0 and steps:                      # the new first step has no previous step
            steps[0] = {key: v for key, v in steps[0].items() if key not in BOUNDARY_KEYS}
        absent = [a.document() for a in self.absents]
        for ad in absent:
            s = ad.get("step")
            if s == k:
                ad.pop("step")                    # anchored to the removed step: the last step
            elif isinstance(s, int) and s > k:
                ad["step"] = s - 1
        self._restructure(steps, absent)

    def _on_add_step(self) -> None:
        """A new last step, 0 to 5 s after the previous one, watching the same road users; its gates
        and scores are added with its own buttons."""
        steps = [b.document() for b in self.steps]
        entity = copy.deepcopy(steps[-1]["entity"]) if steps else dict(NEW_ENTITY)
        steps.append({"entity": entity, "hard_gates": [], "soft_scores": [],
                      **({"gap": {"min_seconds": 0.0, "max_seconds": 5.0}} if steps else {})})
        self._restructure(steps, [a.document() for a in self.absents],
                          lambda: self.steps[-1].gap.max if len(self.steps) > 1 else self.steps[-1].name)

    def _on_add_absent(self) -> None:
        """A new negation around the last step: no road user within 20 m, 2 s either side."""
        absent = [a.document() for a in self.absents]
        absent.append({"entity": dict(NEW_ENTITY),
                       "hard_gates": [{"field": "distance", "op": "lt", "value": 20.0}],
                       "soft_scores": [], "before_seconds": 2.0, "after_seconds": 2.0})
        self._restructure([b.document() for b in self.steps], absent,
                          lambda: self.absents[-1].before)

    def remove_absent(self, box: AbsentBox) -> None:
        absent = [a.document() for a in self.absents if a is not box]
        self._restructure([b.document() for b in self.steps], absent)

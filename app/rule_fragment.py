"""One rule fragment as widgets: who (the entity: other road users of some classes, or the ego
vehicle), what must hold (hard gates) and how strongly it scores (soft scores). A single-pattern
rule is one fragment; each step and each negation of a sequence rule is one more
(`app.rule_form_sequence`). The fragment's document keys are ``entity``, ``hard_gates`` and
``soft_scores``; the engine's schema (`strived.rules.parse_rule`) validates them, never the form.

In a sequence (``in_sequence``) a fragment is realised by one unit at one time: the aggregation
and the gates' and scores' duration/fraction boxes are hidden there, unless the document gives
them (then they show, with the engine's error on them).
"""

from __future__ import annotations

import math
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (QCheckBox, QGridLayout, QGroupBox, QHBoxLayout, QLabel, QListView,
                               QListWidget, QListWidgetItem, QPushButton, QSizePolicy, QVBoxLayout,
                               QWidget)

from strived.api import KNOWN_CLASSES

from .rule_form_rows import (AGG_ITEMS, ENTITY_KEYS, GATE_KEYS, GATE_NUMBERS, ROLE_ITEMS,
                             SELECTION_ITEMS, SOFT_KEYS, WARNING_COLOR, Box, GateRow, Row, SoftRow,
                             combo, dim, exact_number, set_combo)


def fragment_reason(d: dict, where: str = "") -> str | None:
    """None when the form can show the fragment ``d`` (entity, gates, scores) exactly, else a
    one-line reason; ``where`` prefixes it ("step 2: ")."""
    ent = d.get("entity", {})
    if not isinstance(ent, dict):
        return f"{where}'entity' is not an object"
    if set(ent) - ENTITY_KEYS:
        return f"{where}entity key '{sorted(set(ent) - ENTITY_KEYS)[0]}' is not one the form knows"
    cf = ent.get("class_filter")
    if cf is not None and (not isinstance(cf, list) or not all(isinstance(c, str) for c in cf)):
        return f"{where}the class filter is not a list of class names"
    for k in ("role", "selection", "agg_mode"):
        if k in ent and not isinstance(ent[k], str):
            return f"{where}entity '{k}' is not a text"
    for key in ("hard_gates", "soft_scores"):
        lst = d.get(key, [])
        if not isinstance(lst, list):
            return f"{where}'{key}' is not a list"
        for i, item in enumerate(lst):
            if not isinstance(item, dict):
                return f"{where}{key}[{i}] is not an object"
    for i, g in enumerate(d.get("hard_gates", [])):
        if set(g) - GATE_KEYS:
            return (f"{where}gate {i + 1} has key '{sorted(set(g) - GATE_KEYS)[0]}', which a gate "
                    "does not take")
        for k in ("field", "op"):
            if k in g and not isinstance(g[k], str):
                return f"{where}gate {i + 1}'s {k} is not a text"
        for k in GATE_NUMBERS:
            if k in g and not exact_number(g[k]):
                return f"{where}gate {i + 1}'s {k} is not a number the form can show"
    for i, s in enumerate(d.get("soft_scores", [])):
        typ = {"max_change": "temporal_change"}.get(s.get("type"), s.get("type"))
        if typ not in SOFT_KEYS:
            return f"{where}soft score {i + 1} has type {s.get('type')!r}, not one the form knows"
        if set(s) - SOFT_KEYS[typ]:
            return (f"{where}soft score {i + 1} has key '{sorted(set(s) - SOFT_KEYS[typ])[0]}', "
                    f"which a {typ} does not take")
        if "magnitude" in s and "min_delta" in s:
            return f"{where}soft score {i + 1} gives both magnitude and min_delta"
        if "field" in s and not isinstance(s["field"], str):
            return f"{where}soft score {i + 1}'s field is not a text"
        if s.get("direction") is not None and not isinstance(s.get("direction"), str):
            return f"{where}soft score {i + 1}'s direction is not a text"
        for k in ("window_seconds", "magnitude", "min_delta", "min_duration_seconds", "weight",
                  "min_fraction"):
            if k in s and not exact_number(s[k]):
                return f"{where}soft score {i + 1}'s {k} is not a number the form can show"
    return None


class FragmentEditor(QWidget):
    """Entity, gates and soft scores of one fragment (see the module doc). ``owner`` (the
    `RuleForm`) holds the library's statistics and hears every edit."""

    def __init__(self, owner, parent=None, *, in_sequence: bool = False):
        super().__init__(parent)
        self.owner = owner
        self.in_sequence = in_sequence
        self._loading = False
        self._class_order: list[str] = []
        self._class_warnings: dict[str, str] = {}    # class name -> the engine's warning
        self.gate_rows: list[GateRow] = []
        self.soft_rows: list[SoftRow] = []
        self._build()
        self.role.activated.connect(self._on_role)
        self.selection.activated.connect(self.emit_edited)
        self.agg.activated.connect(self.emit_edited)
        self.any_class.clicked.connect(self._on_any_class)
        self.classes.itemChanged.connect(self._on_class_item)
        self.add_gate.clicked.connect(self._on_add_gate)
        self.add_soft.clicked.connect(self._on_add_soft)
        self._fill_classes([])

    @property
    def hints(self) -> dict | None:
        return self.owner.hints

    @property
    def no_hints(self) -> str:
        return self.owner.no_hints

    def _build(self) -> None:
        seq = self.in_sequence
        who = QGroupBox("Who (one road user, or the ego vehicle)" if seq else "Who", self)
        self.who = who
        self.role = combo(ROLE_ITEMS, who, "whose signals the rule reads")
        self.role.setObjectName("rolePicker")
        self.selection = combo(SELECTION_ITEMS, who, "closest = only the track with the smallest "
                                                     "mean distance")
        self.agg = combo(AGG_ITEMS, who, "how tracks make the video's score: the best track, or "
                                         "the mean of the best and the average track")
        self.agg_label = dim("video score:", who)
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
        self.class_note = dim("", who)
        self.warning = QLabel("", who)                 # the engine's warnings about this part
        self.warning.setObjectName("ruleFormWarning")
        self.warning.setStyleSheet(f"color: {WARNING_COLOR};")
        self.warning.setWordWrap(True)
        self.warning.hide()
        g = QGridLayout(who)
        g.setVerticalSpacing(4)
        top = QHBoxLayout()
        top.setSpacing(8)
        for wdg in (self.role, dim("tracks:", who), self.selection, self.agg_label, self.agg):
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
        self.gates_box = Box("Must hold at that time (hard gates)" if seq else
                             "Must hold (hard gates: a video is kept only if some track meets "
                             "each one, in some frame)", self)
        self.gates_lay = self.gates_box.lay
        self.add_gate = QPushButton("+ Add a gate", self.gates_box)
        self.add_gate.setObjectName("addGate")
        self.gates_lay.addWidget(self.add_gate, 0, Qt.AlignmentFlag.AlignLeft)
        self.softs_box = Box("Scored up to that time (soft scores, weighted)" if seq else
                             "Scored (soft scores, weighted: how strongly it happens)", self)
        self.softs_lay = self.softs_box.lay
        self.softs_error = self.softs_box.error
        self.add_soft = QPushButton("+ Add a soft score", self.softs_box)
        self.add_soft.setObjectName("addSoft")
        self.softs_lay.addWidget(self.add_soft, 0, Qt.AlignmentFlag.AlignLeft)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(who)
        lay.addWidget(self.gates_box)
        lay.addWidget(self.softs_box)

    # ------------------------------------------------------------------ the document
    def load(self, d: dict) -> None:
        """Show the fragment ``d`` (the form has checked it: `fragment_reason`)."""
        self._loading = True
        try:
            ent = d.get("entity") or {}
            set_combo(self.role, ent.get("role", "object"))
            set_combo(self.selection, ent.get("selection", "any"))
            set_combo(self.agg, ent.get("agg_mode", "any"))
            shown = not self.in_sequence or ent.get("agg_mode", "any") != "any"
            self.agg.setVisible(shown)
            self.agg_label.setVisible(shown)
            cf = ent.get("class_filter")
            self._class_order = list(cf or [])
            self.any_class.setChecked(cf is None)
            self._fill_classes(self._class_order)
            self._sync_rows(self.gate_rows, d.get("hard_gates") or [], GateRow, self.gates_lay)
            self._sync_rows(self.soft_rows, d.get("soft_scores") or [], SoftRow, self.softs_lay)
            self._update_enabled()
        finally:
            self._loading = False

    def _sync_rows(self, rows: list, docs: list[dict], cls, lay) -> None:
        """Reuse the rows there are (focus, cursor and undo history stay), add or remove the
        difference."""
        while len(rows) > len(docs):
            r = rows.pop()
            lay.removeWidget(r)
            r.hide()                  # gone now, not when the deferred delete runs
            r.deleteLater()
        while len(rows) < len(docs):
            r = cls(self)
            lay.insertWidget(len(rows), r)          # before the error line and the add button
            r.show()
            rows.append(r)
        for r, d in zip(rows, docs):
            r.load(d)

    def document(self) -> dict:
        """``entity``, ``hard_gates`` and ``soft_scores`` as the widgets show them."""
        role = self.role.currentData()
        ego = role == "ego"
        return {"entity": {"role": role,
                           "class_filter": None if ego or self.any_class.isChecked()
                           else self._chosen_classes(),
                           "selection": "any" if ego else self.selection.currentData(),
                           "agg_mode": "any" if ego else self.agg.currentData()},
                "hard_gates": [r.document() for r in self.gate_rows],
                "soft_scores": [r.document() for r in self.soft_rows]}

    def pointer_widgets(self, base: str) -> dict[str, QWidget]:
        """JSON pointer (under ``base``) -> the widget that shows it."""
        pw: dict[str, QWidget] = {f"{base}/entity/role": self.role,
                                  f"{base}/entity/class_filter": self.classes,
                                  f"{base}/entity/selection": self.selection,
                                  f"{base}/entity/agg_mode": self.agg, f"{base}/entity": self.role,
                                  f"{base}/hard_gates": self.gates_box,
                                  f"{base}/soft_scores": self.softs_box}
        for i, r in enumerate(self.gate_rows):
            pw[f"{base}/hard_gates/{i}"] = r
            pw.update({f"{base}/hard_gates/{i}/{k}": w for k, w in r.widgets.items()})
        for i, r in enumerate(self.soft_rows):
            pw[f"{base}/soft_scores/{i}"] = r
            pw.update(r.pointer_widgets(f"{base}/soft_scores/{i}"))
        return pw

    def error_holders(self) -> list[QWidget]:
        """The widgets with an ``error`` line in this fragment."""
        return [*self.gate_rows, *self.soft_rows, self.gates_box, self.softs_box]

    # ------------------------------------------------------------------ classes, statistics
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
            self.class_note.setText(f"{len(lib)} class(es) in this library (number = tracks); grey: "
                                    "none in it" if self.hints else "")
        finally:
            self._loading = was

    def refresh_hints(self) -> None:
        """The owner's statistics changed: the class list and every row's hint again."""
        self._fill_classes(self._chosen_classes())
        self.class_note.setVisible(bool(self.hints))
        for r in self.gate_rows + self.soft_rows:
            r.update_hint()

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

    def show_warnings(self, warnings: list[tuple[str, str]], d: Any, shown: bool) -> None:
        """The engine's warnings about this fragment, their pointers relative to it (an unknown
        class: "/entity/class_filter/0") in amber: on the class in the picker and under the
        classes; ``d`` is the fragment's document."""
        cf = (d.get("entity") or {}).get("class_filter") if isinstance(d, dict) and \
            isinstance(d.get("entity"), dict) else None
        by_class, lines = {}, []
        for ptr, msg in warnings:
            parts = ptr.split("/")
            if len(parts) == 4 and parts[1:3] == ["entity", "class_filter"] and parts[3].isdigit() \
                    and isinstance(cf, list) and int(parts[3]) < len(cf):
                by_class[str(cf[int(parts[3])])] = msg
            lines.append(msg)
        if by_class != self._class_warnings:
            self._class_warnings = by_class
            self._fill_classes(self._chosen_classes())
        self.warning.setText("\n".join(f"⚠ {m}" for m in lines))
        self.warning.setVisible(shown and bool(lines))

    # ------------------------------------------------------------------ user edits
    def emit_edited(self, *_a) -> None:
        if not self._loading:
            self.owner.emit_edited()

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
        self.emit_edited()

    def _on_any_class(self, *_a) -> None:
        self._update_enabled()
        self.emit_edited()

    def _on_class_item(self, it: QListWidgetItem) -> None:
        if self._loading:
            return
        n = it.data(Qt.ItemDataRole.UserRole)
        if it.checkState() == Qt.CheckState.Checked and n not in self._class_order:
            self._class_order.append(n)
        self.emit_edited()

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
        self.emit_edited()
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
        self.emit_edited()
        r.widgets["threshold"].setFocus()

    def remove_row(self, row: Row) -> None:
        rows, lay = (self.gate_rows, self.gates_lay) if row in self.gate_rows else \
            (self.soft_rows, self.softs_lay)
        rows.remove(row)
        lay.removeWidget(row)
        row.hide()
        row.deleteLater()
        self.emit_edited()

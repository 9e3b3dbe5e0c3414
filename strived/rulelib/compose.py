"""Composed queries: "X then Y", "Y after X", "X before Y", "X followed by Y", "X while Y",
"X without Y" -> a temporal composition of two parts (offline, no LLM).

The query parse (`strived.query`: ``ParsedQuery.split``) finds the connective and orders the parts
in time, and reads each part's subject and events; `compose_query` matches each part's events with
the library's and names the library's composite event when one composes those parts
(`COMPOSITES`); otherwise the adapter builds a sequence rule from the parts' calibrated rules
(`adapter.build_sequence`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..query import ParsedQuery, as_parsed, parse_query
from .lexicon import EGO_OTHER, OTHER_EGO, most_specific

DEFAULT_GAP_S = 5.0


@dataclass
class Composition:
    """Two parts of a query in time order. ``kind``: "sequence" (first, then second), "concurrent"
    (second holds when first happens) or "absent" (first happens, second must not)."""

    kind: str
    first: str
    second: str
    connective: str
    within_s: float | None = None
    first_events: list[str] = field(default_factory=list)
    second_events: list[str] = field(default_factory=list)
    composite: str | None = None

    def to_dict(self) -> dict:
        return {"kind": self.kind, "first": self.first, "second": self.second,
                "connective": self.connective, "within_s": self.within_s,
                "first_events": self.first_events, "second_events": self.second_events,
                "composite": self.composite}


def split_query(query: "str | ParsedQuery") -> Composition | None:
    """The composition a query states (`ParsedQuery.split`), or None (no connective, or an empty
    part)."""
    sp = as_parsed(query).split
    return None if sp is None else Composition(sp.kind, sp.first, sp.second, sp.connective, sp.within_s)


def part_events(text: str, keys: set[str], inherit: str | None = None) -> list[str]:
    """Library events a part names, most specific first (the offline matcher without
    composition). ``inherit``: the other part's subject, for a part with none of its own
    ("a car cuts in and then brakes": the car brakes)."""
    p = parse_query(text)
    subj = p.part_subject or inherit
    if p.part_subject is None and inherit is not None:   # "... and then turn left": we turn left
        p = parse_query(("we " if inherit == "ego" else "the vehicle ") + text)
    hits = {k for k in p.events if k in keys}
    if subj == "other" and p.slows and "lead_brake" in keys:
        hits.add("lead_brake")                     # another road user brakes / slows down
    if p.stops and not hits & {"sudden_stop", "ego_stationary"}:
        hits.add("sudden_stop" if "sudden_stop" in keys else "ego_stationary")
    if subj == "other":
        hits = {EGO_OTHER[k] if k in EGO_OTHER and EGO_OTHER[k] in keys else k for k in hits}
    elif subj == "ego":
        hits = {OTHER_EGO[k] if OTHER_EGO.get(k) in keys else k for k in hits}
    if "ego_pull_away" in hits:
        hits.discard("object_departure")
    if {"cut_in", "cut_in_left", "cut_in_right"} & hits:
        hits -= {"collision", "ego_collision"}
    return [k for k in most_specific(hits) if k in keys]


# (kind, first-part events, second-part events) -> library composite event
_BRAKE_EGO = {"ego_brake", "hard_brake", "sudden_stop"}
_CUT_IN = {"cut_in", "cut_in_left", "cut_in_right"}
_STOPPED = {"sudden_stop", "ego_stationary"}
COMPOSITES: tuple[tuple[str, set, set, str], ...] = (
    ("sequence", {"lead_brake"}, _BRAKE_EGO, "lead_brake_then_ego_brake"),
    ("sequence", _CUT_IN, _BRAKE_EGO, "cut_in_then_ego_brake"),
    ("sequence", _CUT_IN, {"lead_brake"}, "cut_in_then_brake"),
    ("sequence", _STOPPED, {"ego_pull_away", "sudden_speed_change"}, "stop_then_go"),
    ("concurrent", {"pedestrian_crossing"}, _STOPPED, "pedestrian_crossing_while_stopped"),
    ("absent", _BRAKE_EGO, {"lead_brake", "*vehicle_ahead"}, "ego_brake_no_lead"),
    ("absent", {"ego_lane_change", "lane_change"}, {"*vehicle"}, "lane_change_clear"),
)

def _pseudo(second: str) -> set[str]:
    """Placeholder keys for negated parts that name things, not events ("no car ahead")."""
    out = set()
    q = parse_query(second).qualifiers
    if q.vehicle_things:
        out.add("*vehicle")
        if q.ahead:
            out.add("*vehicle_ahead")
    return out


def compose_query(query: "str | ParsedQuery", keys: set[str]) -> Composition | None:
    """The query's composition with each part's events and the library composite, if any."""
    comp = split_query(query)
    if comp is None:
        return None
    s1, s2 = parse_query(comp.first).part_subject, parse_query(comp.second).part_subject
    comp.first_events = part_events(comp.first, keys, inherit=s2)
    second_text = re.sub(r"^no\s+", "", comp.second)
    comp.second_events = part_events(second_text, keys, inherit=s1)
    if not comp.first_events:
        return comp if comp.second_events else None
    e1 = set(comp.first_events)
    e2 = set(comp.second_events) | (_pseudo(comp.second) if comp.kind == "absent" else set())
    for kind, a, b, key in COMPOSITES:
        if kind == comp.kind and key in keys and e1 & a and e2 & b:
            comp.composite = key
            break
    return comp

"""Composed queries: "X then Y", "Y after X", "X before Y", "X followed by Y", "X while Y",
"X without Y" -> a temporal composition of two parts (offline, no LLM).

`split_query` finds the connective and orders the parts in time; `compose_query` matches each part
with the offline matcher and names the library's composite event when one composes those parts
(`COMPOSITES`); otherwise the adapter builds a sequence rule from the parts' calibrated rules
(`adapter.build_sequence`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .lexicon import EGO_OTHER, OTHER_EGO, extract_events_lexicon, most_specific

# "when" is left out on purpose: "when we turn left" usually names a situation, not an order.
_CONNECTIVE = re.compile(
    r"\b(and then|, then|then|followed by|after which|afterwards|after|before|while|"
    r"without|with no|and no|but no|while no)\b")
_WITHIN = re.compile(r"\bwithin\s+(\d+(?:\.\d+)?)\s*(s|sec|secs|second|seconds)\b")
_STOP = re.compile(r"\b(stop|stops|stopped|stopping|halt\w*|standstill|come to a stop|comes to a stop)\b")
_SLOWS = re.compile(r"\b(brak\w*|slow\w* down|slows|decelerat\w*)\b")
_EGO = re.compile(r"\b(ego|we|i|our (car|vehicle)|my (car|vehicle)|the driver|us)\b")
_OTHER = re.compile(r"\b(car|vehicle|truck|bus|van|motorbike|motorcycle|scooter|lead\w*|"
                    r"pedestrian|cyclist|someone|somebody)\b")

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


def _clean(part: str) -> str:
    part = _WITHIN.sub(" ", part)
    part = re.sub(r"^[\s,;:]*(and|but|so)?\s*", "", part)
    part = re.sub(r"[\s,;:]*(and|but|so)?[\s,;:.!?]*$", "", part)
    return part.strip()


def split_query(query: str) -> Composition | None:
    """The composition a query states, or None (no connective, or an empty part)."""
    q = " " + query.lower().strip() + " "
    m = _CONNECTIVE.search(q)
    if not m:
        return None
    word = m.group(1).replace(",", "").strip()
    left, right = q[:m.start()], q[m.end():]
    w = _WITHIN.search(q)
    within = float(w.group(1)) if w else None
    if word in ("without", "with no", "and no", "but no", "while no"):
        kind, first, second = "absent", left, right
    elif word == "while":
        kind, first, second = "concurrent", left, right
        if not left.strip():                          # "while X, Y": Y happens during X
            x, _, y = right.partition(",")
            first, second = y, x
    elif word == "after":
        if not left.strip():                          # "after X, Y"
            x, _, y = right.partition(",")
            first, second = x, y
        else:                                         # "Y after X"
            first, second = right, left
        kind = "sequence"
    elif word == "before":
        if not left.strip():                          # "before X, Y"
            x, _, y = right.partition(",")
            first, second = y, x
        else:                                         # "X before Y"
            first, second = left, right
        kind = "sequence"
    else:                                             # then, followed by, after which, afterwards
        kind, first, second = "sequence", left, right
    first, second = _clean(first), _clean(second)
    if not first or not second:
        return None
    if word in ("with no", "and no", "but no", "while no"):
        second = "no " + second
    return Composition(kind, first, second, word, within)


def _subject(text: str) -> str | None:
    """Who a part is about: the first of the ego words or another road user named in it
    ("the vehicle in front of us brakes" is about the vehicle)."""
    e, o = _EGO.search(text), _OTHER.search(text)
    if e and (not o or e.start() < o.start()):
        return "ego"
    return "other" if o else None


def part_events(text: str, keys: set[str], inherit: str | None = None) -> list[str]:
    """Library events a part names, most specific first (the offline matcher without
    composition). ``inherit``: the other part's subject, for a part with none of its own
    ("a car cuts in and then brakes": the car brakes)."""
    subj = _subject(text) or inherit
    if _subject(text) is None and inherit is not None:   # "... and then turn left": we turn left
        text = ("we " if inherit == "ego" else "the vehicle ") + text
    hits = {k for k in extract_events_lexicon(text) if k in keys}
    if subj == "other" and _SLOWS.search(text) and "lead_brake" in keys:
        hits.add("lead_brake")                     # another road user brakes / slows down
    if _STOP.search(text) and not hits & {"sudden_stop", "ego_stationary"}:
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
_VEHICLE_WORDS = re.compile(r"\b(car|cars|vehicle|vehicles|truck|trucks|bus|buses|van|one|anyone|"
                            r"traffic|lead\w*)\b")
_AHEAD = re.compile(r"\b(ahead|in front|lead\w*|in (our|the|my) lane)\b")


def _pseudo(second: str) -> set[str]:
    """Placeholder keys for negated parts that name things, not events ("no car ahead")."""
    out = set()
    if _VEHICLE_WORDS.search(second):
        out.add("*vehicle")
        if _AHEAD.search(second):
            out.add("*vehicle_ahead")
    return out


def compose_query(query: str, keys: set[str]) -> Composition | None:
    """The query's composition with each part's events and the library composite, if any."""
    comp = split_query(query)
    if comp is None:
        return None
    s1, s2 = _subject(comp.first), _subject(comp.second)
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

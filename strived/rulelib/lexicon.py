"""The query-time vocabulary of driving events: the negation-aware lexicon extractor that names
the library events a sentence asserts (used by the matcher, the composition parser and, for
captions, by the weak labels of calibration), and the ego/other-vehicle event pairs."""

from __future__ import annotations

import re

from .events import EVENTS, get_event

# (ego event, other-vehicle analogue): used for the ego/other disambiguation
EGO_OTHER = {"hard_brake": "lead_brake", "ego_brake": "lead_brake", "swerving": "lateral_movement",
             "ego_lane_change": "lane_change", "ego_collision": "collision",
             "sudden_stop": "lead_brake"}
OTHER_EGO = {"lateral_movement": "swerving", "lane_change": "ego_lane_change",
             "lead_brake": "ego_brake", "object_departure": "ego_pull_away"}


_NEGATORS = re.compile(
    r"\b(no|not|never|without|none|nor|neither|nobody|avoid\w*|prevent\w*|almost|nearly|narrowly|"
    r"instead of|fail\w* to|didn't|doesn't|don't|isn't|wasn't|aren't|weren't|cannot|can't|"
    r"free of|absence of)\b|n't\b")
# Negation scope ends at these: "did not stop and crashed" still mentions the crash.
_SCOPE_BREAK = re.compile(r"\b(and|but|then|while|when|after|before|until|so|because|however)\b|[,:]")
_CLAUSE_SPLIT = re.compile(r"[.;!?\n]+")
_NEG_WINDOW_TOKENS = 5

_SIDE_LEFT = re.compile(r"\b(left|left[- ]hand|driver'?s? side)\b")
_SIDE_RIGHT = re.compile(r"\b(right|right[- ]hand|passenger'?s? side)\b")
_EGO_WORDS = re.compile(r"\b(ego|we|i|our (car|vehicle)|my (car|vehicle)|the driver|camera car|"
                        r"own car|dashcam car)\b")
_TURN = re.compile(r"\bturn\w*\b")
_BRAKE = re.compile(r"\b(brak\w*|slow\w* down|decelerat\w*)\b")
_LEAD = re.compile(r"\b(ahead|in front|lead\w*|preceding)\b")

_COMPILED: dict[str, list[re.Pattern]] = {
    e.key: [re.compile(r"\b" + p) for p in e.lexicon] for e in EVENTS if e.lexicon}


def _negated(clause: str, start: int) -> bool:
    """True when a negator governs the phrase starting at ``start`` inside ``clause``."""
    before = clause[:start]
    cut = 0
    for m in _SCOPE_BREAK.finditer(before):
        cut = m.end()
    scope = before[cut:]
    tokens = scope.split()
    tail = " ".join(tokens[-_NEG_WINDOW_TOKENS:])
    return bool(_NEGATORS.search(tail))


def _clause_hits(clause: str) -> dict[str, bool]:
    """event -> True (asserted) / False (only negated mentions) for one clause."""
    out: dict[str, bool] = {}
    for key, pats in _COMPILED.items():
        for p in pats:
            for m in p.finditer(clause):
                asserted = not _negated(clause, m.start())
                out[key] = out.get(key, False) or asserted
    return out


def extract_events_lexicon(text: str) -> set[str]:
    """Events a caption asserts, by lexicon, with negation ("no collision", "without braking").

    Finer events are derived from their parent with the clause's side and subject words
    (a cut-in "from the left" -> ``cut_in_left``; "we turn right" -> ``ego_turn_right``).
    """
    found: set[str] = set()
    for raw in _CLAUSE_SPLIT.split(text.lower()):
        clause = " " + raw.strip() + " "
        if not clause.strip():
            continue
        hits = _clause_hits(clause)
        asserted = {k for k, v in hits.items() if v}
        # a negated or avoided collision is a near miss at most, never a collision
        if "near_miss" in asserted:
            asserted.discard("collision") if hits.get("collision") is False else None
        found |= asserted
        left, right = bool(_SIDE_LEFT.search(clause)), bool(_SIDE_RIGHT.search(clause))
        ego = bool(_EGO_WORDS.search(clause))
        if "cut_in" in asserted and left != right:
            found.add("cut_in_left" if left else "cut_in_right")
        if "overtaken_left" in asserted:          # the shared "overtake" lexicon
            found.discard("overtaken_left")
            if left != right:
                found.add("overtaken_left" if left else "overtaken_right")
        m = _TURN.search(clause)
        if m and ego and left != right and not _negated(clause, m.start()):
            found.add("ego_turn_left" if left else "ego_turn_right")
        m = _BRAKE.search(clause)
        if m and not _negated(clause, m.start()):
            if _LEAD.search(clause[:m.start()]) and not ego:
                found.add("lead_brake")
                found.discard("hard_brake")        # the ego's event; here another vehicle brakes
            elif ego:
                found.add("ego_brake")
        if "lane_change" in asserted and ego and "cut_in" not in asserted:
            found.add("ego_lane_change")
        if "collision" in asserted and ego:
            found.add("ego_collision")
    return found


def most_specific(hits: set[str]) -> list[str]:
    """Drop parents whose child also matched; order: children first, then inventory order."""
    keep = [k for k in hits if not any(get_event(c).parent == k for c in hits)]
    order = {e.key: i for i, e in enumerate(EVENTS)}
    return sorted(keep, key=lambda k: (get_event(k).parent is None, order[k]))

"""A query parsed once: `parse_query(text) -> ParsedQuery`, the one value that the matcher, the
composition parser, the adapter and the fusion router read.

What it reads (the word lists are in `vocabulary`; the phrases naming each event are each event's
``lexicon`` in the inventory, `strived.events`):

* candidate events, negation-aware, with their evidence (`extract_events_lexicon`, also the
  caption labeller of calibration): "no collision" names no collision; a negator governs at most
  the 5 tokens after it, up to a scope break ("did not stop and crashed" asserts the crash);
  finer events are derived from a parent with the clause's side and subject words;
* who acts: ``actor`` is the first-mentioned of the ego vehicle ("we", "our car", "the driver")
  and another road user ("the car ahead of us turns left" is about the car); ``ego_mentioned`` /
  ``other_vehicle_mentioned`` say whether each is named at all (another vehicle by an article
  or its position ahead);
* ``side`` (left / right / None when neither or both), road-user ``classes`` (detector classes;
  ``negated_classes`` are named only under a negator: "not a truck"), ``qualifiers`` (proximity,
  highway, conditions the records cannot measure, distance and direction words);
* ``split``: the composition markers ("X then Y", "Y after X", "X while Y", "X without Y") with
  the parts in time order;
* ``motion``: whether something moves and where its motion ends in the view (the router's cues);
* surface words (colours, makes, places, weather, rare classes, proper nouns) and the content
  tokens of the word-overlap similarity.

`parse_query` is pure and cached (the last 4096 texts): a search parses its query once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from ..events import EVENTS
from . import vocabulary as V

_COMPILED: dict[str, list[re.Pattern]] = {
    e.key: [re.compile(r"\b" + p) for p in e.lexicon] for e in EVENTS if e.lexicon}


@dataclass(frozen=True)
class Evidence:
    """Why the lexicon names (or only mentions under a negator) an event: the phrase found, the
    clause it is in (0-based), whether a negator governs it; ``derived``: a finer event read from
    its parent's phrase and a cue in the clause (a side, a subject word)."""

    event: str
    phrase: str
    clause: int
    negated: bool = False
    derived: bool = False


@dataclass(frozen=True)
class Split:
    """Two parts of a query in time order. ``kind``: "sequence" (first, then second),
    "concurrent" (second holds while first happens) or "absent" (first happens, second must not)."""

    kind: str
    first: str
    second: str
    connective: str
    within_s: float | None = None


@dataclass(frozen=True)
class Qualifiers:
    """Words that change a rule's structure or say what it cannot encode."""

    close: bool = False            # "close", "near", "tight", "inches" ...
    extreme: bool = False          # "extremely", "very", "dangerously"
    highway: bool = False
    condition: bool = False        # weather, night, glare, "for no apparent reason", ...
    within_m: float | None = None  # "within 20 m"
    ahead: bool = False            # ahead / in front / in our lane
    behind: bool = False
    someone: bool = False          # "one", "anyone", "someone", "somebody"
    vehicle_things: bool = False   # names vehicles as things: "car", "traffic", "anyone" ...


@dataclass(frozen=True)
class Motion:
    """Whether something moves and where its motion ends in the view (fusion router)."""

    moves: bool = False
    central: bool = False          # ends in the middle of the view
    central_end: bool = False      # a verb whose motion ends there whatever else is said
    off_centre: bool = False       # ends off to a side (cuts out, overtakes, passes alongside)


@dataclass(frozen=True)
class ParsedQuery:
    """A query read once (see module doc). Immutable; build it with `parse_query`."""

    text: str
    lower: str
    words: tuple[str, ...]                 # surface words
    tokens: tuple[str, ...]                # letter tokens (word overlap, matcher features)
    content: tuple[str, ...]               # stems of the tokens that are not stop words
    events: frozenset[str]                 # events the text asserts (lexicon, negation-aware)
    evidence: tuple[Evidence, ...]
    negated_events: frozenset[str]         # events mentioned only under a negator
    negations: tuple[str, ...]             # the negators found, in order
    actor: str                             # "ego" | "other" | "unknown": the first mentioned
    ego_mentioned: bool
    ego_referenced: bool                   # "us", "our", "my" (the ego, not as the actor)
    other_vehicle_mentioned: bool
    side: str | None
    classes_named: tuple[str, ...]         # detector classes of the road users named, in order
    negated_classes: tuple[str, ...]       # ... of those named only under a negator
    qualifiers: Qualifiers
    motion: Motion
    surface: tuple[tuple[str, tuple[str, ...]], ...]   # (kind, words), kinds with words only
    split: Split | None
    slows: bool = False                    # brakes / slows (down) / decelerates
    stops: bool = False                    # stops / halts / comes to a standstill

    @property
    def classes(self) -> tuple[str, ...]:
        """The classes named, without those named only under a negator ("a car, not a truck")."""
        return tuple(c for c in self.classes_named if c not in self.negated_classes)

    @property
    def subject(self) -> str | None:
        """``actor`` with None for unknown."""
        return None if self.actor == "unknown" else self.actor

    @property
    def part_subject(self) -> str | None:
        """Who a part of a composed query is about: its actor, else the ego when it refers to
        it ("with no traffic next to us"), else None (the part inherits the other part's)."""
        return self.subject or ("ego" if self.ego_referenced else None)

    def surface_dict(self) -> dict[str, list[str]]:
        return {k: list(v) for k, v in self.surface}


def as_parsed(query: "str | ParsedQuery") -> ParsedQuery:
    """``query`` itself when already parsed, else `parse_query` of it (cached)."""
    return query if isinstance(query, ParsedQuery) else parse_query(query)


def query_text(query: "str | ParsedQuery") -> str:
    return query.text if isinstance(query, ParsedQuery) else query


# ---- the lexicon: negation-aware event extraction ---------------------------------------------

def _negated(clause: str, start: int, negators: re.Pattern = V.NEGATORS,
             window: int = V.NEG_WINDOW_TOKENS) -> bool:
    """True when a negator governs the phrase starting at ``start`` inside ``clause``: one of the
    last ``window`` tokens before it, in the same scope."""
    before = clause[:start]
    cut = 0
    for m in V.SCOPE_BREAK.finditer(before):
        cut = m.end()
    tokens = before[cut:].split()
    return bool(negators.search(" ".join(tokens[-window:])))


def _clauses(text: str) -> list[str]:
    """The lower-cased, space-padded clauses of a text (empty ones dropped)."""
    out = []
    for raw in V.CLAUSE_SPLIT.split(text.lower()):
        if raw.strip():
            out.append(" " + raw.strip() + " ")
    return out


# The crossing events, by who crosses (`_crosser`).
CROSSING_EVENTS = {"pedestrian": "pedestrian_crossing", "bicycle": "cyclist_crossing",
                   "vehicle": "crossing_vehicle", "animal": "dynamic_object_crossing"}


def _crosser(clause: str, cue: re.Match) -> str | None:
    """Who crosses at the crossing cue ``cue``: the road user named nearest before it (the ego's
    own phrases left out: "a woman crosses in front of our car"); a cycling verb makes a person a
    cyclist ("a man cycles across"); a pronoun or no noun ("someone steps out") is read from the
    cue's verb: cycling, driving, else a person on foot. None: nothing names who crosses."""
    head = clause[:cue.end()]
    for m in V.EGO.finditer(head):
        head = head[:m.start()] + " " * (m.end() - m.start()) + head[m.end():]
    if not cue.group(0).startswith("cross") and head.strip() != clause[:cue.end()].strip() and \
            not any(rx.search(head) for rx in (V.CROSSER_ANIMAL, V.CROSSER_VEHICLE, V.CROSSER_PEDESTRIAN,
                                               V.CROSSER_CYCLIST, V.CROSSER_PRONOUN)):
        return None                    # only the ego moves ("we pull out into ...", "we drive across")
    best, where = None, -1
    for who, rx in (("animal", V.CROSSER_ANIMAL), ("vehicle", V.CROSSER_VEHICLE),
                    ("pedestrian", V.CROSSER_PEDESTRIAN), ("bicycle", V.CROSSER_CYCLIST),
                    ("someone", V.CROSSER_PRONOUN)):
        for m in rx.finditer(head):
            if m.end() > where or (m.end() == where and who == "bicycle"):
                best, where = who, m.end()
    verb = cue.group(0)
    if best in ("pedestrian", "someone", None) and V.CROSSING_BY_BIKE.search(verb):
        return "bicycle"
    if best in ("someone", None) and V.CROSSING_BY_CAR.search(verb):
        return "vehicle"
    if best == "someone" or (best is None and re.search(r"\b(walk|step|stroll|jog|wander|amble|run|ran)", verb)):
        return "pedestrian"
    return best


def _scan(text: str, evidence: list | None = None) -> set[str]:
    """Events asserted by ``text``; appends `Evidence` to ``evidence`` when given."""
    found: set[str] = set()
    for ci, clause in enumerate(_clauses(text)):
        hits: dict[str, bool] = {}
        for key, pats in _COMPILED.items():
            for p in pats:
                for m in p.finditer(clause):
                    asserted = not _negated(clause, m.start())
                    hits[key] = hits.get(key, False) or asserted
                    if evidence is not None:
                        evidence.append(Evidence(key, m.group(0).strip(), ci, not asserted))
        asserted = {k for k, v in hits.items() if v}
        # a negated or avoided collision is a near miss at most, never a collision
        if "near_miss" in asserted and hits.get("collision") is False:
            asserted.discard("collision")
        found |= asserted
        left, right = bool(V.SIDE_LEFT.search(clause)), bool(V.SIDE_RIGHT.search(clause))
        side = "left" if left and not right else "right" if right and not left else None
        leads = [m.span() for m in V.LEAD.finditer(clause)]
        ego = next((e for e in V.EGO.finditer(clause)            # not "the car we're following"
                    if not any(a <= e.start() < b for a, b in leads)), None)
        derived: list[tuple[str, str]] = []
        if "cut_in" in asserted and side:
            derived.append((f"cut_in_{side}", f"cut in + {side}"))
        if "overtaken_left" in asserted:          # the shared "overtake" lexicon
            found.discard("overtaken_left")
            if side:
                derived.append((f"overtaken_{side}", f"overtake + {side}"))
        m = V.TURN.search(clause)
        # a turn with a side: the ego's, when it names the ego or no road user ("turning left")
        if m and side and not _negated(clause, m.start()) and (ego or not V.ROAD_USER.search(clause)):
            derived.append((f"ego_turn_{side}", f"{ego.group(0) if ego else '(ego)'} + {m.group(0)} + {side}"))
        m = V.CROSSING.search(clause)
        who = _crosser(clause, m) if m and not _negated(clause, m.start()) else None
        if who is not None:
            # who crosses picks the crossing event: a person on foot, a cyclist, a vehicle
            key = CROSSING_EVENTS[who]
            found -= set(CROSSING_EVENTS.values()) - {key}
            derived.append((key, f"{who} + {m.group(0).strip()}"))
        m = V.BRAKE.search(clause)
        if m and not _negated(clause, m.start()):
            lead = V.LEAD.search(clause[:m.start()])
            if lead and not ego:
                derived.append(("lead_brake", f"{lead.group(0)} + {m.group(0)}"))
                found.discard("hard_brake")        # the ego's event; here another vehicle brakes
            elif ego:
                derived.append(("ego_brake", f"{ego.group(0)} + {m.group(0)}"))
        m = V.LANE_LEAVE.search(clause)
        lead = V.LEAD.search(clause[:m.start()]) if m else None
        if m and lead and "cut_in" not in asserted and not _negated(clause, m.start()) and not (
                ego and ego.start() < m.start()):
            # the vehicle ahead leaves the lane: a cut-out, not a lane change of ours
            found -= {"lane_change", "ego_lane_change", "lane_change_clear"}
            asserted -= {"lane_change"}
            derived.append(("cut_out", f"{lead.group(0)} + {m.group(0)}"))
        if "cut_in" in asserted and ego and not V.ROAD_USER.search(clause[:ego.start()]) and \
                re.search(r"\b(in)?to (the|a|an|another) (?!ego\b)(\w+ )?lane\b", clause):
            # the ego merging into a lane changes lanes ("we merge into the left lane")
            found -= {"cut_in", "cut_in_left", "cut_in_right"}
            asserted = (asserted - {"cut_in"}) | {"lane_change"}
            derived = [d for d in derived if not d[0].startswith("cut_in")]
        if "lane_change" in asserted and ego and "cut_in" not in asserted:
            derived.append(("ego_lane_change", f"{ego.group(0)} + lane change"))
        if "collision" in asserted and ego:
            derived.append(("ego_collision", f"{ego.group(0)} + collision"))
        for key, why in derived:
            found.add(key)
            if evidence is not None:
                evidence.append(Evidence(key, why, ci, False, True))
    return found


def extract_events_lexicon(text: str) -> set[str]:
    """Events a query or caption asserts, by lexicon, with negation ("no collision", "without
    braking"). Finer events are derived from their parent with the clause's side and subject
    words (a cut-in "from the left" -> ``cut_in_left``; "we turn right" -> ``ego_turn_right``)."""
    return _scan(text)


# ---- composition --------------------------------------------------------------------------------

def _clean(part: str) -> str:
    part = V.WITHIN_SECONDS.sub(" ", part)
    part = re.sub(r"^[\s,;:]*(?:(?:and|but|so)\b)?\s*", "", part)
    part = re.sub(r"[\s,;:]*(?:\b(?:and|but|so))?[\s,;:.!?]*$", "", part)
    return part.strip()


def split_query(text: str) -> Split | None:
    """The composition a text states, or None (no connective, or an empty part)."""
    q = " " + text.lower().strip() + " "
    m = V.CONNECTIVE.search(q)
    if not m:
        return None
    word = m.group(1).replace(",", "").strip()
    left, right = q[:m.start()], q[m.end():]
    w = V.WITHIN_SECONDS.search(q)
    within = float(w.group(1)) if w else None
    if word in V.ABSENT_CONNECTIVES:
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
    if word in ("after", "before") and re.fullmatch(r"(it|that|this|them|him|her|so|too)", first if
                                                    left.strip() and word == "after" else second):
        return None                                   # "... and we brake after it": no second part
    if word in ("with no", "and no", "but no", "while no"):
        second = "no " + second
    return Split(kind, first, second, word, within)


# ---- the parse ----------------------------------------------------------------------------------

def _actor(q: str) -> tuple[str, bool]:
    """(who is mentioned first: "ego" / "other" / "unknown", whether the ego is mentioned). A
    road-user noun inside an ego phrase ("our car", "the driver") is the ego's."""
    ego = [m.span() for m in V.EGO.finditer(q)]
    other = next((m for m in V.ROAD_USER.finditer(q)
                  if not any(a <= m.start() < b for a, b in ego)), None)
    if ego and (other is None or ego[0][0] <= other.start()):
        return "ego", True
    return ("other" if other is not None else "unknown"), bool(ego)


def _classes(text: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(classes named, in order; classes whose every mention is under a negator)."""
    named: list[str] = []
    asserted: set[str] = set()
    for clause in _clauses(text):
        for m in V.CLASS_TOKEN.finditer(clause):
            cs = V.CLASS_WORDS.get(m.group(0), ())
            if not cs:
                continue
            neg = _negated(clause, m.start(), V.THING_NEGATORS, V.THING_NEG_WINDOW_TOKENS)
            for c in cs:
                if c not in named:
                    named.append(c)
                if not neg:
                    asserted.add(c)
    return tuple(named), tuple(c for c in named if c not in asserted)


def _surface(text: str, words: list[str]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    out = [("colour", [w for w in words if w in V.COLOURS]),
           ("make_model", [w for w in words if w in V.MAKES]),
           ("weather_time", [w for w in words if w in V.WEATHER_TIME]),
           ("place", [w for w in words if w in V.PLACES]),
           ("class", [w for w in words if w in V.RARE_CLASSES]),
           # capitalised words inside the sentence: place or brand names the lists do not know
           ("proper_noun", [w.lower() for w in V.PROPER_NOUN.findall(text) if w.lower() != "ego"])]
    return tuple((k, tuple(v)) for k, v in out if v)


@lru_cache(maxsize=4096)
def parse_query(text: str) -> ParsedQuery:
    """The query read once (see module doc). Pure; cached by text."""
    lower = text.lower()
    q = " " + lower.strip() + " "
    evidence: list[Evidence] = []
    events = _scan(text, evidence)
    said = {e.event for e in evidence if not e.negated}
    actor, ego = _actor(q)
    left, right = bool(V.SIDE_LEFT.search(q)), bool(V.SIDE_RIGHT.search(q))
    named, negated_classes = _classes(text)
    tokens = V.TOKEN.findall(lower)
    within = V.WITHIN_METRES.search(lower)
    words = V.WORD.findall(lower)
    return ParsedQuery(
        text=text, lower=lower, words=tuple(words), tokens=tuple(tokens),
        content=tuple(V.stem(t) for t in tokens if t not in V.STOP),
        events=frozenset(events), evidence=tuple(evidence),
        negated_events=frozenset({e.event for e in evidence if e.negated} - said - events),
        negations=tuple(m.group(0) for m in V.NEGATORS.finditer(q)),
        actor=actor, ego_mentioned=ego, ego_referenced=bool(V.EGO_REFERENCE.search(q)),
        other_vehicle_mentioned=bool(V.OTHER_VEHICLE.search(q)),
        side="left" if left and not right else "right" if right and not left else None,
        classes_named=named, negated_classes=negated_classes,
        qualifiers=Qualifiers(
            close=bool(V.CLOSE.search(q)), extreme=bool(V.EXTREME.search(q)),
            highway=bool(V.HIGHWAY.search(q)), condition=bool(V.CONDITION.search(q)),
            within_m=float(within.group(1)) if within else None,
            ahead=bool(V.AHEAD_IN_LANE.search(q)), behind=bool(V.BEHIND.search(q)),
            someone=bool(V.PERSON_PRONOUN.search(q)), vehicle_things=bool(V.VEHICLE_THINGS.search(q))),
        motion=Motion(moves=bool(V.MOTION.search(q)), central=bool(V.CENTRAL.search(q)),
                      central_end=bool(V.CENTRAL_END.search(q)), off_centre=bool(V.OFF_CENTRE.search(q))),
        surface=_surface(text, words), split=split_query(text),
        slows=bool(V.SLOWS.search(q)), stops=bool(V.STOPS.search(q)))

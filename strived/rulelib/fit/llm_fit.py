"""The LLM versions of the fit-time stages: the caption event extractor (weak labels) and the
L2R proposer of the calibration loop. Same conventions as `..llm_stages`: JSON-Schema-constrained
answers through `LLMClient.complete_json`, our own prompts, every answer validated."""

from __future__ import annotations

import json

from ...llm.errors import LLMError, LLMUnavailable
from ...llm.prompting import DATA_NOTICE, quote_data
from ...rules.model import parse_rule
from ...events import EVENT_KEYS, get_event
from ..lexicon import extract_events_lexicon
from ..llm_stages import EVENT_INVENTORY, FIELDS_DOC
from .optimizer import canonical_form, get_at, param_space, set_at

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
    f"keys:\n{EVENT_INVENTORY}\n{DATA_NOTICE}\nAnswer with JSON: {{\"events\": [{{\"event\", "
    "\"subject\": ego|object|both, \"evidence\"}}]}}; an empty list when nothing happens.")


def extract_events_llm(client, caption: str) -> set[str]:
    """Events an LLM extracts from one caption (raises LLMError for the caller to fall back)."""
    ans = client.complete_json(_EXTRACT_SYSTEM, "Description: " + quote_data(caption, 1500),
                               EXTRACT_SCHEMA, stage="rulelib.extract")
    return {e["event"] for e in ans["events"]}


def llm_extractor(client, fallback=None):
    """An extractor function for `labels_from_captions`: the LLM, falling back per caption to
    ``fallback`` (default: the lexicon) on LLMError; ``extractor.n_fallbacks`` counts them."""
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
            f"'{ev.name}': {ev.description}\n{FIELDS_DOC}\nThe rule's structure is fixed; you only "
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



"""The LLM versions of the query-time library stages: matcher and adapter (the fit-time ones, the
caption event extractor and the L2R proposer, are in `fit.llm_fit`).

All go through `LLMClient.complete_json` (JSON-Schema-constrained answers, cached by stage, model,
prompt and the library version). Prompts are our own; they carry the paper's decisions: the
event inventory with ego/other disambiguation, the 0.55 cap for conditions a rule cannot encode,
threshold placement from field statistics (a rare event at P90-P95 of max|Δ|), revision from AP,
best-so-far, score percentiles and issue tags. Answers are untrusted: every rule is validated by
`parse_rule`, and a proposal must keep the form's structure.
"""

from __future__ import annotations

import json

from ..errors import RuleError
from ..llm.prompting import DATA_NOTICE, quote_data
from ..rules.model import parse_rule, rule_schema
from ..events import EVENTS, get_event
from .matcher import CONDITION_CAP, MatchResult

EVENT_INVENTORY = "\n".join(f"- {e.key}: {e.description}" + (f" (weak: {e.weakness})" if e.weakness else "")
                       for e in EVENTS)
FIELDS_DOC = ("Object fields per track and frame: distance (m, forward), loc_x (m, + = right of "
           "ego), abs_loc_x (|loc_x|), loc_x_road / abs_loc_x_road (loc_x with the ego's own "
           "turning taken out, for lateral motion on bends; unknown through a turn of more than 20 deg), loc_z (m), lane_rel (lanes, "
           "0 = ego lane), bbox_area "
           "(px^2). Ego fields: speed (m/s), yaw_rate (rad/s, + = left), accel (m/s^2), heading "
           "(rad, integrated yaw, + = left). temporal_change scores min(1, max change within "
           "window_seconds / magnitude); direction positive/negative keeps one sign; "
           "monotonic_trend scores the longest steady run against 2*min_duration_seconds.")

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
        f"{FIELDS_DOC}\n{DATA_NOTICE}\nAnswer with the rule JSON only.")
    user = (f"Library event {exemplar!r}, calibrated rule: {json.dumps(ex)}\n"
            f"Query: {quote_data(query)}")
    ans = client.complete_json(system, user, _rule_answer_schema(), stage="rulelib.adapt",
                               cache_key_parts=(library.version, exemplar), max_tokens=700,
                               check=_check_rule)
    return parse_rule(ans).to_dict()


def _check_rule(d: dict) -> None:
    try:
        parse_rule(d)
    except RuleError as e:
        raise ValueError(str(e)) from None

"""The fusion router: per-query weights {"rule", "dense", "bm25"} for weighted RRF.

Both routers apply the paper's three facts about a dashcam (appendix "Fusion Router"):

1. When the ego vehicle moves (turns, brakes, stops, changes lanes) every pixel moves: a global
   change the dense (visual) path sees. → dense primary.
2. When another object moves while ego drives steadily, only its pixels change. If it ends in
   the middle of the view (cuts in ahead, crosses in front, brakes ahead) the frames look
   different and dense helps; if it ends off-centre (cuts out, overtakes, passes alongside) the
   frames look like ordinary driving and only the numeric records discriminate. → rule primary,
   dense secondary (more when the end position is central).
3. Summaries rarely contain event names, so BM25 gets a small supplementary weight only for
   surface words (a colour, a make or model, a place, weather or time of day, a rare class).

The offline router implements these facts from the parsed query (`strived.query.ParsedQuery`:
who acts, whether and where a motion ends, surface words; the word lists are the one query
vocabulary, `strived.query.vocabulary`; deterministic, documented in docs/retrieval.md); the LLM router asks the configured model to reason the same way and returns
validated weights, falling back to the offline router with a visible notice when the LLM is
unavailable or answers out of range.

Beyond the paper: our rule DSL has an ``ego`` role (speed, yaw rate, acceleration), so for ego
motion queries the rule path gets a secondary weight instead of none.
"""

from __future__ import annotations

from ..llm.errors import LLMError
from ..llm.prompting import DATA_NOTICE, quote_data
from ..query import ParsedQuery, query_text
from .router_fit import shipped_router
from .router_words import SOURCES, RouterResult, offline_route, surface_tokens  # noqa: F401 (API)

PROMPT_VERSION = "router/1"


_W = {"type": "number", "enum": [round(i / 10, 1) for i in range(11)]}
ROUTER_SCHEMA = {
    "type": "object",
    "properties": {
        "motion": {"type": "string", "maxLength": 120},
        "dense": _W, "rule": _W, "bm25": _W,
    },
    "required": ["motion", "dense", "rule", "bm25"],
    "additionalProperties": False,
}

ROUTER_SYSTEM = f"""You set fusion weights for a dashcam video search engine with three sources.
dense: compares what the camera frames look like with the query, as a person looking at the frames.
rule: never sees pixels; it reads per-frame numbers about detected objects (class, distance, lateral
position, lane) and the ego vehicle's speed and yaw rate, and checks a motion pattern.
bm25: matches query words against one short generated text per video (objects, colours, names).

Physical facts to apply:
- The camera is fixed to the ego vehicle: when ego turns, brakes, stops or changes lanes, the whole
  image moves, so dense sees it. Give dense the highest weight for ego motion.
- When another road user moves and ego drives steadily, only that object's pixels change. If it
  ends large in the middle of the view (cuts in just ahead, crosses in front) dense can still see
  it; if it ends off to the side (cuts out, overtakes, passes alongside) the frames look like normal
  driving and only rule can tell. Give rule the highest weight for another object's motion.
- The texts rarely name events such as "cut-in" or "lane change". Give bm25 a small weight (0.1 to
  0.5) only when the query has a colour, a vehicle make or model, a place, the weather or the time
  of day; otherwise 0.

First write in "motion" one short sentence: who moves, which way relative to ego, where it ends.
Then give each weight from 0.0 to 1.0 in steps of 0.1; the main source gets 1.0.
{DATA_NOTICE}"""


def _check_weights(data: dict) -> None:
    ws = [data.get(s) for s in SOURCES]
    if any(not isinstance(x, (int, float)) or x < 0 or x > 1 for x in ws):
        raise ValueError("weights must be numbers in [0, 1]")
    if sum(ws) <= 0:
        raise ValueError("at least one weight must be positive")


def llm_route(query: "str | ParsedQuery", llm, timeout_s: float | None = None) -> RouterResult:
    """Ask ``llm`` (an `LLMClient`) for the weights. Raises LLMError on any failure."""
    data = llm.complete_json(ROUTER_SYSTEM, "Query: " + quote_data(query_text(query), 300), ROUTER_SCHEMA,
                             stage="fusion_router", cache_key_parts=(PROMPT_VERSION,),
                             timeout_s=timeout_s, check=_check_weights, max_tokens=160)
    weights = {s: float(data[s]) for s in SOURCES}
    return RouterResult(weights, "llm", None, str(data.get("motion", ""))[:200])


def fitted_route(query: "str | ParsedQuery", dense_kind: str = "text") -> RouterResult | None:
    """Weights from the router fitted on labelled queries (``resources/router.json``), or None when
    none ships."""
    fr = shipped_router()
    if fr is None:
        return None
    w, kind = fr.weights(query, dense_kind)
    return RouterResult(w, "fitted", None, f"fitted on labelled queries; query kind {kind}",
                        {"kind": kind})


def route(query: "str | ParsedQuery", llm=None, timeout_s: float | None = None, dense_kind: str = "text",
          mode: str = "auto") -> RouterResult:
    """Weights for ``query``. ``mode``: ``auto`` = the LLM router when ``llm`` is given and works,
    else the router fitted on labelled queries when one ships, else the word-list router;
    ``wordlist`` = the word-list router (the paper's three facts as word lists; an ablation).
    Never raises for LLM failures (falls back with a notice)."""
    def offline() -> RouterResult:
        if mode == "wordlist":
            return offline_route(query)
        return fitted_route(query, dense_kind) or offline_route(query)
    if llm is None:
        return offline()
    try:
        return llm_route(query, llm, timeout_s)
    except LLMError as e:
        res = offline()
        res.notice = f"{e}; used the {res.source} router instead"
        return res

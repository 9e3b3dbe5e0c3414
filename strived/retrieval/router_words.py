"""The offline (word-list) fusion router: weights from the paper's three facts about a dashcam,
read off the parsed query (see `strived.retrieval.router` for the facts). Below both the router and
its fitting (`router_fit`), which compares fitted weights with these."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..query import ParsedQuery, as_parsed

SOURCES = ("rule", "dense", "bm25")


@dataclass
class RouterResult:
    """Weights per source (non-negative; relative scale), where they came from, an optional
    notice for the user (e.g. why the LLM router was not used) and a short explanation."""

    weights: dict[str, float]
    source: str                      # "llm" | "offline"
    notice: str | None = None
    reasoning: str | None = None
    details: dict = field(default_factory=dict)


def surface_tokens(query: "str | ParsedQuery") -> dict[str, list[str]]:
    """Query words likely to appear literally in summary text, grouped by kind
    (`ParsedQuery.surface`)."""
    return as_parsed(query).surface_dict()


_BM25_WEIGHT = {"make_model": 0.5, "proper_noun": 0.5, "colour": 0.4, "weather_time": 0.4,
                "place": 0.3, "class": 0.2}


def offline_route(query: "str | ParsedQuery") -> RouterResult:
    """Deterministic router from the three facts (module docstring)."""
    pq = as_parsed(query)
    motion = pq.motion.moves
    if pq.actor == "ego":
        subject = "ego"
    elif pq.actor == "other" or motion:
        # A moving subject that is not ego (a noun the list does not know, e.g. a brand name).
        subject = "other"
    else:
        subject = "scene"
    if subject == "ego" and motion:
        w = {"dense": 1.0, "rule": 0.6}
        why = "ego motion is a global pixel change the dense path sees (fact 1)"
        end = "n/a"
    elif subject == "other" and motion:
        central, off = pq.motion.central, pq.motion.off_centre
        if off and not pq.motion.central_end:
            end, dense = "off-centre", 0.2
        elif central:
            end, dense = "central", 0.5
        else:
            end, dense = "unknown", 0.4
        w = {"rule": 1.0, "dense": dense}
        why = (f"another object's motion ending {end}: the numeric records discriminate; "
               f"dense weight {dense} (fact 2)")
    else:
        w = {"dense": 1.0, "rule": 0.3}
        end = "n/a"
        why = "no motion of a specific subject: a scene description, dense primary"
    toks = pq.surface_dict()
    bm25 = max((_BM25_WEIGHT[k] for k in toks), default=0.0)
    w["bm25"] = bm25
    if toks:
        why += "; surface words " + ", ".join(sorted({t for v in toks.values() for t in v})) + \
               f" → bm25 {bm25} (fact 3)"
    else:
        why += "; no surface words → bm25 0 (fact 3)"
    weights = {s: float(w.get(s, 0.0)) for s in SOURCES}
    return RouterResult(weights, "offline", None, why,
                        {"subject": subject, "end_position": end, "surface_tokens": toks})

"""Query -> rule: the confidence-gated policy (match; reuse at ≥ 0.6, else adapt).

    resolve_rule("a scooter crashes", llm=None) -> ResolvedRule(rule, event="collision",
        confidence=0.55, mode="adapted", source="offline", notices=[...], exemplar_event="collision")

With ``llm`` (an `LLMClient`), the LLM matcher and adapter run first; an unreachable or invalid
LLM answer falls back to the offline path and says so in ``notices``. Never raises for LLM
trouble.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..llm.errors import LLMError
from ..query import ParsedQuery, as_parsed
from ..rules.model import Rule, parse_rule
from .adapter import adapt_offline_from
from .library import RuleLibrary, load_default_library
from .llm_stages import adapt_llm, match_llm
from .matcher import TAU_REUSE, MatchResult, match_offline


@dataclass
class ResolvedRule:
    rule: Rule
    event: str
    confidence: float
    mode: str                 # "reused" | "adapted"
    source: str               # "offline" | "llm"
    notices: list[str] = field(default_factory=list)
    exemplar_event: str | None = None
    reason: str = ""
    # calibrated probability that ``event`` is the event asked for (None: the matcher that
    # answered is not calibrated, e.g. an LLM); ``confidence`` = P(the rule is reusable as is)
    p_event: float | None = None

    def explain(self) -> str:
        """Human-readable summary (what `strived search --explain` prints)."""
        import json
        lines = [f"matched event: {self.event} (confidence {self.confidence:.2f}, {self.source})",
                 f"rule {self.mode}" + (f" from '{self.exemplar_event}'" if self.mode == "adapted"
                                        else ""), f"why: {self.reason}"]
        lines += [f"notice: {n}" for n in self.notices]
        lines.append(json.dumps(self.rule.to_dict(), indent=1))
        return "\n".join(lines)


def _p(match: MatchResult | None) -> float | None:
    import math

    p = getattr(match, "p_event", None) if match is not None else None
    return float(p) if p is not None and math.isfinite(p) else None


def resolve_rule(query: "str | ParsedQuery", library: RuleLibrary | None = None, llm=None, *,
                 tau: float = TAU_REUSE, use_embeddings: bool = False,
                 available_fields: set[str] | None = None) -> ResolvedRule:
    """The rule to run for ``query`` (see module doc). ``available_fields``: the fields some video
    of the searched library has; the adapters add no gate on any other field. ``query``: the
    text or its `ParsedQuery` (the offline matcher and adapter read the parsed value, the LLM
    stages the text)."""
    query = as_parsed(query)
    text = query.text
    lib = library or load_default_library()
    notices: list[str] = []
    match: MatchResult | None = None
    if llm is not None:
        try:
            match = match_llm(llm, text, lib)
        except LLMError as e:
            notices.append(f"LLM matcher unavailable, offline matcher used: {e}")
        if match is not None and match.event != "none" and match.confidence >= tau:
            return ResolvedRule(lib.rule(match.event), match.event, match.confidence, "reused",
                                "llm", notices, match.event, match.reason, p_event=_p(match))
        if match is not None:
            exemplar = match.event if match.event in lib.entries else \
                match_offline(query, lib, use_embeddings=use_embeddings).event
            try:
                rule_d = adapt_llm(llm, text, exemplar, lib)
                if available_fields is not None:
                    kept = [g for g in rule_d.get("hard_gates", []) if g.get("field") in available_fields]
                    if len(kept) < len(rule_d.get("hard_gates", [])):
                        dropped = sorted({g.get("field") for g in rule_d["hard_gates"]} -
                                         {g.get("field") for g in kept})
                        notices.append(f"LLM adapter's gates on {', '.join(dropped)} dropped: no video in "
                                       "this library has them")
                        rule_d = {**rule_d, "hard_gates": kept}
                return ResolvedRule(parse_rule(rule_d), match.event, match.confidence, "adapted",
                                    "llm", notices, exemplar, match.reason, p_event=_p(match))
            except LLMError as e:
                notices.append(f"LLM adapter failed, offline adapter used: {e}")
    off = match_offline(query, lib, use_embeddings=use_embeddings)
    if match is None:
        match = off
    if match.event in lib.entries and match.confidence >= tau:
        return ResolvedRule(lib.rule(match.event), match.event, match.confidence, "reused",
                            "offline", notices, match.event, match.reason, p_event=_p(match))
    exemplar_match = match if match.event in lib.entries else off
    rule_d, more, exemplar = adapt_offline_from(query, exemplar_match, lib, available_fields)
    return ResolvedRule(parse_rule(rule_d), match.event, match.confidence, "adapted", "offline",
                        notices + more, exemplar, match.reason, p_event=_p(match))

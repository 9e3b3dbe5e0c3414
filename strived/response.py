"""What a search returns: the ranked hits with each source's part in them (`strived.engine.search`)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class SearchHit:
    rank: int
    video_id: str
    path: str | None
    score: float
    span_s: tuple[float, float] | None
    per_source: dict[str, dict]
    peak_track: int | None = None
    # estimated probability that the result matches the query (strived.retrieval.relevance);
    # None when no fitted model applies (e.g. a single-source search)
    relevance: float | None = None
    # sequence rules: each step's unit, anchor and span, and each negation (strived.rules.sequence)
    steps: list[dict] | None = None
    absent: list[dict] | None = None
    # an event across a file boundary of a drive: id, span in drive time, per-file parts (strived.drive_hits)
    drive: dict | None = None

    def to_dict(self) -> dict:
        d = {"rank": self.rank, "video_id": self.video_id, "path": self.path, "score": self.score,
             "span_s": list(self.span_s) if self.span_s else None, "per_source": self.per_source,
             "peak_track": self.peak_track, "relevance": self.relevance}
        if self.steps is not None:
            d["steps"], d["absent"] = self.steps, self.absent or []
        if self.drive is not None:
            d["drive"] = self.drive
        return d


@dataclass
class SearchResponse:
    query: str
    hits: list[SearchHit]
    rule: dict | None
    match: dict
    weights: dict[str, float]
    notices: list[str] = field(default_factory=list)
    timings_ms: dict[str, float] = field(default_factory=dict)
    sources_used: list[str] = field(default_factory=list)
    rankings: dict[str, list[str]] = field(default_factory=dict)
    # each source's scores, aligned with ``rankings`` (equal scores share a rank in the fusion)
    ranking_scores: dict[str, list[float]] = field(default_factory=dict, repr=False)
    # the rule each calibration profile ran ({"tracks": rule, "video": rule}) when they differ,
    # and the profile of each video; `rule` is then the rule of the library's main profile
    rules_by_profile: dict[str, dict] = field(default_factory=dict)
    video_profiles: dict[str, str] = field(default_factory=dict, repr=False)
    # videos the rule source could not evaluate -> the fields they lack (not ranked by the rule)
    rule_unjudged: dict[str, list[str]] = field(default_factory=dict)

    def rule_for(self, video_id: str) -> dict | None:
        """The rule that scored ``video_id`` (its calibration profile's rule)."""
        if self.rules_by_profile:
            p = self.video_profiles.get(video_id)
            if p in self.rules_by_profile:
                return self.rules_by_profile[p]
        return self.rule

    def to_dict(self) -> dict:
        d = {"query": self.query, "hits": [h.to_dict() for h in self.hits], "rule": self.rule,
             "match": self.match, "weights": self.weights, "notices": self.notices,
             "timings_ms": self.timings_ms, "sources_used": self.sources_used}
        if self.rules_by_profile:
            d["rules_by_profile"] = self.rules_by_profile
        d["rule_cannot_evaluate"] = self.rule_unjudged
        return d

"""The hits of a search's fused list (`strived.engine.search`): each one's span (the rule's peak
window for the first hits, records needed; else the dense segment), its per-source details (rank,
score, weight, RRF contribution, the rule's percentile and ties) and its relevance estimate."""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from typing import Any

from .availability import judged_share
from .jobs import check_cancel
from .response import SearchHit
from .retrieval.relevance import default_model, hit_features
from .rule_source import scorer_for
from .rules import Rule
from .rules.explain import peak_span
from .rules.sequence import match_sequence
from .search_steps import Fusion, SearchRun


_span_memos: "weakref.WeakKeyDictionary[Any, tuple[int, OrderedDict]]" = weakref.WeakKeyDictionary()
_SPAN_MEMO_RULES = 64
_span_lock = threading.Lock()


def _span_memo(library, rule: Rule) -> dict:
    """Spans already computed for ``rule`` on this library, {(video_id, peak_track): span};
    forgotten when the library's content changes (a repeated query computes no span)."""
    import json

    ver = library.content_version
    key = json.dumps(rule.to_dict(), sort_keys=True)
    with _span_lock:
        cached = _span_memos.get(library)
        if cached is None or cached[0] != ver:
            cached = (ver, OrderedDict())
            _span_memos[library] = cached
        memos = cached[1]
        memo = memos.get(key)
        if memo is None:
            memo = memos[key] = {}
            while len(memos) > _SPAN_MEMO_RULES:
                memos.popitem(last=False)
        else:
            memos.move_to_end(key)
        return memo


def _span_records(library, video_id: str, peak_track: int | None):
    """What `peak_span` reads of a video: its times, ego series and only the peak track (reading
    every track of a video is ~10x slower per hit). Raises KeyError when the video is absent."""
    keep = [int(peak_track)] if peak_track is not None and peak_track >= 0 else []
    return library.get_video(video_id, track_ids=keep)


class HitBuilder:
    """The `SearchHit` of each video of ``fusion.fused``, in order; spans for the first ``span_k``."""

    def __init__(self, run: SearchRun, fusion: Fusion, span_k: int):
        import numpy as np

        library, used = run.library, fusion.used
        self.run, self.fusion, self.span_k = run, fusion, span_k
        self.vids_meta = None
        self.profiles = library.video_profiles() if run.rule_of else {}
        self.memos = {p: _span_memo(library, r) for p, r in run.rule_of.items()}
        self.span_memo = _span_memo(library, run.rule_obj) if run.rule_obj is not None else None
        # 1-based position of each video (by code) in each ranking, 0 when it is absent
        self.pos_of = {}
        for s in used:
            self.pos_of[s] = np.zeros(fusion.n_codes, np.int64)
            self.pos_of[s][fusion.codes[s]] = np.arange(1, fusion.n_ranked[s] + 1)
        ranked = run.ranked
        self.best_bm25 = float(ranked["bm25"].scores.max()) if "bm25" in used and fusion.n_ranked["bm25"] else 0.0
        self.rule_desc = None  # the rule's scores negated (ascending), for percentiles; built on first use
        self.avails = None     # the library's availability records, read on first use
        rel_model = default_model()
        if rel_model is not None and sorted(rel_model.provenance.get("sources", [])) != sorted(used):
            rel_model = None          # fitted on full three-source searches only
        self.rel_model = rel_model

    def hits(self) -> list[SearchHit]:
        fusion = self.fusion
        code_get = fusion.space.code_of.get
        out = []
        for k, (vid, sc) in enumerate(fusion.fused, start=1):
            check_cancel(self.run.cancel)
            c = code_get(vid)
            if c is None:
                c = fusion.extra[vid]
            at = {s: int(self.pos_of[s][c]) for s in fusion.used}          # 0: not ranked by s
            out.append(self.hit(k, vid, sc, at))
        return out

    def hit(self, k: int, vid: str, sc: float, at: dict[str, int]) -> SearchHit:
        ranked = self.run.ranked
        peak = int(ranked["rule"].peaks[at["rule"] - 1]) if at.get("rule") else None
        span = steps = absent = None
        if k <= self.span_k and self.run.rule_obj is not None and at.get("rule"):
            span, steps, absent = self.rule_span(vid, peak)
        if span is None and at.get("dense"):
            span = ranked["dense"].span_at(at["dense"] - 1)
        per_source = self.per_source(vid, at)
        if self.vids_meta is None:
            ids = [v for v, _ in self.fusion.fused]
            self.vids_meta = self.run.library.video_paths(ids if len(ids) <= 500 else None)
        rel_model = self.rel_model
        rel = (float(rel_model.predict(hit_features(per_source, k, self.run.match))[0])
               if rel_model is not None else None)
        return SearchHit(rank=k, video_id=vid, path=self.vids_meta.get(vid), score=float(sc),
                         span_s=span, per_source=per_source, peak_track=peak,
                         steps=steps, absent=absent if steps is not None else None, relevance=rel)

    def rule_span(self, vid: str, peak: int | None) -> tuple:
        """(span, steps, absent) of the rule of ``vid``'s profile at its peak track (steps and
        absent: a sequence rule's, else None); remembered per rule and library state."""
        run, library = self.run, self.run.library
        v_rule, v_memo = run.rule_obj, self.span_memo
        if run.rule_of and self.profiles.get(vid) in run.rule_of:
            v_rule, v_memo = run.rule_of[self.profiles[vid]], self.memos[self.profiles[vid]]
        key = (vid, peak)
        if key in v_memo:
            span = v_memo[key]
        elif v_rule.sequence is not None:
            try:  # a sequence's span covers its steps: every track may take part
                # (unknown terms take the library's expected values, as when it was scored)
                m = match_sequence(library.get_video(vid), v_rule,
                                   scorer_for(library).term_means(v_rule))
                span = (m.span_s, *m.to_dicts())
            except KeyError:
                span = None
            v_memo[key] = span
        else:
            try:
                span = peak_span(_span_records(library, vid, peak), v_rule, peak)
            except KeyError:
                span = None
            v_memo[key] = span
        if v_rule.sequence is not None and span is not None:
            return span
        return span, None, None

    def per_source(self, vid: str, at: dict[str, int]) -> dict[str, dict]:
        """Each source's rank (of how many), score, weight and RRF contribution for ``vid``."""
        f, ranked, unjudged = self.fusion, self.run.ranked, self.run.unjudged
        w_used, rrf_k = f.weights, f.rrf_k
        per_source = {s: {"rank": at[s] or None, "of": f.n_ranked[s],
                          "score": float(ranked[s].scores[at[s] - 1]) if at[s] else None,
                          "weight": w_used[s],
                          "contribution": (w_used[s] / (rrf_k + float(f.ranks[s][at[s] - 1]))) if at[s] else 0.0}
                      for s in f.used}
        if "rule" in per_source and per_source["rule"]["rank"]:
            self._rule_percentile(per_source["rule"])
        if "bm25" in per_source and per_source["bm25"]["rank"] and self.best_bm25 > 0:
            per_source["bm25"]["score_vs_best"] = per_source["bm25"]["score"] / self.best_bm25
        if "rule" in per_source and vid in unjudged:
            per_source["rule"]["status"] = "cannot evaluate"
            per_source["rule"]["missing_fields"] = list(unjudged[vid])
        elif "rule" in per_source and per_source["rule"]["rank"]:
            share = self.judged_share(vid)
            if share:
                per_source["rule"]["judged_share"] = share
        return per_source

    def judged_share(self, vid: str) -> dict[str, float]:
        """The part of the clip the rule judged ``vid`` on, for ego fields known on part of it."""
        run = self.run
        rule = run.rule_of.get(self.profiles.get(vid), run.rule_obj) if run.rule_of else run.rule_obj
        if rule is None:
            return {}
        if self.avails is None:
            self.avails = run.library.availability()
        return judged_share(self.avails.get(vid), rule)

    def _rule_percentile(self, d: dict) -> None:
        """Share of the judged videos this one scores at least as high as (1.0 = the top): one
        minus the share that score strictly higher, so every video of a tie gets the same."""
        import numpy as np

        if self.rule_desc is None:
            self.rule_desc = np.negative(np.asarray(self.run.ranked["rule"].scores, np.float64))
        rule_desc = self.rule_desc
        higher = int(np.searchsorted(rule_desc, -d["score"], side="left"))
        d["percentile"] = 1.0 - higher / max(1, self.fusion.n_ranked["rule"])
        tied = int(np.searchsorted(rule_desc, -d["score"], side="right")) - higher
        if tied > 1:   # videos sharing this exact score: the rule cannot order them
            d["tie"] = {"first": higher + 1, "size": tied}

"""The rule (symbolic) source of a search: the query's rule per calibration profile, the videos
the rule cannot evaluate, and its ranking of the library (`strived.engine.search` runs it)."""

from __future__ import annotations

import copy
import weakref
from collections import Counter
from typing import Any, Sequence

from .availability import DERIVED_FROM, AvailGroups, field_available, unjudgeable
from .errors import StrivedError
from .jobs import CancelFn, ProgressFn, check_cancel, report
from .query import ParsedQuery
from .retrieval.ranked import Ranked, per_content_version
from .rulelib.hand_rules import hand_rule
from .rulelib.learned import learned_notice, search_rules
from .rulelib.library import PROFILES, load_default_library
from .rulelib.resolve import resolve_rule
from .rules import Rule, RuleScorer, parse_rule
from .rules.model import ALL_FIELDS
from .rules.rowcheck import damaged_notice

_scorers: "weakref.WeakKeyDictionary[Any, tuple[int, RuleScorer]]" = weakref.WeakKeyDictionary()


def scorer_for(library) -> RuleScorer:
    """A RuleScorer whose column cache is reused until the library's content changes."""
    return per_content_version(_scorers, library, lambda: RuleScorer(library))


def resolve_query_rule(query: "str | ParsedQuery", *, library=None, llm=None, event: str | None = None,
                       rule_library=None, available_fields: set[str] | None = None) -> tuple[Rule, dict]:
    """Rule for a query: the calibrated library's matcher/adapter when present, else the
    hand-written rule of ``event``. Returns (rule, match info)."""
    if event:
        d = hand_rule(event)
        if d is None:
            raise StrivedError(f"no hand-written rule for event {event!r}")
        return parse_rule(d), {"event": event, "confidence": 1.0, "mode": "hand", "source": "hand",
                               "notices": []}

    rr = resolve_rule(query, library=rule_library, llm=llm, available_fields=available_fields)
    return rr.rule, {"event": rr.event, "confidence": rr.confidence, "p_event": rr.p_event,
                     "mode": rr.mode, "source": rr.source, "notices": list(rr.notices),
                     "exemplar_event": rr.exemplar_event, "reason": rr.reason}


def available_fields(library, profile: str | None = None, videos=None) -> set[str] | None:
    """Rule fields (derived ones included) that at least one video of ``library`` (of ``profile``,
    or among ``videos``) has values for; None when nothing is known to be missing."""
    if not hasattr(library, "availability"):
        return None
    avails = library.availability()
    memo_key = None
    if videos is None and hasattr(library, "content_version"):
        # asked on every search, per profile: remembered until the library's content changes
        memo_key = (library.content_version, id(avails), profile)
        memo = getattr(library, "_available_fields_memo", None)
        if memo is not None and memo[0] == memo_key:
            return set(memo[1]) if memo[1] is not None else None
    prof = library.video_profiles() if profile else {}
    # videos share a few availability records (the library interns them): test each one once
    distinct = {id(avails[v]): avails[v] for v in avails
                if (profile is None or prof.get(v) == profile) and (videos is None or v in videos)}
    out = None
    if distinct:
        out = {f for f in ALL_FIELDS
               if any(field_available(av, DERIVED_FROM.get(f, f)) is not False for av in distinct.values())}
    if memo_key is not None:
        library._available_fields_memo = (memo_key, frozenset(out) if out is not None else None)
    return out


def _profile_counts(library) -> "Counter[str]":
    """{profile: number of videos}, counted once per library state (every search asks; counting
    is a pass over every video)."""
    prof = library.video_profiles()
    key = (getattr(library, "content_version", None), id(prof))
    memo = getattr(library, "_profile_counts_memo", None)
    if memo is None or memo[0] != key or key[0] is None:
        memo = (key, prof, Counter(prof.values()))     # holds ``prof``: its id is not reused
        try:
            library._profile_counts_memo = memo
        except AttributeError:
            pass
    return memo[2]


def resolve_profile_rules(query: "str | ParsedQuery", *, library, llm=None) -> tuple[dict[str, Rule], dict]:
    """The query's rule for each calibration profile present in ``library`` (videos perceived by
    our pipeline use the ``video`` profile, imported track records the ``tracks`` profile).
    Returns ({profile: rule}, match info of the main profile, with every profile's match)."""
    n_of = _profile_counts(library)                            # videos per profile
    present = set(n_of) or {"tracks"}
    rules, matches = {}, {}
    for p in PROFILES:
        if p in present:
            lib_p, note = search_rules(library, p)        # shipped numbers + any learned here
            rules[p], matches[p] = resolve_query_rule(query, library=library, llm=llm, rule_library=lib_p,
                                                      available_fields=available_fields(library, p))
            note = note or learned_notice(lib_p, matches[p], p)
            if note:
                matches[p]["notices"].append(note)
    main = max(matches, key=lambda p: (n_of.get(p, 0), p == "tracks"))
    match = dict(matches[main])
    match["profile"] = main
    if len(matches) > 1:
        match["profiles"] = {p: {k: m.get(k) for k in ("event", "confidence", "p_event", "mode", "source")}
                             for p, m in matches.items()}
        for p, m in matches.items():
            for n in m.get("notices") or []:
                if n not in match["notices"]:
                    match["notices"].append(n)
    return rules, match


def rule_unjudged(library, rule: "Rule | dict[str, Rule]") -> dict[str, list[str]]:
    """{video_id: [fields]} of the videos the rule cannot evaluate (a needed field was not estimated
    for them: see strived.availability). ``rule`` may be {profile: rule}."""
    avails = library.availability()
    # the videos grouped by their (interned) availability record, once per library state: a
    # search then tests each distinct record, not each video
    memo_key = (getattr(library, "content_version", None), id(avails))
    memo = getattr(library, "_avail_groups_memo", None)
    if memo is None or memo[0] != memo_key or memo_key[0] is None:
        memo = (memo_key, {})
        try:
            library._avail_groups_memo = memo
        except AttributeError:
            pass
    groups = memo[1]
    if not isinstance(rule, dict):
        if None not in groups:
            groups[None] = AvailGroups(avails, list(avails))
        return unjudgeable(avails, rule, groups=groups[None])
    prof = library.video_profiles()
    out: dict[str, list[str]] = {}
    for p, r in rule.items():
        if p not in groups:
            groups[p] = AvailGroups(avails, [v for v, q in prof.items() if q == p])
        out.update(unjudgeable(avails, r, groups=groups[p]))
    return out


def rule_ranking(library, rule: "Rule | dict[str, Rule]", binarize: bool = False,
                 unjudged: dict[str, list[str]] | None = None,
                 cancel: CancelFn = None, as_ranked: bool = False):
    """(video_id, score, peak_track) of videos with a score > 0, best first (ties by id).

    ``rule`` may be {profile: rule}: each video is then scored by its calibration profile's rule.
    Videos the rule cannot evaluate (``rule_unjudged``; pass it as ``unjudged`` when already
    computed) are left out: unknown is neither a match nor a non-match. ``cancel`` is checked per
    profile and inside the scorer (per gate, soft score and chunk of a feature computed).
    ``as_ranked``: the same ranking as a `Ranked` (arrays over the scorer's video list, what
    `search` fuses; no Python step per video)."""
    import numpy as np

    if unjudged is None and hasattr(library, "availability"):
        unjudged = rule_unjudged(library, rule)

    if isinstance(rule, dict):
        distinct = {json_key(r): r for r in rule.values()}
        if len(distinct) == 1:
            rule = next(iter(distinct.values()))
    scorer = scorer_for(library)
    if isinstance(rule, dict):
        prof = library.video_profiles()
        res = None
        for p, r in rule.items():
            check_cancel(cancel)
            rp = scorer.score(r, binarize=binarize, cancel=cancel)
            if res is None:
                res = copy.copy(rp)
                res.scores = np.zeros_like(rp.scores)
                res.peak_track = np.full_like(rp.peak_track, -1)
            sel = _profile_array(library, rp.video_ids, prof) == p
            res.scores[sel] = rp.scores[sel]
            res.peak_track[sel] = rp.peak_track[sel]
    else:
        res = scorer.score(rule, binarize=binarize, cancel=cancel)
    ids = res.video_ids
    if ids == scorer.video_ids:     # (C speed) the scorer's own list: one object per library state,
        ids = scorer.video_ids      # so its id codes and id array are worked out once
    ok = res.scores > 0
    if unjudged:
        at = _positions(ids, unjudged)
        ok[at[at >= 0]] = False
    nz = np.flatnonzero(ok)
    order = nz[np.lexsort((nz, -res.scores[nz]))]  # ids are sorted, so index order = id order
    memo = getattr(scorer, "_ids_array_memo", None)
    if memo is None or memo[0] is not ids:
        memo = (ids, np.asarray(ids, dtype=object) if len(ids) else np.zeros(0, dtype=object))
        scorer._ids_array_memo = memo
    r = Ranked(ids=memo[1][order].tolist(), scores=res.scores[order].astype(float),
               space=ids, index=order, peaks=res.peak_track[order].astype(int))
    return r if as_ranked else list(zip(r.ids, r.scores.tolist(), r.peaks.tolist()))


def add_damaged(library, unjudged: dict[str, list[str]], notices: list[str]) -> dict[str, list[str]]:
    """``unjudged`` plus the videos whose stored records are damaged (the scorer left them out:
    `rules.rowcheck`), each with the reason; their notice goes to ``notices``."""
    broken = scorer_for(library).columns.broken
    if not broken:
        return unjudged
    notices.append(damaged_notice(broken, len(library)))
    out = dict(unjudged)
    for vid, why in broken.items():
        out[vid] = [f"records damaged: {why}"]
    return out


_positions_memo: list = [None]   # (ids, {id: position}) of the last list of ids asked about


def _positions(ids: Sequence[str], wanted) -> "Any":
    """Position in ``ids`` of each id of ``wanted`` (-1 when absent), through a {id: position}
    map built once per distinct list of ids (a scorer returns an equal list on every call)."""
    import numpy as np

    memo = _positions_memo[0]
    if memo is None or memo[0] != ids:        # list equality: C speed, no work per video in Python
        memo = _positions_memo[0] = (list(ids), {v: i for i, v in enumerate(ids)})
    get = memo[1].get
    return np.fromiter((get(v, -1) for v in wanted), dtype=np.int64, count=len(wanted))


def _profile_array(library, ids: Sequence[str], prof: dict[str, str]):
    """The calibration profile of each video of ``ids`` as an array (compared per profile),
    remembered per library state."""
    import numpy as np

    key = (library.content_version, len(ids), id(prof))
    cached = getattr(library, "_profile_array_memo", None)
    if cached is None or cached[0] != key or cached[1] != ids:
        arr = np.array([prof.get(v) for v in ids], dtype=object)
        cached = (key, list(ids), arr)
        library._profile_array_memo = cached
    return cached[2]


def json_key(rule: Rule) -> str:
    import json

    return json.dumps(rule.to_dict(), sort_keys=True)


def ranked_from_hits(hits: Sequence[tuple[str, float, int]]) -> Ranked:
    """A caller's precomputed rule ranking [(video_id, score, peak_track)] as a `Ranked`."""
    import numpy as np

    ids, sc, peaks = (list(x) for x in zip(*hits)) if hits else ([], [], [])
    return Ranked(ids=ids, scores=np.asarray(sc, np.float64).reshape(-1),
                  peaks=np.asarray(peaks, np.int64).reshape(-1))


def warm_rule_features(library, progress: ProgressFn = None, cancel: CancelFn = None) -> int:
    """Score every rule of the shipped library once, which computes and caches (on disk, per video)
    the window features they read, so the first searches of a new process read them instead of
    computing them over every track (`strived index` / `import` call this). Returns the number of
    rules scored."""
    if len(library) == 0:
        return 0
    # the per-video answers every search reads (their small files of the cache folder), written
    # now rather than by the first search (reading every video's attrs: ~0.1 ms a video)
    library.availability()
    library.video_profiles()
    todo = {}
    for p in sorted(set(library.video_profiles().values())):
        lib = load_default_library(profile=p)
        for key in lib.keys():
            r = lib.rule(key)
            if r.sequence is not None:
                continue  # sequence rules read per-sample traces kept in memory only: nothing to warm
            todo.setdefault(json_key(r), (key, r))
    scorer = scorer_for(library)
    for k, (key, r) in enumerate(todo.values()):
        check_cancel(cancel)
        report(progress, "features", k, len(todo), item=key)
        scorer.score(r, cancel=cancel)
    report(progress, "features", len(todo), len(todo))
    return len(todo)

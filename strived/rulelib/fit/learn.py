"""Refit one event's numbers for one library from the user's relevance marks (`strived learn`).

    marks of queries that resolved to EVENT, on this library's videos of one calibration profile
      -> the L2R loop of `strived calibrate` (`calibrate_event`) over the marked videos only,
         started from the shipped numbers, each video its own group: a number moves only on an
         AP gain that holds with any one marked video left out, ties going to the fewest grid
         steps from the shipped numbers (the shrinkage)
      -> leave one video out: each marked video scored by the rule refitted without it; the
         pooled AP of those held-out scores must beat the AP of the numbers in use now on the
         same marks, or nothing changes.

Refused (`LearnRefused`, nothing changed): fewer than ``MIN_RELEVANT`` relevant or
``MIN_NOT_RELEVANT`` not-relevant marked videos, or a video marked both ways for queries of the
event. Offline, seeded, no LLM. Versions are kept by `strived.rulelib.learned`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ...errors import StrivedError
from ...jobs import CancelFn, ProgressFn, check_cancel, report
from ...rules.model import parse_rule
from ...events import EVENT_KEYS, get_event
from ...rules.scorer import RuleScorer
from ..learned import active_version
from ..library import load_default_library
from .calibrate import MIN_POSITIVES, average_precision_pessimistic, calibrate_event
from .optimizer import canonical_form, get_at, param_space
from .weak_labels import WeakLabels, mark_rows

#: The fit needs this many relevant marked videos (the calibration loop's own minimum: with one
#: or two the optimiser isolates those videos instead of the event) and as many not-relevant
#: ones (what the numbers must rank below them), so every leave-one-out fold keeps two of each.
MIN_RELEVANT = MIN_POSITIVES
MIN_NOT_RELEVANT = 3


class LearnRefused(StrivedError):
    """The marks cannot support a refit (too few, or contradictory); nothing was changed."""


@dataclass
class LearnResult:
    """What a refit found (not yet kept: `strived.rulelib.learned.add_version` keeps it)."""

    event: str
    profile: str
    marks: list[dict]                # {"query", "video_id", "relevant"} used
    unused: list[str]                # why other marks of the event were not used
    shipped_rule: dict
    current_rule: dict
    current_version: int             # 0: the shipped numbers
    new_rule: dict
    changes: list[str]               # "<number>: before -> after" (vs the numbers in use now)
    heldout: dict                    # leave-one-video-out figures
    ranks: list[dict] = field(default_factory=list)
    accepted: bool = False
    reason: str = ""
    elapsed_s: float = 0.0

    @property
    def n_relevant(self) -> int:
        return sum(1 for m in self.marks if m["relevant"])

    def record(self) -> dict:
        """The version record kept in the library's learned-numbers file."""
        return {"event": self.event, "profile": self.profile, "rule": self.new_rule,
                "previous_rule": self.current_rule, "previous_version": self.current_version,
                "changes": self.changes, "marks": self.marks, "heldout": self.heldout,
                "ranks": self.ranks, "method": METHOD}

    def to_dict(self) -> dict:
        return {**self.record(), "accepted": self.accepted, "reason": self.reason,
                "unused": self.unused, "elapsed_s": round(self.elapsed_s, 3)}


METHOD = ("L2R loop of `strived calibrate` (optimizer proposer, seed 0) on the marked videos, started "
          "from the shipped numbers; a number moves only on an AP gain holding with any one marked video "
          "left out; kept only if the leave-one-video-out AP beats the numbers in use")


def event_marks(library, event: str, profile: str | None = None) -> tuple[list[dict], list[str], str]:
    """(marks, notes on marks left out, profile) of ``event`` in ``library``: the marks of queries
    that resolved to the event, on videos still in the library, of one calibration profile
    (``profile``, or the one most marked videos have)."""
    prof = library.video_profiles()
    rows = [(q, v, r) for q, v, r, ev in mark_rows(library) if ev == event]
    notes = []
    gone = sorted({v for _q, v, _r in rows if v not in prof})
    if gone:
        notes.append(f"{len(gone)} marked video(s) no longer in the library: {', '.join(gone[:5])}")
    rows = [x for x in rows if x[1] in prof]
    if profile is None:
        counts = {p: len({v for _q, v, _r in rows if prof[v] == p}) for p in ("tracks", "video")}
        profile = max(counts, key=lambda p: (counts[p], p == "tracks"))
    other = sorted({v for _q, v, _r in rows if prof[v] != profile})
    if other:
        notes.append(f"{len(other)} marked video(s) of another calibration profile than '{profile}' "
                     "(learn them with --profile)")
    marks = [{"query": q, "video_id": v, "relevant": r} for q, v, r in rows if prof[v] == profile]
    return marks, notes, profile


def check_marks(event: str, marks: list[dict]) -> tuple[list[str], list[str]]:
    """(relevant videos, not-relevant videos) of ``marks``; raises LearnRefused when a video is
    marked both ways or when there are too few of either."""
    by_vid: dict[str, set[bool]] = {}
    for m in marks:
        by_vid.setdefault(m["video_id"], set()).add(bool(m["relevant"]))
    both = sorted(v for v, s in by_vid.items() if len(s) > 1)
    if both:
        where = [f"{m['video_id']} ({'relevant' if m['relevant'] else 'not relevant'} for \"{m['query']}\")"
                 for m in marks if m["video_id"] in both[:3]]
        raise LearnRefused(f"the marks for {event} contradict each other: {len(both)} video(s) marked both "
                           f"relevant and not relevant: {'; '.join(where)}. Clear one of each pair's "
                           "marks and learn again (nothing was changed)")
    pos = sorted(v for v, s in by_vid.items() if True in s)
    neg = sorted(v for v, s in by_vid.items() if False in s)
    if len(pos) < MIN_RELEVANT or len(neg) < MIN_NOT_RELEVANT:
        raise LearnRefused(f"too few marks to learn {event}: {len(pos)} relevant and {len(neg)} not relevant "
                           f"video(s); at least {MIN_RELEVANT} of each are needed (mark more results of "
                           "searches for this event; nothing was changed)")
    return pos, neg


def describe_changes(before: dict, after: dict) -> list[str]:
    """Each number that differs between two rules of the same form, as "<where>: a -> b"."""
    a, b = canonical_form(before), canonical_form(after)
    out = []
    for p in param_space(a):
        try:
            va, vb = float(get_at(a, p.path)), float(get_at(b, p.path))
        except (KeyError, IndexError, TypeError):
            continue
        if abs(va - vb) > 1e-9:
            out.append(f"{_where(a, p.path)}: {va:g} -> {vb:g}")
    return out


def _where(rule: dict, path: tuple) -> str:
    """A readable name of the number at ``path`` (e.g. "gate accel lt", "step 2 speed magnitude")."""
    parts, node = [], rule
    for i, k in enumerate(path):
        if k == "sequence":
            parts.append(f"step {path[i + 1] + 1}")
        elif k == "absent":
            parts.append(f"absence {path[i + 1] + 1}")
        elif k == "hard_gates":
            g = node[k][path[i + 1]]
            parts.append(f"gate {g['field']} {g['op']}")
        elif k == "soft_scores":
            s = node[k][path[i + 1]]
            parts.append(f"{s['type']} {s['field']}")
        elif k == "gap" or (isinstance(k, str) and i == len(path) - 1 and k != "value"):
            parts.append(k)
        if isinstance(node, (dict, list)):
            node = node[k]
    return " ".join(parts)


def leave_one_video_out(event: str, scorer, labels: WeakLabels, vids: list[str], form: dict, *,
                        seed: int = 0, progress: ProgressFn = None, cancel: CancelFn = None) -> dict:
    """Each marked video scored by the rule refitted on the other marked videos (the same loop
    and groups as the fit). Returns {"heldout_ap": pooled AP of the held-out scores, "per_video":
    [{"video_id", "relevant", "score"}]}."""
    index = {v: i for i, v in enumerate(scorer.video_ids)}
    pos = labels.positives.get(event, set())
    got = np.zeros(len(vids))
    for k, v in enumerate(vids):
        check_cancel(cancel)
        report(progress, f"learn:{event}", k + 1, len(vids) + 1, item=v,
               message=f"held-out check {k + 1}/{len(vids)}")
        train = [u for u in vids if u != v]
        rep = calibrate_event(event, scorer, labels, videos=train, form=form, seed=seed,
                              groups={u: u for u in train}, cancel=cancel)
        got[k] = scorer.score(parse_rule(rep.best_rule)).scores[index[v]]
    y = np.array([v in pos for v in vids], bool)
    return {"heldout_ap": average_precision_pessimistic(got, y),
            "per_video": [{"video_id": v, "relevant": bool(t), "score": round(float(x), 4)}
                          for v, t, x in zip(vids, y, got)]}


def library_ranks(library, vids: list[str], profile: str, rules: dict[str, dict]) -> list[dict]:
    """Where each of ``vids`` ranks in this library's ``profile`` videos under each rule of
    ``rules`` ({"before": rule, "after": rule}): 1-based, ties by id as search orders them; None
    when the rule gives it no score (it is not among the results)."""
    prof = library.video_profiles()
    sc = RuleScorer(library)
    ids = np.array(sc.video_ids, dtype=object)
    keep = np.array([prof.get(v) == profile for v in sc.video_ids], bool)
    pos = {v: i for i, v in enumerate(sc.video_ids)}
    out = [{"video_id": v} for v in vids]
    for name, rule in rules.items():
        s = np.where(keep, sc.score(parse_rule(rule)).scores, 0.0)
        for row, v in zip(out, vids):
            x = s[pos[v]]
            row[name] = None if x <= 0 else int(1 + (s > x).sum() + ((s == x) & (ids < v)).sum())
    return out


def learn_event(library, event: str, *, profile: str | None = None, seed: int = 0,
                progress: ProgressFn = None, cancel: CancelFn = None) -> LearnResult:
    """Refit ``event``'s numbers for ``library`` from its marks (see module doc). Raises
    LearnRefused (too few or contradictory marks) and Cancelled; keeps nothing itself."""
    t0 = time.perf_counter()
    if event not in EVENT_KEYS:
        get_event(event)               # raises KeyError with suggestions
    marks, unused, profile = event_marks(library, event, profile)
    pos, neg = check_marks(event, marks)
    vids = sorted(set(pos) | set(neg))
    shipped = parse_rule(load_default_library(profile=profile).entries[event].rule).to_dict()
    act = active_version(library, event, profile)
    current = act["rule"] if act else shipped
    scorer = RuleScorer.from_records([library.get_video(v) for v in vids])
    labels = WeakLabels(vids, {event: set(pos)}, {}, {event: set(neg)}, ["marks"])
    steps = len(vids) + 1
    report(progress, f"learn:{event}", 0, steps, message=f"fitting on {len(vids)} marked videos")
    rep = calibrate_event(event, scorer, labels, videos=vids, form=shipped, seed=seed,
                          groups={v: v for v in vids}, cancel=cancel)
    new = parse_rule(rep.best_rule).to_dict()
    y = np.array([v in set(pos) for v in vids], bool)
    idx = np.array([scorer.video_ids.index(v) for v in vids])
    cur_ap = average_precision_pessimistic(scorer.score(parse_rule(current)).scores[idx], y)
    new_ap = average_precision_pessimistic(scorer.score(parse_rule(new)).scores[idx], y)
    res = LearnResult(event, profile, marks, unused, shipped, current, act["version"] if act else 0,
                      new, describe_changes(current, new), {"current_ap": cur_ap, "fit_ap": new_ap,
                                                            "heldout_ap": None, "n_videos": len(vids)})
    if new == shipped:
        res.reason = ("no change of the shipped numbers gained AP on your marks with any one marked video "
                      "left out: nothing learned")
    elif new == current:
        res.reason = "the numbers in use are already what these marks fit: nothing to change"
    else:
        lovo = leave_one_video_out(event, scorer, labels, vids, shipped, seed=seed, progress=progress,
                                   cancel=cancel)
        res.heldout.update(lovo)
        res.accepted = lovo["heldout_ap"] > cur_ap + 1e-9
        res.reason = (f"leave one video out: AP {lovo['heldout_ap']:.3f} with the refitted numbers vs "
                      f"{cur_ap:.3f} with the numbers in use ({len(vids)} marked videos): "
                      + ("the new numbers are better on videos they were not fitted on" if res.accepted
                         else "not better on videos they were not fitted on, nothing changed"))
    res.ranks = library_ranks(library, vids, profile, {"before": current, "after": new})
    for r in res.ranks:
        r["relevant"] = r["video_id"] in set(pos)
    report(progress, f"learn:{event}", steps, steps, message="done")
    res.elapsed_s = time.perf_counter() - t0
    return res

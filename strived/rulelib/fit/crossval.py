"""Out-of-sample evaluation of calibration: folds split by source and sequence.

A *group* is the unit that never straddles folds: one recording sequence of one source (a KITTI
tracking sequence, an AV2 log, a comma2k19 segment, a video file). Groups are dealt to folds
greedily (largest first, to the fold with the fewest videos; ties by name), so windows cut from
one drive are never both calibrated on and evaluated. For each fold, every event is calibrated on
the other folds and its fitted rule scores the held-out fold. Reported per event: AP per fold
(where the fold has positives), and the pooled out-of-sample AP over all held-out scores (each
video scored by a rule not fitted on it), next to the starting numbers' AP on the same videos.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from ...jobs import CancelFn, ProgressFn, check_cancel, report
from ...rules.model import parse_rule
from .calibrate import average_precision_pessimistic, calibrate_event
from ...events import EVENT_KEYS, get_event
from .optimizer import canonical_form
from .weak_labels import WeakLabels

_WINDOW_SUFFIX = re.compile(r"_w\d+$")


def group_of(video_id: str) -> str:
    """Recording group of a video id: the id without a trailing window suffix ``_wNN``; AV2
    scenarios/logs and other single-item sources are their own groups."""
    return _WINDOW_SUFFIX.sub("", video_id)


def source_of(video_id: str) -> str:
    return video_id.split("_", 1)[0]


def make_folds(video_ids: list[str], n_folds: int = 5, group_fn=group_of) -> list[list[str]]:
    """Deal recording groups to ``n_folds`` folds (deterministic)."""
    groups: dict[str, list[str]] = {}
    for v in sorted(video_ids):
        groups.setdefault(group_fn(v), []).append(v)
    folds: list[list[str]] = [[] for _ in range(max(1, min(n_folds, len(groups))))]
    for g in sorted(groups, key=lambda g: (-len(groups[g]), g)):
        k = min(range(len(folds)), key=lambda i: (len(folds[i]), i))
        folds[k].extend(groups[g])
    return [sorted(f) for f in folds]


@dataclass
class EventCV:
    event: str
    n_pos: int
    fold_ap: list[float | None] = field(default_factory=list)
    fold_start_ap: list[float | None] = field(default_factory=list)
    pooled_ap: float | None = None
    pooled_start_ap: float | None = None
    in_sample_ap: float | None = None

    def to_dict(self) -> dict:
        r = lambda x: None if x is None else round(float(x), 4)  # noqa: E731
        return {"event": self.event, "n_pos": self.n_pos, "fold_ap": [r(x) for x in self.fold_ap],
                "fold_start_ap": [r(x) for x in self.fold_start_ap], "pooled_ap": r(self.pooled_ap),
                "pooled_start_ap": r(self.pooled_start_ap), "in_sample_ap": r(self.in_sample_ap)}


def cross_validate(scorer, labels: WeakLabels, *, folds: list[list[str]] | None = None,
                   events: list[str] | None = None, n_folds: int = 5, progress: ProgressFn = None,
                   cancel: CancelFn = None, **kw) -> tuple[list[list[str]], list[EventCV]]:
    """Per-event out-of-sample AP. ``kw`` goes to `calibrate_event` (proposer, seed, target_ap...)."""
    vids = [v for v in labels.videos if v in set(scorer.video_ids)]
    folds = folds or make_folds(vids, n_folds)
    index = {v: i for i, v in enumerate(scorer.video_ids)}
    vset = set(vids)
    events = [e for e in (events or EVENT_KEYS) if labels.positives.get(e, set()) & vset]
    out = []
    for n, ev in enumerate(events):
        check_cancel(cancel)
        report(progress, "crossval", n, len(events), item=ev)
        pos = labels.positives.get(ev, set())
        ign = labels.ignore.get(ev, set()) - pos
        start = parse_rule(canonical_form(get_event(ev).form))
        start_scores = scorer.score(start).scores
        res = EventCV(ev, len(pos & set(vids)))
        pooled_s, pooled_s0, pooled_y = [], [], []
        for fold in folds:
            train = [v for v in vids if v not in set(fold)]
            test = [v for v in fold if v not in ign]
            rep = calibrate_event(ev, scorer, labels, videos=train, cancel=cancel, **kw)
            s = scorer.score(parse_rule(rep.best_rule)).scores
            ii = np.array([index[v] for v in test], dtype=np.int64)
            y = np.array([v in pos for v in test], dtype=bool)
            pooled_s.append(s[ii]), pooled_s0.append(start_scores[ii]), pooled_y.append(y)
            if y.any():
                res.fold_ap.append(average_precision_pessimistic(s[ii], y))
                res.fold_start_ap.append(average_precision_pessimistic(start_scores[ii], y))
            else:
                res.fold_ap.append(None), res.fold_start_ap.append(None)
        y = np.concatenate(pooled_y)
        if y.any():
            res.pooled_ap = average_precision_pessimistic(np.concatenate(pooled_s), y)
            res.pooled_start_ap = average_precision_pessimistic(np.concatenate(pooled_s0), y)
        full = calibrate_event(ev, scorer, labels, videos=vids, cancel=cancel, **kw)
        res.in_sample_ap = full.best_ap
        out.append(res)
    report(progress, "crossval", len(events), len(events))
    return folds, out


def format_cv_table(folds: list[list[str]], rows: list[EventCV]) -> str:
    """A plain-text table: event, n_pos, per-fold AP (calibrated/start), pooled OOS AP, in-sample."""
    f = lambda x: "  -  " if x is None else f"{x:.2f}"  # noqa: E731
    head = (f"{'event':22s} npos " + " ".join(f"fold{i}(cal/start)" for i in range(len(folds)))
            + "  pooled_cal pooled_start in_sample")
    lines = [head]
    for r in rows:
        cells = " ".join(f"{f(a):>6s}/{f(b):<10s}" for a, b in zip(r.fold_ap, r.fold_start_ap))
        lines.append(f"{r.event:22s} {r.n_pos:4d} {cells}  {f(r.pooled_ap):>10s} "
                     f"{f(r.pooled_start_ap):>12s} {f(r.in_sample_ap):>9s}")
    sizes = ", ".join(f"fold{i}: {len(fo)} ({', '.join(sorted({group_of(v) for v in fo}))[:80]})"
                      for i, fo in enumerate(folds))
    lines.append("folds: " + sizes)
    return "\n".join(lines)

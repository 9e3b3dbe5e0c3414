"""Sequence rules (issue 17): scoring speed at scale, agreement with the naive reference, and
retrieval on the labelled composition queries (sequence rule vs the best single-step rule).

    python benchmarks/bench_sequence.py [--videos 10000] [--naive-subset 20] [--skip-speed]

Speed: the bench_core corpus (synthetic, 20 s x 10 fps x 15 tracks per video = 3,000 object-frames
per video; 30M at 10k videos), held in memory; each library sequence rule scored cold (per-sample
traces computed) and warm (traces cached), next to a single-pattern rule; the same at 1/10 and
1/3 of the corpus to show the scaling (the DP is O(K (N + F) log(N + F)) for N object-frames and
F frames). Quality: benchmarks/composition (real track records of bench-dev, our labels):
per query, AP of the query's resolved rule (a library composite, or a sequence the adapter
composes) and of each single-step library rule its parts name; with the shipped library and with
the rule forms' starting numbers (nothing fitted on these labels).
"""

from __future__ import annotations

import argparse
import gc
import resource
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from strived.evaluation.synth import make_video  # noqa: E402
from strived.rules import RuleScorer, parse_rule  # noqa: E402
from strived.rules.columns import TrackColumns  # noqa: E402
from strived.rules.reference import score_video  # noqa: E402
from strived.events import EVENTS  # noqa: E402

SINGLE = {"event": "ego_brake", "entity": {"role": "ego"}, "hard_gates": [{"field": "accel", "op": "lt", "value": -1.0}],
          "soft_scores": [{"type": "temporal_change", "field": "speed", "window_seconds": 4.0, "magnitude": 6.0,
                           "direction": "negative"}]}
CUT_IN = {"event": "cut_in", "entity": {"class_filter": ["car", "truck"]},
          "hard_gates": [{"field": "distance", "op": "lt", "value": 40.0}],
          "soft_scores": [{"type": "temporal_change", "field": "loc_x", "window_seconds": 4.0, "magnitude": 14.0}]}
# parts of each labelled query: the single-step library rules to compare with
PARTS = {"c01": ["lead_brake", "ego_brake"], "c02": ["sudden_stop", "ego_stationary", "ego_pull_away"],
         "c03": ["pedestrian_crossing", "ego_stationary"], "c04": ["ego_brake", "hard_brake"],
         "c05": ["overtaken_right", "ego_lane_change"], "c06": ["ego_brake", "pedestrian_crossing"]}


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def speed(n_videos: int, naive_subset: int) -> None:
    seq_rules = [parse_rule(e.form) for e in EVENTS if "sequence" in e.form]
    print(f"== speed: {len(seq_rules)} library sequence rules, synthetic corpus (bench_core's make_video)")
    for n in sorted({max(1, n_videos // 10), max(1, n_videos // 3), n_videos}):
        rng = np.random.default_rng(0)
        t0 = time.perf_counter()
        recs = [make_video(k, rng) for k in range(n)]
        cols = TrackColumns.from_records(recs)
        t_build = time.perf_counter() - t0
        subset = recs[:naive_subset]
        del recs
        gc.collect()
        sc = RuleScorer(None, columns=cols)
        N, F = cols.tracks.t.shape[0], cols.ego.t.shape[0]
        print(f"-- {n} videos: {N / 1e6:.1f}M object-frames, {F / 1e6:.2f}M frames (built in {t_build:.1f} s; "
              f"peak RSS so far {rss_mb():.0f} MB)")
        for name, d in (("single ego_brake", SINGLE), ("single cut_in", CUT_IN)):
            r = parse_rule(d)
            t0 = time.perf_counter(); sc.score(r); cold = time.perf_counter() - t0
            t0 = time.perf_counter(); sc.score(r); warm = time.perf_counter() - t0
            print(f"   {name:36s} cold {cold * 1e3:8.0f} ms   warm {warm * 1e3:7.0f} ms")
        tot_cold = tot_warm = 0.0
        for r in seq_rules:
            t0 = time.perf_counter(); res = sc.score(r); cold = time.perf_counter() - t0
            t0 = time.perf_counter(); sc.score(r); warm = time.perf_counter() - t0
            tot_cold += cold
            tot_warm += warm
            K = len(r.sequence)
            print(f"   {r.event:36s} cold {cold * 1e3:8.0f} ms   warm {warm * 1e3:7.0f} ms   "
                  f"K={K} neg={len(r.absent)}  nonzero {float((res.scores > 0).mean()):.0%}   "
                  f"warm/(N+F) {warm / (N + F) * 1e9:.0f} ns")
        print(f"   all {len(seq_rules)} sequence rules: cold {tot_cold:.2f} s, warm {tot_warm:.2f} s; "
              f"peak RSS {rss_mb():.0f} MB")
        if n == n_videos and naive_subset:
            sub = sorted(subset, key=lambda r: r.info.id)
            scs = RuleScorer.from_records(sub)
            worst, t_naive, t_fast = 0.0, 0.0, 0.0
            for r in seq_rules:
                t0 = time.perf_counter(); fast = scs.score(r).scores; t_fast += time.perf_counter() - t0
                tm = scs.term_means(r); t0 = time.perf_counter(); ref = np.array([score_video(x, r, term_means=tm) for x in sub])
                t_naive += time.perf_counter() - t0
                worst = max(worst, float(np.abs(fast - ref).max()))
            print(f"   naive reference on {len(sub)} videos x {len(seq_rules)} rules: {t_naive:.1f} s "
                  f"({t_naive / len(sub) / len(seq_rules) * 1e3:.0f} ms per video and rule; "
                  f"extrapolated to {n} videos: {t_naive / len(sub) / len(seq_rules) * n / 60:.0f} min per rule); "
                  f"max |fast - naive| = {worst:.1e}")
        del sc, cols
        gc.collect()


def quality() -> None:
    from strived.evaluation.bench import load_benchmark
    from strived.records import VideoRecords
    from strived.retrieval.metrics import average_precision
    from strived.rulelib.library import load_default_library
    from strived.rulelib.resolve import resolve_rule

    bench = load_benchmark(ROOT / "benchmarks" / "composition")
    try:
        recs = [VideoRecords.load(it.records) for it in bench.items]
    except FileNotFoundError as e:
        print(f"== quality skipped: {e} (the records live in ../shared/data/bench-dev)")
        return
    sc = RuleScorer.from_records(recs)
    print(f"== quality: {bench.name}, {len(recs)} record items, {len(bench.queries)} queries (AP, rule source alone)")
    for label, cal in (("shipped library", True), ("starting numbers", False)):
        lib = load_default_library(calibrated=cal)
        print(f"-- {label}")
        print(f"   {'query':5s} {'n':>2s} {'sequence':>9s} {'best single':>12s}  resolved rule / singles")
        seq_aps, single_aps = [], []
        for q in bench.queries:
            rr = resolve_rule(q.text, library=lib)

            def ap(rule):
                res = sc.score(rule)
                ranked = [v for v, s in res.ranking() if s > 0]
                return average_precision(ranked, q.relevant, q.ambiguous)
            a_seq = ap(rr.rule)
            singles = {e: ap(lib.rule(e)) for e in PARTS.get(q.id, [])}
            best = max(singles.items(), key=lambda kv: kv[1]) if singles else (None, float("nan"))
            seq_aps.append(a_seq)
            single_aps.append(best[1])
            print(f"   {q.id:5s} {len(q.relevant):2d} {a_seq:9.3f} {best[1]:12.3f}  {rr.rule.event} "
                  f"({rr.mode}) / " + ", ".join(f"{k} {v:.3f}" for k, v in singles.items()))
        print(f"   mAP   {np.mean(seq_aps):9.3f} {np.nanmean(single_aps):12.3f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--videos", type=int, default=10000)
    ap.add_argument("--naive-subset", type=int, default=20)
    ap.add_argument("--skip-speed", action="store_true")
    ap.add_argument("--skip-quality", action="store_true")
    a = ap.parse_args()
    if not a.skip_quality:
        quality()
    if not a.skip_speed:
        speed(a.videos, a.naive_subset)


if __name__ == "__main__":
    main()

"""Speed of the calibrated library (issue 5): offline calibration of every event over 1,000
synthetic videos (target <= 60 s) and offline matcher + adapter per query (target <= 20 ms).

    .venv/bin/python benchmarks/bench_calibration.py [--videos 1000] [--seed 0] [--json PATH]

Prints the figures as JSON; ``--json PATH`` also writes them to a file (read by `strived bench`).
"""

import argparse
import json
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--videos", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None, help="also write the figures to this JSON file")
    args = ap.parse_args()
    from strived.rules.scorer import RuleScorer
    from strived.rulelib.fit.calibrate import calibrate_library
    from strived.events import EVENT_KEYS
    from strived.rulelib.resolve import resolve_rule
    from strived.rulelib.library import load_default_library
    from strived.rulelib.fit.synthetic import synthetic_corpus

    t0 = time.perf_counter()
    recs, labels = synthetic_corpus(args.videos, seed=args.seed)
    # give every event positives so every event runs its full loop: planted events keep their
    # labels; the others borrow a planted event's positives (timing only, not quality)
    planted = [labels.positives[k] for k in sorted(labels.positives)]
    for i, k in enumerate(EVENT_KEYS):
        labels.positives.setdefault(k, planted[i % len(planted)])
    scorer = RuleScorer.from_records(recs)
    t_build = time.perf_counter() - t0
    t1 = time.perf_counter()
    lib, reps = calibrate_library(scorer, labels, seed=args.seed)
    t_cal = time.perf_counter() - t1
    n_iter = sum(len(r.iterations) for r in reps)
    queries = ["a vehicle cuts into our lane from the right", "we make a right turn",
               "the vehicle ahead of us brakes", "crash involving a scooter or motorbike",
               "a truck or bus passes extremely close to us", "snowy loss of control",
               "a cyclist rides across the street ahead of us", "the ego car is standing still"]
    dlib = load_default_library()
    resolve_rule(queries[0], dlib)
    t2 = time.perf_counter()
    reps_q = 50
    for _ in range(reps_q):
        for q in queries:
            resolve_rule(q, dlib)
    ms = (time.perf_counter() - t2) / (reps_q * len(queries)) * 1000
    fig = {"videos": args.videos, "events": len(reps), "iterations": n_iter,
           "build_s": round(t_build, 2), "calibrate_all_s": round(t_cal, 2),
           "target_calibrate_s": 60, "resolve_ms_per_query": round(ms, 3),
           "target_resolve_ms": 20}
    print(json.dumps(fig, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(fig, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()

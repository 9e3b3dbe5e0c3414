"""Engine-core benchmark (issue 2): import, size, RAM, open time, and rule scoring vs the naive
reference on a synthetic corpus (default 10,000 videos x 20 s x 10 fps x 15 tracks = 30M
object-frames).

    python benchmarks/bench_core.py [--videos 10000] [--naive-subset 50] [--keep DIR]

Prints figures measured in one run; ratios are what to compare across machines.
"""

from __future__ import annotations

import argparse
import gc
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from strived.evaluation.synth import make_video  # noqa: E402,F401  (bench_search imports it from here)
from strived.rules import RuleScorer, parse_rule  # noqa: E402
from strived.rules.reference import score_video  # noqa: E402
from strived.store import Library  # noqa: E402

RULE = {"event": "cut_in", "entity": {"class_filter": ["car", "truck"], "agg_mode": "any"},
        "hard_gates": [{"field": "distance", "op": "lt", "value": 40.0}],
        "soft_scores": [{"type": "temporal_change", "field": "loc_x", "window_seconds": 4.0, "magnitude": 14.0}]}
RULE2 = {"event": "ego_brake", "entity": {"role": "ego"},
         "soft_scores": [{"type": "temporal_change", "field": "speed", "window_seconds": 4.0, "magnitude": 6.0,
                          "direction": "negative"}]}


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--videos", type=int, default=10_000)
    ap.add_argument("--naive-subset", type=int, default=50)
    ap.add_argument("--keep", default=None, help="build the library here and keep it")
    args = ap.parse_args(argv)

    folder = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="strived-bench-"))
    if folder.exists() and args.keep:
        shutil.rmtree(folder)
    rng = np.random.default_rng(0)
    print(f"corpus: {args.videos} videos x 20 s x 10 fps x 15 tracks "
          f"= {args.videos * 200 * 15 / 1e6:.1f}M object-frames")

    t0 = time.perf_counter()
    gen_s = 0.0
    lib = Library.open(folder, create=True)
    batch = []
    for k in range(args.videos):
        g = time.perf_counter()
        batch.append(make_video(k, rng))
        gen_s += time.perf_counter() - g
        if len(batch) == 500:
            lib.add_videos(batch)
            batch = []
    if batch:
        lib.add_videos(batch)
    lib.close()
    import_s = time.perf_counter() - t0 - gen_s
    size_mb = sum(p.stat().st_size for p in folder.glob("library.sqlite*")) / 1e6
    print(f"import (excluding synthetic generation {gen_s:.1f} s): {import_s:.1f} s   (target <= 60 s)")
    print(f"library size on disk: {size_mb:.0f} MB")
    gc.collect()

    t0 = time.perf_counter()
    lib = Library.open(folder)
    n = len(lib)
    open_s = time.perf_counter() - t0
    print(f"open library ({n} videos): {open_s * 1e3:.0f} ms   (target <= 1000 ms)")

    sc = RuleScorer(lib)
    t0 = time.perf_counter()
    sc.columns  # scan the database (and write the column cache)
    load_s = time.perf_counter() - t0
    print(f"load columns into memory: {load_s:.2f} s   (RSS so far {rss_mb():.0f} MB)")

    for name, rd in (("temporal_change loc_x 4 s (object)", RULE), ("temporal_change speed 4 s (ego)", RULE2)):
        rule = parse_rule(rd)
        t0 = time.perf_counter()
        sc.score(rule)
        cold = time.perf_counter() - t0
        times = []
        for _ in range(5):
            t0 = time.perf_counter()
            res = sc.score(rule)
            times.append(time.perf_counter() - t0)
        warm = float(np.median(times))
        print(f"score one rule [{name}] over {n} videos: first {cold * 1e3:.0f} ms (computes and caches the "
              f"window features), warm {warm * 1e3:.1f} ms   (target <= 30 ms; paper 254 ms / 583 videos)")

        sub = lib.video_ids()[: args.naive_subset]
        recs = [lib.get_video(v) for v in sub]
        t0 = time.perf_counter()
        ref = np.array([score_video(r, rule) for r in recs])
        naive_s = time.perf_counter() - t0
        per_video_naive = naive_s / len(sub)
        idx = [res.video_ids.index(v) for v in sub]
        err = float(np.abs(res.scores[idx] - ref).max())
        print(f"  naive reference: {per_video_naive * 1e3:.1f} ms/video on {len(sub)} videos -> "
              f"{per_video_naive * n:.0f} s extrapolated to {n}; fast/naive speed-up x{per_video_naive * n / warm:,.0f} "
              f"(warm), x{per_video_naive * n / cold:,.0f} (first); max |diff| {err:.1e}")
    print(f"peak RSS: {rss_mb():.0f} MB")
    lib.close()
    # what a new process (the app's next start) sees: memory-mapped column cache + feature files
    import subprocess

    code = (
        "import sys, time, json\n"
        "from strived.store import Library\nfrom strived.rules import RuleScorer, parse_rule\n"
        "t0=time.perf_counter(); lib=Library.open(sys.argv[1]); t1=time.perf_counter()\n"
        "sc=RuleScorer(lib); sc.columns; t2=time.perf_counter()\n"
        "r=parse_rule(json.loads(sys.argv[2])); sc.score(r); t3=time.perf_counter(); sc.score(r); t4=time.perf_counter()\n"
        "print(f'new process: open {1e3*(t1-t0):.0f} ms, columns from cache {1e3*(t2-t1):.0f} ms, first score "
        "(features from disk) {1e3*(t3-t2):.0f} ms, warm {1e3*(t4-t3):.1f} ms')\n")
    import json

    out = subprocess.run([sys.executable, "-c", code, str(folder), json.dumps(RULE)], capture_output=True,
                         text=True, cwd=Path(__file__).resolve().parents[1])
    print(out.stdout.strip() or out.stderr.strip())
    if not args.keep:
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

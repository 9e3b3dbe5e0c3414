"""Engine-core benchmark (issue 2): import, size, RAM, open time, and rule scoring vs the naive
reference on a synthetic corpus (default 10,000 videos x 20 s x 10 fps x 15 tracks = 30M
object-frames).

    python benchmarks/bench_core.py [--videos 10000] [--naive-subset 50] [--keep DIR] [--json PATH]

Prints figures measured in one run; ratios are what to compare across machines. ``--json PATH``
also writes them as JSON (keys: videos, import_s, library_mb, open_ms, load_columns_s, rules[],
new_process, peak_rss_mb; read by `strived bench` / `strived report`).
"""

from __future__ import annotations

import argparse
import gc
import json
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
    ap.add_argument("--json", default=None, help="also write the figures to this JSON file")
    args = ap.parse_args(argv)
    fig: dict = {"videos": args.videos}

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
    fig.update(import_s=round(import_s, 3), generate_s=round(gen_s, 3), library_mb=round(size_mb, 2))
    gc.collect()

    t0 = time.perf_counter()
    lib = Library.open(folder)
    n = len(lib)
    open_s = time.perf_counter() - t0
    print(f"open library ({n} videos): {open_s * 1e3:.0f} ms   (target <= 1000 ms)")
    fig.update(videos=n, open_ms=round(open_s * 1e3, 2))

    sc = RuleScorer(lib)
    t0 = time.perf_counter()
    sc.columns  # scan the database (and write the column cache)
    load_s = time.perf_counter() - t0
    print(f"load columns into memory: {load_s:.2f} s   (RSS so far {rss_mb():.0f} MB)")
    fig["load_columns_s"] = round(load_s, 3)
    rules: list[dict] = []

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
        ref = np.array([score_video(r, rule, term_means=res.term_means) for r in recs])  # library E[s_c]
        naive_s = time.perf_counter() - t0
        per_video_naive = naive_s / len(sub)
        idx = [res.video_ids.index(v) for v in sub]
        err = float(np.abs(res.scores[idx] - ref).max())
        print(f"  naive reference: {per_video_naive * 1e3:.1f} ms/video on {len(sub)} videos -> "
              f"{per_video_naive * n:.0f} s extrapolated to {n}; fast/naive speed-up x{per_video_naive * n / warm:,.0f} "
              f"(warm), x{per_video_naive * n / cold:,.0f} (first); max |diff| {err:.1e}")
        rules.append({"rule": name, "videos": n, "first_ms": round(cold * 1e3, 3), "disk_ms": None,
                      "warm_ms": round(warm * 1e3, 4), "naive_ms_per_video": round(per_video_naive * 1e3, 4),
                      "naive_subset": len(sub), "speedup_warm": per_video_naive * n / warm,
                      "speedup_first": per_video_naive * n / cold, "max_abs_diff": err})
    fig["rules"] = rules
    fig["peak_rss_mb"] = round(rss_mb(), 1)
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
        "print(json.dumps({'open_ms': 1e3*(t1-t0), 'columns_ms': 1e3*(t2-t1), 'first_score_ms': 1e3*(t3-t2), "
        "'warm_ms': 1e3*(t4-t3)}))\n")
    out = subprocess.run([sys.executable, "-c", code, str(folder), json.dumps(RULE)], capture_output=True,
                         text=True, cwd=Path(__file__).resolve().parents[1])
    try:
        child = {k: round(v, 3) for k, v in json.loads(out.stdout.strip().splitlines()[-1]).items()}
    except (ValueError, IndexError):
        child = None
    if out.returncode == 0 and child:
        # the new process scores RULE (the first rule above) with its window features read from disk
        print(f"new process: open {child['open_ms']:.0f} ms, columns from cache {child['columns_ms']:.0f} ms, first "
              f"score (features from disk) {child['first_score_ms']:.0f} ms, warm {child['warm_ms']:.1f} ms")
        fig["new_process"] = child
        rules[0]["disk_ms"] = child["first_score_ms"]
    else:
        err_tail = (out.stderr.strip() or out.stdout.strip())[-2000:]
        print(f"new process failed (exit {out.returncode}): {err_tail}")
        fig["new_process"] = None
        fig["new_process_error"] = f"exit {out.returncode}: {err_tail[-300:]}"
    if args.json:
        Path(args.json).write_text(json.dumps(fig, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {args.json}")
    if not args.keep:
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

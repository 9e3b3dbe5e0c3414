"""`strived report BENCH_DIR --out DIR`: evaluate every method on a benchmark folder, run the quick
speed benchmarks, and write a markdown report with PNG plots (README.md, eval.json, bench.json, *.png)."""

from __future__ import annotations

import shlex
import sys

from ..evaluation.bench_runner import load_bench_json, parse_only, run_benchmarks
from ._common import TerminalProgress

DEFAULT_ONLY = "core,perception,retrieval,calibration,search"


def register(sub) -> None:
    p = sub.add_parser("report", help="evaluation + performance report (markdown and PNG plots) of a benchmark folder")
    p.add_argument("bench", help="benchmark folder with manifest.json and queries.json (docs/formats.md §2)")
    p.add_argument("--out", required=True, help="output folder (a report already there is only replaced "
                                                "with --yes)")
    p.add_argument("--yes", action="store_true", help="replace the report files already in --out")
    p.add_argument("--library", default=None,
                   help="library holding the benchmark items (default: a cache folder per benchmark)")
    p.add_argument("--index-videos", action="store_true", help="run perception on video items not yet in the library")
    p.add_argument("--cv", type=int, default=5, metavar="K",
                   help="cross-fit the calibrated library in K folds (default 5; 0 = the shipped library as it is)")
    p.add_argument("--methods", default=None, help="comma-separated methods (default: all)")
    p.add_argument("--bench", dest="bench_mode", choices=("quick", "full", "none"), default="quick",
                   help="speed benchmarks to run for the performance section (default quick)")
    p.add_argument("--bench-json", default=None,
                   help="use the figures of an earlier `strived bench --json FILE` run instead of running them")
    p.add_argument("--only", default=DEFAULT_ONLY,
                   help=f"benchmarks for the performance section (default {DEFAULT_ONLY})")
    p.set_defaults(func=cmd_report)


def _cmdline(args) -> tuple[str, str]:
    q = shlex.quote
    common = [q(args.bench)]
    if args.library:
        common += ["--library", q(args.library)]
    if args.index_videos:
        common.append("--index-videos")
    if args.cv != 5:
        common += ["--cv", str(args.cv)]
    if args.methods:
        common += ["--methods", q(args.methods)]
    rep = ["strived", "report", *common, "--out", q(args.out)]
    if args.bench_json:
        rep += ["--bench-json", q(args.bench_json)]
    elif args.bench_mode != "quick":
        rep += ["--bench", args.bench_mode]
    if args.only != DEFAULT_ONLY:
        rep += ["--only", q(args.only)]
    return " ".join(rep), " ".join(["strived", "eval", *common])


def cmd_report(args) -> int:
    from ..evaluation.report import evaluate, make_context, write_report  # lazy: loads numpy

    from pathlib import Path

    mine = ("README.md", "eval.json", "bench.json", "metrics.png", "ranks.png", "latency.png", "stage_fps.png")
    there = [n for n in mine if (Path(args.out) / n).exists()]
    if there and not args.yes:
        print(f"strived: error: {args.out} already holds a report ({', '.join(there[:4])}"
              f"{', ...' if len(there) > 4 else ''}); choose another --out, or add --yes to replace it "
              "(nothing was written)", file=sys.stderr)
        return 1
    names = parse_only(args.only)
    bench = None
    bench_cmd = ""
    if args.bench_json:
        bench = load_bench_json(args.bench_json)  # ratios recomputed from the figures it holds
        bench_cmd = (f"strived bench{' --quick' if bench.get('mode') == 'quick' else ''} "
                     f"--only {','.join(bench['benchmarks'])} --json {shlex.quote(args.bench_json)}")
    prog = TerminalProgress()
    methods = [m.strip() for m in args.methods.split(",")] if args.methods else None
    ev = evaluate(args.bench, library=args.library, index_videos=args.index_videos, methods=methods,
                  cv_folds=args.cv, progress=prog)
    if bench is None and args.bench_mode != "none":
        quick = args.bench_mode == "quick"
        bench = run_benchmarks(names, quick=quick, echo=lambda s: print(s, file=sys.stderr, flush=True))
        bench_cmd = f"strived bench{' --quick' if quick else ''} --only {','.join(names)}"
    cmd, eval_cmd = _cmdline(args)
    ctx = make_context(cmd, eval_cmd, bench_cmd)
    for p in write_report(ev, bench, args.bench, args.out, ctx):
        print(f"wrote {p}")
    return 0

"""`strived bench`: run the speed benchmarks in one go (each writes its figures as JSON) and print
ratios (fast path vs reference, latency vs the paper's, throughput, memory)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ..errors import StrivedError
from ..evaluation import bench_index
from ..evaluation.bench_runner import BENCH_ORDER, parse_only, run_benchmarks
from ..evaluation.ratios import format_bench


def register(sub) -> None:
    p = sub.add_parser("bench", help="run the speed benchmarks (benchmarks/bench_*.py) and print ratios",
                       description="Runs the repository's benchmark scripts as subprocesses and prints each "
                                   "fast path vs its reference and each latency vs the paper's.")
    p.add_argument("suite", nargs="?", choices=("scale", "index"), default=None,
                   help="scale: a synthetic library of --videos N built once under --cache, measured "
                        "whole in a new process (JSON keys: see strived.evaluation.scale.KEYS); "
                        "index FOLDER: the whole `strived index` command on FOLDER in a new process "
                        "(JSON keys: see strived.evaluation.bench_index.KEYS)")
    p.add_argument("folder", nargs="?", default=None, help="index: the folder of videos to index")
    p.add_argument("--workers", type=int, nargs="+", default=[0],
                   help="index: worker processes to measure, one run each (default 0 = automatic)")
    p.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"), help="index: detector device")
    p.add_argument("--videos", type=int, nargs="+", default=[1000],
                   help="scale: library sizes to build and measure (default 1000)")
    p.add_argument("--cache", default=None,
                   help="scale: folder for the built libraries and the embedding cache "
                        "(default ~/.cache/strived/bench-scale; also passed to scale when it runs with the others)")

    p.add_argument("--only", default=None,
                   help=f"comma-separated subset of {','.join(BENCH_ORDER)} (default: all)")
    p.add_argument("--quick", action="store_true", help="small sizes (about a minute or two per benchmark)")
    p.add_argument("--json", dest="json_out", default=None, help="write every figure and ratio here")
    p.add_argument("--benchmarks", default=None,
                   help="folder holding bench_*.py (default: the checkout's benchmarks/, or $STRIVED_BENCHMARKS)")
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds allowed per benchmark (default 1800)")
    p.set_defaults(func=cmd_bench)


def cmd_bench(args) -> int:
    if args.suite == "scale":
        return _cmd_scale(args)
    if args.suite == "index":
        return _cmd_index(args)
    if args.folder is not None:
        raise StrivedError("a folder is only taken by `strived bench index FOLDER`")

    names = parse_only(args.only)
    extra = {"scale": ["--cache", args.cache]} if args.cache else None
    res = run_benchmarks(names, quick=args.quick, bench_dir=Path(args.benchmarks) if args.benchmarks else None,
                         timeout_s=args.timeout, extra=extra, echo=lambda s: print(s, file=sys.stderr, flush=True))
    print(format_bench(res))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(res, indent=2) + "\n")
        print(f"wrote {args.json_out}", file=sys.stderr)
    bad = [n for n, r in res["benchmarks"].items() if r["status"] in ("failed", "timeout")]
    return 1 if bad else 0


def _cmd_scale(args) -> int:
    from ..evaluation import scale  # lazy: loads numpy

    if any(n < 1 for n in args.videos):
        raise StrivedError("--videos: sizes must be positive")
    cache = Path(args.cache).expanduser() if args.cache else Path.home() / ".cache" / "strived" / "bench-scale"
    echo = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731
    rows = []
    for n in args.videos:
        echo(f"== {n:,} synthetic videos (20 s, 10 fps, 15 tracks; real MiniLM vectors)")
        rows.append(scale.run(n, cache, echo))
    print(scale.format_table(rows))
    if args.json_out:
        out = rows[0] if len(rows) == 1 else rows
        Path(args.json_out).write_text(json.dumps(out, indent=2) + "\n")
        print(f"wrote {args.json_out}", file=sys.stderr)
    return 0


def _cmd_index(args) -> int:
    if not args.folder:
        raise StrivedError("usage: strived bench index FOLDER [--workers N ...] [--json OUT]")
    echo = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731
    rows = []
    for w in args.workers:
        r = bench_index.run(Path(args.folder), workers=w, device=args.device, echo=echo)
        print(bench_index.format_row(r), flush=True)
        rows.append(r)
    if args.json_out:
        out = rows[0] if len(rows) == 1 else {"runs": rows}
        Path(args.json_out).write_text(json.dumps(out, indent=2) + "\n")
        print(f"wrote {args.json_out}", file=sys.stderr)
    return 0 if all(r["failed"] == 0 for r in rows) else 1

"""`strived bench-mirror SRC OUT`: a benchmark folder of left-right mirrored items with their
left/right labels swapped (strived.evaluation.mirror)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from ._common import TerminalProgress


def register(sub) -> None:
    p = sub.add_parser("bench-mirror", help="write a benchmark of left-right mirrored items (labels swapped)",
                       description="Reads the benchmark folder SRC (docs/formats.md section 2) and writes OUT: "
                                   "each item flipped left-right (id + '_mirror', same group as its original), "
                                   "queries with a side get the mirrored event and text. SRC is never written; "
                                   "OUT must be outside it (and, for research-only clips, outside the repository).")
    p.add_argument("src", metavar="SRC", help="source benchmark folder")
    p.add_argument("out", metavar="OUT", help="new benchmark folder (must not exist, be empty, or be an earlier mirror "
                                              "with --force)")
    p.add_argument("--items", choices=("video", "records", "all"), default="video",
                   help="which items to mirror: those with a video (default), those with track records only, or all")
    p.add_argument("--force", action="store_true", help="replace an earlier mirror in OUT")
    p.set_defaults(func=cmd_bench_mirror)


def cmd_bench_mirror(args) -> int:
    from ..evaluation.mirror import mirror_benchmark  # lazy: loads numpy

    bar = TerminalProgress()

    def progress(ev) -> None:
        if ev.message:
            print(f"{ev.item}: {ev.message}", file=sys.stderr, flush=True)
        bar(ev)

    t0 = time.perf_counter()
    out = mirror_benchmark(args.src, args.out, items=args.items, progress=progress, overwrite=args.force)
    secs = time.perf_counter() - t0
    man = json.loads((Path(out) / "manifest.json").read_text(encoding="utf-8"))
    queries = json.loads((Path(out) / "queries.json").read_text(encoding="utf-8"))
    info = man["mirror"]
    print(f"wrote {out}: {info['n_items']} items, {info['n_queries']} queries "
          f"({info['codec'] or 'no video'}; {secs:.1f} s)")
    for q in queries:
        was = "" if q["id"] == q["mirror_of"] else f"  (mirror of {q['mirror_of']})"
        print(f"  {q['id']:<6} {q.get('event') or '-':<24} {len(q['relevant']):>2} relevant  {q['text']}{was}")
    for s in info["skipped"]:
        print(f"skipped {s['id']}: {s['reason']}", file=sys.stderr)
    for n in info["notes"]:
        print(f"note: {n}", file=sys.stderr)
    return 0

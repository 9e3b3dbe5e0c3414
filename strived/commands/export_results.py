"""`strived export-results`: search a library and export the clip list (CSV/JSON/FiftyOne/OpenLABEL,
optionally the cut clips) — the same engine functions the app's Export dialog calls."""

from __future__ import annotations

import sys

from ..export import clip_rows, export_results, library_versions, pad_rows
from ._common import TerminalProgress, add_library_arg, load_json_file, positive_int


def register(sub) -> None:
    p = sub.add_parser("export-results", help="search, then export the ranked clips (CSV, JSON, "
                                              "FiftyOne, OpenLABEL; optionally cut clips)")
    p.add_argument("query", help="plain-language query")
    p.add_argument("out_dir", help="export folder")
    add_library_arg(p)
    p.add_argument("--top-k", type=positive_int, default=20)
    p.add_argument("--format", action="append", choices=("csv", "json", "fiftyone", "openlabel"),
                   help="repeatable; default csv and json")
    p.add_argument("--clips", choices=("reencode", "copy"), default=None,
                   help="cut each clip: frame-accurate re-encode, or fast keyframe copy (ffmpeg)")
    p.add_argument("--rule", help="rule JSON file to use instead of the library's matcher")
    p.add_argument("--lead-in", type=_lead, default=0.0, metavar="S",
                   help="seconds of footage before each event in the clip (0-60; the event's own span "
                        "stays in the event_* fields)")
    p.add_argument("--lead-out", type=_lead, default=0.0, metavar="S", help="seconds after each event (0-60)")
    p.set_defaults(func=cmd_export_results)


def _lead(text: str) -> float:
    """argparse type: a lead-in/lead-out in seconds, 0 to 60."""
    import argparse
    import math

    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, found {text!r}") from None
    if not math.isfinite(v) or not 0.0 <= v <= 60.0:
        raise argparse.ArgumentTypeError(f"must be between 0 and 60 seconds, found {text}")
    return v


def cmd_export_results(args) -> int:
    from .. import engine  # lazy: loads numpy
    from ..store import Library  # lazy: loads numpy

    lib = Library.open(args.library)
    try:
        rule = load_json_file(args.rule, "rule file") if args.rule else None
        resp = engine.search(lib, args.query, rule=rule, top_k=args.top_k)
        rows = clip_rows(resp, lib)
        if args.lead_in or args.lead_out:
            rows = pad_rows(rows, args.lead_in, args.lead_out, lib.video_extents(r["video_id"] for r in rows))
        ctx = {"query": resp.query, "rule": resp.rule, "weights": resp.weights, "match": resp.match,
               "library": str(lib.folder), **library_versions(lib)}
        rep = export_results(rows, args.out_dir, formats=args.format or ["csv", "json"],
                             clips=args.clips, context=ctx, progress=TerminalProgress())
    finally:
        lib.close()
    for f in rep.files + rep.clips:
        print(f)
    for vid, why in rep.skipped:
        print(f"skipped {vid}: {why}", file=sys.stderr)
    return 0

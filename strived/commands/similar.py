"""`strived similar VIDEO --at T0-T1 [--track ID]`: the moments of the library most like a span."""

from __future__ import annotations

import argparse
import math
import re

from ._common import add_library_arg, positive_int, print_json

_SPAN = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*-\s*([0-9]*\.?[0-9]+)\s*$")


def parse_span(text: str) -> tuple[float, float]:
    """argparse type: ``START-END`` in seconds (``3.2-6``)."""
    m = _SPAN.match(text or "")
    if not m:
        raise argparse.ArgumentTypeError(f"expected START-END in seconds (e.g. 3.2-6.0), found {text!r}")
    a, b = float(m.group(1)), float(m.group(2))
    if not (math.isfinite(a) and math.isfinite(b)):
        raise argparse.ArgumentTypeError(f"expected finite seconds, found {text!r}")
    return a, b


def register(sub) -> None:
    p = sub.add_parser("similar", help="find moments like a span of a video (more like this)")
    p.add_argument("video", metavar="VIDEO_ID")
    p.add_argument("--at", required=True, type=parse_span, metavar="T0-T1",
                   help="the example span in seconds, e.g. 3.2-6.0")
    p.add_argument("--track", type=int, default=None, metavar="ID",
                   help="compare this track's distance, lateral offset and lane too (default: the ego only)")
    add_library_arg(p)
    p.add_argument("--top", type=positive_int, default=10, help="number of moments (default 10)")
    p.add_argument("--sources", default="signals,dense", help="comma-separated subset of signals,dense")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_similar)


def cmd_similar(args) -> int:
    from ..similar import more_like_this  # lazy: loads numpy
    from ..store import Library  # lazy: loads numpy

    t0, t1 = args.at
    sources = tuple(s.strip() for s in args.sources.split(",") if s.strip())
    with Library.open(args.library) as lib:
        resp = more_like_this(lib, args.video, t0, t1, args.track, top_k=args.top, sources=sources)
    if args.json:
        print_json(resp.to_dict())
        return 0
    ex, used = resp.example, resp.used
    who = f"track {ex['track_id']} ({ex['cls']})" if ex["track_id"] is not None else "the ego"
    print(f"like {ex['video_id']} {ex['compared_span'][0]:.1f}-{ex['compared_span'][1]:.1f} s, {who}")
    if "signals" in used["sources"]:
        group = f" of {', '.join(used['class_group'])} tracks" if used.get("class_group") else ""
        print(f"signals: {', '.join(used['signals'])} ({used['windows_compared']:,} windows{group} compared)"
              + (f"; unknown over the span: {', '.join(used['unknown_signals'])}" if used.get("unknown_signals") else ""))
    print("dense: " + ("text segments of the span" if "dense" in used["sources"]
                       else f"not used ({(used.get('dense') or {}).get('reason') or 'not asked'})"))
    for n in resp.notices:
        print(f"note: {n}")
    if not resp.moments:
        print("no similar moments found")
    for m in resp.moments:
        what = []
        if m.distance is not None:
            who = f"track {m.track_id} ({m.cls})" if m.track_id is not None else "ego"
            what.append(f"{who}, signal distance {m.distance:.2f}")
        if m.dense_cosine is not None:
            what.append(f"text cosine {m.dense_cosine:.2f}")
        print(f"{m.rank:3d}. {m.video_id}  {m.t0:.1f}-{m.t1:.1f} s  {'; '.join(what)}")
    return 0

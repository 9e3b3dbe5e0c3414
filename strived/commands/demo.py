"""`strived demo`: build a library from the bundled sample and run explained searches on it."""

from __future__ import annotations

import tempfile
from pathlib import Path

DEMO_QUERIES = [
    ("a car cuts in from the right", "cut_in_right"),
    ("we turn left at a junction", "ego_turn_left"),
    ("the ego car brakes hard", "ego_brake"),
    ("a pedestrian crosses in front of the car", "pedestrian_crossing"),
    ("the ego car is standing still, waiting", "ego_stationary"),
]


def register(sub) -> None:
    p = sub.add_parser("demo", help="search the bundled sample scenarios (offline, no set-up)")
    p.add_argument("--library", default=None, help="where to build the demo library (default: a temp folder)")
    p.set_defaults(func=cmd_demo)


def cmd_demo(args) -> int:
    from ..engine import SourceUnavailable, search
    from ..sample import sample_scenarios
    from ..store import Library

    folder = Path(args.library) if args.library else Path(tempfile.mkdtemp(prefix="strived-demo-"))
    recs = sample_scenarios()
    with Library.open(folder, create=True) as lib:
        lib.add_videos(recs)
        from ..engine import build_text_index

        note = build_text_index(lib)
        if note:
            print(f"note: {note}")
        print(f"demo library: {lib.folder} ({len(lib)} generated scenarios)")
        for r in recs:
            print(f"  {r.info.id:<28} {r.info.attrs['description']}")
        for query, event in DEMO_QUERIES:
            print(f"\nquery: {query!r}")
            try:
                resp = search(lib, query, top_k=3)
            except SourceUnavailable:
                resp = search(lib, query, event=event, top_k=3)
            m = resp.match
            conf = m.get("confidence")
            print(f"  rule: event {m.get('event')} ({m.get('mode')}, confidence "
                  f"{'-' if conf is None else f'{conf:.2f}'}); sources {', '.join(resp.sources_used)}; "
                  f"{resp.timings_ms['total']:.0f} ms")
            for n in resp.notices:
                print(f"  note: {n}")
            for h in resp.hits:
                span = f"{h.span_s[0]:.1f}-{h.span_s[1]:.1f} s" if h.span_s else "-"
                print(f"  {h.rank}. {h.video_id:<28} score {h.score:.3f}  peak {span}")
    return 0

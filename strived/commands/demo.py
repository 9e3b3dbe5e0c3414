"""`strived demo`: build a library from the bundled sample and run explained searches on it."""

from __future__ import annotations

import tempfile
from pathlib import Path

from .search import match_probabilities

REAL_CLIP = "street_bus_passes.mp4"     # mmdetection's demo video, Apache-2.0 (resources/sample/)
REAL_QUERY = "a bus passes very close to us"
DEMO_QUERIES = [
    ("a car cuts in from the right", "cut_in_right"),
    ("we turn left at a junction", "ego_turn_left"),
    ("the ego car brakes hard", "ego_brake"),
    ("a pedestrian crosses in front of the car", "pedestrian_crossing"),
    ("the ego car is standing still, waiting", "ego_stationary"),
]


def register(sub) -> None:
    p = sub.add_parser("demo", help="search the bundled sample (generated scenarios + one real clip; offline)")
    p.add_argument("--library", default=None, help="where to build the demo library (default: a temp folder)")
    p.add_argument("--no-video", action="store_true",
                   help="skip indexing the bundled real clip (the generated scenarios only)")
    p.set_defaults(func=cmd_demo)


def sample_clip() -> Path | None:
    """The bundled real clip (source tree or installed bundle), or None."""
    here = Path(__file__).resolve().parents[2] / "resources" / "sample" / REAL_CLIP
    return here if here.is_file() else None


def _index_real_clip(lib) -> str | None:
    """Index the bundled clip with the real perception pipeline; its video id, or None."""
    import time

    from ..indexing.job import index_folder  # lazy: loads numpy

    clip = sample_clip()
    if clip is None:
        print("\nreal clip: not bundled with this installation (resources/sample/); skipped")
        return None
    print(f"\nreal clip: {clip.name} (2.2 s of street driving; OpenMMLab mmdetection demo video, "
          "Apache-2.0, resources/sample/PROVENANCE.md)")
    print("  indexing it with the real perception pipeline (detector, tracker, ranging, ego motion)...",
          flush=True)
    t0 = time.perf_counter()
    rep = index_folder(clip.parent, lib)
    if rep.failed:
        print(f"  could not index it: {rep.failed[0][1]}")
        return None
    vid = (rep.indexed or [None])[0] or next((v for v in lib.video_ids() if not v.startswith("sample_")), None)
    if vid is None:
        return None
    rec = lib.get_video(vid)
    from collections import Counter

    counts = Counter(t.cls for t in rec.tracks)
    objs = ", ".join(f"{n} {c}" for c, n in counts.most_common()) or "no objects"
    avail = lib.availability().get(vid, {}) if hasattr(lib, "availability") else {}
    speed = avail.get("speed", {}) if isinstance(avail, dict) else {}
    speed_note = (f"ego speed: {speed.get('status')}" + (f" ({speed.get('reason')})" if speed.get("reason") else "")
                  if isinstance(speed, dict) and speed.get("status") else "")
    print(f"  indexed in {time.perf_counter() - t0:.1f} s: {len(rec.t)} sampled frames, tracks: {objs}"
          + (f"; {speed_note}" if speed_note else ""))
    return vid


def cmd_demo(args) -> int:
    from ..engine import SourceUnavailable, search  # lazy: loads numpy
    from ..sample import sample_scenarios  # lazy: loads numpy
    from ..store import Library  # lazy: loads numpy

    folder = Path(args.library) if args.library else Path(tempfile.mkdtemp(prefix="strived-demo-"))
    recs = sample_scenarios()
    with Library.open(folder, create=True) as lib:
        lib.add_videos(recs)
        print(f"demo library: {lib.folder}")
        print(f"{len(recs)} generated scenarios: synthetic per-frame track records (no video), written by "
              "strived/sample.py to show the rule language on clean signals:")
        for r in recs:
            print(f"  {r.info.id:<28} {r.info.attrs['description']}")
        real = None if args.no_video else _index_real_clip(lib)
        from ..engine import build_text_index  # lazy: loads numpy

        note = build_text_index(lib)
        if note:
            print(f"note: {note}")
        queries = list(DEMO_QUERIES) + ([(REAL_QUERY, "close_pass_large")] if real else [])
        for query, event in queries:
            print(f"\nquery: {query!r}")
            try:
                resp = search(lib, query, top_k=3)
            except SourceUnavailable:
                resp = search(lib, query, event=event, top_k=3)
            m = resp.match

            print(f"  rule: event {m.get('event')} ({m.get('mode')}; {match_probabilities(m)}); "
                  f"sources {', '.join(resp.sources_used)}; {resp.timings_ms['total']:.0f} ms")
            for n in resp.notices:
                print(f"  note: {n}")
            for h in resp.hits:
                span = f"{h.span_s[0]:.1f}-{h.span_s[1]:.1f} s" if h.span_s else "-"
                tag = "  <- the real clip" if h.video_id == real else ""
                rel = f"relevance {h.relevance:.0%}" if h.relevance is not None else "relevance -"
                print(f"  {h.rank}. {h.video_id:<28} {rel:<14} peak {span}{tag}")
            if real and query == REAL_QUERY and real not in {h.video_id for h in resp.hits}:
                print(f"  (the real clip {real} is not in the top 3)")
    return 0

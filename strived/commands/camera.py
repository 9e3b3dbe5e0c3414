"""`strived camera list|show|set|split|merge`: the cameras a library's videos came from.

Videos are grouped by a signature of their recorder (`strived.perception.camera_id`); the user
sees each group with its evidence and the camera values estimated from its clips, confirms it,
splits or merges groups, and gives values they know (camera.json keys).
"""

from __future__ import annotations

import sys

from ..errors import StrivedError
from ._common import add_library_arg, print_json, positive_float


def register(sub) -> None:
    p = sub.add_parser("camera", help="the cameras a library's videos came from (list, show, set, "
                                      "split, merge)")
    csub = p.add_subparsers(dest="camera_command", metavar="ACTION")

    q = csub.add_parser("list", help="camera groups with their size, frame rate, naming and videos")
    add_library_arg(q)
    q.add_argument("--json", action="store_true")
    q.set_defaults(func=cmd_list)

    q = csub.add_parser("show", help="one group: evidence, estimated and known values, its clips")
    q.add_argument("id", type=int)
    add_library_arg(q)
    q.add_argument("--json", action="store_true")
    q.set_defaults(func=cmd_show)

    q = csub.add_parser("set", help="name or confirm a group, give values known for its camera")
    q.add_argument("id", type=int)
    add_library_arg(q)
    q.add_argument("--name")
    g = q.add_mutually_exclusive_group()
    g.add_argument("--confirm", dest="confirmed", action="store_const", const=True, default=None,
                   help="the grouping is right")
    g.add_argument("--unconfirm", dest="confirmed", action="store_const", const=False)
    q.add_argument("--focal-px", type=positive_float(), help="focal length in pixels")
    q.add_argument("--hfov-deg", type=positive_float(), help="horizontal field of view, degrees")
    q.add_argument("--height-m", type=positive_float(), help="mounting height above the road, m")
    q.add_argument("--horizon-frac", type=positive_float(), help="horizon row / frame height")
    q.add_argument("--clear", action="append", default=[], metavar="KEY",
                   help="forget a known value (focal_px, hfov_deg, camera_height_m, horizon_frac)")
    q.set_defaults(func=cmd_set)

    q = csub.add_parser("split", help="move videos of a group into a new group of their own")
    q.add_argument("id", type=int)
    q.add_argument("videos", nargs="+", metavar="VIDEO")
    add_library_arg(q)
    q.add_argument("--name")
    q.set_defaults(func=cmd_split)

    q = csub.add_parser("merge", help="merge groups into the first one")
    q.add_argument("id", type=int)
    q.add_argument("others", nargs="+", type=int, metavar="ID")
    add_library_arg(q)
    q.set_defaults(func=cmd_merge)
    p.set_defaults(func=lambda a: (p.print_help(), 2)[1])


def _open(args):
    from ..store import Library  # lazy: loads numpy

    return Library.open(args.library)


def _groups():
    from ..indexing import camera_groups  # lazy: loads numpy

    return camera_groups


def cmd_list(args) -> int:
    with _open(args) as lib:
        groups = _groups().groups(lib)
        if args.json:
            print_json([{k: c[k] for k in ("id", "name", "confirmed", "known", "keys")} |
                        {"videos": [v["video_id"] for v in c["videos"]]} for c in groups])
            return 0
        if lib.readonly:
            print("(read-only library: groups as last stored; new videos are not grouped)", file=sys.stderr)
        if not groups:
            print("no videos in this library")
            return 0
        for c in groups:
            ev = c["evidence"]
            first = lambda k: next(iter(ev.get(k, {"unknown": 0})))  # noqa: E731
            mark = " (confirmed)" if c["confirmed"] else ""
            known = ", ".join(f"{k}={v:g}" for k, v in c["known"].items())
            print(f"{c['id']:>3}  {c['name']}{mark}: {len(c['videos'])} video(s), {first('size')} "
                  f"@ {first('fps')} fps, {first('codec')}, {first('name_pattern')}"
                  + (f", overlay {first('overlay')}" if "overlay" in ev else "")
                  + (f"; known: {known}" if known else ""))
    return 0


def cmd_show(args) -> int:
    with _open(args) as lib:
        c = info = _groups().group_details(lib, args.id)
        if args.json:
            print_json(info)
            return 0
        print(f"camera {c['id']}: {c['name']}" + (" (confirmed)" if c["confirmed"] else " (not confirmed)"))
        print("evidence (value: videos):")
        for k, vals in info["evidence"].items():
            print(f"  {k}: " + ", ".join(f"{v} ({n})" for v, n in vals.items()))
        print("known values: " + (", ".join(f"{k}={v:g}" for k, v in c["known"].items()) or "none given"))
        print("estimated from its clips:")
        for k, e in info["estimated"].items():
            val = e["note"] if e["value"] is None else f"{e['value']:g} (from {len(e['clips'])} clip(s))"
            print(f"  {k}: {val}; how: " + ", ".join(f"{s} ({n})" for s, n in e["sources"].items()))
        print("videos: " + ", ".join(f"{v['id']}" + (" [by user]" if v["grouped_by"] == "user" else "")
                                     for v in info["videos"]))
    return 0


def cmd_set(args) -> int:
    known = {k: getattr(args, a) for k, a in (("focal_px", "focal_px"), ("hfov_deg", "hfov_deg"),
                                              ("camera_height_m", "height_m"), ("horizon_frac", "horizon_frac"))
             if getattr(args, a) is not None}
    with _open(args) as lib:
        cg = _groups()
        c, again = cg.set_group(lib, args.id, name=args.name, confirmed=args.confirmed, known=known,
                                clear=args.clear)
        print(f"camera {c['id']}: {c['name']}" + (" (confirmed)" if c["confirmed"] else "")
              + "; known: " + (", ".join(f"{k}={v:g}" for k, v in c["known"].items()) or "none"))
        if again is not None:
            print(cg.reperceive_note(again))
    return 0


def cmd_split(args) -> int:
    with _open(args) as lib:
        new = _groups().split(lib, args.id, args.videos, args.name)
        print(f"camera {new}: {len(set(args.videos))} video(s) split off camera {args.id}")
    return 0


def cmd_merge(args) -> int:
    with _open(args) as lib:
        c = _groups().merge(lib, args.id, args.others)
        print(f"camera {c['id']}: {len(c['videos'])} video(s) after merging {', '.join(map(str, args.others))}")
    return 0


def video_info(lib, video_id: str) -> dict:
    """`strived info VIDEO`: where the video's speed comes from (availability, telemetry, the
    burnt-in overlay) and its camera group."""
    from ..store import cameras  # lazy: loads numpy

    try:
        rec = lib.get_video(video_id, track_ids=[])
    except KeyError:
        raise StrivedError(f"no video {video_id!r} in library {lib.folder}") from None
    from ..indexing.known_camera import stored_source  # lazy: loads numpy

    a = rec.info.attrs
    avail = a.get("availability") or {}
    _groups().refresh(lib)   # a video indexed since the last grouping joins its group (read-only: as stored)
    cam = cameras.camera_of(lib, video_id)
    source, used = stored_source(lib, rec.info.path, a.get("camera"), cam["id"] if cam else None)
    return {"id": video_id, "path": rec.info.path, "size": f"{rec.info.width}x{rec.info.height}",
            "fps": rec.info.fps,
            "speed": avail.get("speed") or "unknown (no availability record)",
            "accel": avail.get("accel") or "unknown (no availability record)",
            "telemetry": a.get("telemetry") or "none",
            "burnin": a.get("burnin") or "not read (indexed before burnt-in speed was read, or imported)",
            "camera": {"source": source, **({"values_used": used} if used else {}),
                       "model": a.get("camera") or "unknown (not in the records)"},
            "camera_group": {"id": cam["id"], "name": cam["name"], "confirmed": cam["confirmed"],
                             "known": cam["known"]} if cam else "not grouped yet (run `strived camera list`)"}

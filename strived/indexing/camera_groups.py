"""A library's camera groups as the user sees and edits them (`strived camera`, the app's
Library → Cameras…): grouping of new videos, each group's evidence, the camera values estimated
from its clips, and what a change of known values means for the next index."""

from __future__ import annotations

import statistics
from collections import Counter

from ..perception.camera_id import video_signature
from ..store import cameras as camera_store
from .known_camera import pending


def refresh(lib) -> dict | None:
    """Group the library's videos not grouped yet (None when the library is read-only)."""
    if lib.readonly:
        return None
    have = camera_store.assigned(lib)
    sigs = {v["id"]: video_signature(v) for v in lib.list_videos() if v["id"] not in have}
    return camera_store.refresh(lib, sigs)


def describe(c: dict) -> dict:
    """A group's evidence over its videos: each value with how many videos show it (a value no
    probe found: "unknown")."""
    ev: dict[str, Counter] = {}
    for v in c["videos"]:
        for k, val in (v.get("evidence") or {}).items():
            ev.setdefault(k, Counter())["unknown" if val is None else str(val)] += 1
    return {k: dict(cnt.most_common()) for k, cnt in ev.items()}


def estimated(lib, video_ids: list[str]) -> dict:
    """Camera values perception estimated on these clips (median over the clips with one), with
    the clips each came from and how each was found (config, road flow, cars, lanes, assumed)."""
    out: dict = {}
    cams = {}
    for vid in video_ids:
        try:
            a = lib.get_video(vid, track_ids=[]).info.attrs
        except KeyError:
            continue
        cams[vid] = (a.get("camera") or {}, a.get("ego_motion") or {})
    for key, src_key in (("focal_px", "focal_source"), ("horizon_y", "horizon_source"),
                         ("camera_height_m", "height_source")):
        vals = {v: (c.get(key), c.get(src_key)) for v, (c, _) in cams.items() if isinstance(c.get(key), (int, float))}
        measured = {v: x for v, x in vals.items() if x[1] not in (None, "default", "assumed_fov")}
        out[key] = {"value": round(statistics.median(x[0] for x in measured.values()), 3) if measured else None,
                    "clips": sorted(measured), "sources": dict(Counter(x[1] for x in vals.values())),
                    "note": None if measured else "unknown: no clip measured it (only the defaults)"}
    return out


def groups(lib) -> list[dict]:
    """Every group (new videos grouped first; read-only: as stored), each with its ``evidence``."""
    refresh(lib)
    return [c | {"evidence": describe(c)} for c in camera_store.cameras(lib)]


def group_details(lib, cid: int) -> dict:
    """One group as `strived camera show --json` gives it: evidence, known and estimated values,
    its videos and how each joined."""
    refresh(lib)
    c = camera_store.camera(lib, cid)
    ids = [v["video_id"] for v in c["videos"]]
    return {"id": c["id"], "name": c["name"], "confirmed": c["confirmed"], "keys": c["keys"],
            "known": c["known"], "evidence": describe(c), "estimated": estimated(lib, ids),
            "videos": [{"id": v["video_id"], "grouped_by": v["by"]} for v in c["videos"]]}


def set_group(lib, cid: int, *, name: str | None = None, confirmed: bool | None = None,
              known: dict | None = None, clear: list[str] | None = None) -> tuple[dict, int | None]:
    """Rename, confirm, set or clear known values of group ``cid`` (``CameraError`` when a value is
    out of range: nothing changed). Returns (the group, how many of its videos the next index
    perceives again — None when its known values did not change)."""
    refresh(lib)
    before = camera_store.camera(lib, cid)["known"]
    c = camera_store.update(lib, cid, name=name, confirmed=confirmed, known=known, clear=clear)
    return c, (pending(lib, cid) if c["known"] != before else None)


def reperceive_note(n: int, index: str = "`strived index`") -> str:
    """What the next index (``index``: how the user runs it) does for a group whose known values
    changed, ``n`` videos of it to perceive again."""
    if not n:
        return (f"no video of this camera will be perceived again by the next {index} (a "
                "camera.json beside a video wins over these values; new videos of this camera get them)")
    return (f"{n} video{'s' if n > 1 else ''} of this camera will be perceived again by the next "
            f"{index} (a camera.json beside a video wins over these values)")


def split(lib, cid: int, video_ids: list[str], name: str | None = None) -> int:
    """Move ``video_ids`` of group ``cid`` into a new group; its id."""
    refresh(lib)
    return camera_store.split(lib, cid, list(dict.fromkeys(video_ids)), name)


def merge(lib, into: int, others: list[int]) -> dict:
    """Merge the groups ``others`` into ``into``; the merged group."""
    refresh(lib)
    return camera_store.merge(lib, into, others)

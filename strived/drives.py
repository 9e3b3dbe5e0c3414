"""Drives across files: consecutive files of one camera joined into one drive timeline.

A dashcam records a drive as a series of files (one a minute, three...): it closes one file and
opens the next within about 1-2 s. Two files of the same camera group join when the second starts
within ``GAP_TOL_S`` of the first one's end (a gap of -2 s to +2 s: name time stamps have a 1 s
resolution, so a measured gap may also come out slightly negative).

When a file started is read, per file, from the first of:

1. ``name``: the time stamp in its file name, when its camera's naming has one (BlackVue, Viofo,
   Novatek, Thinkware, Nextbase, or a date-time in a name of its own shape); the camera's local
   clock, zone unknown;
2. ``container``: the container's ``creation_time`` tag (PyAV);
3. ``mtime``: the file's modification time minus its length (a dashcam writes the file to its end).

Files are only chained with files whose start comes from the same source (the clocks differ: a
name's local time is no UTC). A file whose start cannot be read (records only, file gone, no time
stamp) joins no drive. Indexing stays per file; `refresh` (run at the end of `strived index` and by
`strived drives`) reads the start of each new or re-indexed file only, then regroups.
"""

from __future__ import annotations

import calendar
import os
import re
from datetime import datetime, timezone
from pathlib import Path

from .perception.camera_id import name_pattern, signature
from .store import cameras as cam_store
from .store import drives as store

GAP_TOL_S = 2.0          # a dashcam opens the next file within ~1-2 s of closing one
_DATE_TIME = re.compile(r"(?<!\d)(20\d\d)[-_.]?(\d\d)[-_.]?(\d\d)[-_T ]?(\d\d)[-_.:]?(\d\d)[-_.:]?(\d\d)(?!\d)")
_NEXTBASE = re.compile(r"^(\d\d)(\d\d)(\d\d)_(\d\d)(\d\d)(\d\d)_")
_NO_TIME = ("gopro", "garmin", "generic-dvr")     # file counters, no time stamp in the name


def _epoch(y: int, mo: int, d: int, h: int, mi: int, s: int) -> float | None:
    try:
        return float(calendar.timegm(datetime(y, mo, d, h, mi, s).timetuple()))
    except ValueError:
        return None


def name_start(name: str) -> tuple[float, str] | None:
    """(seconds since the epoch, read as if UTC, and the text read) of the time stamp in a file
    name, or None when its naming has none."""
    stem = Path(str(name)).stem
    family = name_pattern(stem)
    if family in _NO_TIME:
        return None
    m = _NEXTBASE.match(stem) if family == "nextbase" else _DATE_TIME.search(stem)
    if not m:
        return None
    y, mo, d, h, mi, s = (int(g) for g in m.groups())
    t = _epoch(y + 2000 if family == "nextbase" else y, mo, d, h, mi, s)
    return None if t is None else (t, m.group(0))


def container_start(path: str) -> tuple[float, str] | None:
    """The container's creation_time (UTC) through PyAV, or None (no tag, a zero date, no PyAV)."""
    try:
        import av
    except ImportError:
        return None
    try:
        with av.open(str(path)) as c:
            text = (c.metadata or {}).get("creation_time")
    except Exception:  # noqa: BLE001 - a file PyAV cannot read has no tag
        return None
    if not text:
        return None
    try:
        dt = datetime.fromisoformat(str(text).strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    if dt.year < 2000:          # 1904/1970: a camera that never set its clock
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return dt.timestamp(), str(text).strip()


def file_length(n_frames, fps, duration_s) -> float | None:
    """A file's length in seconds: its frames at its rate (the samples' span when that is unknown)."""
    if n_frames and fps and fps > 0:
        return float(n_frames) / float(fps)
    return float(duration_s) if duration_s else None


def read_start(video: dict) -> dict:
    """The start evidence of one video row (``Library.list_videos`` plus ``rev``): start_s,
    source, detail, length_s, sig_key."""
    path = video.get("path")
    name = path or video["id"]
    length = file_length(video.get("n_frames"), video.get("fps"), video.get("duration_s"))
    a = video.get("attrs") or {}
    out = {"video_id": video["id"], "rev": video.get("rev"), "path": path, "length_s": length,
           "start_s": None, "source": None, "detail": None,
           "sig_key": signature(name, video.get("width"), video.get("height"), video.get("fps"),
                                a.get("codec"), a)["key"]}
    got = name_start(name)
    if got:
        out.update(start_s=got[0], source="name", detail=f"file name {got[1]} (camera's local clock)")
        return out
    exists = bool(path) and os.path.isfile(path)
    got = container_start(path) if exists else None
    if got:
        out.update(start_s=got[0], source="container", detail=f"creation_time {got[1]}")
    elif exists and length is not None:
        mt = os.stat(path).st_mtime
        out.update(start_s=mt - length, source="mtime",
                   detail=f"modified {datetime.fromtimestamp(mt, timezone.utc).isoformat(timespec='seconds')} "
                          f"minus {length:.1f} s")
    else:
        out["detail"] = ("unknown: no video file" if not exists else "unknown: no time stamp, tag or length")
    return out


def group(starts: list[dict], camera_of: dict[str, str], tolerance_s: float = GAP_TOL_S) -> list[dict]:
    """Drives of two files or more: per camera and start source, files sorted by start, a new
    drive wherever a gap (next start minus this file's end) leaves [-tolerance, +tolerance]."""
    lanes: dict[tuple, list[dict]] = {}
    for s in starts:
        if s.get("start_s") is None or s.get("length_s") is None:
            continue
        cam = camera_of.get(s["video_id"]) or f"signature {s['sig_key']}"
        lanes.setdefault((cam, s["source"]), []).append(s)
    out = []
    for (cam, source), files in sorted(lanes.items()):
        files.sort(key=lambda s: (s["start_s"], s["video_id"]))
        run: list[tuple[dict, float | None]] = []
        for s in files + [None]:
            if s is not None and run:
                prev = run[-1][0]
                gap = s["start_s"] - (prev["start_s"] + prev["length_s"])
                if abs(gap) <= tolerance_s:
                    run.append((s, gap))
                    continue
            if len(run) >= 2:
                t0 = run[0][0]["start_s"]
                last = run[-1][0]
                out.append({"id": f"drive:{run[0][0]['video_id']}", "camera": cam, "source": source,
                            "start_s": t0, "length_s": last["start_s"] + last["length_s"] - t0,
                            "files": [{"video_id": f["video_id"], "offset_s": f["start_s"] - t0, "gap_s": g}
                                      for f, g in run]})
            run = [(s, None)] if s is not None else []
    return out


def refresh(lib, tolerance_s: float = GAP_TOL_S) -> dict:
    """Read the start of every video not read yet (or written again since) and regroup the
    library's drives; one transaction. Returns {"drives", "files", "read", "unknown"}."""
    have = store.starts(lib)
    revs = store.video_revs(lib)
    new = []
    for v in lib.list_videos():
        old = have.get(v["id"])
        if old is not None and old["rev"] == revs.get(v["id"]) and old["path"] == v.get("path"):
            continue
        new.append(read_start({**v, "rev": revs.get(v["id"])}))
    every = {**have, **{s["video_id"]: s for s in new}}
    every = {vid: s for vid, s in every.items() if vid in revs}
    camera_of = {vid: f"camera {cid}" for vid, (cid, _by) in cam_store.assigned(lib).items()}
    found = group(list(every.values()), camera_of, tolerance_s)
    store.save(lib, new, found, tolerance_s)
    return {"drives": len(found), "files": sum(len(d["files"]) for d in found), "read": len(new),
            "unknown": sum(1 for s in every.values() if s.get("start_s") is None)}


def clock_text(start_s: float | None, source: str | None) -> str:
    """A start in words: the date-time on its clock (``local`` for a name's time stamp)."""
    if start_s is None:
        return "unknown"
    dt = datetime.fromtimestamp(start_s, timezone.utc).replace(tzinfo=None)
    return dt.isoformat(sep=" ", timespec="seconds") + (" (local)" if source == "name" else " UTC")

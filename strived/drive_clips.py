"""Exporting an event across a file boundary (a merged hit, `strived.drive_hits`): the drive
fields of its clip-list row and its lead-in/lead-out (`export.cut_segments_reencode` cuts the
one clip across the files).

A row of such a hit carries ``drive_id``, ``drive_start_s``/``drive_end_s`` (the event in drive
time) and ``drive_parts``: per file, in order, ``video_id``, ``video_path``, ``offset_s`` (the
file's start in drive time), ``event_start_s``/``event_end_s`` (the event's part in that file) and
``start_s``/``end_s``/``start_frame``/``end_frame`` (what the clip takes of that file: from the
event's start to the end of the first file, whole middle files, the start of the last file to the
event's end; a lead-in widens the first part, a lead-out the last). A clip across files is always
re-encoded (frame-accurate): a keyframe copy cannot join two files' streams.
"""

from __future__ import annotations


def _frame(t: float, fps: float | None, n_frames: int | None) -> int | None:
    if not fps:
        return None
    f = int(round(float(t) * float(fps)))
    return max(0, min(f, int(n_frames) - 1)) if n_frames else max(0, f)


def _last_s(p: dict) -> float:
    """Time of a file's last frame (its length when the frame count is unknown)."""
    if p.get("fps") and p.get("n_frames"):
        return (int(p["n_frames"]) - 1) / float(p["fps"])
    return float(p.get("length_s") or p["t1"])


def row_fields(drive: dict | None) -> dict:
    """The drive fields of a clip-list row (all None for a hit inside one file)."""
    if not drive:
        return {"drive_id": None, "drive_start_s": None, "drive_end_s": None, "drive_parts": None}
    parts, n = [], len(drive["parts"])
    for k, p in enumerate(drive["parts"]):
        a = float(p["t0"]) if k == 0 else 0.0
        b = float(p["t1"]) if k == n - 1 else _last_s(p)
        parts.append({"video_id": p["video_id"], "video_path": p.get("path"), "offset_s": p["offset_s"],
                      "event_start_s": p["t0"], "event_end_s": p["t1"], "start_s": round(a, 4),
                      "end_s": round(b, 4), "start_frame": _frame(a, p.get("fps"), p.get("n_frames")),
                      "end_frame": _frame(b, p.get("fps"), p.get("n_frames")), "fps": p.get("fps"),
                      "n_frames": p.get("n_frames")})
    return {"drive_id": drive["id"], "drive_start_s": drive["span_s"][0], "drive_end_s": drive["span_s"][1],
            "drive_parts": parts}


def pad_parts(parts: list[dict], lead_in_s: float, lead_out_s: float) -> list[dict]:
    """Copies of ``parts`` whose first starts ``lead_in_s`` earlier and last ends ``lead_out_s``
    later, inside their files."""
    out = [dict(p) for p in parts]
    first, last = out[0], out[-1]
    first["start_s"] = round(max(0.0, float(first["start_s"]) - lead_in_s), 4)
    last["end_s"] = round(min(_last_s({**last, "t1": last["end_s"]}), float(last["end_s"]) + lead_out_s), 4)
    for p in (first, last):
        p["start_frame"] = _frame(p["start_s"], p.get("fps"), p.get("n_frames"))
        p["end_frame"] = _frame(p["end_s"], p.get("fps"), p.get("n_frames"))
    return out


def n_frames(parts: list[dict]) -> int:
    return sum(max(1, (p["end_frame"] or 0) - (p["start_frame"] or 0) + 1) for p in parts)

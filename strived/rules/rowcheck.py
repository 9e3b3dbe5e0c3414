"""Checks of one video's stored rows before the rule source reads them (issue 37).

A row damaged on disk (bit rot, or written by an old buggy version) must cost its own video only:
the column builders (`strived.rules.rows`) pass every video's rows through these checks and
leave a damaged video out, with the reason, instead of failing the whole corpus. The checks
mirror what `strived.records` refuses at import: frame times finite and increasing, every series
as long as its frame list, positions inside the video's frames, class names that are text, and
no infinite values (NaN is "unknown" and stays allowed).
"""

from __future__ import annotations

from itertools import groupby
from typing import Iterable, Iterator

import numpy as np

from ..records import EGO_FIELDS, OBJECT_FIELDS


def video_problem(t_b, ego: dict) -> str | None:
    """Why a video's frame times or ego series (BLOBs, as stored) cannot be read, or None."""
    if t_b is None:
        return None
    if not isinstance(t_b, bytes):
        return f"its frame times are stored as {type(t_b).__name__}, not as binary samples"
    if len(t_b) % 8:
        return f"its frame times are {len(t_b)} bytes, not a whole number of 8-byte samples"
    t = np.frombuffer(t_b, "<f8")
    if not np.isfinite(t).all():
        return "its frame times hold NaN or infinite values"
    if t.size > 1 and not (np.diff(t) > 0).all():
        return "its frame times are not increasing"
    for k in EGO_FIELDS:
        b = ego.get(k)
        if b is None:
            continue
        if not isinstance(b, bytes) or len(b) != len(t_b):
            n = len(b) // 8 if isinstance(b, bytes) else type(b).__name__
            return f"its ego {k} series has {n} samples, its frame list {t.size}"
        if np.isinf(np.frombuffer(b, "<f8")).any():
            return f"its ego {k} series holds infinite values"
    return None


def tracks_problem(n_t: int, rows: list) -> str | None:
    """Why a video's track rows [(video_id, track, cls, pos bytes, {field: bytes})] cannot be
    read against its ``n_t`` sampled frames, or None. One pass of array operations per video."""
    lens = []
    for _, track, cls, pos_b, fb in rows:
        if isinstance(track, bool) or not isinstance(track, int):
            return f"a track id is {track!r}, not an integer"
        if not isinstance(cls, str) or not cls:
            return f"track {track}: its class is {cls!r}, not a class name"
        if not isinstance(pos_b, bytes) or len(pos_b) % 4:
            what = f"{len(pos_b)} bytes" if isinstance(pos_b, (bytes, str)) else type(pos_b).__name__
            return f"track {track}: its frame list does not parse ({what}, not 4-byte positions)"
        n = len(pos_b) // 4
        for f in OBJECT_FIELDS:
            b = fb.get(f)
            if not isinstance(b, bytes) or len(b) != 4 * n:
                got = len(b) // 4 if isinstance(b, bytes) else type(b).__name__
                return f"track {track}: its {f} has {got} samples, its frame list {n}"
        lens.append(n)
    if not rows:
        return None
    pos = np.frombuffer(b"".join(r[3] for r in rows), "<i4")
    if pos.size and (int(pos.min()) < 0 or int(pos.max()) >= n_t):
        k = _first_track(rows, lens, (pos < 0) | (pos >= n_t))
        return f"track {k}: its frame list points outside the video's {n_t} sampled frames"
    step = np.diff(pos) <= 0
    if step.size:
        ends = np.cumsum(lens)[:-1] - 1          # the last sample of each track but the last one
        step[ends[(ends >= 0) & (ends < step.size)]] = False
        if step.any():
            k = _first_track(rows, lens, np.r_[False, step])
            return f"track {k}: its frame list is not increasing"
    vals = np.frombuffer(b"".join(fb[f] for *_, fb in rows for f in OBJECT_FIELDS), "<f4")
    if np.isinf(vals).any():
        return "a track field holds infinite values"
    return None


def _first_track(rows: list, lens: list[int], bad: np.ndarray):
    at = int(np.flatnonzero(bad)[0])
    return rows[int(np.searchsorted(np.cumsum(lens), at, side="right"))][1]


def checked_track_rows(rows: Iterable, n_frames: dict[str, int], broken: dict[str, str]) -> Iterator:
    """The rows of ``Library.iter_track_rows`` (ordered by video) less every row of a video that
    is in ``broken`` or whose rows fail `tracks_problem`; each such video's reason is put in
    ``broken``. ``n_frames``: each video's number of sampled frames."""
    for vid, group in groupby(rows, key=lambda r: r[0]):
        group = list(group)
        if vid in broken:
            continue
        if vid not in n_frames:
            broken[vid] = "its tracks belong to no stored video row"
            continue
        why = tracks_problem(n_frames[vid], group)
        if why:
            broken[vid] = why
            continue
        yield from group


def damaged_notice(broken: dict[str, str], n_videos: int, limit: int = 3) -> str | None:
    """One line for the user about the videos whose records are damaged, or None."""
    if not broken:
        return None
    shown = "; ".join(f"{v}: {why}" for v, why in sorted(broken.items())[:limit])
    more = f"; and {len(broken) - limit} more" if len(broken) > limit else ""
    return (f"rule source could not judge {len(broken)} of {n_videos} videos whose stored records are "
            f"damaged ({shown}{more}); the other videos are ranked as usual. Re-index or re-import "
            "them, or remove them (`strived remove VIDEO_ID`)")

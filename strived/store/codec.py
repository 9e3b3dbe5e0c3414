"""How a video's records are stored: per-frame arrays as little-endian BLOBs, and the columns of
its ``videos`` row and ``tracks`` rows read back into `VideoRecords`."""

from __future__ import annotations

import datetime as _dt
import json

import numpy as np

from ..records import EGO_FIELDS, OBJECT_FIELDS, Track, VideoInfo, VideoRecords


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def _blob(a: np.ndarray, dtype) -> bytes:
    return np.ascontiguousarray(a, dtype=np.dtype(dtype).newbyteorder("<")).tobytes()


def _arr(b: bytes | None, dtype) -> np.ndarray:
    if b is None:
        return np.zeros(0, dtype)
    return np.frombuffer(b, dtype=np.dtype(dtype).newbyteorder("<")).astype(dtype, copy=False)


_EGO_COLS = ", ".join(f"ego_{k}" for k in EGO_FIELDS)


def _ego_arr(b: bytes | None, n: int) -> np.ndarray:
    """An ego series from its BLOB; a column written before the field existed (NULL after a
    migration) reads as all-NaN: not estimated, never zero."""
    if b is None:
        return np.full(n, np.nan)
    return _arr(b, np.float64).copy()


VIDEO_COLS = f"id, path, fps, n_frames, width, height, source, frame_idx, t, attrs, {_EGO_COLS}"
TRACK_COLS = "track, cls, pos, distance, loc_x, loc_z, lane_rel, bbox_area, score, bbox, attrs"


def records_from_rows(r, track_rows) -> VideoRecords:
    """A video's records from its ``videos`` row (VIDEO_COLS) and its ``tracks`` rows (TRACK_COLS)."""
    info = VideoInfo(id=r[0], path=r[1], fps=r[2], n_frames=r[3], width=r[4], height=r[5],
                     source=r[6], attrs=json.loads(r[9]) if r[9] else {})
    n = len(r[8]) // 8 if r[8] else 0
    ego = {k: _ego_arr(b, n) for k, b in zip(EGO_FIELDS, r[10:])}
    tracks = []
    for tr in track_rows:
        bbox = None if tr[9] is None else _arr(tr[9], np.float32).reshape(-1, 4).copy()
        tracks.append(Track(track_id=tr[0], cls=tr[1], pos=_arr(tr[2], np.int32).copy(),
                            fields={f: _arr(b, np.float32).copy() for f, b in zip(OBJECT_FIELDS, tr[3:9])},
                            bbox=bbox, attrs=json.loads(tr[10]) if tr[10] else {}))
    return VideoRecords(info=info, frame_idx=_arr(r[7], np.int64).copy(),
                        t=_arr(r[8], np.float64).copy(), ego=ego, tracks=tracks)

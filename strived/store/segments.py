"""The finished segments of long files being indexed (table ``perceived_segments``).

A long file is perceived in segments (`strived.perception.long_file`); each segment's records are
stored here, in its own transaction, as soon as it is finished, so a killed run redoes only the
segments it had not finished. Rows are keyed by the file's path and segment number, and carry a
``key`` (the file's fingerprint, the perception settings and the segmentation): rows under another
key describe another version of the file or other settings and are dropped. When every segment is
there the file's records are joined and written, and its rows deleted, in one transaction
(`strived.indexing.long_files`).

A segment's records are stored as a JSON header (video info, track ids, classes, attributes)
followed by the arrays in NumPy's ``.npz`` format, read back with ``allow_pickle=False``.
"""

from __future__ import annotations

import io
import json
import sqlite3
import struct

import numpy as np

from ..errors import LibraryError
from ..records import EGO_FIELDS, OBJECT_FIELDS, Track, VideoInfo, VideoRecords

TABLE = "perceived_segments"
_CREATE = (f"CREATE TABLE IF NOT EXISTS {TABLE} (path TEXT NOT NULL, seg INTEGER NOT NULL, "
           "key TEXT NOT NULL, t0 REAL, t1 REAL, records BLOB NOT NULL, thumbnail BLOB, thumb_w INTEGER, "
           "thumb_h INTEGER, n_sampled INTEGER, timings TEXT, PRIMARY KEY (path, seg))")


def _has_table(lib) -> bool:
    return lib.conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?",
                            (TABLE,)).fetchone() is not None


def encode_records(rec: VideoRecords) -> bytes:
    v = rec.info
    head = {"info": {"id": v.id, "path": v.path, "fps": v.fps, "n_frames": v.n_frames, "width": v.width,
                     "height": v.height, "source": v.source, "attrs": v.attrs},
            "tracks": [{"id": tr.track_id, "cls": tr.cls, "attrs": tr.attrs, "bbox": tr.bbox is not None}
                       for tr in rec.tracks]}
    arrays = {"frame_idx": np.asarray(rec.frame_idx, np.int64), "t": np.asarray(rec.t, np.float64)}
    arrays.update({f"ego_{k}": np.asarray(rec.ego[k], np.float64) for k in EGO_FIELDS})
    for i, tr in enumerate(rec.tracks):
        arrays[f"tr{i}_pos"] = np.asarray(tr.pos, np.int32)
        arrays.update({f"tr{i}_{f}": np.asarray(tr.fields[f], np.float32) for f in OBJECT_FIELDS})
        if tr.bbox is not None:
            arrays[f"tr{i}_bbox"] = np.asarray(tr.bbox, np.float32)
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    h = json.dumps(head).encode("utf-8")
    return struct.pack("<I", len(h)) + h + buf.getvalue()


def decode_records(blob: bytes) -> VideoRecords:
    (n,) = struct.unpack("<I", blob[:4])
    head = json.loads(blob[4:4 + n].decode("utf-8"))
    with np.load(io.BytesIO(blob[4 + n:]), allow_pickle=False) as z:
        a = {k: z[k] for k in z.files}
    tracks = [Track(track_id=int(m["id"]), cls=m["cls"], pos=a[f"tr{i}_pos"],
                    fields={f: a[f"tr{i}_{f}"] for f in OBJECT_FIELDS},
                    bbox=a[f"tr{i}_bbox"] if m["bbox"] else None, attrs=m["attrs"] or {})
              for i, m in enumerate(head["tracks"])]
    return VideoRecords(info=VideoInfo(**head["info"]), frame_idx=a["frame_idx"], t=a["t"],
                        ego={k: a[f"ego_{k}"] for k in EGO_FIELDS}, tracks=tracks)


def prune(lib, path: str, key: str) -> set[int]:
    """Drop ``path``'s segment rows stored under another key; the segment numbers left (done)."""
    if not _has_table(lib):
        return set()
    try:
        with lib.transaction():
            lib.conn.execute(f"DELETE FROM {TABLE} WHERE path=? AND key<>?", (path, key))
    except sqlite3.Error as e:
        raise LibraryError(f"cannot update indexing state in {lib.folder}: {e}") from None
    return {int(r[0]) for r in lib.conn.execute(f"SELECT seg FROM {TABLE} WHERE path=?", (path,))}


def put(lib, path: str, key: str, seg: int, t0: float, t1: float, rec: VideoRecords,
        thumbnail: tuple[bytes, tuple[int, int]] | None, n_sampled: int, timings: dict) -> None:
    """Store one finished segment (own transaction). Raises ``LibraryError``."""
    jpeg, (w, h) = thumbnail if thumbnail and thumbnail[0] else (None, (None, None))
    try:
        with lib.transaction():
            lib.conn.execute(_CREATE)
            lib.conn.execute(f"INSERT OR REPLACE INTO {TABLE}(path, seg, key, t0, t1, records, thumbnail, "
                             "thumb_w, thumb_h, n_sampled, timings) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                             (path, int(seg), key, float(t0), float(t1), encode_records(rec), jpeg, w, h,
                              int(n_sampled), json.dumps(timings)))
    except sqlite3.Error as e:
        raise LibraryError(f"cannot store a segment of {path} in {lib.folder}: {e}") from None


def done(lib, path: str, key: str) -> set[int]:
    """Segment numbers of ``path`` stored under ``key``."""
    if not _has_table(lib):
        return set()
    return {int(r[0]) for r in lib.conn.execute(f"SELECT seg FROM {TABLE} WHERE path=? AND key=?", (path, key))}


def load(lib, path: str, key: str) -> list[dict]:
    """``path``'s stored segments in order: {"seg", "t0", "t1", "records", "thumbnail" (jpeg,
    (w, h)) or None, "n_sampled", "timings"}."""
    if not _has_table(lib):
        return []
    out = []
    for seg, t0, t1, blob, jpeg, w, h, n, tim in lib.conn.execute(
            f"SELECT seg, t0, t1, records, thumbnail, thumb_w, thumb_h, n_sampled, timings FROM {TABLE} "
            "WHERE path=? AND key=? ORDER BY seg", (path, key)):
        out.append({"seg": int(seg), "t0": t0, "t1": t1, "records": decode_records(blob),
                    "thumbnail": (jpeg, (w, h)) if jpeg else None, "n_sampled": int(n or 0),
                    "timings": json.loads(tim or "{}")})
    return out


def clear(lib, path: str) -> None:
    """Delete ``path``'s segment rows (inside the caller's transaction)."""
    if _has_table(lib):
        lib.conn.execute(f"DELETE FROM {TABLE} WHERE path=?", (path,))

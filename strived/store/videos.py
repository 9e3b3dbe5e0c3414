"""The ``videos`` and ``tracks`` tables (a video's records: one row, one row per track) and the
``thumbnails`` table; a mixin of `Library`.

Every write of a video (its row and all its tracks) happens in one SQLite transaction, so a crash
or a kill never leaves half a video: the next run sees either the old state or the new one.
"""

from __future__ import annotations

import json

import numpy as np

from ..availability import complete_availability
from ..errors import LibraryError
from ..records import EGO_FIELDS, OBJECT_FIELDS, VideoRecords
from .codec import _EGO_COLS, TRACK_COLS, VIDEO_COLS, _blob, _now, records_from_rows
from .schema import VIDEO_CHILD_TABLES


class VideosMixin:
    # ------------------------------------------------------------------ writes
    def add_video(self, rec: VideoRecords, replace: bool = True) -> None:
        """Store a video's records (row + all tracks) atomically."""
        v = rec.info
        v.attrs["availability"] = complete_availability(rec)
        with self.transaction():
            exists = self.conn.execute("SELECT 1 FROM videos WHERE id=?", (v.id,)).fetchone()
            if exists:
                if not replace:
                    raise LibraryError(f"video {v.id!r} is already in the library")
                self._delete_video_rows(v.id, keep_children=("summaries", "segments", "thumbnails"))
            self._bump()
            rev = self.content_version  # identifies this write of the video (derived caches key on it)
            self.conn.execute(
                "INSERT INTO videos(id, path, fps, n_frames, width, height, source, duration_s, "
                f"n_samples, n_tracks, frame_idx, t, {_EGO_COLS}, attrs, added_at, rev) "
                f"VALUES (?,?,?,?,?,?,?,?,?,?,?,?,{','.join('?' * len(EGO_FIELDS))},?,?,?)",
                (v.id, v.path, v.fps, v.n_frames, v.width, v.height, v.source, rec.duration_s,
                 len(rec.t), len(rec.tracks), _blob(rec.frame_idx, np.int64), _blob(rec.t, np.float64),
                 *(_blob(rec.ego[k], np.float64) for k in EGO_FIELDS), json.dumps(v.attrs), _now(), rev))
            self.conn.executemany(
                "INSERT INTO tracks(video_id, track, cls, n, pos, distance, loc_x, loc_z, lane_rel, "
                "bbox_area, score, bbox, attrs) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                [(v.id, tr.track_id, tr.cls, len(tr), _blob(tr.pos, np.int32),
                  *(_blob(tr.fields[f], np.float32) for f in OBJECT_FIELDS),
                  None if tr.bbox is None else _blob(tr.bbox, np.float32),
                  json.dumps(tr.attrs) if tr.attrs else None) for tr in rec.tracks])

    def add_videos(self, recs, replace: bool = True) -> int:
        """Store many videos in one transaction (fast bulk import). Returns the count."""
        n = 0
        with self.transaction():
            for rec in recs:
                self.add_video(rec, replace=replace)
                n += 1
        return n

    def _delete_video_rows(self, video_id: str, keep_children=()) -> None:
        for t in VIDEO_CHILD_TABLES:
            if t not in keep_children:
                self.conn.execute(f"DELETE FROM {t} WHERE video_id=?", (video_id,))
        self.conn.execute("DELETE FROM tracks WHERE video_id=?", (video_id,))
        self.conn.execute("DELETE FROM videos WHERE id=?", (video_id,))

    def remove_video(self, video_id: str) -> None:
        with self.transaction():
            self._delete_video_rows(video_id)
            self.conn.execute("DELETE FROM files WHERE video_id=?", (video_id,))
            self._bump()

    # ------------------------------------------------------------------ reads
    def has_video(self, video_id: str) -> bool:
        return self.conn.execute("SELECT 1 FROM videos WHERE id=?", (video_id,)).fetchone() is not None

    def video_ids(self) -> list[str]:
        return [r[0] for r in self.conn.execute("SELECT id FROM videos ORDER BY id")]

    def __len__(self) -> int:
        return self.conn.execute("SELECT COUNT(*) FROM videos").fetchone()[0]

    def count_tracks(self) -> int:
        """Tracks of every video (a count of rows, no BLOB read)."""
        return self.conn.execute("SELECT COUNT(*) FROM tracks").fetchone()[0]

    def video_extents(self, video_ids) -> dict[str, tuple]:
        """video id -> (n_frames, duration_s) (a clip's lead-out must stay inside its video)."""
        ids = list(dict.fromkeys(video_ids))
        out: dict[str, tuple] = {}
        for k in range(0, len(ids), 500):
            part = ids[k:k + 500]
            rows = self.conn.execute(
                f"SELECT id, n_frames, duration_s FROM videos WHERE id IN ({','.join('?' * len(part))})",
                part).fetchall()
            out.update({r[0]: (r[1], r[2]) for r in rows})
        return out

    def video_timing(self, video_id: str) -> dict | None:
        """{"fps", "n_frames", "duration_s", "path"} of ``video_id``, or None when absent."""
        r = self.conn.execute("SELECT fps, n_frames, duration_s, path FROM videos WHERE id=?",
                              (video_id,)).fetchone()
        return {"fps": r[0], "n_frames": r[1], "duration_s": r[2], "path": r[3]} if r else None

    def list_videos(self) -> list[dict]:
        rows = self.conn.execute(
            "SELECT id, path, fps, n_frames, width, height, duration_s, source, n_tracks, attrs "
            "FROM videos ORDER BY id").fetchall()
        keys = ("id", "path", "fps", "n_frames", "width", "height", "duration_s", "source",
                "n_tracks", "attrs")
        out = []
        for r in rows:
            d = dict(zip(keys, r))
            d["attrs"] = json.loads(d["attrs"]) if d["attrs"] else {}
            out.append(d)
        return out

    def video_path(self, video_id: str) -> str | None:
        """The video file of ``video_id`` (None: records only, or no such video)."""
        r = self.conn.execute("SELECT path FROM videos WHERE id=?", (video_id,)).fetchone()
        return r[0] if r else None

    def video_paths(self, video_ids=None) -> dict[str, str | None]:
        """{video id: its file path} of ``video_ids`` (at most 999 ids: one statement), or of
        every video when None."""
        if video_ids is None:
            return dict(self.conn.execute("SELECT id, path FROM videos").fetchall())
        ids = list(video_ids)
        return dict(self.conn.execute(
            f"SELECT id, path FROM videos WHERE id IN ({','.join('?' * len(ids))})", ids).fetchall())

    def recorded_paths(self, skip_empty: bool = True) -> list[tuple[str, str]]:
        """(video id, path) of every video that has a path, by id (``skip_empty``: not an empty one)."""
        if skip_empty:
            sql = "SELECT id, path FROM videos WHERE path IS NOT NULL AND path != '' ORDER BY id"
        else:
            sql = "SELECT id, path FROM videos WHERE path IS NOT NULL ORDER BY id"
        return self.conn.execute(sql).fetchall()

    def video_revs(self, video_ids=None) -> dict[str, int | None]:
        """{video id: the content version of its last write} of ``video_ids`` (at most 999 ids),
        or of every video when None."""
        if video_ids is None:
            return dict(self.conn.execute("SELECT id, rev FROM videos"))
        ids = list(video_ids)
        return dict(self.conn.execute(f"SELECT id, rev FROM videos WHERE id IN ({','.join('?' * len(ids))})",
                                      ids))

    def track_counts_over(self, cap: int) -> list[tuple[str, int]]:
        """(video id, its track count) of the videos with more than ``cap`` tracks."""
        return self.conn.execute("SELECT id, n_tracks FROM videos WHERE n_tracks > ?", (cap,)).fetchall()

    def get_video(self, video_id: str, track_ids=None) -> VideoRecords:
        """Rebuild a video's records; ``track_ids`` limits the tracks read (None = all; the
        result lists get only those). Raises KeyError if absent."""
        r = self.conn.execute(f"SELECT {VIDEO_COLS} FROM videos WHERE id=?", (video_id,)).fetchone()
        if r is None:
            raise KeyError(video_id)
        sql = f"SELECT {TRACK_COLS} FROM tracks WHERE video_id=?"
        args: list = [video_id]
        if track_ids is not None:
            ids = [int(t) for t in track_ids]
            sql += f" AND track IN ({','.join('?' * len(ids))})"
            args += ids
        return records_from_rows(r, self.conn.execute(sql + " ORDER BY track", args))

    # ------------------------------------------------------------------ bulk column access
    def iter_track_rows(self, fields=OBJECT_FIELDS):
        """Yield (video_id, track, cls, pos bytes, {field: bytes}) for every track, ordered by video."""
        cols = ", ".join(fields)
        for r in self.conn.execute(f"SELECT video_id, track, cls, pos, {cols} FROM tracks "
                                   "ORDER BY video_id, track"):
            yield r[0], r[1], r[2], r[3], dict(zip(fields, r[4:]))

    def iter_video_series(self):
        """Yield (video_id, rev, t bytes, {ego field: bytes}) for every video, ordered by id."""
        for r in self.conn.execute(f"SELECT id, rev, t, {_EGO_COLS} FROM videos ORDER BY id"):
            n = len(r[2]) // 8 if r[2] else 0
            yield r[0], r[1] or 0, r[2], {k: (b if b is not None else _blob(np.full(n, np.nan), np.float64))
                                          for k, b in zip(EGO_FIELDS, r[3:])}

    # -- thumbnails (one small JPEG per video; the indexer and the app's worker write them)
    def put_thumbnail(self, video_id: str, jpeg: bytes, width: int | None = None,
                      height: int | None = None) -> None:
        """Store (or replace) the thumbnail of ``video_id`` (a savepoint inside an open transaction)."""
        with self.transaction():
            self.conn.execute("INSERT OR REPLACE INTO thumbnails(video_id, jpeg, width, height) "
                              "VALUES (?,?,?,?)", (video_id, jpeg, width, height))

    def thumbnail(self, video_id: str) -> bytes | None:
        r = self.conn.execute("SELECT jpeg FROM thumbnails WHERE video_id=?", (video_id,)).fetchone()
        return r[0] if r else None

    def thumbnail_ids(self) -> set[str]:
        return {r[0] for r in self.conn.execute("SELECT video_id FROM thumbnails")}

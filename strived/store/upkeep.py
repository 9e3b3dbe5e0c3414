"""The queries of library upkeep (`strived check` and its repairs, moved footage, removing
videos): rows that belong to no video, track counts, the ``files`` table's state; a mixin of
`Library`."""

from __future__ import annotations

from .schema import VIDEO_CHILD_TABLES

# tables whose rows name a video (``video_id``); a row of a video not in ``videos`` is an orphan
ORPHAN_TABLES = tuple(VIDEO_CHILD_TABLES) + ("captions", "files")


def _orphans_where(table: str) -> str:
    # a ``files`` row of a failed or running file has no video yet: only a done one is an orphan
    return "video_id NOT IN (SELECT id FROM videos)" + (" AND status='done'" if table == "files" else "")


class UpkeepMixin:
    def orphan_counts(self) -> dict[str, int]:
        """{table: rows that belong to no video} for each of ORPHAN_TABLES."""
        return {t: int(self.conn.execute(f"SELECT COUNT(*) FROM {t} WHERE {_orphans_where(t)}").fetchone()[0])
                for t in ORPHAN_TABLES}

    def delete_orphans(self, tables) -> None:
        """Delete the rows of ``tables`` (of ORPHAN_TABLES) that belong to no video, in one transaction."""
        with self.transaction():
            for t in tables:
                if t not in ORPHAN_TABLES:
                    raise ValueError(f"not a table of video rows: {t!r}")
                self.conn.execute(f"DELETE FROM {t} WHERE {_orphans_where(t)}")

    def track_count_mismatches(self) -> list[str]:
        """Videos whose ``n_tracks`` disagrees with their rows in ``tracks``, by id."""
        return [r[0] for r in self.conn.execute(
            "SELECT v.id FROM videos v LEFT JOIN (SELECT video_id, COUNT(*) AS n FROM tracks GROUP BY video_id) t "
            "ON t.video_id = v.id WHERE COALESCE(t.n, 0) != v.n_tracks ORDER BY v.id")]

    def recount_tracks(self) -> None:
        """Set every video's ``n_tracks`` to its rows in ``tracks``, in one transaction."""
        with self.transaction():
            self.conn.execute("UPDATE videos SET n_tracks = (SELECT COUNT(*) FROM tracks WHERE video_id = videos.id)")

    # -- the files table (one row per video file indexed: its content hash and indexing status)
    def count_files(self, status: str) -> int:
        """Files whose indexing status is ``status`` (``done``, ``running``, ``failed``)."""
        return int(self.conn.execute("SELECT COUNT(*) FROM files WHERE status=?", (status,)).fetchone()[0])

    def file_hash_of(self, video_id: str) -> tuple[int, str] | None:
        """(size, content hash) of the file ``video_id`` was indexed from, or None (no hash recorded)."""
        row = self.conn.execute("SELECT size, hash FROM files WHERE video_id=? AND hash IS NOT NULL",
                                (video_id,)).fetchone()
        return None if row is None else (row[0], row[1])

    def has_file_row(self, video_id: str) -> bool:
        """Whether a ``files`` row names ``video_id`` (a file indexed, or being indexed, into it)."""
        return self.conn.execute("SELECT 1 FROM files WHERE video_id=?", (video_id,)).fetchone() is not None

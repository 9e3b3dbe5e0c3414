"""The search texts: ``captions`` (the user's or a model's), ``summaries`` (one BM25 text per video)
and ``segments`` (per-window descriptions the dense index embeds); a mixin of `Library`, and
`count_segments_at` for a library folder not opened as a `Library`."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from .schema import DB_NAME


class TextsMixin:
    # -- captions
    def put_captions(self, rows) -> None:
        """Store (or replace) (video_id, text, source) captions, in one transaction."""
        with self.transaction():
            self.conn.executemany("INSERT OR REPLACE INTO captions(video_id, text, source) "
                                  "VALUES (?,?,?)", rows)

    def captions(self) -> dict[str, str]:
        """{video_id: caption text} of every stored caption."""
        return dict(self.conn.execute("SELECT video_id, text FROM captions"))

    def caption_sources(self) -> dict[str, str]:
        """{video_id: where its caption came from} (``sidecar``, ``csv:NAME``, ``vlm:MODEL``)."""
        return dict(self.conn.execute("SELECT video_id, source FROM captions"))

    # -- summaries and segments
    def summary_states(self) -> dict[str, tuple]:
        """{video_id: (summary text, source, rev of the records it was built from)}."""
        return {r[0]: (r[1], r[2], r[3]) for r in
                self.conn.execute("SELECT video_id, text, source, rev FROM summaries")}

    def write_texts(self, video_ids, summaries, segments) -> None:
        """Replace the summaries and segments of ``video_ids`` in one transaction: ``summaries``
        are (video_id, text, source, updated_at, rev) rows, ``segments`` (video_id, seg, t0, t1,
        text) rows."""
        with self.transaction():
            self.conn.executemany("DELETE FROM segments WHERE video_id=?", [(v,) for v in video_ids])
            self.conn.executemany("INSERT OR REPLACE INTO summaries(video_id, text, source, updated_at, rev) "
                                  "VALUES (?,?,?,?,?)", summaries)
            self.conn.executemany("INSERT INTO segments(video_id, seg, t0, t1, text) VALUES (?,?,?,?,?)",
                                  segments)

    def summary_texts(self) -> list[tuple[str, str]]:
        """(video_id, summary text) of every summary, ordered by video id."""
        return self.conn.execute("SELECT video_id, text FROM summaries ORDER BY video_id").fetchall()

    def summary_stamps(self) -> dict[str, str]:
        """{video_id: when its summary was last written}."""
        return dict(self.conn.execute("SELECT video_id, updated_at FROM summaries"))

    def summaries_state(self) -> tuple[int, str | None]:
        """(number of summaries, newest update time)."""
        n, newest = self.conn.execute("SELECT COUNT(*), MAX(updated_at) FROM summaries").fetchone()
        return n, newest

    def last_summary_row(self) -> int | None:
        """The largest rowid of ``summaries`` (None when empty): changes with any addition."""
        return self.conn.execute("SELECT MAX(rowid) FROM summaries").fetchone()[0]

    def has_summaries(self) -> bool:
        return self.conn.execute("SELECT 1 FROM summaries LIMIT 1").fetchone() is not None

    def segments_of(self, video_id: str) -> list[tuple]:
        """(seg, t0, t1, text) of the segments of ``video_id``, in order."""
        return self.conn.execute("SELECT seg, t0, t1, text FROM segments WHERE video_id=? "
                                 "ORDER BY seg", (video_id,)).fetchall()

    def distinct_segment_texts(self) -> list[str]:
        return [r[0] for r in self.conn.execute("SELECT DISTINCT text FROM segments")]

    def sample_segment_texts(self, n: int) -> list[str]:
        """``n`` segment texts spread over the table (a fixed pseudo-random order by rowid)."""
        return [r[0] for r in self.conn.execute(
            "SELECT text FROM segments ORDER BY (rowid * 2654435761) % 1000003 LIMIT ?", (int(n),))]

    def text_stale_ids(self) -> set[str]:
        """Videos whose summary is missing or older than their records."""
        return {r[0] for r in self.conn.execute(
            "SELECT v.id FROM videos v LEFT JOIN summaries s ON s.video_id = v.id "
            "WHERE s.video_id IS NULL OR s.rev IS NOT v.rev")}

    def count_texts_missing(self) -> int:
        """Videos without a summary."""
        return int(self.conn.execute("SELECT COUNT(*) FROM videos v LEFT JOIN summaries s ON s.video_id = v.id "
                                     "WHERE s.video_id IS NULL").fetchone()[0])

    def count_texts_stale(self) -> int:
        """Videos whose summary was built from an earlier write of their records."""
        return int(self.conn.execute("SELECT COUNT(*) FROM videos v JOIN summaries s ON s.video_id = v.id "
                                     "WHERE s.rev IS NOT v.rev").fetchone()[0])


def count_segments_at(folder: Path) -> int:
    """The segments of the library database in ``folder``, read without opening it as a `Library`
    (no schema check, no lock: a finished build's count)."""
    c = sqlite3.connect(f"file:{Path(folder) / DB_NAME}?mode=ro", uri=True)
    n = c.execute("SELECT COUNT(*) FROM segments").fetchone()[0]
    c.close()
    return n

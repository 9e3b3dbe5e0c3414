"""The user's relevance marks (``marks``: they feed calibration) and saved searches
(``saved_searches``); a mixin of `Library`."""

from __future__ import annotations

import json

from .codec import _now


class MarksMixin:
    # -- relevance marks (the user's judgements of a search's results; they feed calibration)
    def set_mark(self, query: str, video_id: str, relevant: bool | None,
                 event: str | None = None) -> None:
        """Mark ``video_id`` relevant (True) or not (False) for ``query``; None clears the mark."""
        with self.transaction():
            if relevant is None:
                self.conn.execute("DELETE FROM marks WHERE query=? AND video_id=?", (query, video_id))
            else:
                self.conn.execute(
                    "INSERT OR REPLACE INTO marks(query, video_id, relevant, event, created_at) "
                    "VALUES (?,?,?,?,?)", (query, video_id, int(bool(relevant)), event, _now()))

    def marks_for(self, query: str) -> dict[str, bool]:
        """{video_id: relevant} of the marks given for ``query``."""
        return {v: bool(r) for v, r in self.conn.execute(
            "SELECT video_id, relevant FROM marks WHERE query=?", (query,))}

    def marks_in_order(self) -> list[tuple]:
        """(query, video_id, relevant, event) of every mark, the oldest first (then by query, video)."""
        return self.conn.execute(
            "SELECT query, video_id, relevant, event FROM marks ORDER BY created_at, query, video_id").fetchall()

    def count_marks(self) -> int:
        return int(self.conn.execute("SELECT COUNT(*) FROM marks").fetchone()[0])

    # -- saved searches (a name -> the query and a JSON spec: rule, weights, ranking...)
    def save_search(self, name: str, query: str, spec: dict) -> None:
        """Store (or replace) the saved search ``name``."""
        with self.transaction():
            self.conn.execute(
                "INSERT OR REPLACE INTO saved_searches(name, query, spec, created_at) "
                "VALUES (?,?,?,?)", (name, query, json.dumps(spec), _now()))

    def saved_search(self, name: str) -> dict | None:
        """{"name", "query", "spec", "created_at"} of the saved search ``name``, or None."""
        row = self.conn.execute("SELECT query, spec, created_at FROM saved_searches WHERE name=?",
                                (name,)).fetchone()
        if row is None:
            return None
        return {"name": name, "query": row[0], "spec": json.loads(row[1]) if row[1] else {},
                "created_at": row[2]}

    def saved_searches(self) -> list[tuple[str, str, str]]:
        """(name, query, created_at) of every saved search, the newest first."""
        return [tuple(r) for r in self.conn.execute(
            "SELECT name, query, created_at FROM saved_searches ORDER BY created_at DESC, name")]

    def delete_saved_search(self, name: str) -> bool:
        with self.transaction():
            return self.conn.execute("DELETE FROM saved_searches WHERE name=?", (name,)).rowcount > 0

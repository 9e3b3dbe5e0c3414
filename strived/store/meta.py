"""The ``meta`` table (JSON values by key: schema and content versions, creation time, settings)
and the database's change stamp; a mixin of `Library`."""

from __future__ import annotations

import json
from typing import Any


class MetaMixin:
    def _meta_put(self, key: str, value: Any) -> None:
        self.conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
                          (key, json.dumps(value)))

    def meta_get(self, key: str, default: Any = None) -> Any:
        row = self.conn.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return default if row is None else json.loads(row[0])

    def meta_set(self, key: str, value: Any) -> None:
        with self.transaction():
            self._meta_put(key, value)

    @property
    def content_version(self) -> int:
        """Increases with every change to videos or tracks; derived caches key on it."""
        return int(self.meta_get("content_version", 0))

    def _bump(self) -> None:
        self.conn.execute("UPDATE meta SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT) "
                          "WHERE key='content_version'")

    def change_stamp(self) -> tuple[int, int]:
        """Changes whenever the database may have: (this connection's own writes: ``total_changes``,
        another connection's: ``PRAGMA data_version``)."""
        c = self.conn
        return (c.total_changes, c.execute("PRAGMA data_version").fetchone()[0])

"""The LLM answer cache's SQLite file (one table, ``answers``): the store side of
`strived.llm.cache` (the key is made there). A file of its own in the user's cache folder, not a
library's database."""

from __future__ import annotations

import datetime as _dt
import json
import sqlite3
import threading
from pathlib import Path


class LLMCache:
    """``get(key) -> dict | None``, ``put(key, stage, model, answer)``. Thread-safe; ``path=None``
    keeps the cache in memory only."""

    def __init__(self, path: str | Path | None):
        self.path = None if path is None else Path(path)
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(":memory:" if self.path is None else str(self.path),
                                     check_same_thread=False, timeout=5.0, isolation_level=None)
        self._conn.execute("PRAGMA journal_mode=WAL" if self.path else "PRAGMA journal_mode=MEMORY")
        self._conn.execute("CREATE TABLE IF NOT EXISTS answers (key TEXT PRIMARY KEY, stage TEXT, "
                           "model TEXT, answer TEXT, created_at TEXT)")

    def get(self, key: str) -> dict | None:
        with self._lock:
            row = self._conn.execute("SELECT answer FROM answers WHERE key=?", (key,)).fetchone()
        if row is None:
            return None
        try:
            return json.loads(row[0])
        except ValueError:
            return None

    def put(self, key: str, stage: str, model: str, answer) -> None:
        now = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
        with self._lock:
            self._conn.execute("INSERT OR REPLACE INTO answers VALUES (?,?,?,?,?)",
                               (key, stage, model, json.dumps(answer, ensure_ascii=False), now))

    def delete(self, key: str) -> None:
        """Drop one answer (a cached answer that no longer validates, e.g. after the schema got
        stricter: it must not be served again, offline or not)."""
        with self._lock:
            self._conn.execute("DELETE FROM answers WHERE key=?", (key,))

    def __len__(self) -> int:
        with self._lock:
            return self._conn.execute("SELECT COUNT(*) FROM answers").fetchone()[0]

    def clear(self, stage: str | None = None) -> None:
        with self._lock:
            if stage is None:
                self._conn.execute("DELETE FROM answers")
            else:
                self._conn.execute("DELETE FROM answers WHERE stage=?", (stage,))

    def close(self) -> None:
        with self._lock:
            self._conn.close()

"""The SQLite file of an embedding cache (`strived.evaluation.scale_build.CachedTextEmbedder`): float32
vectors by key, in one ``emb`` table."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np

_CHUNK = 900     # keys per statement (SQLite's limit of bound parameters is 999 in old builds)


class EmbeddingFile:
    def __init__(self, path: Path):
        self.db = sqlite3.connect(str(path))
        self.db.execute("CREATE TABLE IF NOT EXISTS emb(key TEXT PRIMARY KEY, vec BLOB)")

    def vectors(self, keys: list[str]) -> dict[str, np.ndarray]:
        """{key: float32 vector} of the ``keys`` (distinct) the file holds."""
        have: dict[str, np.ndarray] = {}
        for i in range(0, len(keys), _CHUNK):
            part = keys[i:i + _CHUNK]
            for k, b in self.db.execute(f"SELECT key, vec FROM emb WHERE key IN ({','.join('?' * len(part))})",
                                        part):
                have[k] = np.frombuffer(b, np.float32)
        return have

    def put(self, rows) -> None:
        """Store (key, vector bytes) rows, committed together."""
        with self.db:
            self.db.executemany("INSERT OR REPLACE INTO emb VALUES (?,?)", rows)

    def held(self, keys: list[str]) -> set[str]:
        """The ``keys`` (distinct) the file holds."""
        out = set()
        for i in range(0, len(keys), _CHUNK):
            part = keys[i:i + _CHUNK]
            out.update(k for (k,) in self.db.execute(
                f"SELECT key FROM emb WHERE key IN ({','.join('?' * len(part))})", part))
        return out

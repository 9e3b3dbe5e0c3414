"""The indexing state per source file (table ``files``): one row per video file the library knows,
with its fingerprint, status ('running', 'done', 'failed'), error and perception settings
(`strived.indexing.state` decides what to write; these are its statements)."""

from __future__ import annotations

from datetime import datetime, timezone

ROW_COLUMNS = ("path", "video_id", "size", "mtime", "hash", "status", "error", "config")


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def get_row(lib, path: str) -> dict | None:
    """``path``'s row as a dict of ROW_COLUMNS, None when the library does not know it."""
    row = lib.conn.execute("SELECT path, video_id, size, mtime, hash, status, error, config FROM files "
                           "WHERE path=?", (path,)).fetchone()
    if row is None:
        return None
    return dict(zip(ROW_COLUMNS, row))


def upsert(lib, path: str, **cols) -> None:
    """Insert or update ``path``'s row with ``cols`` and the time now (inside the caller's transaction)."""
    cols = {"path": path, **cols, "updated_at": _now()}
    names = ", ".join(cols)
    marks = ", ".join("?" for _ in cols)
    updates = ", ".join(f"{k}=excluded.{k}" for k in cols if k != "path")
    lib.conn.execute(f"INSERT INTO files({names}) VALUES ({marks}) ON CONFLICT(path) DO UPDATE SET {updates}",
                     tuple(cols.values()))


def touch(lib, path: str, size: int, mtime: float) -> None:
    """A new size and mtime for ``path``'s row (own transaction)."""
    with lib.transaction():
        lib.conn.execute("UPDATE files SET mtime=?, size=?, updated_at=? WHERE path=?",
                         (mtime, size, _now(), path))


def video_of_path(lib, path: str) -> str | None:
    """The video id the library holds for the file at ``path`` (its files row, else a video
    imported with that path), None when none."""
    row = lib.conn.execute("SELECT video_id FROM files WHERE path=?", (path,)).fetchone()
    if row:
        return row[0]
    row = lib.conn.execute("SELECT id FROM videos WHERE path=?", (path,)).fetchone()
    return row[0] if row else None


def move(lib, old_path: str, new_path: str, video_id: str) -> None:
    """``video_id``'s files row and video path moved from ``old_path`` to ``new_path`` (inside the
    caller's transaction); a row of that video already at ``new_path`` gives way."""
    lib.conn.execute("DELETE FROM files WHERE path=? AND video_id=?", (new_path, video_id))
    lib.conn.execute("UPDATE files SET path=? WHERE path=?", (new_path, old_path))
    lib.conn.execute("UPDATE videos SET path=? WHERE id=?", (new_path, video_id))


def video_paths(lib) -> dict[str, str]:
    """video id -> path, over every files row."""
    return {r[0]: r[1] for r in lib.conn.execute("SELECT video_id, path FROM files")}


def done_with_hash(lib) -> list[tuple[str, int, str]]:
    """(path, size, content hash) of every file indexed ('done') with a known hash."""
    return [(r[0], r[1], r[2]) for r in lib.conn.execute(
        "SELECT path, size, hash FROM files WHERE status='done' AND hash IS NOT NULL")]


def done_paths(lib) -> list[str]:
    """Paths of every file indexed ('done')."""
    return [r[0] for r in lib.conn.execute("SELECT path FROM files WHERE status='done'")]

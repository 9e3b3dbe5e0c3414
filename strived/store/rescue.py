"""Reading a damaged library for `strived check --salvage` (`strived.maintenance.salvage`): the
damaged database is only read, and never through its indexes.

An index may disagree with its table (an entry for a row that is gone, or whose rowid now holds
another video's row), and a video read through it comes back with another video's tracks. Each
table is scanned by rowid instead (a damaged page is stepped over one rowid at a time), and each
video's records are checked before they are copied: the tracks its row counts, all readable and
all its own, and arrays that agree (`VideoRecords.problem`).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from ..errors import LibraryError
from .codec import TRACK_COLS, VIDEO_COLS, records_from_rows
from .library import Library
from .schema import DB_NAME

# rowids tried one by one past damaged pages when the table's largest rowid cannot be read
_BLIND_PROBES = 100_000


def open_damaged(folder: Path) -> Library:
    """The library in ``folder`` opened read-only as it is: no schema check, no integrity check."""
    from urllib.parse import quote

    uri = "file:" + quote(str(folder / DB_NAME)) + "?mode=ro"
    try:
        conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
    except sqlite3.Error as e:
        raise LibraryError(f"cannot read {folder / DB_NAME} at all ({e})") from None
    lib = Library(folder, conn)
    lib.readonly, lib.readonly_reason = True, "damaged library opened for salvage"
    return lib


def scan_rows(lib, table: str, cols: str, where: str = "1"):
    """Yield (rowid, *cols) of every readable row of ``table`` in rowid order, from the table
    itself (NOT INDEXED); past a damaged page, rowids are tried one at a time up to the largest."""
    conn = lib.conn
    try:
        top = conn.execute(f"SELECT MAX(rowid) FROM {table}").fetchone()[0]
    except sqlite3.DatabaseError:
        top = None
    last = 0
    while True:
        try:
            for r in conn.execute(f"SELECT rowid, {cols} FROM {table} NOT INDEXED WHERE rowid > ? "
                                  f"AND ({where}) ORDER BY rowid", (last,)):
                last = r[0]
                yield r
            return
        except sqlite3.DatabaseError:
            pass
        end = top if top is not None else last + _BLIND_PROBES
        found = None
        for rowid in range(last + 1, end + 1):
            try:
                found = conn.execute(f"SELECT rowid, {cols} FROM {table} WHERE rowid = ? AND ({where})",
                                     (rowid,)).fetchone()
            except sqlite3.DatabaseError:
                continue
            if found is not None:
                break
        if found is None:
            return
        last = found[0]
        yield found


def read_video_at(lib, rowid: int, track_rowids: list[int]):
    """(records, None) of the video in row ``rowid`` with the tracks in ``track_rowids``, or
    (None, why it cannot be copied)."""
    conn = lib.conn
    r = conn.execute(f"SELECT n_tracks, {VIDEO_COLS} FROM videos WHERE rowid = ?", (rowid,)).fetchone()
    if r is None:
        return None, "its row cannot be read"
    rows = []
    for k in range(0, len(track_rowids), 500):
        part = track_rowids[k:k + 500]
        rows += conn.execute(f"SELECT video_id, {TRACK_COLS} FROM tracks WHERE rowid IN "
                             f"({','.join('?' * len(part))})", part).fetchall()
    rows = sorted((t[1:] for t in rows if t[0] == r[1]), key=lambda t: t[0])
    if r[0] is not None and len(rows) != r[0]:
        return None, f"{len(rows)} of its {r[0]} tracks can be read"
    rec = records_from_rows(r[1:], rows)
    why = rec.problem()
    return (None, f"its records are inconsistent ({why})") if why else (rec, None)


def copy_table(src, dst, table: str, where: str, videos: set[str] | None) -> int:
    """Copy the readable rows of ``table`` (only those of ``videos`` when given), by rowid."""
    have = {r[1] for r in dst.conn.execute(f"PRAGMA table_info({table})")}
    try:
        cols = [r[1] for r in src.conn.execute(f"PRAGMA table_info({table})") if r[1] in have]
    except sqlite3.DatabaseError:
        return 0
    if not cols:
        return 0
    sql = (f"INSERT OR REPLACE INTO {table}({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})")
    vcol = cols.index("video_id") if videos is not None else None
    n = 0
    with dst.transaction():
        for r in scan_rows(src, table, ", ".join(cols), where):
            if vcol is None or r[1 + vcol] in videos:
                dst.conn.execute(sql, r[1:])
                n += 1
    return n

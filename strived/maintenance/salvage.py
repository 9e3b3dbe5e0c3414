"""`salvage`: copy what can still be read of a damaged library into a new one (`strived check
--salvage NEW`). The damaged library is only read.

Nothing is read through the damaged database's indexes: an index may disagree with its table (an
entry for a row that is gone, or whose rowid now holds another video's row), and a video read
through it comes back with another video's tracks. Each table is scanned by rowid instead (a
damaged page is stepped over one rowid at a time), and each video's records are checked before
they are copied: the tracks its row counts, all readable and all its own, and arrays that agree
(`VideoRecords.problem`). A video that fails is skipped with the reason.
"""

from __future__ import annotations

import os
import sqlite3
from collections import Counter
from pathlib import Path

from ..errors import LibraryError
from ..store.library import DB_NAME, TRACK_COLS, VIDEO_COLS, Library, records_from_rows

# rowids tried one by one past damaged pages when the table's largest rowid cannot be read
_BLIND_PROBES = 100_000


def _raw_readonly(folder: Path) -> Library:
    from urllib.parse import quote

    uri = "file:" + quote(str(folder / DB_NAME)) + "?mode=ro"
    try:
        conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
    except sqlite3.Error as e:
        raise LibraryError(f"cannot read {folder / DB_NAME} at all ({e})") from None
    lib = Library(folder, conn)
    lib.readonly, lib.readonly_reason = True, "damaged library opened for salvage"
    return lib


def _scan(conn, table: str, cols: str, where: str = "1"):
    """Yield (rowid, *cols) of every readable row of ``table`` in rowid order, from the table
    itself (NOT INDEXED); past a damaged page, rowids are tried one at a time up to the largest."""
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


def _read_video(conn, rowid: int, track_rowids: list[int]):
    """(records, None) of the video in row ``rowid`` with the tracks in ``track_rowids``, or
    (None, why it cannot be copied)."""
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


def salvage(folder: str | os.PathLike, new_folder: str | os.PathLike, *, text_index: bool = True) -> dict:
    """Copy every video of the (damaged) library in ``folder`` that can still be read whole into
    a new library in ``new_folder``, with its thumbnail, caption and indexing state, and the
    marks, saved searches and export records that can be read. Returns {"folder", "videos",
    "total", "lost": [ids], "reasons": {id: why}}."""
    folder = Path(folder).expanduser().resolve()
    new_folder = Path(new_folder).expanduser().resolve()
    if new_folder == folder:
        raise LibraryError("salvage into a new folder, not into the damaged library itself")
    if (new_folder / DB_NAME).exists():
        raise LibraryError(f"{new_folder} already holds a library: salvage into a new, empty folder")
    src = _raw_readonly(folder)
    try:
        videos = [(r[0], r[1]) for r in _scan(src.conn, "videos", "id")]
        tracks_of: dict[str, list[int]] = {}
        for rowid, vid in _scan(src.conn, "tracks", "video_id"):
            tracks_of.setdefault(vid, []).append(rowid)
        reasons = {v: f"{n} rows carry this video id" for v, n in Counter(v for _, v in videos).items()
                   if n > 1}
        saved: set[str] = set()
        with Library.open(new_folder, create=True) as dst:
            for rowid, vid in videos:
                if vid in reasons:
                    continue
                try:
                    rec, why = _read_video(src.conn, rowid, tracks_of.get(vid, []))
                except (sqlite3.DatabaseError, ValueError, TypeError) as e:
                    rec, why = None, f"cannot be read ({e})"
                if rec is None:
                    reasons[vid] = why
                    continue
                dst.add_video(rec)
                saved.add(vid)
            done = "status='done'"
            for table, where, per_video in (("files", done, True), ("thumbnails", "1", True),
                                            ("captions", "1", True), ("marks", "1", False),
                                            ("saved_searches", "1", False), ("exports", "1", False)):
                _copy_table(src, dst, table, where, saved if per_video else None)
            if text_index and saved:
                from ..retrieval.sources import ensure_text_index

                ensure_text_index(dst)
        lost = sorted(reasons)
        return {"folder": str(new_folder), "videos": len(saved), "total": len(saved) + len(lost),
                "lost": lost, "reasons": {v: reasons[v] for v in lost}}
    finally:
        src.close()


def _copy_table(src, dst, table: str, where: str, videos: set[str] | None) -> int:
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
        for r in _scan(src.conn, table, ", ".join(cols), where):
            if vcol is None or r[1 + vcol] in videos:
                dst.conn.execute(sql, r[1:])
                n += 1
    return n

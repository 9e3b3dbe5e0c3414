"""`salvage`: copy what can still be read of a damaged library into a new one (`strived check
--salvage NEW`). The damaged library is only read.

Nothing is read through the damaged database's indexes: an index may disagree with its table (an
entry for a row that is gone, or whose rowid now holds another video's row), and a video read
through it comes back with another video's tracks. Each table is scanned by rowid instead (a
damaged page is stepped over one rowid at a time), and each video's records are checked before
they are copied: the tracks its row counts, all readable and all its own, and arrays that agree
(`VideoRecords.problem`). A video that fails is skipped with the reason. The reading is
`strived.store.rescue`'s.
"""

from __future__ import annotations

import os
import sqlite3
from collections import Counter
from pathlib import Path

from ..errors import LibraryError
from ..retrieval.sources import ensure_text_index
from ..store.library import DB_NAME, Library
from ..store.rescue import copy_table, open_damaged, read_video_at, scan_rows


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
    src = open_damaged(folder)
    try:
        videos = [(r[0], r[1]) for r in scan_rows(src, "videos", "id")]
        tracks_of: dict[str, list[int]] = {}
        for rowid, vid in scan_rows(src, "tracks", "video_id"):
            tracks_of.setdefault(vid, []).append(rowid)
        reasons = {v: f"{n} rows carry this video id" for v, n in Counter(v for _, v in videos).items()
                   if n > 1}
        saved: set[str] = set()
        with Library.open(new_folder, create=True) as dst:
            for rowid, vid in videos:
                if vid in reasons:
                    continue
                try:
                    rec, why = read_video_at(src, rowid, tracks_of.get(vid, []))
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
                copy_table(src, dst, table, where, saved if per_video else None)
            if text_index and saved:
                ensure_text_index(dst)
        lost = sorted(reasons)
        return {"folder": str(new_folder), "videos": len(saved), "total": len(saved) + len(lost),
                "lost": lost, "reasons": {v: reasons[v] for v in lost}}
    finally:
        src.close()

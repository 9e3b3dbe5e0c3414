"""`check_library`: is a library whole, and what to do when it is not (`strived check`).

It looks at, in order: SQLite's own integrity check of every page; rows that belong to no video
(tracks, texts, thumbnails, indexing state left by an old bug or a hand edit); videos whose track
count disagrees with their rows; the BM25 texts (a summary per video, built from its current
records); the dense index (every file hashed against its manifest on every check, built by the
library's embedder, covering the library); files the library points to that are gone; and
indexing runs that were interrupted.

``repair=True`` fixes what can be fixed in place on an intact database: orphan rows are deleted,
the texts and the dense index are brought up to date (a damaged dense index, or one built by
another embedder, is rebuilt from the library). A database that fails the integrity check is never
written: ``salvage_to`` copies every video that can still be read whole (`salvage`) into a new
library, or the footage is re-indexed into a new library.
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import LibraryCorruptError, LibraryError, LibraryLockedError, LibraryVersionError
from ..retrieval.dense import DenseIndexCorrupt, DenseIndexMismatch, verify_index_files
from ..retrieval.dense_audit import index_problems
from ..retrieval.sources import ensure_text_index, library_embedder, open_dense_index
from ..store.library import DB_NAME, Library
from ..store.upkeep import ORPHAN_TABLES
from .footage import MissingVideo, missing_videos
from .salvage import salvage


@dataclass
class CheckReport:
    folder: str
    open_error: str | None = None
    integrity: list[str] = field(default_factory=list)
    orphans: dict[str, int] = field(default_factory=dict)
    track_count_mismatch: list[str] = field(default_factory=list)
    texts_missing: int = 0
    texts_stale: int = 0
    dense: str = "not checked"         # ok | absent | damaged: ... | other embedder: ... | ...
    dense_lagging: int = 0
    dense_orphans: int = 0
    dense_foreign: str | None = None   # the other embedder that built the dense index
    dense_problems: list[str] = field(default_factory=list)   # unusable vectors, an unusable graph
    missing_files: list[MissingVideo] = field(default_factory=list)
    interrupted: int = 0               # files rows left 'running' by a killed run
    failed_files: int = 0
    repaired: list[str] = field(default_factory=list)
    salvage: dict | None = None
    advice: list[str] = field(default_factory=list)
    videos: int = 0

    @property
    def damaged(self) -> bool:
        return bool(self.open_error or self.integrity)

    @property
    def ok(self) -> bool:
        """Nothing wrong (missing files and failed videos are reported but are the footage's state)."""
        return not (self.damaged or any(self.orphans.values()) or self.track_count_mismatch
                    or self.texts_missing or self.texts_stale or self.dense_lagging
                    or self.dense_orphans or self.dense.startswith("damaged") or self.dense_foreign
                    or self.dense_problems)

    def to_dict(self) -> dict:
        d = dict(self.__dict__)
        d["missing_files"] = [{"video_id": m.video_id, "path": m.path} for m in self.missing_files]
        d["ok"], d["damaged"] = self.ok, self.damaged
        return d

    def lines(self) -> list[str]:
        """The report as text, one finding per line."""
        out = [f"library {self.folder}: {self.videos or 'unknown number of'} videos"
               if self.damaged else f"library {self.folder}: {self.videos} videos"]
        if self.open_error:
            out.append(f"DAMAGED: cannot open it: {self.open_error}")
        if self.integrity:
            out.append(f"DAMAGED: the database fails SQLite's integrity check ({len(self.integrity)} "
                       f"problem{'s' if len(self.integrity) > 1 else ''}):")
            out += [f"  {p}" for p in self.integrity[:10]]
        elif not self.open_error:
            out.append("database integrity: ok")
        for t, n in self.orphans.items():
            if n:
                out.append(f"{n} {t} row{'s' if n > 1 else ''} belong to no video")
        if self.track_count_mismatch:
            out.append(f"{len(self.track_count_mismatch)} videos have a track count that disagrees "
                       f"with their tracks (e.g. {self.track_count_mismatch[0]})")
        if self.texts_missing or self.texts_stale:
            out.append(f"BM25 texts: {self.texts_missing} videos without one, {self.texts_stale} older "
                       "than their records")
        elif not self.damaged:
            out.append("BM25 texts: up to date")
        out.append(f"dense index: {self.dense}" + (f", {self.dense_lagging} videos not (re)embedded yet"
                                                    if self.dense_lagging else "")
                   + (f", {self.dense_orphans} removed videos still in it" if self.dense_orphans else ""))
        out += [f"  {p}" for p in self.dense_problems]
        if self.missing_files:
            out.append(f"{len(self.missing_files)} video files are gone (moved or deleted):")
            out += [f"  {m.video_id}: {m.path}" for m in self.missing_files[:10]]
            if len(self.missing_files) > 10:
                out.append(f"  ... and {len(self.missing_files) - 10} more")
        if self.interrupted:
            out.append(f"{self.interrupted} videos were being indexed when a run stopped (the next "
                       "`strived index` of their folder redoes them)")
        if self.failed_files:
            out.append(f"{self.failed_files} files failed to index (see `strived index`; "
                       "--retry-failed retries them)")
        out += [f"repaired: {r}" for r in self.repaired]
        if self.salvage is not None:
            s = self.salvage
            out.append(f"salvaged {s['videos']} of {s['total']} videos into {s['folder']}")
            if s["lost"]:
                out.append(f"skipped {len(s['lost'])} video{'s' if len(s['lost']) > 1 else ''} that "
                           "cannot be read whole (re-index or re-import them):")
                out += [f"  {v}: {s['reasons'].get(v, 'unreadable')}" for v in s["lost"][:10]]
                if len(s["lost"]) > 10:
                    out.append(f"  ... and {len(s['lost']) - 10} more")
        out += [f"advice: {a}" for a in self.advice]
        return out


def check_library(folder: str | os.PathLike, *, repair: bool = False, salvage_to: str | None = None,
                  text_index: bool = True) -> CheckReport:
    """Check the library in ``folder`` (see the module docstring). ``repair`` fixes an intact
    library in place; ``salvage_to`` copies what can be read of a damaged one into a new
    library there. ``text_index`` lets repair and salvage (re)build the BM25/dense indexes."""
    folder = Path(folder).expanduser().resolve()
    rep = CheckReport(str(folder))
    if not (folder / DB_NAME).is_file():
        raise LibraryError(f"no STRIVE-D library in {folder} (expected {DB_NAME})")
    try:
        # an ordinary open (a library of an older schema is upgraded as by any command; a
        # read-only one is opened read-only); the pages are checked below, in full
        lib = Library.open(folder, check=False)
    except LibraryCorruptError as e:
        rep.open_error = str(e)
        lib = None
    except (LibraryVersionError, LibraryLockedError):
        raise  # not damage: the message says what to do
    except LibraryError as e:
        if "not a valid" not in str(e) and "schema version" not in str(e):
            raise
        rep.open_error = str(e)
        lib = None
    try:
        if lib is not None:
            rep.integrity = lib.integrity_problems(full=True)
        if rep.damaged:
            rep.dense = "not checked (the database is damaged)"
            try:
                rep.videos = len(lib) if lib is not None else 0
            except sqlite3.DatabaseError:
                pass
            _advise_damaged(rep, folder, salvage_to)
            if salvage_to:
                rep.salvage = salvage(folder, salvage_to, text_index=text_index)
            return rep
        _check_rows(lib, rep)
        _check_texts(lib, rep)
        if repair:
            _repair(lib, rep, text_index)
        _advise(rep, folder, repair)
        return rep
    finally:
        if lib is not None:
            lib.close()


def _check_rows(lib, rep: CheckReport) -> None:
    rep.videos = len(lib)
    rep.orphans.update(lib.orphan_counts())
    rep.track_count_mismatch = lib.track_count_mismatches()
    rep.missing_files = missing_videos(lib)
    rep.interrupted = lib.count_files("running")
    rep.failed_files = lib.count_files("failed")


def _check_texts(lib, rep: CheckReport) -> None:
    rep.texts_missing = lib.count_texts_missing()
    rep.texts_stale = lib.count_texts_stale()
    dense_dir = lib.folder / "dense"
    rep.dense_foreign, rep.dense_problems = None, []
    try:
        meta = verify_index_files(dense_dir)   # every file hashed, every check: bit rot included
    except DenseIndexCorrupt as e:
        rep.dense = f"damaged: {e.reason}"
        return
    if meta is None:
        rep.dense = "absent" + (" (built by the next indexing or import)" if len(lib) else "")
        return
    try:
        idx = open_dense_index(lib, library_embedder(lib))
    except DenseIndexCorrupt as e:
        rep.dense = f"damaged: {e.reason}"
        return
    except DenseIndexMismatch as e:
        b, w = e.built, e.wanted
        rep.dense_foreign = f"{b.get('embedder')} {b.get('dim')}-d"
        rep.dense = (f"built by another embedder ({rep.dense_foreign}), not the library's "
                     f"({w.get('embedder')} {w.get('dim')}-d): searches cannot use it")
        return
    except Exception as e:  # noqa: BLE001  (no embedder installed: the files can still be checked)
        rep.dense = f"not checked against the library ({type(e).__name__}: {e})"
        return
    stamps = lib.summary_stamps()
    every = idx.meta.get("kind") == "text-of-perception"
    rep.dense_lagging = sum(1 for v, st in stamps.items() if idx.stamps.get(v) != st and (every or v in idx.stamps))
    rep.dense_orphans = sum(1 for v in idx.stamps if v not in stamps)
    rep.dense = f"ok ({len(idx)} segments of {len(idx.stamps)} videos, {idx.meta.get('embedder')})"

    rep.dense_problems = index_problems(dense_dir)     # vectors and graph validated (issue 37)
    if rep.dense_problems:
        rep.dense = f"{len(rep.dense_problems)} problem(s) in {len(idx.stamps)} videos"


def _repair(lib, rep: CheckReport, text_index: bool) -> None:
    if lib.readonly:
        rep.advice.append(f"cannot repair: {lib.readonly_reason}")
        return
    if any(rep.orphans.values()):
        lib.delete_orphans([t for t in ORPHAN_TABLES if rep.orphans.get(t)])
        rep.repaired.append("deleted " + ", ".join(f"{n} {t}" for t, n in rep.orphans.items() if n)
                            + " rows that belonged to no video")
        rep.orphans = {t: 0 for t in rep.orphans}
    if rep.track_count_mismatch:
        lib.recount_tracks()
        rep.repaired.append(f"recounted the tracks of {len(rep.track_count_mismatch)} videos")
        rep.track_count_mismatch = []
    need_texts = rep.texts_missing or rep.texts_stale or rep.dense_lagging or rep.dense_orphans \
        or rep.dense.startswith("damaged") or rep.dense.startswith("absent") or rep.dense_foreign \
        or rep.dense_problems
    if need_texts and text_index and (len(lib) or rep.dense_foreign):
        foreign = rep.dense_foreign
        damaged = rep.dense.startswith("damaged") or bool(rep.dense_problems)
        # rebuilt, not extended: the damage found by hashing every file may be invisible to the
        # open (a file whose stat is unchanged since it was verified is not hashed there)
        r = ensure_text_index(lib, rebuild_dense=bool(foreign) or damaged)
        what = f"brought the BM25 texts ({r.texts_built} rebuilt)"
        if r.dense_unavailable:
            what += f" up to date; dense index unavailable: {r.dense_unavailable}"
        else:
            how = (f"rebuilt with {r.embedder}: it was built by {foreign}" if foreign else
                   "rebuilt: it was damaged" if damaged or r.dense_rebuilt else f"{r.dense_embedded} embedded")
            what += f" and the dense index ({how}, {r.dense_removed} removed) up to date"
        rep.repaired.append(what)
        _check_texts(lib, rep)
        if rep.dense_foreign:
            rep.advice.append(
                f"the dense index was built by {rep.dense_foreign}; rebuilding it needs the library's "
                f"embedder, which cannot be loaded here: {r.dense_unavailable}. Then run `strived "
                "check --repair` again (searches use BM25 and the rules meanwhile)")


def _advise(rep: CheckReport, folder: Path, repair: bool) -> None:
    if not repair and not rep.ok:
        rep.advice.append(f"`strived check --repair --library {folder}` fixes the rows and indexes above")
    if rep.missing_files:
        rep.advice.append("for moved footage: `strived relink OLD_FOLDER NEW_FOLDER` (or index the new "
                          "folder: moved files are recognised by content); to drop them: "
                          "`strived remove --missing`")


def _advise_damaged(rep: CheckReport, folder: Path, salvage_to: str | None) -> None:
    rep.advice.append("the database is damaged and is not written to. Copy what can be read into a "
                      f"new library: `strived check --library {folder} --salvage NEW_FOLDER`, then "
                      "search NEW_FOLDER (re-index the footage into it to recover videos that could "
                      "not be read: `strived index FOOTAGE --library NEW_FOLDER`)")
    rep.advice.append("or re-index everything into a new library: `strived index FOOTAGE --library "
                      "NEW_FOLDER` (and `strived import` for records-only videos)")
    rep.advice.append(f"keep {folder / DB_NAME} until the new library is complete")

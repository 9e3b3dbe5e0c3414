"""A library: one folder with ``library.sqlite`` (videos, tracks, indexing state...), ``cache/``
(derived column/feature caches, safe to delete) and ``dense/`` (vector index files).

`Library` opens (or creates) it, checks it, and runs write transactions; each table's statements
live in a module of their own, mixed into `Library`: `videos` (records and thumbnails), `profiles`
(per-video answers from the attrs, the overview, counts), `texts` (captions, summaries, segments),
`marks` (relevance marks, saved searches), `exports` (exported clips), `meta`, `upkeep` (orphans,
track counts, the files table). Every write of a video (its row and all its tracks) happens in one
SQLite transaction, so a crash or a kill never leaves half a video.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import sqlite3
from pathlib import Path
from typing import Iterator

from ..errors import (LibraryCorruptError, LibraryError, LibraryLockedError, LibraryReadOnlyError,
                      LibraryVersionError)
from .codec import _now
from .exports import ExportsMixin
from .marks import MarksMixin
from .meta import MetaMixin
from .profiles import ProfilesMixin
from .schema import DB_NAME, INDEXES, MIGRATIONS, OPTIONAL_TABLES, SCHEMA_VERSION, TABLES
from .texts import TextsMixin
from .upkeep import UpkeepMixin
from .videos import VideosMixin


# Opening a database up to this size runs SQLite's integrity check first (every page, and every
# index against its table); a larger one is checked before its first write instead. Measured from
# the page cache: 55 ms for 253 MiB (500 videos of 40 tracks; quick_check, pages only: 51 ms), 65 ms
# for 3,000 videos of 40 tracks (120k rows; quick_check 42 ms): the index part is ~0.2 us a row.
OPEN_CHECK_MAX_BYTES = 256 << 20


def _locked(e: sqlite3.OperationalError) -> bool:
    return "locked" in str(e).lower() or "busy" in str(e).lower()


def _malformed(e: sqlite3.DatabaseError) -> bool:
    m = str(e).lower()
    return "malformed" in m or "corrupt" in m or "file is not a database" in m


def _readonly_error(e: sqlite3.Error) -> bool:
    m = str(e).lower()
    return "readonly" in m or "read-only" in m or "unable to open database" in m


def _can_write(folder: Path, db_path: Path) -> bool:
    """Whether this process may write the database and its journal beside it."""
    return os.access(folder, os.W_OK | os.X_OK) and (not db_path.exists() or os.access(db_path, os.W_OK))


def _connect_readonly(db_path: Path, timeout_s: float) -> sqlite3.Connection:
    """A read-only connection. A WAL database in a folder we cannot write has no shared-memory
    file to open; it is then read as immutable (nobody can write it either)."""
    from urllib.parse import quote

    uri = "file:" + quote(str(db_path)) + "?mode=ro"
    conn = sqlite3.connect(uri, uri=True, timeout=timeout_s, isolation_level=None,
                           check_same_thread=False)
    try:
        conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
        return conn
    except sqlite3.OperationalError as e:
        conn.close()
        if _locked(e):
            raise
    return sqlite3.connect(uri + "&immutable=1", uri=True, timeout=timeout_s, isolation_level=None,
                           check_same_thread=False)


class Library(VideosMixin, ProfilesMixin, TextsMixin, MarksMixin, ExportsMixin, MetaMixin,
              UpkeepMixin):
    """A STRIVE-D library folder. Use `Library.open(folder, create=True)`."""

    def __init__(self, folder: Path, conn: sqlite3.Connection):
        self.folder = folder
        self.conn = conn
        self._db = None
        self._depth = 0
        self.readonly = False          # opened read-only: searches work, writes raise
        self.readonly_reason = ""
        self._intact = False           # integrity checked once before the first write

    @property
    def db(self):
        """The sqlite-utils view of the database (imported on first use: it is slow to import)."""
        if self._db is None:
            import sqlite_utils

            self._db = sqlite_utils.Database(self.conn)
        return self._db

    # ------------------------------------------------------------------ lifecycle
    @classmethod
    def open(cls, folder: str | os.PathLike, create: bool = False, timeout_s: float = 5.0,
             readonly: bool | None = None, check: bool = True) -> "Library":
        """Open (or with ``create=True`` create) the library in ``folder``.

        ``readonly``: None (default) opens read-only by itself when the folder or the database
        cannot be written (a read-only disk, another user's library): searching works, and any
        write raises LibraryReadOnlyError saying why; True never writes.

        Raises LibraryError when the folder holds no library (and create is False) or cannot be
        used, LibraryVersionError for an older/newer schema, LibraryLockedError when another
        process holds the write lock past ``timeout_s``, LibraryCorruptError when the database
        is damaged (``check``: a database up to OPEN_CHECK_MAX_BYTES is checked in full at open;
        any database is checked before its first write).
        """
        folder = Path(folder).expanduser().resolve()
        db_path = folder / DB_NAME
        exists = db_path.exists()
        if not exists and not create:
            raise LibraryError(f"no STRIVE-D library in {folder} (expected {DB_NAME}); "
                               "create one with `strived import RECORDS --library FOLDER` or "
                               "`strived index VIDEOS --library FOLDER`")
        if folder.exists() and not folder.is_dir():
            raise LibraryError(f"{folder} exists and is not a folder")
        why_ro = ""
        if readonly is None and exists and not _can_write(folder, db_path):
            why_ro = "no write permission on its folder or database, or a read-only disk"
        elif readonly:
            why_ro = "opened read-only"
        if why_ro and not exists:
            raise LibraryReadOnlyError(str(folder), why_ro, message=(
                f"no STRIVE-D library in {folder}, and it cannot be created read-only"))
        conn = None
        for attempt in range(2):
            try:
                if why_ro:
                    conn = _connect_readonly(db_path, timeout_s)
                else:
                    folder.mkdir(parents=True, exist_ok=True)
                    conn = sqlite3.connect(str(db_path), timeout=timeout_s, isolation_level=None,
                                           check_same_thread=False)
            except OSError as e:
                if isinstance(e, PermissionError) or e.errno == errno.EROFS:
                    raise LibraryReadOnlyError(str(folder), e.strerror, message=(
                        f"cannot create a library in {folder}: the folder or disk is read-only "
                        f"({e.strerror}); choose a folder you can write to")) from None
                raise LibraryError(f"cannot open library {folder}: {e}") from None
            except sqlite3.Error as e:
                raise LibraryError(f"cannot open library {folder}: {e}") from None
            lib = cls(folder, conn)
            lib.readonly, lib.readonly_reason = bool(why_ro), why_ro
            try:
                lib._init_schema(new=not exists)
                if check and exists and db_path.stat().st_size <= OPEN_CHECK_MAX_BYTES:
                    lib.ensure_intact()
                return lib
            except LibraryCorruptError:
                conn.close()
                raise
            except sqlite3.OperationalError as e:
                conn.close()
                if _locked(e):
                    raise LibraryLockedError(str(folder)) from None
                if not why_ro and exists and readonly is None and _readonly_error(e) and attempt == 0:
                    # permissions said yes but the disk said no (a read-only mount seen as root)
                    why_ro = f"the database cannot be written ({e})"
                    continue
                raise LibraryError(f"cannot open library {folder}: {e}") from None
            except sqlite3.DatabaseError as e:
                conn.close()
                if _malformed(e) and "file is not a database" not in str(e).lower():
                    raise LibraryCorruptError(str(folder), str(e)) from None
                raise LibraryError(f"{db_path} is not a valid STRIVE-D library database ({e})") from None
            except BaseException:
                conn.close()
                raise
        raise AssertionError("unreachable")

    def _init_schema(self, new: bool) -> None:
        c = self.conn
        if new:
            c.execute("PRAGMA page_size=16384")
        # look before changing anything: a foreign SQLite file is refused untouched (no WAL switch)
        tables = {r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if tables and "meta" not in tables:
            raise LibraryError(f"{self.folder / DB_NAME} is an SQLite file but not a STRIVE-D "
                               "library (nothing was changed)")
        found = None
        if "meta" in tables:
            row = c.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
            try:
                found = int(json.loads(row[0])) if row else 0
            except (TypeError, ValueError, OverflowError):
                raise LibraryError(f"{self.folder / DB_NAME} has an unreadable schema version "
                                   f"({row[0]!r}): it was not written by STRIVE-D, or it is damaged "
                                   "(nothing was changed)") from None
            if found > SCHEMA_VERSION or (found < SCHEMA_VERSION and not all(
                    v in MIGRATIONS for v in range(found, SCHEMA_VERSION))):
                raise LibraryVersionError(str(self.folder), found, SCHEMA_VERSION)
        if self.readonly:
            c.execute("PRAGMA query_only=ON")
            if found is None or found != SCHEMA_VERSION or not set(TABLES) - OPTIONAL_TABLES <= tables:
                raise LibraryReadOnlyError(str(self.folder), self.readonly_reason + "; it needs an "
                                           "upgrade to this STRIVE-D's format, which means writing it")
            return
        c.execute("PRAGMA journal_mode=WAL")
        c.execute("PRAGMA synchronous=NORMAL")
        c.execute("PRAGMA foreign_keys=ON")
        if found is not None:
            if found < SCHEMA_VERSION:
                self._migrate(found)
            if set(TABLES) - OPTIONAL_TABLES <= tables:
                return  # the common case: nothing to create, and no sqlite-utils import
        with self.transaction():
            for name, (cols, opts) in TABLES.items():
                if name not in tables:
                    self.db[name].create(cols, pk=opts["pk"])
            for table, cols in INDEXES:
                self.db[table].create_index(cols, if_not_exists=True)
            if "meta" not in tables:
                self._meta_put("schema_version", SCHEMA_VERSION)
                self._meta_put("created_at", _now())
                self._meta_put("content_version", 0)
            if "exports" not in tables:
                self._import_legacy_exports()   # (an optional table is otherwise made on first use)

    def _migrate(self, found: int) -> None:
        for v in range(found, SCHEMA_VERSION):
            with self.transaction():
                for table, column, typ in MIGRATIONS[v]:
                    have = {r[1] for r in self.conn.execute(f"PRAGMA table_info({table})")}
                    if column not in have:
                        self.conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {typ}")
                self._meta_put("schema_version", v + 1)

    def close(self) -> None:
        try:
            self.conn.close()
        except sqlite3.Error:
            pass

    def __enter__(self) -> "Library":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def cache_dir(self) -> Path:
        """Derived caches (safe to delete). A read-only library keeps them in the user's cache
        folder ($STRIVED_CACHE or $XDG_CACHE_HOME/strived), one folder per library path."""
        if self.readonly:
            import hashlib

            base = os.environ.get("STRIVED_CACHE") or os.path.join(
                os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "strived")
            p = Path(base) / "readonly-libraries" / hashlib.sha1(str(self.folder).encode()).hexdigest()[:16]
            p.mkdir(parents=True, exist_ok=True)
            return p
        p = self.folder / "cache"
        p.mkdir(exist_ok=True)
        return p

    @property
    def dense_dir(self) -> Path:
        p = self.folder / "dense"
        if not self.readonly:
            p.mkdir(exist_ok=True)
        return p

    # ------------------------------------------------------------------ integrity
    def integrity_problems(self, full: bool = False, max_errors: int = 20) -> list[str]:
        """SQLite's own check of every page (``quick_check``; ``full`` adds index contents:
        ``integrity_check``). Returns the problems found, [] when the database is intact."""
        pragma = "integrity_check" if full else "quick_check"
        try:
            rows = self.conn.execute(f"PRAGMA {pragma}({int(max_errors)})").fetchall()
        except sqlite3.DatabaseError as e:
            return [str(e)]
        out = [r[0] for r in rows if r and r[0] != "ok"]
        return out

    def ensure_intact(self) -> None:
        """Raise LibraryCorruptError when the database fails SQLite's integrity check (run once per
        open library; every write transaction calls it first, so a damaged library is never
        written into). The full check, not ``quick_check``: that one passes an index whose entries
        disagree with its table (a row gone from the table but not from its index), into which a
        write adds a video before failing."""
        if self._intact:
            return
        problems = self.integrity_problems(full=True)
        if problems:
            more = f" and {len(problems) - 1} more" if len(problems) > 1 else ""
            raise LibraryCorruptError(str(self.folder), f"{problems[0]}{more}")
        self._intact = True

    def ensure_writable(self) -> None:
        """Raise LibraryReadOnlyError (opened read-only) or LibraryCorruptError (damaged)."""
        if self.readonly:
            raise LibraryReadOnlyError(str(self.folder), self.readonly_reason)
        self.ensure_intact()

    @contextlib.contextmanager
    def transaction(self) -> Iterator["Library"]:
        """One SQLite write transaction (nested calls become savepoints); rollback on any error.
        The write lock is taken at the start (BEGIN IMMEDIATE), so a busy library fails early with
        LibraryLockedError instead of half-way through."""
        c = self.conn
        if not c.in_transaction:
            self.ensure_writable()
        try:
            if c.in_transaction:
                sp = f"sp{id(self)}_{self._depth}"
                self._depth += 1
                c.execute(f"SAVEPOINT {sp}")
                try:
                    yield self
                except BaseException:
                    if c.in_transaction:
                        c.execute(f"ROLLBACK TO SAVEPOINT {sp}")
                        c.execute(f"RELEASE SAVEPOINT {sp}")
                    raise
                else:
                    c.execute(f"RELEASE SAVEPOINT {sp}")
                finally:
                    self._depth -= 1
            else:
                c.execute("BEGIN IMMEDIATE")
                try:
                    yield self
                except BaseException:
                    if c.in_transaction:
                        c.execute("ROLLBACK")
                    raise
                else:
                    c.execute("COMMIT")
        except sqlite3.OperationalError as e:
            if _locked(e):
                raise LibraryLockedError(str(self.folder)) from None
            if "readonly" in str(e).lower():
                raise LibraryReadOnlyError(str(self.folder), str(e)) from None
            if "disk is full" in str(e).lower():
                raise LibraryError(f"the disk is full while writing library {self.folder}: nothing "
                                   "of this change was written; free some space and run it again") from None
            raise
        except sqlite3.DatabaseError as e:
            if _malformed(e):
                raise LibraryCorruptError(str(self.folder), str(e)) from None
            raise

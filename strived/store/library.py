"""A library: one folder with ``library.sqlite`` (videos, tracks, indexing state...), ``cache/``
(derived column/feature caches, safe to delete) and ``dense/`` (vector index files).

Every write of a video (its row and all its tracks) happens in one SQLite transaction, so a crash
or a kill never leaves half a video: the next run sees either the old state or the new one.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import errno
import json
import os
import sqlite3
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from ..errors import (LibraryCorruptError, LibraryError, LibraryLockedError, LibraryReadOnlyError,
                      LibraryVersionError)
from ..records import EGO_FIELDS, OBJECT_FIELDS, Track, VideoInfo, VideoRecords
from .schema import INDEXES, MIGRATIONS, OPTIONAL_TABLES, SCHEMA_VERSION, TABLES, VIDEO_CHILD_TABLES

DB_NAME = "library.sqlite"
# Opening a database up to this size runs SQLite's integrity check first (every page, and every
# index against its table); a larger one is checked before its first write instead. Measured from
# the page cache: 55 ms for 253 MiB (500 videos of 40 tracks; quick_check, pages only: 51 ms), 65 ms
# for 3,000 videos of 40 tracks (120k rows; quick_check 42 ms): the index part is ~0.2 us a row.
OPEN_CHECK_MAX_BYTES = 256 << 20


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def _blob(a: np.ndarray, dtype) -> bytes:
    return np.ascontiguousarray(a, dtype=np.dtype(dtype).newbyteorder("<")).tobytes()


def _arr(b: bytes | None, dtype) -> np.ndarray:
    if b is None:
        return np.zeros(0, dtype)
    return np.frombuffer(b, dtype=np.dtype(dtype).newbyteorder("<")).astype(dtype, copy=False)


_EGO_COLS = ", ".join(f"ego_{k}" for k in EGO_FIELDS)


def _ego_arr(b: bytes | None, n: int) -> np.ndarray:
    """An ego series from its BLOB; a column written before the field existed (NULL after a
    migration) reads as all-NaN: not estimated, never zero."""
    if b is None:
        return np.full(n, np.nan)
    return _arr(b, np.float64).copy()


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


class Library:
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

    # ------------------------------------------------------------------ meta
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

    # ------------------------------------------------------------------ videos
    def add_video(self, rec: VideoRecords, replace: bool = True) -> None:
        """Store a video's records (row + all tracks) atomically."""
        from ..availability import complete_availability

        v = rec.info
        v.attrs["availability"] = complete_availability(rec)
        with self.transaction():
            exists = self.conn.execute("SELECT 1 FROM videos WHERE id=?", (v.id,)).fetchone()
            if exists:
                if not replace:
                    raise LibraryError(f"video {v.id!r} is already in the library")
                self._delete_video_rows(v.id, keep_children=("summaries", "segments", "thumbnails"))
            self._bump()
            rev = self.content_version  # identifies this write of the video (derived caches key on it)
            self.conn.execute(
                "INSERT INTO videos(id, path, fps, n_frames, width, height, source, duration_s, "
                f"n_samples, n_tracks, frame_idx, t, {_EGO_COLS}, attrs, added_at, rev) "
                f"VALUES (?,?,?,?,?,?,?,?,?,?,?,?,{','.join('?' * len(EGO_FIELDS))},?,?,?)",
                (v.id, v.path, v.fps, v.n_frames, v.width, v.height, v.source, rec.duration_s,
                 len(rec.t), len(rec.tracks), _blob(rec.frame_idx, np.int64), _blob(rec.t, np.float64),
                 *(_blob(rec.ego[k], np.float64) for k in EGO_FIELDS), json.dumps(v.attrs), _now(), rev))
            self.conn.executemany(
                "INSERT INTO tracks(video_id, track, cls, n, pos, distance, loc_x, loc_z, lane_rel, "
                "bbox_area, score, bbox, attrs) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                [(v.id, tr.track_id, tr.cls, len(tr), _blob(tr.pos, np.int32),
                  *(_blob(tr.fields[f], np.float32) for f in OBJECT_FIELDS),
                  None if tr.bbox is None else _blob(tr.bbox, np.float32),
                  json.dumps(tr.attrs) if tr.attrs else None) for tr in rec.tracks])

    def add_videos(self, recs, replace: bool = True) -> int:
        """Store many videos in one transaction (fast bulk import). Returns the count."""
        n = 0
        with self.transaction():
            for rec in recs:
                self.add_video(rec, replace=replace)
                n += 1
        return n

    def _delete_video_rows(self, video_id: str, keep_children=()) -> None:
        for t in VIDEO_CHILD_TABLES:
            if t not in keep_children:
                self.conn.execute(f"DELETE FROM {t} WHERE video_id=?", (video_id,))
        self.conn.execute("DELETE FROM tracks WHERE video_id=?", (video_id,))
        self.conn.execute("DELETE FROM videos WHERE id=?", (video_id,))

    def remove_video(self, video_id: str) -> None:
        with self.transaction():
            self._delete_video_rows(video_id)
            self.conn.execute("DELETE FROM files WHERE video_id=?", (video_id,))
            self._bump()

    def has_video(self, video_id: str) -> bool:
        return self.conn.execute("SELECT 1 FROM videos WHERE id=?", (video_id,)).fetchone() is not None

    def video_ids(self) -> list[str]:
        return [r[0] for r in self.conn.execute("SELECT id FROM videos ORDER BY id")]

    def __len__(self) -> int:
        return self.conn.execute("SELECT COUNT(*) FROM videos").fetchone()[0]

    def video_extents(self, video_ids) -> dict[str, tuple]:
        """video id -> (n_frames, duration_s) (a clip's lead-out must stay inside its video)."""
        ids = list(dict.fromkeys(video_ids))
        out: dict[str, tuple] = {}
        for k in range(0, len(ids), 500):
            part = ids[k:k + 500]
            rows = self.conn.execute(
                f"SELECT id, n_frames, duration_s FROM videos WHERE id IN ({','.join('?' * len(part))})",
                part).fetchall()
            out.update({r[0]: (r[1], r[2]) for r in rows})
        return out

    def list_videos(self) -> list[dict]:
        rows = self.conn.execute(
            "SELECT id, path, fps, n_frames, width, height, duration_s, source, n_tracks, attrs "
            "FROM videos ORDER BY id").fetchall()
        keys = ("id", "path", "fps", "n_frames", "width", "height", "duration_s", "source",
                "n_tracks", "attrs")
        out = []
        for r in rows:
            d = dict(zip(keys, r))
            d["attrs"] = json.loads(d["attrs"]) if d["attrs"] else {}
            out.append(d)
        return out

    def video_path(self, video_id: str) -> str | None:
        """The video file of ``video_id`` (None: records only, or no such video)."""
        r = self.conn.execute("SELECT path FROM videos WHERE id=?", (video_id,)).fetchone()
        return r[0] if r else None

    def overview(self, limit: int = 5000) -> list[dict]:
        """What a user browses before any search, per video (by id, at most ``limit``): path,
        duration, tracks per class, whether ego speed is known (and its source or why not), day or
        night, and whether a thumbnail is stored."""
        vids = self.conn.execute(
            "SELECT id, path, duration_s, n_tracks, json_extract(attrs, '$.daynight'), "
            "json_extract(attrs, '$.speed_source'), json_extract(attrs, '$.availability') "
            "FROM videos ORDER BY id LIMIT ?", (int(limit),)).fetchall()
        if not vids:
            return []
        counts: dict[str, dict[str, int]] = {}
        last = vids[-1][0]
        for vid, cls, n in self.conn.execute("SELECT video_id, cls, COUNT(*) FROM tracks WHERE video_id <= ? "
                                             "GROUP BY video_id, cls", (last,)):
            counts.setdefault(vid, {})[cls] = int(n)
        thumbs = self.thumbnail_ids()
        out = []
        for vid, path, dur, n_tracks, dn, speed_src, av in vids:
            try:
                speed = (json.loads(av) or {}).get("speed") if av else None
            except ValueError:
                speed = None
            speed = speed if isinstance(speed, dict) else {}
            out.append({"id": vid, "path": path, "duration_s": dur, "n_tracks": n_tracks,
                        "classes": dict(sorted(counts.get(vid, {}).items(), key=lambda kv: -kv[1])),
                        "daynight": dn,
                        # availability (strived.availability): None when the video predates it
                        "speed_status": speed.get("status"), "speed_coverage": speed.get("coverage"),
                        "speed_source": speed.get("source") or speed_src, "speed_reason": speed.get("reason"),
                        "thumbnail": vid in thumbs})
        return out

    def get_video(self, video_id: str, track_ids=None) -> VideoRecords:
        """Rebuild a video's records; ``track_ids`` limits the tracks read (None = all; the
        result lists get only those). Raises KeyError if absent."""
        r = self.conn.execute(f"SELECT {VIDEO_COLS} FROM videos WHERE id=?", (video_id,)).fetchone()
        if r is None:
            raise KeyError(video_id)
        sql = f"SELECT {TRACK_COLS} FROM tracks WHERE video_id=?"
        args: list = [video_id]
        if track_ids is not None:
            ids = [int(t) for t in track_ids]
            sql += f" AND track IN ({','.join('?' * len(ids))})"
            args += ids
        return records_from_rows(r, self.conn.execute(sql + " ORDER BY track", args))

    # ------------------------------------------------------------------ bulk column access
    def iter_track_rows(self, fields=OBJECT_FIELDS):
        """Yield (video_id, track, cls, pos bytes, {field: bytes}) for every track, ordered by video."""
        cols = ", ".join(fields)
        for r in self.conn.execute(f"SELECT video_id, track, cls, pos, {cols} FROM tracks "
                                   "ORDER BY video_id, track"):
            yield r[0], r[1], r[2], r[3], dict(zip(fields, r[4:]))

    def iter_video_series(self):
        """Yield (video_id, rev, t bytes, {ego field: bytes}) for every video, ordered by id."""
        for r in self.conn.execute(f"SELECT id, rev, t, {_EGO_COLS} FROM videos ORDER BY id"):
            n = len(r[2]) // 8 if r[2] else 0
            yield r[0], r[1] or 0, r[2], {k: (b if b is not None else _blob(np.full(n, np.nan), np.float64))
                                          for k, b in zip(EGO_FIELDS, r[3:])}

    def video_profiles(self) -> dict[str, str]:
        """{video_id: calibration profile}: ``video`` for videos our perception produced (their
        attrs carry the perception config), ``tracks`` for imported records. Cached until the
        library's content changes."""
        ver = self.content_version
        cached = getattr(self, "_profiles_cache", None)
        if cached is not None and cached[0] == ver:
            return cached[1]
        # Reading attrs walks past each row's blobs (~0.1 ms a video): a new process reads the
        # answer of the last one from a small file of the cache folder instead, keyed by the
        # library's creation and content version (never written to the database: a search must
        # not need write access).
        key, n = self._side_cache_key()
        out = None
        d = self._read_side_cache("video_profiles.json", key)
        try:
            if d is not None:
                video = set(d["video"])
                out = {vid: ("video" if vid in video else "tracks") for vid in d["ids"]}
        except (KeyError, TypeError):
            out = None
        if out is None:
            out = {vid: ("video" if has else "tracks") for vid, has in self.conn.execute(
                "SELECT id, json_extract(attrs, '$.perception') IS NOT NULL FROM videos ORDER BY id")}
            self._write_side_cache("video_profiles.json", {
                "key": key, "ids": list(out), "video": [v for v, p in out.items() if p == "video"]})
        self._profiles_cache = (ver, out)
        return out

    def availability(self) -> dict[str, dict]:
        """{video_id: per-field availability} for every video (see strived.availability). A video
        stored before availability existed (schema < 3) has none ({}): nothing is known to be
        missing, so every rule judges it as before (re-import or re-index to record it); measuring
        it here would read every track of every such video on the first search."""
        ver = self.content_version
        cached = getattr(self, "_avail_cache", None)
        if cached is not None and cached[0] == ver:
            return cached[1]
        # Videos share a few distinct records: each distinct one is held once (interned), so a
        # large library does not hold a dict per video (~3 KB each). A new process reads them
        # from a small file of the cache folder (like `video_profiles`) instead of every row's
        # attrs. Callers must not modify the returned dicts.
        key, n = self._side_cache_key()
        out = None
        d = self._read_side_cache("video_availability.json", key)
        try:
            if d is not None and len(d["ids"]) == len(d["which"]) == n:
                kinds = [k if isinstance(k, dict) else {} for k in d["kinds"]]
                out = {vid: kinds[i] for vid, i in zip(d["ids"], d["which"])}
        except (KeyError, TypeError, IndexError):
            out = None
        if out is None:
            out, kinds, index, which = {}, [], {}, []
            for vid, av in self.conn.execute("SELECT id, json_extract(attrs, '$.availability') FROM videos "
                                             "ORDER BY id"):
                k = index.get(av)
                if k is None:
                    try:
                        d = json.loads(av) if av else {}
                    except ValueError:
                        d = {}
                    k = index[av] = len(kinds)
                    kinds.append(d if isinstance(d, dict) else {})
                out[vid] = kinds[k]
                which.append(k)
            self._write_side_cache("video_availability.json",
                                   {"key": key, "kinds": kinds, "ids": list(out), "which": which})
        self._avail_cache = (ver, out)
        return out

    # -- small per-library answers kept in a file of the cache folder (never in the database: a
    #    search must not need write access), keyed by creation, content version and video count
    def _side_cache_key(self) -> tuple[str, int]:
        n = self.conn.execute("SELECT COUNT(*) FROM videos").fetchone()[0]
        return f"{self.meta_get('created_at')}|{self.content_version}|{n}", n

    def _read_side_cache(self, name: str, key: str) -> dict | None:
        try:
            d = json.loads((self.cache_dir / name).read_text())
        except (OSError, ValueError):
            return None
        return d if isinstance(d, dict) and d.get("key") == key else None

    def _write_side_cache(self, name: str, payload: dict) -> None:
        path = self.cache_dir / name
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f"{path.stem}.{os.getpid()}.tmp")
            tmp.write_text(json.dumps(payload))
            tmp.replace(path)
        except OSError:
            pass                      # a cache that cannot be written is only slower

    def stats(self) -> dict:
        n_v = len(self)
        n_t, n_of = self.conn.execute("SELECT COUNT(*), COALESCE(SUM(n), 0) FROM tracks").fetchone()
        size = sum(p.stat().st_size for p in self.folder.glob(DB_NAME + "*") if p.is_file())
        return {"videos": n_v, "tracks": n_t, "object_frames": int(n_of), "db_bytes": size,
                "schema_version": SCHEMA_VERSION, "content_version": self.content_version}

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

    def count_marks(self) -> int:
        return int(self.conn.execute("SELECT COUNT(*) FROM marks").fetchone()[0])

    # -- thumbnails (one small JPEG per video; the indexer and the app's worker write them)
    def put_thumbnail(self, video_id: str, jpeg: bytes, width: int | None = None,
                      height: int | None = None) -> None:
        """Store (or replace) the thumbnail of ``video_id`` (a savepoint inside an open transaction)."""
        with self.transaction():
            self.conn.execute("INSERT OR REPLACE INTO thumbnails(video_id, jpeg, width, height) "
                              "VALUES (?,?,?,?)", (video_id, jpeg, width, height))

    def thumbnail(self, video_id: str) -> bytes | None:
        r = self.conn.execute("SELECT jpeg FROM thumbnails WHERE video_id=?", (video_id,)).fetchone()
        return r[0] if r else None

    def thumbnail_ids(self) -> set[str]:
        return {r[0] for r in self.conn.execute("SELECT video_id FROM thumbnails")}

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

    # -- exported clips (the app's "already exported" mark: which spans of a video were written)
    _EXPORT_KEYS = ("start_s", "end_s", "at", "folder", "clip", "query")

    def record_exports(self, entries) -> int:
        """Remember exported clips, in one transaction. Each entry: ``video_id``, ``start_s`` and
        ``end_s`` (the span written, in seconds; None = the whole video), and optionally ``at``
        (when), ``folder``, ``clip`` (the clip file, None when only listed) and ``query``.
        Returns how many were stored."""
        rows = []
        for e in entries:
            a, b = e.get("start_s"), e.get("end_s")
            if (a is None) != (b is None) or (a is not None and float(b) < float(a)):
                raise ValueError(f"an exported span needs start_s <= end_s (or neither): {e!r}")
            rows.append((str(e["video_id"]), None if a is None else float(a),
                         None if b is None else float(b), e.get("at") or _now(), e.get("folder"),
                         None if e.get("clip") is None else str(e["clip"]), e.get("query")))
        with self.transaction():
            if not self._has_table("exports"):
                # a library written before this table: made now, with the records it replaces
                # (not at open: the first write of a large library checks it, ~8 s at 10k videos)
                cols, opts = TABLES["exports"]
                self.db["exports"].create(cols, pk=opts["pk"])
                self.db["exports"].create_index(["video_id"], if_not_exists=True)
            self._import_legacy_exports()
            self.conn.executemany("INSERT INTO exports(video_id, start_s, end_s, at, folder, clip, "
                                  "query) VALUES (?,?,?,?,?,?,?)", rows)
        return len(rows)

    def _has_table(self, name: str) -> bool:
        return self.conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?",
                                 (name,)).fetchone() is not None

    def exported_spans(self, video_ids=None) -> dict[str, list[dict]]:
        """video id -> its exported clips, oldest first, each {"start_s", "end_s", "at", "folder",
        "clip", "query"} (``start_s``/``end_s`` None: the whole video). Only ``video_ids`` when
        given. The per-video records an older STRIVE-D app kept in the metadata are read too, first
        (the first `record_exports` moves them into the table; a read-only library keeps them)."""
        keep = None if video_ids is None else set(map(str, video_ids))
        out: dict[str, list[dict]] = {}
        for vid, e in self._legacy_exports():
            if keep is None or vid in keep:
                out.setdefault(vid, []).append(e)
        if self._has_table("exports"):
            cols = ", ".join(self._EXPORT_KEYS)
            if keep is None:
                cur = self.conn.execute(f"SELECT video_id, {cols} FROM exports ORDER BY id")
            else:
                ids = sorted(keep)
                cur = (r for k in range(0, len(ids), 500) for r in self.conn.execute(
                    f"SELECT video_id, {cols}, id FROM exports WHERE video_id IN "
                    f"({','.join('?' * len(ids[k:k + 500]))}) ORDER BY id", ids[k:k + 500]))
            for r in cur:
                out.setdefault(r[0], []).append(dict(zip(self._EXPORT_KEYS, r[1:7])))
        return out

    LEGACY_EXPORTS_KEY = "app_exports"   # meta: {video id: [records]} of the app before this table

    def _legacy_exports(self) -> list[tuple[str, dict]]:
        row = self.conn.execute("SELECT value FROM meta WHERE key=?", (self.LEGACY_EXPORTS_KEY,)).fetchone()
        try:
            d = json.loads(row[0]) if row else {}
        except ValueError:
            d = {}
        out = []
        for vid, recs in (d.items() if isinstance(d, dict) else ()):
            for e in recs if isinstance(recs, list) else ():
                if not isinstance(e, dict):
                    continue
                a, b = e.get("start_s"), e.get("end_s")
                ok = isinstance(a, (int, float)) and isinstance(b, (int, float)) and b >= a
                out.append((str(vid), {"start_s": float(a) if ok else None,
                                       "end_s": float(b) if ok else None,
                                       **{k: e.get(k) for k in ("at", "folder", "clip", "query")}}))
        return out

    def _import_legacy_exports(self) -> None:
        """Move the per-video export records the app kept in the metadata (if any) into
        ``exports`` (a record without a valid span marks the whole video). Runs inside a write
        transaction, so they move entirely or not at all."""
        if not self.conn.execute("SELECT 1 FROM meta WHERE key=?", (self.LEGACY_EXPORTS_KEY,)).fetchone():
            return
        legacy = self._legacy_exports()
        if legacy:
            self.conn.executemany(
                "INSERT INTO exports(video_id, start_s, end_s, at, folder, clip, query) "
                "VALUES (?,?,?,?,?,?,?)",
                [(vid, e["start_s"], e["end_s"], e.get("at"), e.get("folder"), e.get("clip"),
                  e.get("query")) for vid, e in legacy])
        self.conn.execute("DELETE FROM meta WHERE key=?", (self.LEGACY_EXPORTS_KEY,))


VIDEO_COLS = f"id, path, fps, n_frames, width, height, source, frame_idx, t, attrs, {_EGO_COLS}"
TRACK_COLS = "track, cls, pos, distance, loc_x, loc_z, lane_rel, bbox_area, score, bbox, attrs"


def records_from_rows(r, track_rows) -> VideoRecords:
    """A video's records from its ``videos`` row (VIDEO_COLS) and its ``tracks`` rows (TRACK_COLS)."""
    info = VideoInfo(id=r[0], path=r[1], fps=r[2], n_frames=r[3], width=r[4], height=r[5],
                     source=r[6], attrs=json.loads(r[9]) if r[9] else {})
    n = len(r[8]) // 8 if r[8] else 0
    ego = {k: _ego_arr(b, n) for k, b in zip(EGO_FIELDS, r[10:])}
    tracks = []
    for tr in track_rows:
        bbox = None if tr[9] is None else _arr(tr[9], np.float32).reshape(-1, 4).copy()
        tracks.append(Track(track_id=tr[0], cls=tr[1], pos=_arr(tr[2], np.int32).copy(),
                            fields={f: _arr(b, np.float32).copy() for f, b in zip(OBJECT_FIELDS, tr[3:9])},
                            bbox=bbox, attrs=json.loads(tr[10]) if tr[10] else {}))
    return VideoRecords(info=info, frame_idx=_arr(r[7], np.int64).copy(),
                        t=_arr(r[8], np.float64).copy(), ego=ego, tracks=tracks)


def spans_overlap(a, b) -> bool:
    """Whether two spans (start_s, end_s) of one video share a moment; None is the whole video.
    A span of zero length (one instant) overlaps a span that contains it."""
    if a is None or b is None:
        return True
    lo, hi = max(float(a[0]), float(b[0])), min(float(a[1]), float(b[1]))
    return hi > lo or (hi == lo and (float(a[0]) == float(a[1]) or float(b[0]) == float(b[1])))

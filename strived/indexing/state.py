"""Indexing state per source file (the library's ``files`` table) and the one writer of results.

A file is fingerprinted by size + mtime, and by a content hash when those differ: SHA-1 over the size
and the first and last MiB (fast on large videos; a change confined to the middle of a file with the
same size and mtime is not detected, which editing tools do not produce in practice).
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from ..errors import LibraryError
from ..safepaths import make_video_id
from ..store import files as file_store
from ..store.files import video_of_path

HASH_CHUNK_BYTES = 1 << 20


@dataclass(frozen=True)
class Fingerprint:
    size: int
    mtime: float


def fingerprint(path: str | os.PathLike) -> Fingerprint:
    st = os.stat(path)
    return Fingerprint(int(st.st_size), float(st.st_mtime))


def content_hash(path: str | os.PathLike) -> str:
    """SHA-1 of the file size plus its first and last MiB."""
    h = hashlib.sha1()
    size = os.path.getsize(path)
    h.update(str(size).encode())
    with open(path, "rb") as fh:
        h.update(fh.read(HASH_CHUNK_BYTES))
        if size > HASH_CHUNK_BYTES:
            fh.seek(max(HASH_CHUNK_BYTES, size - HASH_CHUNK_BYTES))
            h.update(fh.read(HASH_CHUNK_BYTES))
    return h.hexdigest()


def mark_file(lib, path: str, *, video_id: str, fp: Fingerprint, file_hash: str | None, status: str,
              config: str, error: str | None = None) -> None:
    """Record a file's state (own transaction)."""
    try:
        with lib.transaction():
            file_store.upsert(lib, path, video_id=video_id, size=fp.size, mtime=fp.mtime, hash=file_hash,
                              status=status, error=error, config=config)
    except sqlite3.Error as e:
        raise LibraryError(f"cannot update indexing state in {lib.folder}: {e}") from None


def touch_file(lib, path: str, fp: Fingerprint) -> None:
    """A file changed mtime but not content: remember the new mtime, keep its records."""
    file_store.touch(lib, path, fp.size, fp.mtime)


def write_result(lib, path: str, *, fp: Fingerprint, file_hash: str | None, config: str, rec,
                 thumbnail_jpeg: bytes | None, thumbnail_size: tuple[int, int] | None) -> None:
    """Store one video's records, its files row ('done') and thumbnail in ONE transaction.

    A crash or a full disk in the middle rolls everything back, leaving the previous state (the
    file row stays 'running', so the next run redoes the video). Raises ``LibraryError``.
    """
    try:
        with lib.transaction():
            lib.add_video(rec, replace=True)
            file_store.upsert(lib, path, video_id=rec.info.id, size=fp.size, mtime=fp.mtime, hash=file_hash,
                              status="done", error=None, config=config)
            if thumbnail_jpeg:
                w, h = thumbnail_size or (None, None)
                lib.put_thumbnail(rec.info.id, thumbnail_jpeg, w, h)
    except sqlite3.Error as e:
        raise LibraryError(f"cannot write {rec.info.id} into {lib.folder}: {e}") from None


def config_key(config: dict) -> str:
    """Canonical JSON of the settings that change perception output."""
    return json.dumps(config, sort_keys=True, separators=(",", ":"))


def video_id_for(path: Path, root: Path) -> str:
    """Default id: the path under ``root`` without extension, folders joined by '__', made safe
    (`strived.safepaths.make_video_id`: characters that cannot be in an id become '_')."""
    try:
        rel = path.resolve().relative_to(root.resolve())
    except ValueError:
        rel = Path(path.name)
    return make_video_id("__".join(rel.with_suffix("").parts))


def relink_file(lib, old_path: str, new_path: str) -> str | None:
    """Point the library at ``new_path`` where it knew ``old_path`` (the same video, moved): its
    ``files`` row keeps its state and video id, and the video's path follows. Returns the video
    id (None when the library does not know ``old_path``). Raises LibraryError when ``new_path``
    already belongs to another video."""
    old_path, new_path = str(old_path), str(new_path)
    with lib.transaction():
        vid = video_of_path(lib, old_path)
        if vid is None:
            return None
        other = video_of_path(lib, new_path)
        if other is not None and other != vid:
            raise LibraryError(f"{new_path} is already in the library as video {other!r}; remove one "
                               f"of the two (`strived remove {other}`) before relinking")
        file_store.move(lib, old_path, new_path, vid)
    return vid

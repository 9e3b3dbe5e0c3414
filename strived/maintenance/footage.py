"""Keeping a library in step with its footage: videos whose file is gone, moved or renamed
footage (relinked by content, never duplicated), and removing videos.

    missing_videos(lib)                   # [MissingVideo(video_id, path)] whose file no longer exists
    relink_file(lib, old_path, new_path)  # one moved file: its files row and its video's path
    relink(lib, old, new)                 # a moved file or folder (OLD as the library knows it)
    find_moved(lib, folder)               # look in FOLDER for missing files, by content hash
    remove_videos(lib, ids)               # records, tracks, texts, thumbnails, files rows

These are the engine functions the CLI (`strived remove`, `strived relink`, `strived check`) and
the app call. Each change is one transaction; the dense index drops removed videos at its next
update (`strived.retrieval.sources.ensure_text_index`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import LibraryError
from ..indexing.state import content_hash, relink_file, video_of_path  # noqa: F401  (relink_file: API)
from ..perception.video import find_videos


@dataclass(frozen=True)
class MissingVideo:
    video_id: str
    path: str


@dataclass
class RelinkReport:
    """What a relink did: (video_id, old path, new path) per relinked video, and per video that
    was not relinked (video_id, old path, reason)."""

    relinked: list[tuple[str, str, str]] = field(default_factory=list)
    not_relinked: list[tuple[str, str, str]] = field(default_factory=list)

    def summary(self) -> str:
        s = f"{len(self.relinked)} video{'s' if len(self.relinked) != 1 else ''} relinked"
        if self.not_relinked:
            s += f", {len(self.not_relinked)} not relinked"
        return s


def missing_videos(lib) -> list[MissingVideo]:
    """Videos whose recorded file no longer exists (records-only videos, without a path, are
    not missing: they never had a file here)."""
    out = []
    for vid, path in lib.recorded_paths(skip_empty=True):
        if not os.path.exists(path):
            out.append(MissingVideo(vid, path))
    return out


def _under(path: str, prefix: str) -> str | None:
    """``path`` relative to ``prefix`` ('' when equal), or None when it is not under it."""
    if path == prefix:
        return ""
    pre = prefix.rstrip(os.sep) + os.sep
    return path[len(pre):] if path.startswith(pre) else None


def _same_content(lib, vid: str, new_path: str) -> bool | None:
    """True/False when the library has a content hash of the video's file to compare with."""
    row = lib.file_hash_of(vid)
    if row is None:
        return None
    try:
        return os.path.getsize(new_path) == row[0] and content_hash(new_path) == row[1]
    except OSError:
        return False


def relink(lib, old: str | os.PathLike, new: str | os.PathLike, *, verify: bool = True) -> RelinkReport:
    """Relink the videos the library knows at ``old`` (a file, or a folder: every video under
    it) to the same relative place under ``new``. With ``verify``, a file whose content hash
    differs from the indexed one is not relinked (it is another video). Videos whose new file
    does not exist are reported, not changed."""
    old_s = os.path.abspath(os.path.expanduser(str(old)))
    new_s = os.path.abspath(os.path.expanduser(str(new)))
    if os.path.exists(new_s):
        new_s = str(Path(new_s).resolve())
    rep = RelinkReport()
    known = lib.recorded_paths(skip_empty=False)
    for vid, path in known:
        rel = _under(path, old_s)
        if rel is None:
            continue
        target = os.path.join(new_s, rel) if rel else new_s
        if not os.path.isfile(target):
            rep.not_relinked.append((vid, path, f"{target} does not exist"))
            continue
        if target == path:
            continue
        if verify and _same_content(lib, vid, target) is False:
            rep.not_relinked.append((vid, path, f"{target} has other content (not the video indexed)"))
            continue
        try:
            relink_file(lib, path, target)
        except LibraryError as e:
            rep.not_relinked.append((vid, path, str(e)))
            continue
        rep.relinked.append((vid, path, target))
    if not rep.relinked and not rep.not_relinked:
        rep.not_relinked.append(("", old_s, "the library has no video at or under this path"))
    return rep


def find_moved(lib, folder: str | os.PathLike) -> RelinkReport:
    """Look under ``folder`` for the files of missing videos, recognised by content hash (size
    plus first and last MiB), and relink each one found. Only videos indexed from video files
    (which have a hash) can be found this way."""
    rep = RelinkReport()
    gone: dict[tuple[int, str], tuple[str, str]] = {}
    for m in missing_videos(lib):
        row = lib.file_hash_of(m.video_id)
        if row is None:
            rep.not_relinked.append((m.video_id, m.path, "no content hash recorded (imported records)"))
        else:
            gone[(int(row[0]), row[1])] = (m.video_id, m.path)
    sizes = {k[0] for k in gone}
    for p in find_videos(folder) if gone else []:
        try:
            real = str(p.resolve(strict=True))
            size = os.path.getsize(real)
            if size not in sizes or video_of_path(lib, real) is not None:
                continue
            hit = gone.pop((size, content_hash(real)), None)
        except (OSError, RuntimeError):
            continue
        if hit is None:
            continue
        vid, old_path = hit
        try:
            relink_file(lib, old_path, real)
        except LibraryError as e:
            rep.not_relinked.append((vid, old_path, str(e)))
            continue
        rep.relinked.append((vid, old_path, real))
    for vid, old_path in gone.values():
        rep.not_relinked.append((vid, old_path, f"not found under {folder}"))
    return rep


def remove_videos(lib, video_ids) -> list[str]:
    """Remove these videos (records, tracks, texts, thumbnails, indexing state) in one
    transaction; ids the library does not hold are ignored. Returns the ids removed."""
    done = []
    with lib.transaction():
        for vid in dict.fromkeys(video_ids):
            if lib.has_video(vid) or lib.has_file_row(vid):
                lib.remove_video(vid)
                done.append(vid)
    return done

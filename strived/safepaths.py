"""Video ids and output paths that cannot escape the folder the user chose.

Two rules, one module (STYLE habit 16):

* A video id comes from outside (a records file, a file name) and becomes part of file names on
  export. `video_id_problem` says why an id is unsafe; `check_video_id` raises. The safe set is
  letters and digits (any script), ``_ - . + @ = , ~ ( ) [ ]`` and inner spaces; the first
  character is a letter, a digit or ``_`` (so never ``.``/``..``, a dot-file or an option), and
  there is no path separator, drive colon or control character anywhere.
* Every file the product writes outside its library is named by `output_path(folder, *parts)`,
  which takes plain name components only and refuses any path that resolves outside ``folder``
  (``..``, an absolute part, a drive, a symlink leading out). `safe_filename` turns any text (an
  id from an older library, an event name) into such a component.
"""

from __future__ import annotations

import os
import unicodedata
from pathlib import Path

from .errors import UnsafePathError

VIDEO_ID_MAX_CHARS = 200
_PUNCT = set("_-.+@=,~()[]")
# Names Windows refuses as a file stem whatever the extension.
_WIN_RESERVED = {"CON", "PRN", "AUX", "NUL", *(f"COM{i}" for i in range(1, 10)),
                 *(f"LPT{i}" for i in range(1, 10))}


def _char_ok(c: str) -> bool:
    if c in _PUNCT or c == " ":
        return True
    return c.isalnum() and unicodedata.category(c)[0] in "LN"


def video_id_problem(vid) -> str | None:
    """Why ``vid`` is not a safe video id, or None when it is."""
    if not isinstance(vid, str):
        return f"must be a string, found {type(vid).__name__}"
    if not vid:
        return "must not be empty"
    if len(vid) > VIDEO_ID_MAX_CHARS:
        return f"is {len(vid)} characters long (at most {VIDEO_ID_MAX_CHARS})"
    if vid != vid.strip():
        return "must not start or end with white space"
    bad = sorted({c for c in vid if not _char_ok(c)})
    if bad:
        shown = ", ".join(repr(c) for c in bad[:5])
        return (f"contains {shown}: a video id may hold letters, digits, spaces and "
                f"{''.join(sorted(_PUNCT))} only (no path separators), since it becomes a file name "
                "on export")
    first = vid[0]
    if not (first == "_" or first.isalnum()):
        return (f"must start with a letter, a digit or '_' (found {first!r}): ids become file "
                "names on export, and a leading '.' or '-' would hide or misread them")
    return None


def check_video_id(vid) -> str:
    """Return ``vid`` when it is a safe video id, else raise UnsafePathError saying why."""
    why = video_id_problem(vid)
    if why:
        raise UnsafePathError(f"video id {vid!r} {why}", path=str(vid))
    return vid


def make_video_id(text: str) -> str:
    """A safe video id made from ``text`` (e.g. a file's path under the indexed folder): unsafe
    characters become ``_``, and an id that would start with another character gets a ``_``."""
    s = "".join(c if _char_ok(c) else "_" for c in str(text)).strip()
    s = s[:VIDEO_ID_MAX_CHARS - 10].rstrip()  # room for the _2, _3... of a duplicate
    if not s:
        return "video"
    if not (s[0] == "_" or s[0].isalnum()):
        s = "_" + s
    return s


#: File systems limit a name to 255 *bytes* (ext4, APFS, tmpfs; NTFS counts 255 UTF-16 units,
#: which this also respects): a component made here stays within this many UTF-8 bytes, leaving
#: room for what exports add around it (a rank, a time span, "_2", ".json").
MAX_NAME_BYTES = 180


def safe_filename(text: str, default: str = "item", max_chars: int = 120) -> str:
    """A single, portable file-name component made from ``text``: characters outside the safe set
    become ``_``, leading dots and spaces go, Windows device names get a ``_`` prefix, and the
    result is at most ``max_chars`` characters and `MAX_NAME_BYTES` UTF-8 bytes (never empty,
    never ``.`` or ``..``)."""
    s = "".join(c if (_char_ok(c) and c != " ") else "_" for c in str(text))
    s = s.lstrip(". ").rstrip(". ")[:max_chars]
    while len(s.encode("utf-8")) > MAX_NAME_BYTES:     # 120 CJK characters are 360 bytes
        s = s[:-1]
    s = s.rstrip(". ")
    if not s:
        s = default
    if s.split(".")[0].upper() in _WIN_RESERVED:
        s = "_" + s
    return s


def unique_filename(name: str, taken: set[str]) -> str:
    """``name`` or ``stem_2.ext``, ``stem_3.ext``... so that no two outputs share a file (compared
    case-insensitively, as on macOS and Windows). Adds the result to ``taken``."""
    stem, dot, ext = name.rpartition(".")
    if not dot:
        stem, ext = name, ""
    out, k = name, 2
    while out.lower() in taken:
        out = f"{stem}_{k}{dot}{ext}"
        k += 1
    taken.add(out.lower())
    return out


def _check_part(part: str, folder: Path) -> None:
    bad = (not part or part in (".", "..") or "/" in part or "\\" in part or "\x00" in part
           or (os.sep in part) or (os.altsep is not None and os.altsep in part)
           or os.path.isabs(part) or (len(part) >= 2 and part[1] == ":"))
    if bad:
        raise UnsafePathError(f"refusing to write {part!r} in {folder}: an output name must be one "
                              "plain file or folder name (no '..', separators or drive)",
                              path=str(part))


def output_path(folder: str | os.PathLike, *parts: str) -> Path:
    """``folder/part/part...`` after checking that each part is one plain name and that the
    result, with symlinks resolved, stays inside ``folder``. Raises UnsafePathError."""
    root = Path(folder).expanduser()
    for part in parts:
        _check_part(str(part), root)
    path = root.joinpath(*[str(p) for p in parts])
    try:
        real_root = root.resolve()
        real = path.resolve()
    except (OSError, RuntimeError) as e:  # a symlink loop on the way
        raise UnsafePathError(f"refusing to write {path}: cannot resolve it ({e})", path=str(path)) from None
    if real != real_root and real_root not in real.parents:
        raise UnsafePathError(f"refusing to write {path}: it resolves to {real}, outside the chosen "
                              f"folder {real_root} (a symlink?)", path=str(path))
    return path

"""Domain exceptions. Each carries the data a presenter needs and a message a user can act on."""

from __future__ import annotations


class StrivedError(Exception):
    """Base class of every error the engine raises on purpose."""


class RecordsError(StrivedError):
    """A `strived.records/1` file is malformed."""

    def __init__(self, message: str, *, path: str | None = None, frame: int | None = None,
                 key: str | None = None):
        self.path, self.frame, self.key = path, frame, key
        where = []
        if path:
            where.append(str(path))
        if frame is not None:
            where.append(f"frame {frame}")
        if key:
            where.append(f"key '{key}'")
        super().__init__(f"{': '.join([', '.join(where)] if where else [])}{': ' if where else ''}{message}")


class RuleError(StrivedError):
    """A rule is invalid. ``errors`` is a list of (json_pointer, message)."""

    def __init__(self, errors: list[tuple[str, str]]):
        self.errors = list(errors)
        lines = [f"{ptr or '/'}: {msg}" for ptr, msg in self.errors]
        super().__init__("invalid rule:\n  " + "\n  ".join(lines))


class LibraryError(StrivedError):
    """The library folder or database cannot be used."""


class LibraryVersionError(LibraryError):
    def __init__(self, path: str, found: int, supported: int):
        self.path, self.found, self.supported = path, found, supported
        if found > supported:
            advice = ("it was written by a newer STRIVE-D; upgrade STRIVE-D to open it "
                      "(nothing was changed)")
        else:
            advice = ("it was written by an older STRIVE-D whose format this version cannot "
                      "upgrade; open it with that version and `strived export` its records, then "
                      "`strived import` them here (nothing was changed)")
        super().__init__(f"library {path} has schema version {found}, this STRIVE-D supports "
                         f"{supported}: {advice}")


class LibraryLockedError(LibraryError):
    def __init__(self, path: str):
        self.path = path
        super().__init__(f"library {path} is locked by another process (indexing or another "
                         "window?); try again when it has finished")


class LibraryReadOnlyError(LibraryError):
    """A change was asked of a library that could only be opened read-only."""

    def __init__(self, path: str, why: str = "", message: str | None = None):
        self.path, self.why = path, why
        super().__init__(message or (
            f"library {path} is read-only{f' ({why})' if why else ''}: it is open for searching "
            "only, nothing can be indexed, imported, marked or saved in it; copy the folder "
            "somewhere you can write to, or fix its permissions"))


class LibraryCorruptError(LibraryError):
    """The library database is damaged (failed integrity check or a malformed page)."""

    def __init__(self, path: str, detail: str = ""):
        self.path, self.detail = path, detail
        super().__init__(f"library {path} is damaged ({detail or 'database disk image is malformed'}); "
                         "it is not written to. Run `strived check --library "
                         f"{path}` for details: it can copy every readable video into a new library "
                         "(--salvage NEW), or re-index the footage into a new library")


class UnsafePathError(StrivedError):
    """A name (video id, output file) would lead outside the folder it belongs in."""

    def __init__(self, message: str, path: str | None = None):
        self.path = path
        super().__init__(message)


class VideoDecodeError(StrivedError):
    def __init__(self, path: str, message: str, frame_idx: int | None = None):
        self.path, self.frame_idx = path, frame_idx
        at = f" at frame {frame_idx}" if frame_idx is not None else ""
        super().__init__(f"{path}: cannot decode{at}: {message}")


class BenchmarkError(StrivedError):
    """A benchmark folder does not follow docs/formats.md section 2."""


class Cancelled(StrivedError):
    """A long job was cancelled by its caller."""

    def __init__(self, message: str = "cancelled"):
        super().__init__(message)


class SourceUnavailable(StrivedError):
    """A retrieval source cannot run on this library (not built, no model, no input it can use)."""

    def __init__(self, source: str, reason: str):
        self.source, self.reason = source, reason
        super().__init__(f"{source} retrieval unavailable: {reason}")

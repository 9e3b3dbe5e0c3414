"""Shared CLI helpers."""

from __future__ import annotations

import json
import os
import sys

from ..errors import StrivedError


def default_library() -> str:
    return os.environ.get("STRIVED_LIBRARY", "strived-library")


def add_library_arg(p, required: bool = False) -> None:
    p.add_argument("--library", "-L", default=None if required else default_library(),
                   required=required,
                   help="library folder (default: $STRIVED_LIBRARY or ./strived-library)")


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1 (``--top -1`` would silently drop a result)."""
    import argparse

    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, found {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, found {v}")
    return v


def positive_float(max_value: float | None = None):
    """argparse type factory: a finite number > 0 (and <= ``max_value``)."""
    import argparse
    import math

    def parse(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, found {text!r}") from None
        if not math.isfinite(v) or v <= 0:
            raise argparse.ArgumentTypeError(f"must be a finite number above 0, found {text}")
        if max_value is not None and v > max_value:
            raise argparse.ArgumentTypeError(f"must be at most {max_value:g}, found {text}")
        return v

    parse.__name__ = "number"
    return parse


def load_json_file(path: str, what: str = "JSON file"):
    """Parse a user's JSON file; any problem (missing, not UTF-8, not JSON, nested too deep)
    is a StrivedError naming the file, never a traceback."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except OSError as e:
        raise StrivedError(f"{path}: cannot read the {what}: {e.strerror or e}") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise StrivedError(f"{path}: the {what} is not UTF-8 text (byte {e.start})") from None
    return parse_json_text(text, f"{path}: the {what}")


def parse_json_text(text: str, what: str):
    """json.loads with errors as StrivedError (``what`` names the source in the message)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise StrivedError(f"{what} is not valid JSON (line {e.lineno}, column {e.colno}): {e.msg}") from None
    except RecursionError:
        raise StrivedError(f"{what} is nested too deeply to be a rule or settings") from None


def print_json(obj) -> None:
    json.dump(obj, sys.stdout, indent=2, ensure_ascii=False, default=_default)
    sys.stdout.write("\n")


def _default(o):
    import numpy as np

    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    if hasattr(o, "to_dict"):
        return o.to_dict()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


class TerminalProgress:
    """A one-line progress bar on stderr (no dependency); silent when stderr is not a TTY unless
    ``always`` is set, in which case it prints a line per 10 %."""

    def __init__(self, always: bool = False):
        self.tty = sys.stderr.isatty()
        self.always = always
        self._last = -1

    def __call__(self, ev) -> None:
        frac = ev.fraction
        if self.tty:
            width = 30
            fill = int(frac * width)
            item = f" {ev.item}" if ev.item else ""
            sys.stderr.write(f"\r{ev.stage:>10} [{'#' * fill}{'.' * (width - fill)}] "
                             f"{ev.done}/{ev.total}{item[:40]:<41}")
            if ev.done >= ev.total:
                sys.stderr.write("\n")
            sys.stderr.flush()
        elif self.always:
            step = (ev.stage, int(frac * 10))
            if step != self._last:
                self._last = step
                sys.stderr.write(f"{ev.stage}: {ev.done}/{ev.total}\n")

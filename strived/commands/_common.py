"""Shared CLI helpers."""

from __future__ import annotations

import json
import os
import sys


def default_library() -> str:
    return os.environ.get("STRIVED_LIBRARY", "strived-library")


def add_library_arg(p, required: bool = False) -> None:
    p.add_argument("--library", "-L", default=None if required else default_library(),
                   required=required,
                   help="library folder (default: $STRIVED_LIBRARY or ./strived-library)")


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
            step = int(frac * 10)
            if step != self._last:
                self._last = step
                sys.stderr.write(f"{ev.stage}: {ev.done}/{ev.total}\n")

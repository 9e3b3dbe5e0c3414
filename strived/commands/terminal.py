"""Terminal output without control sequences from data.

Text that reaches the terminal can come from untrusted data: an LLM's reason, a rule's step name,
a class name or a file name from imported records. An escape sequence in it could rewrite the
screen, or (OSC 52) set the user's clipboard. The CLI writes through `CleanStream`, which drops
every C0 control character except newline, tab and carriage return (progress bars use it), DEL,
and every C1 control character (U+0080-U+009F, an 8-bit CSI among them): without ESC and CSI no
sequence can start.
"""

from __future__ import annotations

import re
import sys

_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\x80-\x9f]")


def clean(text: str) -> str:
    return _CONTROL.sub("", text)


class CleanStream:
    """A text stream that writes ``clean(text)`` to the stream it wraps."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(clean(text))
        return len(text)

    def __getattr__(self, name):
        return getattr(self._stream, name)


def install() -> None:
    """Wrap sys.stdout and sys.stderr (once)."""
    for name in ("stdout", "stderr"):
        s = getattr(sys, name)
        if s is not None and not isinstance(s, CleanStream):
            setattr(sys, name, CleanStream(s))

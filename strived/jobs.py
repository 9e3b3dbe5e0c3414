"""The progress/cancel protocol every long engine job follows (CLI and app wrap it the same way)."""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Callable, Iterator, Optional

from .errors import Cancelled


@dataclass
class ProgressEvent:
    """One progress report. ``done``/``total`` count work units of ``stage`` (videos, frames...)."""

    stage: str
    done: int
    total: int
    item: str | None = None
    message: str | None = None
    extra: dict = field(default_factory=dict)

    @property
    def fraction(self) -> float:
        return 0.0 if self.total <= 0 else min(1.0, self.done / self.total)


ProgressFn = Optional[Callable[[ProgressEvent], None]]
CancelFn = Optional[Callable[[], bool]]


def report(progress: ProgressFn, stage: str, done: int, total: int, item: str | None = None,
           message: str | None = None, **extra) -> None:
    if progress is not None:
        progress(ProgressEvent(stage, done, total, item, message, dict(extra)))


def check_cancel(cancel: CancelFn) -> None:
    """Raise Cancelled when the caller asked to stop. Call between batches of work."""
    if cancel is not None and cancel():
        raise Cancelled()


_running_cancel: ContextVar[CancelFn] = ContextVar("strived_running_cancel", default=None)


@contextmanager
def cancel_scope(cancel: CancelFn) -> Iterator[None]:
    """Make ``cancel`` the running job's cancel for the code it calls that takes no ``cancel``
    argument (the feature kernels of `strived.rules.chunks` check it per chunk through
    `current_cancel`). Per thread (a context variable); ``None`` keeps the enclosing one."""
    if cancel is None:
        yield
        return
    token = _running_cancel.set(cancel)
    try:
        yield
    finally:
        _running_cancel.reset(token)


def current_cancel() -> CancelFn:
    """The cancel of the innermost `cancel_scope` of this thread, or None."""
    return _running_cancel.get()

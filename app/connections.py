"""One SQLite connection per thread for the open library (issue 15, item 10).

The UI thread and the library worker thread never share a ``Library`` (an sqlite3 connection is
not safe to use from two threads at once, and its transactions would interleave). ``get()``
returns the calling thread's own ``Library``, opened on first use. ``use()`` marks it busy while a
job runs, so ``close_all()`` (from the UI thread, at close) closes only idle connections at once;
a busy one is closed by its own thread when its job ends.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Callable, Iterator

from strived import api
from strived.api import Cancelled

class LibraryConnections:
    """Per-thread ``strived.store.library.Library`` objects of one library folder."""

    def __init__(self, folder: str, opener: Callable | None = None, first=None):
        if opener is None:
            opener = api.Library.open
        self.folder = str(folder)
        self._opener = opener
        self._lock = threading.Lock()
        self._by_thread: dict[int, object] = {}
        self._busy: dict[int, int] = {}
        self.closed = False
        if first is not None:               # an already open Library for the calling thread
            self._by_thread[threading.get_ident()] = first

    def get(self):
        """The calling thread's Library (opened now when the thread has none)."""
        tid = threading.get_ident()
        with self._lock:
            if self.closed:
                raise Cancelled("the library was closed")
            lib = self._by_thread.get(tid)
        if lib is None:
            lib = self._opener(self.folder)
            with self._lock:
                self._by_thread[tid] = lib
        return lib

    @contextlib.contextmanager
    def use(self) -> Iterator[object]:
        """The calling thread's Library, kept open until the block ends (worker jobs). Marked busy
        under the lock before it is handed out, so ``close_all()`` can never close it mid-job."""
        tid = threading.get_ident()
        with self._lock:
            if self.closed:
                raise Cancelled("the library was closed")
            self._busy[tid] = self._busy.get(tid, 0) + 1
            lib = self._by_thread.get(tid)
        try:
            if lib is None:
                lib = self._opener(self.folder)
                with self._lock:
                    self._by_thread[tid] = lib
            yield lib
        finally:
            with self._lock:
                self._busy[tid] -= 1
                close = self.closed and not self._busy[tid] and lib is not None
                if close:
                    self._by_thread.pop(tid, None)
            if close:
                lib.close()

    @property
    def threads(self) -> list[int]:
        with self._lock:
            return list(self._by_thread)

    def close_all(self) -> int:
        """Close every idle connection now; busy ones close when their job ends. Returns how many
        are still busy."""
        with self._lock:
            self.closed = True
            idle = [t for t in self._by_thread if not self._busy.get(t)]
            libs = [self._by_thread.pop(t) for t in idle]
            busy = len(self._by_thread)
        for lib in libs:
            try:
                lib.close()
            except Exception:  # noqa: BLE001 - closing twice or a vanished folder is harmless
                pass
        return busy


def library_job(connections: LibraryConnections, fn: Callable, *args, **kwargs):
    """Run ``fn(library, *args, **kwargs)`` on the worker thread's own connection."""
    with connections.use() as lib:
        return fn(lib, *args, **kwargs)

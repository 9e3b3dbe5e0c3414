"""The search indexes' update (BM25 texts, dense vectors, rule features) in a process of its own.

The app indexes in a worker thread of its UI process. Loading the text embedder there (torch and
transformers: shared libraries opened and weights read while holding the interpreter lock) froze
the window for up to 295 ms at the end of every indexing run (`benchmarks/bench_app.py --only
index`). In a spawned process it costs the window nothing. The library is written through its own
SQLite connection, as by any second process; a cancel stops the process at once (the dense index
commits a generation by renaming its manifest, SQLite rolls back an unfinished transaction).
"""

from __future__ import annotations

import os
import queue as _queue
from pathlib import Path

from ..errors import Cancelled, StrivedError
from ..jobs import CancelFn, ProgressFn, report
from .workers import _die_with_parent

POLL_S = 0.1


def _run(library_folder: str, embedder_dir: str | None, q) -> None:
    _die_with_parent()
    try:
        # imported here, after _die_with_parent and inside the try that reports a failure to the parent
        from ..engine import build_text_index  # lazy: loads numpy
        from ..retrieval.sources import set_library_embedder  # lazy: loads numpy
        from ..store.library import Library  # lazy: loads numpy

        with Library.open(library_folder) as lib:
            set_library_embedder(lib, embedder_dir or None)   # a changed choice rebuilds the dense index

            def progress(ev) -> None:
                q.put(("progress", ev.stage, ev.done, ev.total, ev.item, ev.message))

            note = build_text_index(lib, progress=progress)
        q.put(("done", note))
    except BaseException as e:  # reported by the parent as the run's error
        msg = str(e) if isinstance(e, StrivedError) else f"internal error: {type(e).__name__}: {e}"
        q.put(("error", msg))


def build_text_index_in_process(library_folder: str | os.PathLike, *, embedder_dir: str | None = None,
                                progress: ProgressFn = None, cancel: CancelFn = None) -> str | None:
    """``engine.build_text_index`` on ``library_folder`` in a spawned process; its progress events
    are reported here. Returns its notice; raises ``StrivedError`` with its error, ``Cancelled``
    when ``cancel()`` turns true (the process is stopped at once)."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=_run, args=(str(Path(library_folder)), embedder_dir, q),
                    name="strived-text-index", daemon=True)
    p.start()
    try:
        while True:
            if cancel is not None and cancel():
                raise Cancelled()
            try:
                msg = q.get(timeout=POLL_S)
            except _queue.Empty:
                if not p.is_alive():
                    try:
                        msg = q.get(timeout=1.0)       # the last message may still be in the pipe
                    except _queue.Empty:
                        raise StrivedError(f"the search index process stopped (exit code {p.exitcode}); "
                                           "index again to finish it") from None
                else:
                    continue
            if msg[0] == "progress":
                _, stage, done, total, item, message = msg
                report(progress, stage, done, total, item=item, message=message)
            elif msg[0] == "done":
                return msg[1]
            else:
                raise StrivedError(msg[1])
    finally:
        if p.is_alive():
            p.join(timeout=2.0)
        if p.is_alive():
            p.kill()
            p.join(timeout=5.0)
        q.close()
        q.join_thread()

"""Issue 14: Cancel stops a running search promptly, also inside a source. A real click on the
Cancel button while the engine computes the rule's window features over a 2,000-video library:
the window is idle at once, the engine stops within a bounded time (it checks per chunk), nothing
of the cancelled search is shown, and the next search gives the full, correct ranking."""

import os
import threading
import time

import numpy as np
import pytest
from PySide6.QtCore import Qt

from tests.app.conftest import press_return, shot, type_query

QUERY = "a car cuts in from the right"
N_VIDEOS = 2000            # 6 M object samples: a cold rule source takes ~1-2 s on 2 cores


@pytest.fixture(scope="module")
def big_library(tmp_path_factory):
    from strived.evaluation.synth import make_video
    from strived.store.library import Library

    folder = tmp_path_factory.mktemp("big") / "lib"
    lib = Library.open(folder, create=True)
    rng = np.random.default_rng(11)
    for a in range(0, N_VIDEOS, 250):
        lib.add_videos([make_video(k, rng) for k in range(a, min(N_VIDEOS, a + 250))])
    lib.close()
    return folder


def test_cancel_click_stops_the_engine_inside_the_rule_source(qtbot, window, big_library,
                                                              monkeypatch):
    from strived import engine
    from strived.rules import kernels as K

    w = window
    assert w.open_library(str(big_library))
    monkeypatch.setattr(K, "CHUNK_SAMPLES", 200_000)     # ~30 chunks per feature (default 2 M: 3)
    inside = threading.Event()
    kernel_after_cancel = []
    real_kernel = K.window_change

    def kernel(*a, **k):                     # observes the engine's feature chunks, runs them
        inside.set()
        worker = w._search_worker
        kernel_after_cancel.append(worker is None)
        return real_kernel(*a, **k)

    monkeypatch.setattr(K, "window_change", kernel)
    finished = []
    w.search_finished.connect(finished.append)
    type_query(qtbot, w, QUERY)
    press_return(qtbot, w)
    worker = w._search_worker
    assert worker is not None and w.search_cancel.isVisible()
    qtbot.waitUntil(inside.is_set, timeout=60000)        # the rule source computes features now
    assert not worker.is_done
    with qtbot.waitSignal(w.search_cancelled, timeout=2000):
        qtbot.mouseClick(w.search_cancel, Qt.MouseButton.LeftButton)
    t_click = time.monotonic()
    # the window is idle at once: Search is back, Cancel gone, the label says so
    assert not w.search_cancel.isVisible() and not w.search_progress.isVisible()
    assert w.search_button.isEnabled() and w.act_search.isEnabled()
    assert "cancelled" in w.results_label.text()
    # the engine stops within a bounded time (it checks cancel per chunk of a feature)
    qtbot.waitUntil(lambda: worker.is_done, timeout=5000)
    stop_s = time.monotonic() - t_click
    assert stop_s < 1.5, f"the engine went on {stop_s:.2f} s after the click"
    assert worker.result is None and worker.error is None       # cancelled, not finished
    # only the chunks already running in the pool went on; the others were skipped
    assert sum(kernel_after_cancel) <= min(os.cpu_count() or 1, 8) < N_VIDEOS * 15 * 200 // 200_000
    # nothing of the cancelled search is shown, even later
    qtbot.wait(300)
    assert not finished and w.model.rowCount() == 0 and w.response is None
    assert "cancelled" in w.results_label.text()
    shot(w, "search_cancelled_inside_rule_source")

    # the same search again, to the end: the full ranking, as a fresh connection computes it
    monkeypatch.setattr(K, "window_change", real_kernel)
    with qtbot.waitSignal(w.search_finished, timeout=120000) as got:
        press_return(qtbot, w)
    resp = got.args[0]
    assert w.model.rowCount() == len(resp.hits) > 0
    from strived.store.library import Library

    lib = Library.open(big_library)
    ref = engine.search(lib, QUERY, top_k=100)
    lib.close()
    assert [h.video_id for h in resp.hits] == [h.video_id for h in ref.hits]
    assert [h.score for h in resp.hits] == pytest.approx([h.score for h in ref.hits], abs=1e-12)
    shot(w, "search_after_cancel_done")

"""The worker plumbing: progress events are coalesced but never lost (issue 14: "0 / 9 videos"
while 5 were done), and each thread gets its own library connection (issue 15, item 10)."""

import threading

from PySide6.QtCore import Qt


def _chatty_index_job(n_videos=4, n_frames=200, progress=None, cancel=None):
    """Reports like ``index_folder``: many frame events per video, then one 'videos' milestone."""
    from strived.jobs import report

    report(progress, "videos", 0, n_videos, message=f"{n_videos} found")
    for v in range(n_videos):
        item = f"/clips/v{v}.mp4"
        for f in range(1, n_frames + 1):
            report(progress, "frames", f, n_frames, item=item, videos_done=v, videos_total=n_videos)
        report(progress, "videos", v + 1, n_videos, item=item, message="indexed")
    report(progress, "texts", 1, 3)                  # a stage that stops before its total
    return "ok"


def test_progress_milestones_are_never_dropped(qtbot):
    from app.workers import Worker

    got = []
    w = Worker(_chatty_index_job, min_interval_s=0.1)
    w.signals.progressed.connect(got.append, Qt.ConnectionType.DirectConnection)
    with qtbot.waitSignal(w.signals.done, timeout=10000):
        w.start()
    milestones = [(e.done, e.item, e.message) for e in got if e.stage == "videos"]
    assert milestones == [(0, None, "4 found")] + [
        (v + 1, f"/clips/v{v}.mp4", "indexed") for v in range(4)]
    frames = [e for e in got if e.stage == "frames"]
    assert len(frames) < 40                           # throttled: 800 frame events sent
    for v in range(4):                                # each video's last frame event arrives
        assert any(e.item == f"/clips/v{v}.mp4" and e.done == 200 for e in frames)
    # order is kept: every frame event of a video comes before its milestone
    idx = {id(e): k for k, e in enumerate(got)}
    for e in frames:
        ms = next(m for m in got if m.stage == "videos" and m.item == e.item)
        assert idx[id(e)] < idx[id(ms)]
    assert got[-1].stage == "texts" and got[-1].done == 1     # the held last event is flushed


def test_index_panel_moves_while_a_video_is_perceived(qtbot):
    """The panel reads the engine's own names (videos_done/videos_total) on frame events, so the
    bar and the ETA move during a long video, and each finished row says done."""
    from app.index_panel import IndexPanel
    from app.workers import Worker

    panel = IndexPanel()
    qtbot.addWidget(panel)
    panel.start("/clips")
    seen = []

    def on(ev):
        panel.on_progress(ev)
        seen.append((ev.stage, panel.bar.value(), panel.bar.format()))

    w = Worker(_chatty_index_job, 3, 50, min_interval_s=0.0)
    w.signals.progressed.connect(on)
    with qtbot.waitSignal(w.signals.done, timeout=10000):
        w.start()
    qtbot.wait(20)
    first_frames = [v for st, v, _f in seen if st == "frames"]
    assert first_frames[0] > 0                        # moved before the first video finished
    assert seen[-1][2].startswith("3 / 3 videos")
    assert [panel.tree.topLevelItem(i).text(1) for i in range(3)] == ["done"] * 3
    assert "ETA" in panel.eta.text() and panel.eta.text() != "ETA –"


def test_each_thread_has_its_own_connection(tmp_path):
    from app.connections import LibraryConnections
    from strived.store.library import Library

    lib = Library.open(tmp_path / "lib", create=True)
    conns = LibraryConnections(str(lib.folder), first=lib)
    assert conns.get() is lib
    other = {}

    def worker():
        with conns.use() as l2:
            other["lib"] = l2
            other["again"] = conns.get()
            other["n"] = len(l2)

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert other["lib"] is not lib and other["lib"].conn is not lib.conn
    assert other["again"] is other["lib"] and other["n"] == 0
    assert len(conns.threads) == 2
    assert conns.close_all() == 0                     # nothing busy: all closed now
    assert conns.threads == []


def test_a_busy_connection_is_closed_by_its_own_thread(tmp_path):
    from app.connections import LibraryConnections
    from strived.store.library import Library

    Library.open(tmp_path / "lib", create=True).close()
    conns = LibraryConnections(str(tmp_path / "lib"))
    inside, release, done = threading.Event(), threading.Event(), {}

    def worker():
        with conns.use() as lib:
            inside.set()
            release.wait(5)
            done["n"] = len(lib)                      # still usable after close_all()
        done["lib"] = lib

    t = threading.Thread(target=worker)
    t.start()
    inside.wait(5)
    assert conns.close_all() == 1                     # busy: left to its thread
    release.set()
    t.join()
    assert done["n"] == 0 and conns.threads == []
    import sqlite3

    try:
        done["lib"].conn.execute("SELECT 1")
    except sqlite3.ProgrammingError:
        pass
    else:
        raise AssertionError("the worker's connection should be closed after its job")

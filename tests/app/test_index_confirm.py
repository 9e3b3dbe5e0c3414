"""Indexing a folder picked in a dialog asks first, with what the folder holds: Enter in a folder
dialog accepts the folder it opened in, and a whole tree must not start without the user seeing
it. Cancel (also the default button) indexes nothing."""

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFileDialog, QMessageBox

from tests.app.conftest import make_clip


def _tree(tmp_path):
    root = tmp_path / "home"
    (root / "a").mkdir(parents=True)
    (root / "b" / "c").mkdir(parents=True)
    make_clip(root / "a" / "v0.mp4", n_frames=10, fps=10.0, size=(160, 90), seed=1)
    make_clip(root / "b" / "c" / "v1.mp4", n_frames=10, fps=10.0, size=(160, 90), seed=2)
    (root / "notes.txt").write_text("not a video")
    return root


def _choose(monkeypatch, folder):
    monkeypatch.setattr(QFileDialog, "getExistingDirectory", staticmethod(lambda *a, **k: str(folder)))


def test_index_asks_with_the_count_and_cancel_indexes_nothing(qtbot, window, tmp_path, monkeypatch):
    w = window
    assert w.open_library(str(tmp_path / "lib"), create=True)
    root = _tree(tmp_path)
    _choose(monkeypatch, root)
    w.index_confirm = None
    qtbot.keyClick(w, Qt.Key.Key_I, Qt.KeyboardModifier.ControlModifier)   # Ctrl+I: Index folder…
    qtbot.waitUntil(lambda: getattr(w, "index_confirm", None) is not None and w.index_confirm.isVisible(),
                    timeout=10000)
    box = w.index_confirm
    assert "Index 2 videos" in box.text() and "2 folders" in box.text() and str(root) in box.text()
    assert box.defaultButton() is box.button(QMessageBox.StandardButton.Cancel)
    qtbot.keyClick(box, Qt.Key.Key_Return)                   # Enter: the default, Cancel
    qtbot.waitUntil(lambda: not box.isVisible(), timeout=3000)
    assert not w.indexing and w.index_worker is None
    # again, and this time the user clicks Index
    w.index_confirm = None
    w.act_index.trigger()
    qtbot.waitUntil(lambda: w.index_confirm is not None and w.index_confirm.isVisible(), timeout=10000)
    qtbot.mouseClick(w.index_confirm.button(QMessageBox.StandardButton.Yes), Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: w.index_worker is not None and w.index_worker.is_done, timeout=180000)
    assert len(w.library.video_ids()) == 2


def test_a_folder_without_videos_says_so(qtbot, window, tmp_path, monkeypatch):
    w = window
    assert w.open_library(str(tmp_path / "lib"), create=True)
    empty = tmp_path / "empty"
    empty.mkdir()
    _choose(monkeypatch, empty)
    w.index_confirm = None
    w.act_index.trigger()
    qtbot.waitUntil(lambda: w.index_confirm is not None and w.index_confirm.isVisible(), timeout=10000)
    assert "No videos" in w.index_confirm.text()
    qtbot.keyClick(w.index_confirm, Qt.Key.Key_Return)
    assert not w.indexing and w.index_worker is None

"""The first-run screen: what it says, opening a dashcam folder, and the generated sample, driven
through the real dialog and main window offscreen."""

from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from tests.app.conftest import make_clip, shot


def test_welcome_says_what_runs_offline_and_what_needs_configuration(qtbot, window):
    from app.welcome import capabilities

    d = window.show_welcome()
    qtbot.waitExposed(d)
    offline = d.offline_label.text()
    for name, ok, _how in capabilities():
        assert name in offline
        assert ("✔ " if ok else "✘ ") + name in offline
    assert "Perception" in offline and "rule library" in offline
    conf = d.config_label.text()
    assert "LLM endpoint" in conf and "model folder" in conf and "Nothing is downloaded" in conf
    for b in (d.sample_button, d.open_folder_button, d.open_library_button):
        assert b.isVisible() and b.isEnabled()
    shot(d, "welcome")
    d.close()


def test_show_at_start_is_remembered(qtbot, window):
    d = window.show_welcome(only_if_wanted=True)
    assert d is not None and d.show_at_start.isChecked()
    d.show_at_start.setChecked(False)
    d.close()
    assert window.show_welcome(only_if_wanted=True) is None
    assert window.show_welcome() is not None               # the toolbar action always shows it
    window.welcome.close()


def test_open_a_dashcam_folder_creates_its_library_and_indexes(qtbot, window, tmp_path, monkeypatch):
    folder = tmp_path / "dashcam"
    folder.mkdir()
    make_clip(folder / "trip.mp4", n_frames=40, fps=20.0)
    d = window.show_welcome()
    monkeypatch.setattr("app.welcome.QFileDialog.getExistingDirectory", lambda *a, **k: str(folder))
    qtbot.mouseClick(d.open_folder_button, Qt.MouseButton.LeftButton)
    assert window.library is not None
    assert window.library_path != str(folder)              # the library lives apart from the footage
    assert Path(window.library_path).name.startswith("dashcam-")
    with qtbot.waitSignal(window.index_worker.signals.done, timeout=120000):
        pass
    qtbot.waitUntil(lambda: "1 videos" in window.stats_label.text(), timeout=10000)
    assert not d.isVisible()


@pytest.mark.slow
def test_try_the_sample_opens_rendered_clips_and_searches(qtbot, window, tmp_path):
    d = window.show_welcome()
    d.sample_dir = tmp_path / "sample"
    with qtbot.waitSignal(window.search_finished, timeout=300000) as got:
        qtbot.mouseClick(d.sample_button, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: d.progress.isVisible() or window.library is not None, timeout=5000)
    resp = got.args[0]
    assert window.library_path == str((tmp_path / "sample" / "library").resolve()) or \
        Path(window.library_path).resolve() == (tmp_path / "sample" / "library").resolve()
    assert window.query.currentText() == "a car cuts in from the right"
    assert resp.hits and resp.hits[0].video_id == "sample_cut_in_right"
    assert resp.hits[0].path.endswith("sample_cut_in_right.mp4") and Path(resp.hits[0].path).exists()
    # the player shows the rendered clip with the records' boxes on it
    with qtbot.waitSignal(window.inspect_finished, timeout=30000):
        pass
    qtbot.waitUntil(lambda: bool(window.player.canvas.boxes), timeout=10000)
    assert window.player.overlay_data.boxes_at(window.player.frame_idx)
    assert window.model.rowCount() >= 1
    shot(window, "welcome_sample_results")
    # a second start reuses the sample (no re-rendering)
    from app.welcome import sample_job

    assert sample_job(str(tmp_path / "sample"))["reused"] is True


def test_the_sample_can_be_cancelled_and_tried_again(qtbot, window, tmp_path):
    """Preparing the sample shows a Cancel button; a click stops it, the dialog is usable again,
    no half-made sample is taken for a finished one."""
    d = window.show_welcome()
    d.sample_dir = tmp_path / "sample"
    qtbot.mouseClick(d.sample_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: d.cancel_button.isVisible(), timeout=5000)
    qtbot.waitUntil(lambda: d.progress.maximum() > 0, timeout=30000)          # rendering has begun
    with qtbot.waitSignal(d.worker.signals.cancelled, timeout=60000):
        qtbot.mouseClick(d.cancel_button, Qt.MouseButton.LeftButton)
    assert "cancelled" in d.status.text().lower() and not d.cancel_button.isVisible()
    assert d.sample_button.isEnabled() and window.library is None
    assert not (tmp_path / "sample" / "sample.json").exists()   # not marked complete: a retry rebuilds

"""The player plays an event across a file boundary of a drive (issue 33): from 0.5 s before the end
of file 1 the arrow key (and playback) goes on into file 2's first frames, and back."""

import numpy as np
import pytest
from PySide6.QtCore import Qt

from tests.core.drive_data import NAMES, file_no, frame_code, make_drive


@pytest.fixture()
def merged_hit(tmp_path):
    from strived import engine
    from strived.cli import main
    from strived.store.library import Library

    recs, rule, paths = make_drive(tmp_path)
    lib = tmp_path / "lib"
    assert main(["import", str(recs), "-L", str(lib), "--no-text-index"]) == 0
    import json

    with Library.open(lib) as L:
        resp = engine.search(L, "hard braking", rule=json.loads(rule.read_text()), sources=("rule",))
    hit = resp.hits[0]
    assert hit.drive and [p["video_id"] for p in hit.drive["parts"]] == list(NAMES[:2])
    return hit, paths


def _bgr(player):
    from PySide6.QtGui import QImage

    img = player.canvas.image.convertToFormat(QImage.Format.Format_RGB888)
    w, h = img.width(), img.height()
    arr = np.frombuffer(img.constBits(), np.uint8, img.bytesPerLine() * h).reshape(h, -1)
    return arr[:, : w * 3].reshape(h, w, 3)[:, :, ::-1]


def _shown(player):
    img = _bgr(player)
    return player.decoder.path, player.frame_idx, file_no(img), frame_code(img)


def test_player_steps_and_plays_across_the_boundary(qtbot, merged_hit):
    from app.drive_player import follow_drive
    from app.player import PlayerWidget

    hit, paths = merged_hit
    p = PlayerWidget()
    p.prefetch = False
    qtbot.addWidget(p)
    p.resize(640, 400)
    p.show()
    with qtbot.waitSignal(p.frame_shown, timeout=5000):
        assert p.load(hit.path, span_s=hit.span_s)
    dp = follow_drive(p, hit)
    assert dp.video_id == NAMES[0]
    with qtbot.waitSignal(p.frame_shown, timeout=5000):
        p.seek_time(9.5)                                       # 0.5 s before the boundary
    assert _shown(p) == (str(paths[0]), 95, 0, 95)
    p.setFocus()
    for k in range(96, 100):
        with qtbot.waitSignal(p.frame_shown, timeout=5000):
            qtbot.keyClick(p, Qt.Key.Key_Right)
        assert _shown(p) == (str(paths[0]), k, 0, k)
    with qtbot.waitSignal(dp.file_changed, timeout=5000):
        qtbot.keyClick(p, Qt.Key.Key_Right)                  # past file 1's last frame: file 2 begins
    qtbot.waitUntil(lambda: p.canvas.image is not None, timeout=5000)
    assert _shown(p) == (str(paths[1]), 0, 1, 0) and dp.video_id == NAMES[1]
    assert p.intervals_s == [(0.0, 2.0)]                       # file 2's part of the event
    with qtbot.waitSignal(dp.file_changed, timeout=5000):
        qtbot.keyClick(p, Qt.Key.Key_Left)                   # and back to file 1's last frame
    qtbot.waitUntil(lambda: p.canvas.image is not None and p.frame_idx == 99, timeout=5000)
    assert _shown(p) == (str(paths[0]), 99, 0, 99)
    # playing from 0.3 s before the boundary goes on into file 2 without a stop
    with qtbot.waitSignal(p.frame_shown, timeout=5000):
        p.seek_time(9.7)
    qtbot.mouseClick(p.play_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: p.decoder.path == str(paths[1]) and p.frame_idx >= 3, timeout=8000)
    assert p.is_playing
    qtbot.mouseClick(p.play_button, Qt.MouseButton.LeftButton)
    p.wait_idle()
    qtbot.waitUntil(lambda: _shown(p)[0] == str(paths[1]) and _shown(p)[2:] == (1, p.frame_idx), timeout=5000)
    p.shutdown()


def test_a_hit_inside_one_file_stops_at_its_end(qtbot, merged_hit, tmp_path):
    from app.drive_player import follow_drive
    from app.player import PlayerWidget
    from strived.engine import SearchHit

    _hit, paths = merged_hit
    p = PlayerWidget()
    p.prefetch = False
    qtbot.addWidget(p)
    with qtbot.waitSignal(p.frame_shown, timeout=5000):
        assert p.load(str(paths[0]))
    follow_drive(p, SearchHit(1, NAMES[0], str(paths[0]), 1.0, (8.0, 9.9), {}))
    with qtbot.waitSignal(p.frame_shown, timeout=5000):
        p.seek(99)
    qtbot.keyClick(p, Qt.Key.Key_Right)
    p.wait_idle()
    assert p.decoder.path == str(paths[0]) and p.frame_idx == 99
    p.shutdown()

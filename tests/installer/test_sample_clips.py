"""The generated sample clips: rendered frame for frame from the scenario records."""

import numpy as np
import pytest

from strived.sample import render_clip, sample_scenarios


@pytest.fixture(scope="module")
def cut_in(tmp_path_factory):
    rec = {r.info.id: r for r in sample_scenarios()}["sample_cut_in_right"]
    path = tmp_path_factory.mktemp("clip") / "cut_in.mp4"
    info = render_clip(rec, path, t_range_s=(6.0, 8.0))
    return rec, path, info


def _frames(path):
    import cv2

    cap = cv2.VideoCapture(str(path))
    out = []
    while True:
        ok, img = cap.read()
        if not ok:
            break
        out.append(img)
    cap.release()
    return out


def test_clip_matches_the_records_size_and_frames(cut_in):
    rec, path, info = cut_in
    frames = _frames(path)
    assert info["n_frames"] == len(frames) == 20          # 2 s at the records' 10 fps
    assert frames[0].shape == (rec.info.height, rec.info.width, 3) == (720, 1280, 3)


def test_road_users_are_drawn_exactly_where_their_record_boxes_are(cut_in, tmp_path):
    """Diff against the same clip rendered without road users: every changed pixel lies in a
    record box (plus its ground shadow), and every sizeable box is filled."""
    import copy

    rec, path, _ = cut_in
    empty = copy.deepcopy(rec)
    empty.tracks = []
    render_clip(empty, tmp_path / "empty.mp4", t_range_s=(6.0, 8.0))
    drawn, bare = _frames(path), _frames(tmp_path / "empty.mp4")
    for j in (0, 10, 19):
        k = 60 + j                                          # sample index of file frame j
        changed = np.abs(drawn[j].astype(int) - bare[j].astype(int)).max(axis=2) > 40
        allowed = np.zeros_like(changed)
        filled = []
        for tr in rec.tracks:
            at = {int(p): i for i, p in enumerate(tr.pos)}
            if k not in at:
                continue
            x1, y1, x2, y2 = tr.bbox[at[k]]
            w, h = x2 - x1, y2 - y1
            allowed[max(0, int(y1 - 3)):int(y2 + 0.1 * h + 4), max(0, int(x1 - 0.1 * w - 3)):int(x2 + 0.1 * w + 4)] = True
            if w > 30 and h > 30:
                filled.append(changed[int(y1):int(y2), max(0, int(x1)):int(x2)].mean())
        assert changed.sum() > 500
        assert (changed & ~allowed).sum() < 0.01 * changed.sum(), j
        assert filled and min(filled) > 0.5, (j, filled)


def test_left_turn_pans_the_skyline(tmp_path):
    """Turning left moves distant scenery to the right in the image (what ego-yaw reads)."""
    import cv2

    rec = {r.info.id: r for r in sample_scenarios()}["sample_left_turn"]
    path = tmp_path / "turn.mp4"
    render_clip(rec, path, t_range_s=(9.0, 9.3))
    a, _, c = _frames(path)
    g0 = cv2.cvtColor(a[150:350], cv2.COLOR_BGR2GRAY).astype(np.float32)
    g1 = cv2.cvtColor(c[150:350], cv2.COLOR_BGR2GRAY).astype(np.float32)
    (dx, dy), _ = cv2.phaseCorrelate(g0, g1)
    # 0.28 rad/s over 0.2 s with f = 1000 px: ~56 px to the right
    assert 40 < dx < 70 and abs(dy) < 2


def test_unwritable_target_raises(tmp_path):
    rec = sample_scenarios()[0]
    with pytest.raises(OSError):
        render_clip(rec, tmp_path / "missing-dir" / "x.mp4", t_range_s=(0, 0.5))

"""Shot cuts (perception/shots.py): an edited clip's cut ends every track and voids the ego frame
pair across it; fast pans, and a camera tumbling after a crash, are footage, not cuts."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from strived.perception.shots import ShotCuts, split_at_cuts

cv2 = pytest.importorskip("cv2")


def _texture(seed: int, w: int, h: int, tint) -> np.ndarray:
    rng = np.random.default_rng(seed)
    g = cv2.GaussianBlur(rng.integers(0, 255, (h, w), dtype=np.uint8), (0, 0), 1.5).astype(np.float32)
    return np.clip(g[..., None] * np.asarray(tint, np.float32)[None, None, :], 0, 255).astype(np.uint8)


def _shot(seed: int, n: int, tint, shift_px: int = 3, size=(320, 180), block_x0: int = 40) -> list[np.ndarray]:
    """A textured scene panning by ``shift_px`` per frame, a red 'car' block moving right on it."""
    w, h = size
    tex = _texture(seed, w + n * shift_px + 1, h, tint)
    out = []
    for k in range(n):
        img = np.ascontiguousarray(tex[:, k * shift_px:k * shift_px + w])
        bx = block_x0 + 4 * k
        cv2.rectangle(img, (bx, 90), (bx + 50, 130), (0, 0, 200), -1)
        out.append(img)
    return out


def _edited(n1: int = 20, n2: int = 20) -> list[np.ndarray]:
    # the second shot's block sits where the first one's was: an IoU tracker would join them
    return _shot(1, n1, (1.0, 0.9, 0.8)) + _shot(2, n2, (0.5, 0.9, 1.3), block_x0=40 + 4 * (n1 - 1))


def _cuts(frames) -> list[int]:
    s = ShotCuts()
    for f in frames:
        s.feed(f)
    return s.cuts()


def test_an_edit_between_two_shots_is_one_cut_at_the_first_frame_of_the_new_shot():
    assert _cuts(_edited()) == [20]
    assert _cuts(_edited(1, 20)) == [1]            # at the clip's very start
    assert _cuts(_edited(20, 2)) == [20]           # and near its end


def test_a_fast_pan_and_a_tumbling_camera_are_footage_not_cuts():
    assert _cuts(_shot(3, 30, (1.0, 1.0, 1.0), shift_px=12)) == []
    # a camera knocked off its mount: several unrelated frames in a row inside one shot
    tumble = [_texture(10 + k, 320, 180, (0.3 + 0.2 * k, 1.0, 1.5 - 0.2 * k)) for k in range(4)]
    frames = _shot(4, 15, (1.0, 1.0, 1.0)) + tumble + _shot(4, 15, (1.0, 1.0, 1.0))
    assert _cuts(frames) == []
    # a black frame has no corners: nothing is judged across it
    black = [np.zeros((180, 320, 3), np.uint8)]
    assert _cuts(_shot(5, 10, (1, 1, 1)) + black + _shot(6, 10, (0.5, 0.9, 1.3))) == []


def test_split_at_cuts_gives_each_shot_its_own_track():
    pos = np.array([0, 1, 2, 3, 4, 5, 1, 2, 5, 6])
    tid = np.array([7, 7, 7, 7, 7, 7, 9, 9, 9, 9])
    new, origin = split_at_cuts(pos, tid, [3, 5], next_id=100)
    assert new.tolist() == [7, 7, 7, 100, 100, 101, 9, 9, 102, 102]
    assert origin == {100: 7, 101: 7, 102: 9}
    same, none = split_at_cuts(pos, tid, [], next_id=100)
    assert same.tolist() == tid.tolist() and none == {}


def test_perceive_video_ends_tracks_and_voids_the_ego_pair_at_an_edit(tmp_path, fake_detector):
    from strived.perception.pipeline import PerceptionConfig, perceive_video

    path = tmp_path / "edited.mp4"
    wr = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), 10.0, (320, 180))
    for f in _edited():
        wr.write(f)
    wr.release()
    res = perceive_video(path, detector=fake_detector, camera_config={},
                         config=PerceptionConfig(sample_fps=10.0, lanes=False, telemetry=False))
    rec = res.records
    assert rec.info.attrs["shot_cuts_s"] == pytest.approx([2.0])
    assert len(rec.tracks) == 2                     # the block before and the block after the edit
    spans = sorted((float(rec.t[tr.pos[0]]), float(rec.t[tr.pos[-1]])) for tr in rec.tracks)
    assert spans[0][1] < 2.0 <= spans[1][0]
    assert np.isnan(rec.ego["jolt"][20])            # the edit is not a jolt of the camera


def test_real_edits_are_found_and_real_footage_has_none(shared_dir):
    def read(path: Path, fps: float = 10.0) -> list[np.ndarray]:
        cap = cv2.VideoCapture(str(path))
        step = max(1, int(round((cap.get(cv2.CAP_PROP_FPS) or fps) / fps)))
        out, i = [], 0
        while True:
            ok, f = cap.read()
            if not ok:
                return out
            if i % step == 0:
                out.append(f)
            i += 1

    mmdet = shared_dir / "data" / "bench-dev" / "videos" / "mmdet_demo.mp4"
    kitti = shared_dir / "data" / "egomotion" / "kitti_raw_0005" / "video.mp4"
    if not mmdet.exists() or not kitti.exists():
        pytest.skip("shared clips not present")
    frames = read(mmdet)
    cuts = _cuts(frames)
    assert len(cuts) == 1 and abs(cuts[0] - 21) <= 1   # "last 4 frames are a cut to a different road" (2.13 s)
    assert _cuts(read(kitti)) == []


def test_a_change_of_frame_shape_mid_stream_starts_a_new_shot():
    frames = _shot(7, 10, (1, 1, 1)) + [cv2.resize(f, (320, 240)) for f in _shot(7, 10, (1, 1, 1))]
    assert _cuts(frames) == [10]

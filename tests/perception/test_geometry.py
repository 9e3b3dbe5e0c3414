"""Camera model, ranging, lanes and ego yaw on synthetic geometry."""

import math

import numpy as np
import pytest

from strived.perception.ego.estimator import EgoMotionEstimator
from strived.perception.geometry import (CameraModel, horizon_from_boxes, lane_rel_from_offset,
                                         load_camera_config, range_boxes, smooth_series)
from strived.perception.lanes import detect_lanes, lane_rel_from_lines

KITTI = CameraModel(1242, 375, 721.5, 609.6, 172.9, camera_height_m=1.65)


def _project_car(cam, X, Z, H=1.5, W=1.8):
    f = cam.focal_px
    yb = cam.horizon_y + f * cam.camera_height_m / Z
    h = f * H / Z
    xc = cam.cx + f * X / Z
    w = f * W / Z
    return [xc - w / 2, yb - h, xc + w / 2, yb]


@pytest.mark.parametrize("X,Z", [(0.0, 8.0), (3.5, 20.0), (-4.0, 35.0)])
def test_ranging_recovers_projected_car(X, Z):
    z, x = range_boxes(np.array([_project_car(KITTI, X, Z)]), ["car"], KITTI)
    assert z[0] == pytest.approx(Z, rel=0.02) and x[0] == pytest.approx(X, abs=0.1 + 0.02 * Z)


def test_ranging_truncated_box_uses_width():
    cam = CameraModel.from_frame_size(1280, 720)
    b = _project_car(cam, 0.0, 4.0)
    b[3] = 719  # cut by the bottom edge
    z, _ = range_boxes(np.array([b]), ["car"], cam)
    assert 3.0 < z[0] < 5.5


def test_horizon_from_cars():
    cam = KITTI.with_horizon(100.0, "wrong")  # the estimate must not depend on the current horizon
    boxes = np.array([_project_car(KITTI, x, z) for x, z in [(0, 10), (3, 15), (-3, 25), (2, 30)] * 3])
    assert horizon_from_boxes(boxes, ["car"] * len(boxes), cam) == pytest.approx(172.9, abs=1.0)
    assert horizon_from_boxes(boxes[:5], ["car"] * 5, cam) is None  # too few cars


def test_camera_config_lookup_and_scaling(tmp_path):
    (tmp_path / "trip").mkdir()
    (tmp_path / "camera.json").write_text('{"focal_px": 1000, "horizon_y": 400, "width": 1920}')
    cfg = load_camera_config(tmp_path / "trip" / "a.mp4", tmp_path)
    cam = CameraModel.from_config(960, 540, cfg)
    assert cam.focal_px == pytest.approx(500) and cam.horizon_y == pytest.approx(200)
    assert cam.horizon_source == "config"
    assert load_camera_config(tmp_path / "trip" / "a.mp4", tmp_path / "trip") is None


def test_lane_rel_helpers():
    assert lane_rel_from_offset(np.array([0.3, 2.0, -5.0]), 3.5).tolist() == [0, 1, -1]
    left, right = (-1.0, 600.0), (1.0, 0.0)  # meet at y=300, x=300
    out = lane_rel_from_lines(np.array([300, 500, 100, 800]), np.array([400, 400, 400, 400]), left, right)
    assert out.tolist() == [0, 1, -1, 3]  # lane width at y=400 is 200 px


def test_detect_lanes_on_drawn_road():
    import cv2

    img = np.zeros((360, 640), np.uint8)
    cv2.line(img, (120, 340), (300, 190), 255, 5)
    cv2.line(img, (540, 340), (340, 190), 255, 5)
    obs = detect_lanes(img, horizon_y=170)
    assert obs.left is not None and obs.right is not None
    vx, vy = obs.vanishing_point()
    assert abs(vx - 320) < 15 and abs(vy - 173) < 15


def test_detect_lanes_accepts_opencv5_line_shape(monkeypatch):
    """OpenCV 5 returns HoughLinesP segments as (N, 4) where OpenCV 4 gave (N, 1, 4): same lanes."""
    import cv2

    img = np.zeros((360, 640), np.uint8)
    cv2.line(img, (120, 340), (300, 190), 255, 5)
    cv2.line(img, (540, 340), (340, 190), 255, 5)
    want = detect_lanes(img, horizon_y=170)
    real = cv2.HoughLinesP
    monkeypatch.setattr(cv2, "HoughLinesP", lambda *a, **k: (lambda r: None if r is None else r.reshape(-1, 4))(real(*a, **k)))
    got = detect_lanes(img, horizon_y=170)
    assert got.left is not None and np.allclose(got.vanishing_point(), want.vanishing_point())


def test_smooth_series_handles_nan_and_irregular_time():
    t = np.array([0, 0.1, 0.2, 0.5, 0.6, 1.0])
    v = np.array([1.0, 1.0, 9.0, 1.0, np.nan, 1.0])
    s = smooth_series(t, v, 0.35)
    assert np.isnan(s[4]) and s[1] < 4


def test_yaw_sign_from_panning_texture():
    import cv2

    rng = np.random.default_rng(0)
    tex = cv2.GaussianBlur(rng.integers(0, 255, (240, 1200), dtype=np.uint8), (0, 0), 2)
    cam = CameraModel.from_frame_size(320, 240)
    est = EgoMotionEstimator()
    shift = 4  # content moves right by 4 px per frame = camera turning left
    for k in range(6):
        x0 = 400 - shift * k
        est.feed(np.ascontiguousarray(tex[:, x0:x0 + 320]), 0.1 * k, np.zeros((0, 4)), cam, 1.0)
    yaw = np.array(est.yaw_rate[1:])
    expected = math.atan(shift / cam.focal_px) / 0.1
    assert np.all(yaw > 0) and np.median(yaw) == pytest.approx(expected, rel=0.25)
    series = est.series(cam)
    assert np.isnan(series["speed"]).all()  # speed proxy is off by default

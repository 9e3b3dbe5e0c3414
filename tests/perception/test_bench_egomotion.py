"""The ego-motion benchmark's degraded test bed: copies at another size keep the calibration right."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]


def _bench():
    spec = importlib.util.spec_from_file_location("bench_egomotion", ROOT / "benchmarks" / "bench_egomotion.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _fake_sequences(root: Path, width=320, height=96, n=6) -> None:
    import cv2

    rng = np.random.default_rng(0)
    for seq in _bench().SEQUENCES:
        d = root / seq
        d.mkdir(parents=True)
        (d / "gt.csv").write_text("frame,t_s,speed_mps\n0,0.0,3.0\n", encoding="utf-8")
        (d / "meta.json").write_text(json.dumps({"width": width, "height": height}), encoding="utf-8")
        (d / "calib.txt").write_text("P0: 300 0 160 0 0 300 48 0 0 0 1 0\n", encoding="utf-8")
        w = cv2.VideoWriter(str(d / "video.mp4"), cv2.VideoWriter_fourcc(*"mp4v"), 10.0, (width, height))
        for _ in range(n):
            w.write(rng.integers(0, 255, (height, width, 3), dtype=np.uint8))
        w.release()


def test_degraded_copies_are_smaller_and_keep_ground_truth_and_calibration(tmp_path):
    from strived.perception.video import probe_video

    be = _bench()
    src, dst = tmp_path / "src", tmp_path / "dst"
    _fake_sequences(src)
    be.degrade_copy(src, dst, 0.5, 8)
    for seq in be.SEQUENCES:
        assert (dst / seq / "gt.csv").read_text() == (src / seq / "gt.csv").read_text()
        p = probe_video(dst / seq / "video.mp4")
        assert (p.width, p.height) == (160, 48)
        assert p.n_frames == 6
    # the KITTI calibration is in the recorded images' pixels: camera.json says which width
    seq = dst / be.SEQUENCES[1]
    assert be.calibration_width(seq, 160) == 320
    cfg = be.kitti_camera_config(seq, be.calibration_width(seq, 160))
    from strived.perception.geometry import CameraModel

    cam = CameraModel.from_config(160, 48, cfg)
    assert cam.focal_px == pytest.approx(150.0)
    assert cam.horizon_y == pytest.approx(24.0)


def test_degrade_option_rejects_nonsense():
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_egomotion.py"), "--degrade", "3:8"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2
    assert "SCALE:QUALITY" in r.stderr


@pytest.mark.parametrize("weather", ["rain", "tunnel"])
def test_weather_copies_keep_size_and_ground_truth_and_change_every_frame(tmp_path, weather):
    from strived.perception.video import iter_frames

    be = _bench()
    src, dst = tmp_path / "src", tmp_path / "dst"
    _fake_sequences(src, n=4)
    be.degrade_copy(src, dst, 1.0, 95, 0.0, weather=weather)
    seq = be.SEQUENCES[0]
    assert (dst / seq / "gt.csv").read_text() == (src / seq / "gt.csv").read_text()

    def frames(p):
        return [f.image.astype(np.float32) for f in iter_frames(p, 0)]   # every frame

    a, b = frames(src / seq / "video.mp4"), frames(dst / seq / "video.mp4")
    assert len(a) == len(b) == 4 and a[0].shape == b[0].shape
    assert all(np.abs(x - y).mean() > 10 for x, y in zip(a, b))     # drawn over every frame
    if weather == "tunnel":
        assert all(y.mean() < 0.5 * x.mean() for x, y in zip(a, b))  # and much darker

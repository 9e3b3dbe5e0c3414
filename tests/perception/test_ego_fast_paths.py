"""The ego stage's fast paths give exactly what their plain forms give: the per-frame cache of the
road fit's levels (each frame is in two pairs), the masked gradient magnitudes and the median.
(The vectorised Jacobian: test_egomotion's finite-difference test.)"""

from pathlib import Path

import numpy as np
import pytest

from strived.perception.ego.frame_cache import FrameCache
from strived.perception.ego.numeric import median
from strived.perception.ego.road_fit import grad_mag, sobel8, textured
from strived.perception.geometry import CameraModel

cv2 = pytest.importorskip("cv2")

CLIP = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "bench-dev" / "videos" / "ccd_000003.mp4"


class NoCache(FrameCache):
    """Computes every value afresh, for each pair on its own (the plain form)."""

    def get(self, img, key, make):
        return make(img)


def _feed_clip(est, frames, cam, scale):
    for k, g in enumerate(frames):
        est.feed(g, 0.1 * k, np.zeros((0, 4)), cam, scale)
    return est.series(cam)


def test_the_frame_cache_changes_no_ego_value_on_a_real_clip():
    """ccd_000003 (bench-dev): every pair's road fit reads the levels of its frames from the cache,
    computed once per frame; the series and the warps equal those of fits that compute them all."""
    from strived.perception.ego.estimator import EgoMotionEstimator

    if not CLIP.exists():
        pytest.skip("bench-dev video missing")
    cap = cv2.VideoCapture(str(CLIP))
    frames = []
    while len(frames) < 40:
        ok, f = cap.read()
        if not ok:
            break
        s = 640 / f.shape[1]
        frames.append(cv2.cvtColor(cv2.resize(f, None, fx=s, fy=s, interpolation=cv2.INTER_AREA),
                                   cv2.COLOR_BGR2GRAY))
    cap.release()
    assert len(frames) >= 30
    h, w = 720, 1280
    cam = CameraModel.from_frame_size(w, h)
    fast, plain = EgoMotionEstimator(), EgoMotionEstimator()
    plain._frames = NoCache()
    a, b = _feed_clip(fast, frames, cam, 0.5), _feed_clip(plain, frames, cam, 0.5)
    fitted = [st for st in fast.steps if st.ground is not None]
    assert len(fitted) >= 10                                 # the road fit ran on most pairs
    for k in ("speed", "accel", "yaw_rate", "jolt", "speed_conf", "stationary"):
        np.testing.assert_array_equal(a[k], b[k])
    assert a["status"] == b["status"]
    for sa, sb in zip(fast.steps, plain.steps):
        assert (sa.ground is None) == (sb.ground is None)
        if sa.ground is not None:
            np.testing.assert_array_equal(sa.ground["x"], sb.ground["x"])
            assert sa.ground["ratio"] == sb.ground["ratio"] or np.isnan(sa.ground["ratio"])


def test_the_cache_computes_once_per_frame_and_keeps_the_newest():
    cache, calls = FrameCache(keep=2), []
    imgs = [np.full((4, 4), i, np.uint8) for i in range(3)]

    def make(im):
        calls.append(int(im[0, 0]))
        return im.astype(np.float32) * 2

    for im in imgs[:2]:
        assert cache.get(im, "x", make)[0, 0] == 2 * im[0, 0]
    cache.get(imgs[1], "x", make)                            # cached
    cache.get(imgs[2], "x", make)                            # evicts imgs[0]
    cache.get(imgs[0], "x", make)
    assert calls == [0, 1, 2, 0]
    same_values = imgs[1].copy()                             # another array: its own entry
    cache.get(same_values, "x", make)
    assert calls == [0, 1, 2, 0, 1]


def test_masked_gradient_magnitudes_equal_the_whole_image_ones():
    rng = np.random.default_rng(3)
    img = cv2.GaussianBlur(rng.integers(0, 256, (90, 160), dtype=np.uint8), (0, 0), 1.2)
    mask = np.zeros(img.shape, np.uint8)
    mask[40:, 20:140] = 255
    mask[60:70, 50:60] = 0
    full = grad_mag(img)
    for thr in (1.0, 2.0, 5.0):
        ys, xs, mag = textured(*sobel8(img), mask, thr)
        want_y, want_x = np.nonzero((mask > 0) & (full > thr))
        np.testing.assert_array_equal(ys, want_y)
        np.testing.assert_array_equal(xs, want_x)
        np.testing.assert_array_equal(mag, full[want_y, want_x])
    assert all(len(v) == 0 for v in textured(*sobel8(img), np.zeros_like(mask), 1.0))


def test_median_equals_numpy_median_bit_for_bit():
    rng = np.random.default_rng(5)
    for n in list(range(1, 30)) + [999, 1000, 2001]:
        for dtype in (np.float64, np.float32):
            for _ in range(10):
                a = (rng.standard_normal(n) * rng.choice([1e-3, 1.0, 1e5])).astype(dtype)
                if rng.random() < 0.2:
                    a[rng.integers(n)] = np.nan
                got, want = median(a), np.median(a)
                assert type(got) is type(want)
                assert (np.isnan(got) and np.isnan(want)) or got == want

"""Per-track signals robust to jitter: noise is not motion, real motion survives."""

import numpy as np

from strived.perception.signals import (lane_with_hysteresis, publishable, robust_smooth,
                                        smooth_track_fields, track_quality)


def _max_rise(t, z, window=4.0):
    best = 0.0
    for i in range(len(t)):
        j = (t > t[i]) & (t - t[i] <= window)
        if j.any():
            best = max(best, float(np.nanmax(z[j] - z[i])))
    return best


def test_jitter_is_not_read_as_motion_but_an_overtake_is():
    rng = np.random.default_rng(0)
    t = np.arange(0, 6, 0.1)
    static_raw, static_new, moving_new = [], [], []
    for _ in range(40):
        z = 30.0 * np.exp(rng.normal(0, 0.08, len(t)))
        z[rng.random(len(t)) < 0.05] *= 1.6                 # occasional bad boxes
        zs, _ = smooth_track_fields(t, z, np.full(len(t), -3.0))
        static_raw.append(_max_rise(t, z))
        static_new.append(_max_rise(t, zs))
        truth = np.clip(5 + 5 * (t - 1), 5, 25)             # a car pulling away: +20 m in 4 s
        zm, _ = smooth_track_fields(t, truth * np.exp(rng.normal(0, 0.08, len(t))), np.full(len(t), -3.0))
        moving_new.append(_max_rise(t, zm))
    # a car standing 30 m ahead: raw ranging "moves" ~25 m within 4 s; smoothed, a few metres
    assert np.median(static_raw) > 15 and np.median(static_new) < 5
    # the real +20 m survives within 15 %
    assert abs(np.median(moving_new) - 20.0) < 3.0


def test_one_outlier_does_not_pull_the_track():
    t = np.arange(0, 3, 0.1)
    y = np.full(len(t), 2.0)
    y[15] = 6.0
    s = robust_smooth(t, y, 0.1, 1.0)
    assert abs(s[15] - 2.0) < 0.3 and np.all(np.abs(s - 2.0) < 0.3)


def test_nan_stays_nan_and_long_gaps_are_not_bridged():
    t = np.r_[np.arange(0, 1, 0.1), np.arange(4, 5, 0.1)]
    y = np.r_[np.full(10, 1.0), np.full(10, 5.0)]
    y[3] = np.nan
    s = robust_smooth(t, y, 0.1, 1.0)
    assert np.isnan(s[3])
    assert np.allclose(s[:3], 1.0, atol=1e-6) and np.allclose(s[10:], 5.0, atol=1e-6)


def test_track_quality_and_publishing():
    t = np.arange(0, 10, 0.1)
    good = track_quality(t, np.arange(0, 30), np.full(30, 0.8), 0.1)
    assert good["duration_s"] == 2.9 and good["fill"] == 1.0 and publishable(good)
    flicker = track_quality(t, np.array([0, 1, 2, 3]), np.full(4, 0.8), 0.1)
    assert not publishable(flicker)                           # 0.3 s: not published
    sparse = track_quality(t, np.arange(0, 60, 6), np.full(10, 0.3), 0.1)
    assert sparse["fill"] < 0.2 and not publishable(sparse)


def test_lane_hysteresis_ignores_a_box_wobbling_on_the_line():
    t = np.arange(0, 3, 0.1)
    lane = np.zeros(len(t))
    lane[[5, 7, 9]] = 1                                       # single-frame flips
    lane[20:] = 1                                             # a real change at 2.0 s
    out = lane_with_hysteresis(t, lane, hold_s=0.4)
    assert np.all(out[:20] == 0)
    assert np.all(out[25:] == 1)

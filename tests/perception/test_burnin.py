"""Burnt-in speed: a speed printed on the frame, read by tesseract, used as a metric speed source."""

import shutil
import sys

import numpy as np
import pytest

from strived.perception import burnin
from strived.perception.burnin import SpeedRead, check_reads, parse_speed, read_burnin, speed_series

from .burnin_video import DURATION_S, FPS, GAP, GLITCH, GLITCH_KMH, true_kmh, write_overlay_video

needs_ocr = pytest.mark.skipif(burnin.ocr_unavailable() is not None,
                               reason=f"OCR not available: {burnin.ocr_unavailable()}")


@pytest.fixture(scope="module")
def overlay_video(tmp_path_factory):
    return write_overlay_video(tmp_path_factory.mktemp("burnin") / "20240501_120000_NF.mp4")


def _frame_times():
    return np.arange(int(DURATION_S * FPS)) / FPS


def test_parse_speed_units_and_ocr_letters():
    assert parse_speed("047.28 039.71 O74km/h 2015/07/29") == (74.0, "km/h")
    assert parse_speed("55 MPH") == (55.0, "mph")
    assert parse_speed("12KMH") == (12.0, "km/h")
    assert parse_speed("2015/07/29 17:29:42") is None
    assert parse_speed("039.71514km/h") is None      # a coordinate's decimals are not a speed


def test_reads_that_jump_beyond_the_acceleration_bound_are_rejected():
    reads = [SpeedRead(float(t), "", v, "km/h") for t, v in enumerate([50, 52, 53, 131, 55, 57])]
    reads.insert(2, SpeedRead(1.5, "km/", None, None))
    check_reads(reads)
    assert [r.accepted for r in reads if r.value is not None] == [True, True, True, False, True, True]
    bad = next(r for r in reads if r.value == 131)
    assert "10 m/s^2" in bad.reason
    # two reads a second apart that differ by 9 km/h (2.5 m/s^2) are both fine
    ok = [SpeedRead(0.0, "", 60, "km/h"), SpeedRead(1.0, "", 69, "km/h")]
    check_reads(ok)
    assert all(r.accepted for r in ok)
    # a value no car reaches is rejected even alone
    alone = [SpeedRead(0.0, "", 420, "km/h")]
    check_reads(alone)
    assert not alone[0].accepted and "300 km/h" in alone[0].reason


@needs_ocr
def test_synthetic_overlay_read_within_10_percent_with_gaps_unknown(overlay_video):
    b = read_burnin(overlay_video)
    assert b.status == "read" and b.overlay.unit == "km/h" and b.overlay.strip == "bottom"
    s = b.summary()
    assert s["rejected"] >= 1 and s["accepted"] >= 7
    glitch = [r for r in b.reads if GLITCH[0] <= r.t < GLITCH[1]]
    assert glitch and all(not r.accepted for r in glitch if r.value == GLITCH_KMH)
    t = _frame_times()
    got = speed_series(b, t)["speed"]
    truth = np.array([true_kmh(x) for x in t]) / 3.6
    known = np.isfinite(got)
    outside_gap = (t < GAP[0]) | (t >= GAP[1])
    assert known[outside_gap].mean() >= 0.8
    rel = np.abs(got[known] - truth[known]) / truth[known]
    assert rel.max() <= 0.10, rel.max()
    # the overlay showed no speed for 4 s: two missed reads either side are not bridged
    assert not known[(t >= GAP[0] + 1.0) & (t < GAP[1] - 1.0)].any()


def test_tesseract_missing_is_unavailable_with_the_reason(overlay_video, monkeypatch):
    real_which = shutil.which
    monkeypatch.setattr(burnin.shutil, "which", lambda name, *a, **k: None if name == "tesseract"
                        else real_which(name, *a, **k))
    b = read_burnin(overlay_video)
    assert b.status == "unavailable" and b.reason == "tesseract not installed"
    assert b.summary()["reads"] == 0


def test_pytesseract_missing_is_unavailable_with_the_reason(overlay_video, monkeypatch):
    monkeypatch.setattr(burnin.shutil, "which", lambda name, *a, **k: "/usr/bin/tesseract")
    monkeypatch.setitem(sys.modules, "pytesseract", None)      # import fails
    b = read_burnin(overlay_video)
    assert b.status == "unavailable" and b.reason == "pytesseract not installed"


@needs_ocr
def test_perception_takes_the_overlay_speed_and_info_shows_its_provenance(overlay_video, fake_detector,
                                                                          tmp_path, capsys):
    import json

    from strived.cli import main
    from strived.perception.pipeline import perceive_video
    from strived.store import Library

    res = perceive_video(overlay_video, detector=fake_detector)
    rec = res.records
    av = rec.info.attrs["availability"]["speed"]
    assert "burnin:ocr" in av["source"]
    info = rec.info.attrs["burnin"]
    assert info["status"] == "read" and info["unit"] == "km/h" and info["rejected"] >= 1
    assert "agreement_with_video" in info
    truth = np.array([true_kmh(x) for x in rec.t]) / 3.6
    from_overlay = rec.ego["speed_conf"] == burnin.BURNIN_CONF
    assert from_overlay.sum() >= 0.5 * len(rec.t)
    rel = np.abs(rec.ego["speed"][from_overlay] - truth[from_overlay]) / truth[from_overlay]
    assert rel.max() <= 0.10

    with Library.open(tmp_path / "lib", create=True) as lib:
        lib.add_video(rec)
    capsys.readouterr()
    assert main(["info", rec.info.id, "--library", str(tmp_path / "lib")]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert "burnin:ocr" in shown["speed"]["source"]
    assert shown["burnin"]["accepted"] == info["accepted"]
    assert main(["info", "no-such-video", "--library", str(tmp_path / "lib")]) == 1
    assert "no video 'no-such-video'" in capsys.readouterr().err


def test_perception_without_tesseract_keeps_the_video_estimate(overlay_video, fake_detector, monkeypatch):
    from strived.perception.pipeline import perceive_video

    monkeypatch.setattr(burnin.shutil, "which", lambda name, *a, **k: None)
    rec = perceive_video(overlay_video, detector=fake_detector).records
    assert rec.info.attrs["burnin"]["status"] == "unavailable"
    assert rec.info.attrs["burnin"]["reason"] == "tesseract not installed"
    assert "burnin" not in rec.info.attrs["availability"]["speed"]["source"]


@pytest.mark.skipif(burnin.ocr_unavailable() is not None, reason="OCR not available")
def test_real_clip_burnt_in_speed(bench_dev):
    """ccd_000838 prints ``0NNkm/h`` (68 -> 74 -> 73 km/h over its 5 s); every accepted read is one
    of the values it shows."""
    clip = bench_dev / "videos" / "ccd_000838.mp4"
    if not clip.exists():
        pytest.skip("ccd_000838 not in bench-dev")
    b = read_burnin(clip, every_s=0.5)
    assert b.status == "read" and b.overlay.unit == "km/h"
    vals = [r.value for r in b.accepted()]
    assert len(vals) >= 6 and set(vals) <= {68.0, 73.0, 74.0}

"""Tesseract run by `strived.perception.ocr` (one OpenMP thread, image on stdin) reads what
pytesseract reads, word for word and box for box."""

import os
import stat
import sys

import numpy as np
import pytest

from strived.perception import burnin, ocr
from strived.perception.burnin import _FIND_CONFIG, _READ_CONFIG, STRIPS, _gray_up, find_overlay

from .burnin_video import write_overlay_video

needs_ocr = pytest.mark.skipif(burnin.ocr_unavailable() is not None,
                               reason=f"OCR not available: {burnin.ocr_unavailable()}")


def _strips_and_crops(path, n: int = 2):
    """The search strips and an overlay-sized crop of the first ``n`` frames (one a second)."""
    from strived.perception.video import iter_frames

    out = []
    for k, f in enumerate(iter_frames(path, 1.0)):
        if k >= n:
            break
        h, w = f.image.shape[:2]
        out += [("data", _gray_up(f.image[int(a * h):int(b * h)])) for _, a, b in STRIPS]
        out.append(("text", _gray_up(f.image[int(0.9 * h):h, : w // 2], 3.0)))
    return out


def _check_same(items) -> None:
    import pytesseract

    for kind, g in items:
        if kind == "data":
            want = pytesseract.image_to_data(g, config=_FIND_CONFIG, output_type=pytesseract.Output.DICT)
            assert ocr.image_to_data(g, _FIND_CONFIG) == want
        else:
            assert ocr.image_to_string(g, _READ_CONFIG) == pytesseract.image_to_string(g, config=_READ_CONFIG)


@needs_ocr
def test_same_words_as_pytesseract_on_a_generated_overlay(tmp_path):
    clip = write_overlay_video(tmp_path / "overlay.mp4")
    items = _strips_and_crops(clip)
    _check_same(items)
    from strived.perception.video import iter_frames

    found = find_overlay(next(iter(iter_frames(clip, 1.0))).image)
    assert found is not None and found[0].unit == "km/h"


@needs_ocr
def test_same_words_as_pytesseract_on_a_real_overlay(bench_dev):
    clip = bench_dev / "videos" / "ccd_000838.mp4"     # prints "O68km/h" and GPS coordinates
    if not clip.exists():
        pytest.skip("ccd_000838 not in bench-dev")
    _check_same(_strips_and_crops(clip))


def _fake_tesseract(tmp_path, monkeypatch, script: str) -> None:
    exe = tmp_path / "tesseract"
    exe.write_text(f"#!{sys.executable}\n{script}\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ.get('PATH', '')}")


def test_tesseract_gets_one_openmp_thread_unless_the_user_set_a_limit(tmp_path, monkeypatch):
    _fake_tesseract(tmp_path, monkeypatch, "import os, sys; sys.stdin.buffer.read(); "
                                           "print(os.environ.get('OMP_THREAD_LIMIT'), ' '.join(sys.argv[1:]))")
    g = np.zeros((20, 40), np.uint8)
    monkeypatch.delenv("OMP_THREAD_LIMIT", raising=False)
    assert ocr.image_to_string(g, "--psm 7").split() == ["1", "stdin", "stdout", "--psm", "7", "txt"]
    monkeypatch.setenv("OMP_THREAD_LIMIT", "3")
    assert ocr.run_tesseract(g, "--psm 6", "tsv").split()[:5] == ["3", "stdin", "stdout", "-c",
                                                                  "tessedit_create_tsv=1"]


def test_a_failing_tesseract_fails_the_ocr_not_the_video(tmp_path, monkeypatch):
    _fake_tesseract(tmp_path, monkeypatch, "import sys; sys.stderr.write('Error: bad image\\n'); sys.exit(1)")
    with pytest.raises(RuntimeError, match="tesseract exited with 1: Error: bad image"):
        ocr.image_to_string(np.zeros((20, 40), np.uint8), "--psm 7")
    monkeypatch.setattr(burnin.shutil, "which", lambda name, *a, **k: str(tmp_path / name))
    reader = burnin.BurnInReader()
    reader.feed(np.zeros((360, 640, 3), np.uint8), 0.0)
    got = reader.finish()
    assert got.status == "unavailable" and "OCR failed: RuntimeError: tesseract exited with 1" in got.reason


def test_a_hanging_tesseract_is_stopped_and_fails_the_ocr(tmp_path, monkeypatch):
    _fake_tesseract(tmp_path, monkeypatch, "import time; time.sleep(60)")
    monkeypatch.setattr(ocr, "TIMEOUT_S", 0.5)
    monkeypatch.setattr(burnin.shutil, "which", lambda name, *a, **k: str(tmp_path / name))
    reader = burnin.BurnInReader()
    reader.feed(np.zeros((360, 640, 3), np.uint8), 0.0)
    got = reader.finish()
    assert got.status == "unavailable" and got.reason.startswith("OCR failed: TimeoutExpired")

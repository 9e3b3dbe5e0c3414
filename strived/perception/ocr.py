"""The ``tesseract`` program, run on one grayscale image with one OpenMP thread.

Tesseract 5 runs its LSTM with a fixed four OpenMP threads (``num_threads(4)``), which
``OMP_NUM_THREADS`` does not lower; only ``OMP_THREAD_LIMIT`` does. On a loaded machine (indexing
workers on every core) those four threads spin for each other: one strip of a 720p frame took
1.3 s of CPU (up to 5 s wall) against 0.35 s with one thread, for the same text. The image goes
in on stdin as PNG and the result comes back on stdout (no temporary files); the TSV is parsed as
``pytesseract.image_to_data(output_type=DICT)`` parses it.
"""

from __future__ import annotations

import os
import shlex
import subprocess

import numpy as np

TIMEOUT_S = 120.0     # a tesseract that hangs fails the OCR, not the video


def _env() -> dict:
    env = dict(os.environ)
    env.setdefault("OMP_THREAD_LIMIT", "1")
    return env


def run_tesseract(gray: np.ndarray, config: str, renderer: str) -> str:
    """Tesseract's output for ``gray`` (uint8, 2-D) with command-line ``config`` and
    ``renderer`` ("txt" or "tsv"), as text. RuntimeError when tesseract fails."""
    import cv2

    ok, png = cv2.imencode(".png", gray)
    if not ok:
        raise RuntimeError("cannot encode the image for tesseract")
    args = ["tesseract", "stdin", "stdout"]
    if renderer == "tsv":
        args += ["-c", "tessedit_create_tsv=1", *shlex.split(config)]
    else:
        args += [*shlex.split(config), renderer]
    proc = subprocess.run(args, input=png.tobytes(), capture_output=True, env=_env(), timeout=TIMEOUT_S)
    if proc.returncode != 0:
        err = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        raise RuntimeError(f"tesseract exited with {proc.returncode}: {err[-1] if err else ''}"[:300])
    return proc.stdout.decode("utf-8")


def image_to_data(gray: np.ndarray, config: str) -> dict:
    """Words with their boxes: ``pytesseract.image_to_data(..., output_type=Output.DICT)``."""
    from pytesseract.pytesseract import file_to_dict

    return file_to_dict(run_tesseract(gray, config, "tsv"), "\t", -1)


def image_to_string(gray: np.ndarray, config: str) -> str:
    """The text: ``pytesseract.image_to_string``."""
    return run_tesseract(gray, config, "txt")

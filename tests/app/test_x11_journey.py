"""The app on a real X server (Xvfb) with a real window manager (openbox), so window activation
and keyboard focus are the window manager's, as on a user's desktop; the offscreen platform the
other app tests use has neither. `.ci/run` installs both (run.sh); skipped where they are absent."""

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _free_display() -> int:
    for n in range(90, 140):
        if not Path(f"/tmp/.X11-unix/X{n}").exists() and not Path(f"/tmp/.X{n}-lock").exists():
            return n
    raise RuntimeError("no free X display number")


@pytest.mark.skipif(shutil.which("Xvfb") is None or shutil.which("openbox") is None,
                    reason="Xvfb and openbox not installed (bash run.sh setup installs them)")
def test_journey_under_a_real_x_server_and_window_manager(library_copy, tmp_path):
    n = _free_display()
    env = dict(os.environ, DISPLAY=f":{n}", QT_QPA_PLATFORM="xcb", HOME=str(tmp_path))
    xvfb = subprocess.Popen(["Xvfb", f":{n}", "-screen", "0", "1600x1000x24", "-nolisten", "tcp"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wm = None
    try:
        t0 = time.monotonic()
        while not Path(f"/tmp/.X11-unix/X{n}").exists() and time.monotonic() - t0 < 10:
            time.sleep(0.05)
        wm = subprocess.Popen(["openbox"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        r = subprocess.run([sys.executable, "-m", "tests.app.x11_journey", str(library_copy),
                            str(tmp_path / "settings.ini")], env=env, cwd=REPO, capture_output=True,
                           text=True, timeout=240)
        line = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")]
        assert r.returncode == 0 and line, r.stderr[-3000:]
        got = json.loads(line[0][7:])
        assert got["platform"] == "xcb"
        assert got["active"], "the window manager activated the window"
        assert got["opened"] and got["query_focused"], got
        assert got["searched"] and got["n_hits"] > 0 and got["typed"] == "a car cuts in from the right", got
        assert got["inspected"] and got["frame_shown"], got
        assert got["playing"] and got["paused"] and got["query_unchanged"], got
    finally:
        for p in (wm, xvfb):
            if p is not None:
                p.terminate()
                try:
                    p.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    p.kill()

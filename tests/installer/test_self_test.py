"""`strived-app --self-test`: the installation check the bundle runs offline."""

import os
import subprocess
import sys
from pathlib import Path


REPO = Path(__file__).resolve().parents[2]


def test_self_test_passes_in_process(qapp):
    from app.self_test import run_self_test

    lines: list[str] = []
    rc = run_self_test(out=lines.append)
    text = "\n".join(lines)
    assert rc == 0, text
    assert "SELF-TEST PASSED" in text
    assert "[FAIL]" not in text
    for what in ("2 clips indexed", "ego yaw from optical flow", "detector + tracker",
                 "left_turn ranked first by the rule source", "main window shows",
                 "the player decoded and drew a frame"):
        assert f"[ok] {what}" in text, what


def test_self_test_fails_without_the_detector_weights(qapp, monkeypatch):
    """A broken installation (detector weights missing) must not pass."""
    import strived.perception.detect as detect
    import strived.perception.detect_nanodet as nanodet
    from app.self_test import run_self_test

    def missing(name):
        raise detect.DetectorError(f"model file {name} not found in: resources/models")

    monkeypatch.setattr(nanodet, "find_model_file", missing)
    lines: list[str] = []
    assert run_self_test(out=lines.append) == 1
    text = "\n".join(lines)
    assert "SELF-TEST FAILED" in text and "nanodet-g.onnx" in text and "SELF-TEST PASSED" not in text
    assert "offline: no  Perception" in text


def test_cli_flag_runs_the_self_test_and_exits_zero(tmp_path):
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", HOME=str(tmp_path),
               XDG_CONFIG_HOME=str(tmp_path / "cfg"), XDG_DATA_HOME=str(tmp_path / "data"))
    p = subprocess.run([sys.executable, "-m", "app", "--self-test"], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "SELF-TEST PASSED" in p.stdout

"""Offline means offline: the dependencies' telemetry and hub opt-outs are set by every entry point,
and a whole command makes no connection outside this machine (issue 37, "Offline for real")."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _clean_env():
    from strived.offline import OPT_OUTS

    return {k: v for k, v in os.environ.items() if k not in OPT_OUTS}


def test_importing_the_engine_sets_every_opt_out_and_keeps_the_users_own_choice():
    from strived.offline import OPT_OUTS

    code = ("import os, json, strived.offline as o, strived; "
            "print(json.dumps({k: os.environ.get(k) for k in o.OPT_OUTS}))")
    env = _clean_env()
    env["HF_HUB_OFFLINE"] = "0"          # the user's explicit choice is theirs
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True, cwd=ROOT).stdout
    import json

    got = json.loads(out)
    assert got == {**OPT_OUTS, "HF_HUB_OFFLINE": "0"}
    assert got["ORT_DISABLE_TELEMETRY"] == "1" and got["RAY_USAGE_STATS_ENABLED"] == "0"


def test_the_detector_runtime_is_loaded_with_its_telemetry_off(monkeypatch):
    ort = pytest.importorskip("onnxruntime")
    calls = []
    monkeypatch.setattr(ort, "disable_telemetry_events", lambda: calls.append(1))
    from strived.offline import onnxruntime

    assert onnxruntime() is ort and calls == [1]


_CONNECT = re.compile(r'connect\(\d+, \{sa_family=(AF_INET6?)[^}]*?(?:inet_addr\("([^"]+)"\)|inet_pton\(AF_INET6, "([^"]+)")')


def outside_connections(strace_log: str) -> list[str]:
    """The connect() targets in an strace log that are not loopback."""
    bad = []
    for m in _CONNECT.finditer(strace_log):
        addr = m.group(2) or m.group(3) or ""
        if addr.startswith("127.") or addr in ("::1", "::ffff:127.0.0.1"):
            continue
        bad.append(addr)
    return bad


def test_the_connection_filter_tells_loopback_from_outside():
    log = ('connect(3, {sa_family=AF_INET, sin_port=htons(53), sin_addr=inet_addr("10.0.0.2")}, 16) = 0\n'
           'connect(4, {sa_family=AF_INET, sin_port=htons(80), sin_addr=inet_addr("127.0.0.1")}, 16) = 0\n'
           'connect(5, {sa_family=AF_UNIX, sun_path="/run/x"}, 110) = 0\n'
           'connect(6, {sa_family=AF_INET6, sin6_port=htons(443), sin6_flowinfo=htonl(0), '
           'inet_pton(AF_INET6, "2603:1030::1", &sin6_addr), sin6_scope_id=0}, 28) = -1\n')
    assert outside_connections(log) == ["10.0.0.2", "2603:1030::1"]


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace not installed (run.sh installs it)")
def test_the_demo_indexes_a_real_clip_and_searches_without_any_outside_connection(tmp_path):
    """`strived demo` runs perception (onnxruntime), the text embedder (transformers) and every
    search source; under strace -f no connect() leaves the machine."""
    exe = Path(sys.executable).parent / "strived"
    log = tmp_path / "strace.log"
    r = subprocess.run(["strace", "-f", "-qq", "-e", "trace=connect", "-o", str(log), str(exe), "demo",
                        "--library", str(tmp_path / "lib")], env=_clean_env(), capture_output=True,
                       text=True, timeout=600, cwd=tmp_path)
    if r.returncode != 0 and "ptrace" in (r.stderr or ""):
        pytest.skip(f"strace cannot trace here: {r.stderr.strip()[:200]}")
    assert r.returncode == 0, r.stderr[-2000:]
    assert outside_connections(log.read_text()) == []


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace not installed (run.sh installs it)")
def test_indexing_with_worker_processes_and_the_app_self_test_stay_offline(tmp_path):
    """`strived index` with two perception worker processes (each loads the detector and its
    runtime) and the app's `--self-test` (index a generated clip, search it): under strace -f, no
    connect() leaves the machine, in the parent or any worker."""
    from tests.perception.conftest import write_video

    src = tmp_path / "videos"
    src.mkdir()
    for k in range(2):
        write_video(src / f"v{k}.mp4", n_frames=12, box_speed_px=3.0 + k)
    exe = Path(sys.executable).parent / "strived"
    runs = [[str(exe), "index", str(src), "--library", str(tmp_path / "lib"), "--workers", "2", "--quiet"],
            [sys.executable, "-m", "app", "--self-test"]]
    for k, cmd in enumerate(runs):
        log = tmp_path / f"strace{k}.log"
        env = dict(_clean_env(), QT_QPA_PLATFORM="offscreen", HOME=str(tmp_path / "home"))
        r = subprocess.run(["strace", "-f", "-qq", "-e", "trace=connect,execve", "-o", str(log), *cmd], env=env,
                           capture_output=True, text=True, timeout=600, cwd=Path(__file__).resolve().parents[2])
        if r.returncode != 0 and "ptrace" in (r.stderr or ""):
            pytest.skip(f"strace cannot trace here: {r.stderr.strip()[:200]}")
        assert r.returncode == 0, (cmd, r.stderr[-2000:])
        text = log.read_text()
        assert outside_connections(text) == [], cmd
        if k == 0:   # the workers were traced too: the spawned interpreters
            assert len(re.findall(r"execve\(.*--multiprocessing-fork", text)) >= 2, text[:2000]

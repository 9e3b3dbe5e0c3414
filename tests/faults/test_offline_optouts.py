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


#: the system calls that write, create or delete a path (strace -e trace=...)
WRITE_CALLS = "open,openat,creat,mkdir,mkdirat,rename,renameat,renameat2,unlink,unlinkat,link,linkat," \
              "symlink,symlinkat,truncate"
_WRITE_SET = frozenset(WRITE_CALLS.split(","))
_CALL = re.compile(r'^(?:\d+ +)?(\w+)\((.*)\) += (-?\d+)', re.M)
# a path argument, after its directory fd when it has one ("3</lib/cache>, "x"" with strace -y)
_DIR_PATH = re.compile(r'(?:\d+<([^>]*)>, )?"((?:[^"\\]|\\.)*)"')


def written_paths(strace_log: str, cwd: Path) -> list[Path]:
    """The paths an strace log (written with ``-y``, so directory fds carry their paths) shows
    written, created, renamed to or from, or deleted (successful calls only; an open counts when its
    flags can write). Relative paths are taken from their directory fd, or ``cwd``."""
    out = []
    for call, args, rc in _CALL.findall(strace_log):
        if int(rc) < 0 or call not in _WRITE_SET:
            continue
        if call in ("open", "openat") and not re.search(r"O_WRONLY|O_RDWR|O_CREAT|O_TRUNC", args):
            continue
        paths = [(base, p) for base, p in _DIR_PATH.findall(args)]
        if call in ("link", "linkat", "symlink", "symlinkat"):
            paths = paths[-1:]            # the new name is the write
        out += [p if os.path.isabs(p) else os.path.join(base or str(cwd), p) for base, p in paths]
    return [Path(os.path.normpath(p)) for p in out]


def stray_writes(strace_log: str, allowed: list[Path], cwd: Path) -> list[str]:
    """Written paths under none of ``allowed`` (folders, or single files such as /dev/null)."""
    def ok(p: Path) -> bool:
        return any(p == a or a in p.parents for a in allowed)
    return sorted({str(p) for p in written_paths(strace_log, cwd) if not ok(p)})


def test_the_write_filter_finds_writes_and_skips_reads_and_failures(tmp_path):
    log = ('12 openat(AT_FDCWD, "/etc/passwd", O_RDONLY|O_CLOEXEC) = 3\n'
           '12 openat(AT_FDCWD, "/home/u/.cache/Microsoft/id", O_WRONLY|O_CREAT|O_TRUNC, 0666) = 4\n'
           '12 openat(AT_FDCWD, "/lib/x.db", O_RDWR|O_CREAT, 0644) = 5\n'
           '12 openat(AT_FDCWD, "/nope/y", O_WRONLY|O_CREAT, 0644) = -1 ENOENT (No such file or directory)\n'
           '13 rename("/lib/a.tmp", "/elsewhere/a") = 0\n'
           '13 mkdir("rel", 0777) = 0\n'
           '13 openat(7</lib/cache>, "f.tmp", O_WRONLY|O_CREAT|O_EXCL, 0600) = 8</lib/cache/f.tmp>\n'
           '13 renameat(7</lib/cache>, "f.tmp", 9</other>, "f") = 0\n'
           '13 unlink("/dev/shm/sem.x") = 0\n'
           'openat(AT_FDCWD, "/dev/null", O_WRONLY) = 6\n'
           '14 execve("/usr/bin/python", ["python", "/elsewhere/b"], 0x7ff /* 3 vars */) = 0\n')
    got = stray_writes(log, [Path("/lib"), Path("/dev/shm"), Path("/dev/null")], tmp_path)
    assert got == sorted(["/home/u/.cache/Microsoft/id", "/elsewhere/a", str(tmp_path / "rel"), "/other/f"])


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace not installed (run.sh installs it)")
def test_index_search_and_export_write_only_where_they_may(tmp_path):
    """Issue 37: under strace -f, `strived index --workers 2`, `search` and `export-results --clips`
    write only into the library, the export folder, the app's config/cache folders and the temp
    folder (and /dev/shm for the workers' semaphores, /dev/null): no device id of a dependency, no
    cache in the home folder, nothing in the working folder."""
    from tests.perception.conftest import write_video

    src, cwd, home, tmp, lib, out = (tmp_path / n for n in ("videos", "cwd", "home", "tmp", "lib", "out"))
    for d in (src, cwd, home, tmp):
        d.mkdir()
    for k in range(2):
        write_video(src / f"v{k}.mp4", n_frames=12, box_speed_px=3.0 + k)
    exe = str(Path(sys.executable).parent / "strived")
    env = dict(_clean_env(), HOME=str(home), TMPDIR=str(tmp), PYTHONDONTWRITEBYTECODE="1")
    for k in ("XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME"):
        env.pop(k, None)
    allowed = [lib, out, home / ".config" / "strived", home / ".cache" / "strived", tmp,
               Path("/dev/shm"), Path("/dev/null"), Path("/dev/tty")]
    runs = [[exe, "index", str(src), "--library", str(lib), "--workers", "2", "--quiet"],
            [exe, "search", "a car moves right", "--library", str(lib), "--json"],
            [exe, "export-results", "a car moves right", str(out), "--library", str(lib), "--clips",
             "reencode", "--format", "openlabel"]]
    for k, cmd in enumerate(runs):
        log = tmp_path / f"strace{k}.log"
        r = subprocess.run(["strace", "-f", "-qq", "-y", "-e", f"trace={WRITE_CALLS}", "-o", str(log), *cmd],
                           env=env, capture_output=True, text=True, timeout=600, cwd=cwd)
        if r.returncode != 0 and "ptrace" in (r.stderr or ""):
            pytest.skip(f"strace cannot trace here: {r.stderr.strip()[:200]}")
        assert r.returncode == 0, (cmd, r.stderr[-2000:])
        text = log.read_text()
        assert stray_writes(text, allowed, cwd) == [], cmd
        if k != 1:   # the audit sees the command's real writes (it cannot pass by seeing nothing)
            assert any((lib if k == 0 else out) in p.parents for p in written_paths(text, cwd)), cmd
    assert any(out.rglob("*.mp4")) and any(out.rglob("*.json"))


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
        (tmp_path / "tmp").mkdir(exist_ok=True)
        env = dict(_clean_env(), QT_QPA_PLATFORM="offscreen", HOME=str(tmp_path / "home"),
                   TMPDIR=str(tmp_path / "tmp"), PYTHONDONTWRITEBYTECODE="1")
        r = subprocess.run(["strace", "-f", "-qq", "-y", "-e", f"trace=connect,execve,{WRITE_CALLS}", "-o", str(log),
                            *cmd], env=env, capture_output=True, text=True, timeout=600, cwd=ROOT)
        if r.returncode != 0 and "ptrace" in (r.stderr or ""):
            pytest.skip(f"strace cannot trace here: {r.stderr.strip()[:200]}")
        assert r.returncode == 0, (cmd, r.stderr[-2000:])
        text = log.read_text()
        assert outside_connections(text) == [], cmd
        home = tmp_path / "home"
        assert stray_writes(text, [tmp_path / "lib", tmp_path / "tmp", home / ".config" / "strived",
                                   home / ".cache" / "strived", Path("/dev/shm"), Path("/dev/null")], ROOT) == [], cmd
        if k == 0:   # the workers were traced too: the spawned interpreters
            assert len(re.findall(r"execve\(.*--multiprocessing-fork", text)) >= 2, text[:2000]


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace not installed (run.sh installs it)")
def test_indexing_on_a_local_ray_instance_stays_on_this_machine(tmp_path):
    """Issue 37: `strived index --ray local` under strace -f. Before: Ray looked up the machine's
    address by a connect to 8.8.8.8, bound its processes to the network address, its dashboard
    probed 169.254.169.254 for a cloud provider, and it wrote ~/.ray and /tmp/ray. Now: loopback
    only, and writes only into the library, the temp folder (a private folder removed at exit),
    /dev/shm and /proc/<pid>/oom_score_adj (Ray's own processes)."""
    pytest.importorskip("ray")
    from tests.perception.conftest import write_video

    import tempfile

    src, cwd, home, lib = (tmp_path / n for n in ("videos", "cwd", "home", "lib"))
    for d in (src, cwd, home):
        d.mkdir()
    # a short temporary folder, as users have (Ray's socket paths must fit 107 bytes; a longer
    # one makes the product use /tmp: ray_local.MAX_BASE)
    tmp = Path(tempfile.mkdtemp(prefix="s", dir="/tmp"))
    write_video(src / "a.mp4", n_frames=12)
    env = dict(_clean_env(), HOME=str(home), TMPDIR=str(tmp), PYTHONDONTWRITEBYTECODE="1")
    env.pop("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", None)
    log = tmp_path / "strace.log"
    exe = str(Path(sys.executable).parent / "strived")
    r = subprocess.run(["strace", "-f", "-qq", "-y", "-e", f"trace=connect,{WRITE_CALLS}", "-o", str(log),
                        exe, "index", str(src), "--library", str(lib), "--ray", "local", "--quiet"],
                       env=env, capture_output=True, text=True, timeout=600, cwd=cwd)
    if r.returncode != 0 and "ptrace" in (r.stderr or ""):
        pytest.skip(f"strace cannot trace here: {r.stderr.strip()[:200]}")
    assert r.returncode == 0, r.stderr[-2000:]
    text = log.read_text()
    assert outside_connections(text) == []
    assert stray_writes(text, [lib, tmp, Path("/dev/shm"), Path("/dev/null"), Path("/proc")], cwd) == []
    assert not list(home.iterdir()) and not [p for p in tmp.iterdir() if p.name.startswith("strived-ray-")]
    shutil.rmtree(tmp, ignore_errors=True)

"""Fault-matrix fixtures: small libraries, a fast deterministic text embedder, hostile files,
damaged database pages, read-only and full disks (a real tmpfs when the test runs as root,
permissions otherwise)."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]


class HashEmbedder:
    """Bag of hashed words -> unit vector: deterministic, instant, no model files."""

    name, version, dim, kind = "hash-test", "1", 64, "text-of-perception"

    def embed_texts(self, texts):
        out = np.zeros((len(texts), self.dim), np.float32)
        for i, t in enumerate(texts):
            for w in str(t).lower().split():
                out[i, int(hashlib.md5(w.encode()).hexdigest(), 16) % self.dim] += 1.0
        out[:, 0] += 1e-3
        return out / np.linalg.norm(out, axis=1, keepdims=True)

    def embed_segments(self, video, segs):
        return self.embed_texts([s[3] for s in segs])


@pytest.fixture
def fast_embedder(monkeypatch):
    """Every library's default dense embedder becomes HashEmbedder (caches cleared around)."""
    from strived.retrieval import sources

    emb = HashEmbedder()
    sources.clear_caches()
    monkeypatch.setattr(sources, "get_default_embedder", lambda: emb)
    yield emb
    sources.clear_caches()


def synth_records(n: int = 4, seed0: int = 0):
    from tests.core.synth import synth_video

    return [synth_video(f"v{i:02d}", seed0 + i, duration_s=12.0, n_tracks=6) for i in range(n)]


@pytest.fixture
def make_library(tmp_path, fast_embedder):
    """make_library(n, text_index=True) -> folder of a records library (closed)."""
    from strived.store import Library

    def make(n: int = 4, text_index: bool = True, name: str = "lib") -> Path:
        folder = tmp_path / name
        with Library.open(folder, create=True) as lib:
            lib.add_videos(synth_records(n))
            if text_index:
                from strived.retrieval.sources import ensure_text_index

                ensure_text_index(lib)
        return folder
    return make


def flip_pages(db: Path, pages: list[int] | None = None, fraction: float = 0.3) -> list[int]:
    """Overwrite whole database pages with garbage (page 1, the header, is left alone unless
    listed). Returns the damaged page numbers."""
    import sqlite3

    with contextlib.closing(sqlite3.connect(db)) as c:
        c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page_size = c.execute("PRAGMA page_size").fetchone()[0]
    n_pages = db.stat().st_size // page_size
    if pages is None:
        rng = np.random.default_rng(1)
        k = max(1, int((n_pages - 1) * fraction))
        pages = sorted(rng.choice(np.arange(2, n_pages + 1), size=k, replace=False).tolist())
    rng = np.random.default_rng(2)
    with open(db, "r+b") as fh:
        for p in pages:
            fh.seek((p - 1) * page_size)
            fh.write(rng.integers(0, 256, page_size, dtype=np.uint8).tobytes())
    return pages


def run_cli(*args: str, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run ``python -m strived.cli ARGS`` as a user would (its own process)."""
    e = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "strived.cli", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO, env=e)


def _can_mount() -> bool:
    if os.geteuid() != 0 or not shutil.which("mount"):
        return False
    probe = Path(f"/tmp/strived-mount-probe-{os.getpid()}")
    probe.mkdir(exist_ok=True)
    try:
        ok = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(probe)],
                            capture_output=True).returncode == 0
        if ok:
            subprocess.run(["umount", str(probe)], capture_output=True)
        return ok
    finally:
        probe.rmdir()


CAN_MOUNT = _can_mount()


@pytest.fixture
def tiny_disk(tmp_path):
    """tiny_disk(size) -> a folder on a fresh tmpfs of that size (root only; skipped otherwise)."""
    mounted = []

    def make(size: str = "256k") -> Path:
        if not CAN_MOUNT:
            pytest.skip("needs root to mount a tiny tmpfs (the monkeypatched disk-full tests still run)")
        d = tmp_path / f"disk{len(mounted)}"
        d.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(d)], check=True)
        mounted.append(d)
        return d

    yield make
    for d in mounted:
        subprocess.run(["umount", "-l", str(d)], capture_output=True)


@pytest.fixture
def make_readonly(tmp_path):
    """make_readonly(folder) makes a library folder truly read-only: a read-only bind mount when
    running as root (root ignores permission bits), else permission bits."""
    undo = []

    def make(folder: Path) -> Path:
        folder = Path(folder)
        if os.geteuid() == 0:
            if not CAN_MOUNT:
                pytest.skip("running as root without mount: cannot make a folder read-only")
            subprocess.run(["mount", "--bind", str(folder), str(folder)], check=True)
            subprocess.run(["mount", "-o", "remount,bind,ro", str(folder)], check=True)
            undo.append(lambda: subprocess.run(["umount", "-l", str(folder)], capture_output=True))
        else:
            for p in [folder, *folder.rglob("*")]:
                os.chmod(p, 0o555 if p.is_dir() else 0o444)
            undo.append(lambda: [os.chmod(p, 0o755) for p in [folder, *folder.rglob("*")] if p.is_dir()])
        return folder

    yield make
    for u in reversed(undo):
        u()

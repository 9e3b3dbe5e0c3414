"""Shared test fixtures. Qt must be offscreen before anything imports it."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("STRIVED_SHARED", REPO.parent / "shared"))


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path_factory, monkeypatch):
    """Tests never touch the user's real config, cache or library."""
    home = tmp_path_factory.getbasetemp() / "home"
    home.mkdir(exist_ok=True)
    monkeypatch.setenv("STRIVED_CACHE", str(home / "cache"))
    monkeypatch.setenv("STRIVED_CONFIG_DIR", str(home / "config"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / "xdg-config"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / "xdg-cache"))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / "xdg-data"))
    for k in list(os.environ):
        if k.startswith("STRIVED_LLM_"):
            monkeypatch.delenv(k)


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """../shared beside the repository (skip when absent)."""
    if not (SHARED / "data").is_dir():
        pytest.skip(f"shared data not found at {SHARED}")
    return SHARED


@pytest.fixture(scope="session")
def bench_dev(shared_dir) -> Path:
    p = shared_dir / "data" / "bench-dev"
    if not (p / "manifest.json").exists():
        pytest.skip("bench-dev not found")
    return p


@pytest.fixture(scope="session")
def bench_records(bench_dev):
    """All real track records of bench-dev, loaded once."""
    from strived.records import VideoRecords

    return [VideoRecords.load(p) for p in sorted((bench_dev / "records").glob("*.json"))]

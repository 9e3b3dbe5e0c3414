"""Issue 15 item 7: a library on a read-only disk (or another user's) opens read-only for
search, and anything that would write says why it cannot."""

from __future__ import annotations

import subprocess
import sys

import pytest

from strived import engine
from strived.cli import main
from strived.errors import LibraryReadOnlyError
from strived.retrieval import sources
from strived.store import Library

from .conftest import REPO, synth_records


def test_readonly_library_opens_and_searches(make_library, make_readonly):
    folder = make_library(4)
    with Library.open(folder) as lib:
        want = [h.video_id for h in engine.search(lib, "a car ahead brakes", top_k=10).hits]
    make_readonly(folder)
    sources.clear_caches()
    with Library.open(folder) as lib:
        assert lib.readonly and "write permission" in lib.readonly_reason
        resp = engine.search(lib, "a car ahead brakes", top_k=10)
        assert [h.video_id for h in resp.hits] == want
        assert set(resp.sources_used) == {"rule", "dense", "bm25"}
        with pytest.raises(LibraryReadOnlyError, match="read-only"):
            lib.meta_set("x", 1)
        with pytest.raises(LibraryReadOnlyError):
            lib.add_video(synth_records(1, seed0=40)[0])


def test_readonly_cli(make_library, make_readonly, tmp_path, capsys):
    folder = make_library(2)
    make_readonly(folder)
    assert main(["search", "car", "--library", str(folder), "--top", "3"]) == 0
    assert "  1. " in capsys.readouterr().out
    rec = tmp_path / "r.json"
    synth_records(1, seed0=41)[0].save(rec)
    assert main(["import", str(rec), "--library", str(folder), "--no-text-index"]) == 1
    assert "read-only" in capsys.readouterr().err
    (tmp_path / "footage").mkdir()
    assert main(["index", str(tmp_path / "footage"), "--library", str(folder), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "read-only" in err and "searching only" in err
    assert main(["check", "--library", str(folder)]) == 0


def test_readonly_after_a_crash_sees_the_last_commit(tmp_path, make_readonly, fast_embedder):
    """A writer killed with its WAL not checkpointed, then the disk made read-only: the last
    committed video must still be seen (WAL read, not ignored)."""
    folder = tmp_path / "lib"
    code = ("import os, sys; sys.path.insert(0, %r)\n"
            "from strived.store import Library\n"
            "from tests.faults.conftest import synth_records\n"
            "lib = Library.open(%r, create=True)\n"
            "lib.add_videos(synth_records(3))\n"
            "os._exit(0)\n") % (str(REPO), str(folder))
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)
    assert (folder / "library.sqlite-wal").exists()
    make_readonly(folder)
    with Library.open(folder) as lib:
        assert lib.readonly and lib.video_ids() == ["v00", "v01", "v02"]


def test_readonly_creation_is_clear(tmp_path, make_readonly):
    parent = tmp_path / "ro"
    parent.mkdir()
    make_readonly(parent)
    with pytest.raises(LibraryReadOnlyError, match="read-only"):
        Library.open(parent / "newlib", create=True)


def test_forced_readonly_open(make_library):
    folder = make_library(1, text_index=False)
    with Library.open(folder, readonly=True) as lib:
        assert len(lib) == 1
        with pytest.raises(LibraryReadOnlyError):
            lib.meta_set("x", 1)

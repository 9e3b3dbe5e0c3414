"""Issue 15 item 2: one badly timed crash must never break search. The dense index is committed
in one rename, verified on load, rebuilt from the library when damaged, and a broken source is
skipped with a notice."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from strived import engine
from strived.retrieval import sources
from strived.retrieval.dense import MANIFEST, DenseIndex, DenseIndexCorrupt, DenseIndexWriteError
from strived.store import Library

from .conftest import synth_records


def _gen(folder):
    return json.loads((folder / "dense" / MANIFEST).read_text())["generation"]


def _search(folder, q="a car ahead brakes"):
    sources.clear_caches()
    with Library.open(folder) as lib:
        return engine.search(lib, q, top_k=10)


def _to_legacy(folder):
    """Rewrite the index in the pre-generation layout (files side by side, meta.json last)."""
    d = folder / "dense"
    man = json.loads((d / MANIFEST).read_text())
    for f in (d / man["generation"]).iterdir():
        shutil.copy(f, d / f.name)
    shutil.rmtree(d / man["generation"])
    (d / MANIFEST).unlink()
    meta = {k: v for k, v in man.items() if k not in ("generation", "generation_no", "files")}
    (d / "meta.json").write_text(json.dumps(meta))


def test_healthy_index_is_one_generation_with_checksums(make_library):
    folder = make_library(4)
    man = json.loads((folder / "dense" / MANIFEST).read_text())
    assert set(man["files"]) >= {"vectors.npy", "rows.npz", "videos.json"}
    assert all(len(v["blake2b"]) == 32 and v["bytes"] > 0 for v in man["files"].values())
    assert [p.name for p in (folder / "dense").iterdir() if p.is_dir()] == [man["generation"]]
    resp = _search(folder)
    assert "dense" in resp.sources_used and not any("dense" in n for n in resp.notices)


def test_kill_between_saves_in_the_old_layout_no_longer_breaks_search(make_library):
    """The fault trial's case: vectors.npy from one save, rows.npz/videos.json from another.
    Before: every default search raised IndexError. Now: notice + the other sources; the next
    index/import rebuilds it, and dense answers again."""
    folder = make_library(4)
    _to_legacy(folder)
    d = folder / "dense"
    vec = np.load(d / "vectors.npy")
    np.save(d / "vectors.npy", vec[: len(vec) // 2])          # the newer, shorter save
    resp = _search(folder)
    assert "dense" not in resp.sources_used and resp.hits
    assert any("dense source skipped" in n and "damaged" in n for n in resp.notices)
    with Library.open(folder) as lib:
        rep = sources.ensure_text_index(lib)                 # what `strived index`/`import` run
        assert rep.dense_rebuilt and "rows" in rep.dense_rebuilt
    assert not (d / "meta.json").exists() and (d / MANIFEST).is_file()
    resp = _search(folder)
    assert "dense" in resp.sources_used and not any("damaged" in n for n in resp.notices)


@pytest.mark.parametrize("damage", ["truncate_vectors", "garbage_videos_json", "delete_rows",
                                    "garbage_manifest", "flip_vector_bytes"])
def test_damaged_files_are_detected_and_rebuilt(make_library, damage):
    folder = make_library(3)
    d = folder / "dense"
    gen = d / _gen(folder)
    if damage == "truncate_vectors":
        data = (gen / "vectors.npy").read_bytes()
        (gen / "vectors.npy").write_bytes(data[: len(data) // 3])
    elif damage == "garbage_videos_json":
        (gen / "videos.json").write_text("{not json")
    elif damage == "delete_rows":
        (gen / "rows.npz").unlink()
    elif damage == "garbage_manifest":
        (d / MANIFEST).write_text("\x00\x01garbage")
    else:
        data = bytearray((gen / "vectors.npy").read_bytes())
        data[-10] ^= 0xFF                                  # same size, one flipped byte
        (gen / "vectors.npy").write_bytes(bytes(data))
    with pytest.raises(DenseIndexCorrupt):
        DenseIndex.open(d, sources.get_default_embedder())
    resp = _search(folder)
    assert resp.hits and "dense" not in resp.sources_used
    assert any("dense source skipped" in n for n in resp.notices)
    with Library.open(folder) as lib:
        assert sources.ensure_text_index(lib).dense_rebuilt
    assert "dense" in _search(folder).sources_used


def test_a_save_killed_before_its_commit_leaves_the_previous_index(make_library, monkeypatch):
    """A kill after the new generation's files but before the manifest swap (the worst moment)."""
    folder = make_library(3)
    before = _gen(folder)
    ranked = [h.video_id for h in _search(folder).hits]
    import strived.retrieval.dense as dense_mod

    real_replace = dense_mod.os.replace

    def killed(src, dst):
        if str(dst).endswith(MANIFEST):
            raise KeyboardInterrupt  # stands for the kill: nothing after this line runs
        return real_replace(src, dst)
    monkeypatch.setattr(dense_mod.os, "replace", killed)
    with Library.open(folder) as lib:
        lib.add_videos(synth_records(6, seed0=50)[3:])
        with pytest.raises(KeyboardInterrupt):
            sources.ensure_text_index(lib)
    monkeypatch.setattr(dense_mod.os, "replace", real_replace)
    assert _gen(folder) == before                         # the old commit stands
    resp = _search(folder)
    assert "dense" in resp.sources_used
    assert [h for h in resp.notices if "added or changed after" in h], resp.notices  # item 9: said
    with Library.open(folder) as lib:
        sources.ensure_text_index(lib)
    resp = _search(folder)
    assert not [h for h in resp.notices if "added or changed after" in h]
    assert len({h.video_id for h in resp.hits}) >= len(ranked)
    assert [p.name for p in (folder / "dense").iterdir() if p.is_dir()] == [_gen(folder)]


def test_full_disk_during_a_dense_save_keeps_the_previous_index(make_library, monkeypatch):
    import errno

    folder = make_library(3)
    before = _gen(folder)
    import strived.retrieval.dense as dense_mod

    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")
    with monkeypatch.context() as m, Library.open(folder) as lib:
        m.setattr(dense_mod.np, "savez", full)
        lib.add_videos(synth_records(5, seed0=70)[3:])
        with pytest.raises(DenseIndexWriteError, match="disk is full"):
            sources.ensure_text_index(lib)
    assert _gen(folder) == before
    assert [p.name for p in (folder / "dense").iterdir() if p.is_dir()] == [before]
    assert "dense" in _search(folder).sources_used


def test_full_tmpfs_under_the_dense_folder(make_library, tiny_disk):
    """The same on a real full disk: a 32 KiB tmpfs as the dense folder."""
    folder = make_library(2)
    d = folder / "dense"
    keep = folder / "dense-copy"
    shutil.copytree(d, keep)
    disk = tiny_disk("32k")
    shutil.rmtree(d)
    d.symlink_to(disk)
    shutil.copytree(keep, disk, dirs_exist_ok=True)
    before = _gen(folder)
    with Library.open(folder) as lib:
        lib.add_videos(synth_records(80, seed0=100)[2:])
        with pytest.raises(DenseIndexWriteError, match="disk is full"):
            sources.ensure_text_index(lib)
    assert _gen(folder) == before
    assert "dense" in _search(folder).sources_used


def test_a_broken_source_never_takes_search_down(make_library, monkeypatch):
    folder = make_library(3)

    def boom(*a, **k):
        raise IndexError("index 12 is out of bounds for axis 0 with size 3")
    monkeypatch.setattr(sources, "dense_ranking", boom)
    resp = _search(folder)
    assert resp.hits and "dense" not in resp.sources_used
    assert any("dense source skipped" in n and "IndexError" in n for n in resp.notices)


def test_each_file_is_hashed_once_per_state_and_any_write_is_hashed_again(make_library, monkeypatch):
    """Opening hashes the index files only when they changed since they last matched their
    checksums (a new search process at 100,000 videos otherwise spends ~3 s hashing 1.6 GB); a
    flipped byte is caught even when the file's size and modification time are put back."""
    import os

    from strived.retrieval import dense

    folder = make_library(3)
    d = folder / "dense"
    gen = d / _gen(folder)
    emb = sources.get_default_embedder()
    DenseIndex.open(d, emb)
    assert (gen / dense.VERIFIED).is_file()
    hashed = []
    real = dense._checksum
    monkeypatch.setattr(dense, "_checksum", lambda p: hashed.append(p.name) or real(p))
    DenseIndex.open(d, emb)
    assert hashed == []                                   # unchanged since verified: no hashing
    before = os.stat(gen / "vectors.npy")
    data = bytearray((gen / "vectors.npy").read_bytes())
    data[-10] ^= 0xFF                                     # same size, one flipped byte ...
    (gen / "vectors.npy").write_bytes(bytes(data))
    os.utime(gen / "vectors.npy", ns=(before.st_atime_ns, before.st_mtime_ns))   # ... same mtime
    with pytest.raises(DenseIndexCorrupt, match="checksum"):
        DenseIndex.open(d, emb)
    assert "vectors.npy" in hashed
    (gen / dense.VERIFIED).write_text("{not json")        # a damaged record is only a re-hash
    with pytest.raises(DenseIndexCorrupt, match="checksum"):
        DenseIndex.open(d, emb)

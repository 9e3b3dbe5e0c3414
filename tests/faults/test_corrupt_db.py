"""Issue 15 item 8: damaged database pages give a clear message (never a traceback), `strived
index` stops with a non-zero exit instead of writing into a malformed database, and `strived
check` says what is wrong and what to do (repair in place, or salvage into a new library)."""

from __future__ import annotations

import contextlib
import json
import sqlite3

import pytest

from strived.cli import main
from strived.errors import LibraryCorruptError, LibraryError
from strived.store import Library

from .conftest import flip_pages, run_cli, synth_records


def _pages_of(db, table):
    try:
        with contextlib.closing(sqlite3.connect(db)) as c:
            c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            return [r[0] for r in c.execute("SELECT pageno FROM dbstat WHERE name=? ORDER BY pageno", (table,))]
    except sqlite3.Error:
        pytest.skip("this SQLite has no dbstat table")


@pytest.fixture
def damaged(make_library):
    """A records library (8 videos) with some pages of the tracks table overwritten."""
    folder = make_library(8, text_index=False)
    pages = _pages_of(folder / "library.sqlite", "tracks")
    flip_pages(folder / "library.sqlite", pages[1::3][:3])
    return folder


def test_search_on_damaged_pages_is_a_clear_message(damaged):
    r = run_cli("search", "a car brakes", "--library", str(damaged), "--sources", "rule")
    assert r.returncode != 0
    assert "Traceback" not in r.stderr and "damaged" in r.stderr and "strived check" in r.stderr


@pytest.mark.parametrize("what", ["index", "import"])
def test_writing_into_a_malformed_database_is_refused(damaged, tmp_path, what):
    db = damaged / "library.sqlite"
    before = db.read_bytes()
    if what == "index":
        (tmp_path / "footage").mkdir()
        r = run_cli("index", str(tmp_path / "footage"), "--library", str(damaged), "--quiet")
    else:
        rec = tmp_path / "new.json"
        synth_records(1, seed0=9)[0].save(rec)
        r = run_cli("import", str(rec), "--library", str(damaged), "--no-text-index")
    assert r.returncode != 0, r.stdout
    assert "damaged" in r.stderr and "strived check" in r.stderr and "Traceback" not in r.stderr
    assert db.read_bytes() == before            # not one byte written


def test_open_and_every_write_check_integrity_first(damaged):
    with pytest.raises(LibraryCorruptError, match="strived check"):
        Library.open(damaged)                    # a small database is checked at open
    with Library.open(damaged, check=False) as lib:   # a large one before its first write
        with pytest.raises(LibraryCorruptError, match="damaged"):
            lib.meta_set("x", 1)


def test_check_reports_damage_and_salvages(damaged, tmp_path, capsys):
    assert main(["check", "--library", str(damaged)]) == 2
    out = capsys.readouterr().out
    assert "DAMAGED" in out and "--salvage" in out and "re-index" in out
    new = tmp_path / "salvaged"
    rc = main(["check", "--library", str(damaged), "--salvage", str(new)])
    out = capsys.readouterr().out
    assert rc == 1 and "salvaged" in out
    with Library.open(new) as lib:
        assert 0 < len(lib) <= 8
        assert not lib.integrity_problems(full=True)
        for vid in lib.video_ids():
            lib.get_video(vid)                      # every salvaged video reads back whole
    assert main(["check", "--library", str(new)]) == 0


def test_page_one_garbage_is_a_clear_message(make_library):
    folder = make_library(2, text_index=False)
    flip_pages(folder / "library.sqlite", [1])
    with pytest.raises(LibraryError) as e:
        Library.open(folder)
    assert "library" in str(e.value)
    r = run_cli("search", "car", "--library", str(folder))
    assert r.returncode == 1 and "Traceback" not in r.stderr


def test_healthy_library_checks_clean_and_orphans_are_repaired(make_library, capsys):
    folder = make_library(3)
    assert main(["check", "--library", str(folder)]) == 0
    assert "database integrity: ok" in capsys.readouterr().out
    with Library.open(folder) as lib, lib.transaction():
        lib.conn.execute("INSERT INTO thumbnails(video_id, jpeg) VALUES ('ghost', x'00')")
        lib.conn.execute("INSERT INTO summaries(video_id, text, source) VALUES ('ghost', 't', 'g')")
        lib.conn.execute("DELETE FROM summaries WHERE video_id='v01'")
    assert main(["check", "--library", str(folder)]) == 1
    out = capsys.readouterr().out
    assert "thumbnails row belong to no video" in out or "1 thumbnails row" in out
    assert "1 videos without one" in out
    assert main(["check", "--repair", "--library", str(folder)]) == 0
    assert "repaired:" in capsys.readouterr().out
    assert main(["check", "--library", str(folder)]) == 0


def test_check_json(make_library, capsys):
    folder = make_library(2)
    assert main(["check", "--json", "--library", str(folder)]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["ok"] and d["videos"] == 2 and d["dense"].startswith("ok")


def test_foreign_sqlite_file_is_refused_untouched(tmp_path):
    folder = tmp_path / "notours"
    folder.mkdir()
    db = folder / "library.sqlite"
    with contextlib.closing(sqlite3.connect(db)) as c:
        c.execute("CREATE TABLE people(name TEXT)")
        c.commit()
    before = db.read_bytes()
    with pytest.raises(LibraryError, match="not a STRIVE-D library"):
        Library.open(folder)
    assert db.read_bytes() == before
    with contextlib.closing(sqlite3.connect(db)) as c:
        assert c.execute("PRAGMA journal_mode").fetchone()[0] == "delete"   # not switched to WAL


@pytest.mark.parametrize("value", ['"abc"', "null", '{"v": 3}', "1e999"])
def test_garbage_schema_version_is_a_clear_message(make_library, value):
    folder = make_library(1, text_index=False)
    with contextlib.closing(sqlite3.connect(folder / "library.sqlite")) as c:
        c.execute("UPDATE meta SET value=? WHERE key='schema_version'", (value,))
        c.commit()
    with pytest.raises(LibraryError, match="schema version"):
        Library.open(folder)
    r = run_cli("info", "--library", str(folder))
    assert r.returncode == 1 and "schema version" in r.stderr and "Traceback" not in r.stderr

"""Exported clips are stored per span (video, start, end) by the store; the per-video records an
older app kept in the library's metadata stay readable and move into the table at the first
export; a library written before the table opens (read-only too) and reads them."""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest

from strived.evaluation.synth import make_video
from strived.store.exports import spans_overlap
from strived.store.library import Library

LEGACY = {"v000001": [{"at": "2025-01-02 10:00", "folder": "/out/a", "clip": "/out/a/c1.mp4",
                       "start_s": 2.0, "end_s": 6.5, "query": "cut in"},
                      {"at": "2025-01-03 11:00", "folder": "/out/b", "clip": None}],   # no span
          "v000002": [{"at": "2025-01-02 10:00", "folder": "/out/a", "clip": "/out/a/c2.mp4",
                       "start_s": 10.0, "end_s": 12.0, "query": "cut in"}]}


def _old_library(folder):
    """A library as the previous STRIVE-D wrote it: no exports table, the app's records in meta."""
    lib = Library.open(folder, create=True)
    lib.add_videos([make_video(k, np.random.default_rng(k)) for k in range(3)])
    lib.meta_set("app_exports", LEGACY)
    lib.close()
    c = sqlite3.connect(folder / "library.sqlite")
    c.execute("DROP TABLE exports")
    c.commit()
    c.close()


def test_spans_overlap():
    assert spans_overlap((1.0, 3.0), (2.5, 9.0)) and spans_overlap((2.5, 9.0), (1.0, 3.0))
    assert not spans_overlap((1.0, 3.0), (3.0, 5.0))            # touching only
    assert not spans_overlap((1.0, 3.0), (3.5, 5.0))
    assert spans_overlap((4.0, 4.0), (3.0, 5.0)) and spans_overlap((3.0, 3.0), (3.0, 5.0))
    assert spans_overlap(None, (3.0, 5.0)) and spans_overlap((3.0, 5.0), None)


def test_exports_are_stored_per_span_and_read_back(tmp_path):
    lib = Library.open(tmp_path / "lib", create=True)
    assert lib.exported_spans() == {}
    n = lib.record_exports([
        {"video_id": "a", "start_s": 1.0, "end_s": 4.0, "at": "t1", "folder": "/o", "clip": "/o/1.mp4",
         "query": "q"},
        {"video_id": "a", "start_s": 20.0, "end_s": 22.5, "folder": "/o", "clip": None},
        {"video_id": "b", "start_s": None, "end_s": None, "folder": "/o"}])
    assert n == 3
    got = lib.exported_spans()
    assert [(e["start_s"], e["end_s"]) for e in got["a"]] == [(1.0, 4.0), (20.0, 22.5)]
    assert got["a"][0] == {"start_s": 1.0, "end_s": 4.0, "at": "t1", "folder": "/o",
                           "clip": "/o/1.mp4", "query": "q"}
    assert got["a"][1]["at"]                                   # stamped when not given
    assert got["b"] == [dict(got["b"][0], start_s=None, end_s=None)]
    assert set(lib.exported_spans(["b", "zzz"])) == {"b"}
    with pytest.raises(ValueError):
        lib.record_exports([{"video_id": "a", "start_s": 5.0, "end_s": 1.0}])
    with pytest.raises(ValueError):
        lib.record_exports([{"video_id": "a", "start_s": 5.0, "end_s": None}])
    assert len(lib.exported_spans()["a"]) == 2                   # nothing of a refused batch
    lib.close()
    again = Library.open(tmp_path / "lib")
    assert again.exported_spans() == got
    again.close()


def test_old_per_video_records_stay_readable_and_move_at_the_first_export(tmp_path):
    folder = tmp_path / "old"
    _old_library(folder)
    # read-only: opens (no table, no upgrade needed) and reads the old records
    ro = Library.open(folder, readonly=True)
    got = ro.exported_spans()
    assert [(e["start_s"], e["end_s"], e["clip"]) for e in got["v000001"]] == \
        [(2.0, 6.5, "/out/a/c1.mp4"), (None, None, None)]        # no span: the whole video
    assert got["v000002"][0]["query"] == "cut in"
    ro.close()
    # writable: opening changes nothing (no table made at open) ...
    lib = Library.open(folder)
    assert not lib._has_table("exports") and lib.exported_spans() == got
    # ... the first export makes the table, moves the old records in, then adds its own
    lib.record_exports([{"video_id": "v000002", "start_s": 30.0, "end_s": 33.0, "folder": "/n"}])
    assert lib._has_table("exports") and lib.meta_get("app_exports") is None
    now = lib.exported_spans()
    assert now["v000001"] == got["v000001"]
    assert [(e["start_s"], e["end_s"]) for e in now["v000002"]] == [(10.0, 12.0), (30.0, 33.0)]
    lib.close()
    assert Library.open(folder).exported_spans() == now


def test_damaged_old_records_do_not_break_reading(tmp_path):
    folder = tmp_path / "old"
    _old_library(folder)
    lib = Library.open(folder)
    lib.meta_set("app_exports", {"v000001": [{"start_s": "x", "end_s": 2}, "junk"], "v000002": "junk"})
    assert lib.exported_spans() == {"v000001": [{"start_s": None, "end_s": None, "at": None,
                                                 "folder": None, "clip": None, "query": None}]}
    c = lib.conn.execute("SELECT value FROM meta WHERE key='app_exports'").fetchone()
    lib.conn.execute("UPDATE meta SET value=? WHERE key='app_exports'", (c[0][:-3],))  # cut JSON
    assert lib.exported_spans() == {}
    lib.close()


def test_old_records_written_beside_the_table_move_too(tmp_path):
    """An older app writing its metadata records into a library that has the table (two app
    versions on one library): read once each, moved at the next export, never doubled."""
    lib = Library.open(tmp_path / "lib", create=True)
    lib.record_exports([{"video_id": "v000001", "start_s": 8.0, "end_s": 9.0}])
    lib.meta_set("app_exports", LEGACY)
    before = lib.exported_spans()
    assert [(e["start_s"], e["end_s"]) for e in before["v000001"]] == [(2.0, 6.5), (None, None), (8.0, 9.0)]
    lib.record_exports([{"video_id": "v000002", "start_s": 1.0, "end_s": 2.0}])
    after = lib.exported_spans()
    assert lib.meta_get("app_exports") is None
    assert sorted((e["start_s"] or -1, e["end_s"] or -1) for e in after["v000001"]) == \
        sorted((e["start_s"] or -1, e["end_s"] or -1) for e in before["v000001"])
    assert len(after["v000002"]) == 2
    lib.close()

import sqlite3

import numpy as np
import pytest

from strived.errors import LibraryError, LibraryLockedError, LibraryVersionError
from strived.store import Library, SCHEMA_VERSION
from tests.core.synth import synth_video


def test_add_get_roundtrip(tmp_path, bench_records):
    with Library.open(tmp_path / "lib", create=True) as lib:
        lib.add_videos(bench_records[:5])
        assert len(lib) == 5
        for rec in bench_records[:5]:
            back = lib.get_video(rec.info.id)
            assert back.to_json_dict() == rec.to_json_dict()
    # reopen: persisted
    with Library.open(tmp_path / "lib") as lib:
        assert lib.video_ids() == sorted(r.info.id for r in bench_records[:5])


def test_open_missing_says_what_to_do(tmp_path):
    with pytest.raises(LibraryError, match="strived import"):
        Library.open(tmp_path / "nothing")


def test_future_version_refused_and_untouched(tmp_path):
    lib = Library.open(tmp_path / "lib", create=True)
    lib.add_video(synth_video("a", seed=1))
    lib.meta_set("schema_version", SCHEMA_VERSION + 1)
    lib.close()
    with pytest.raises(LibraryVersionError, match="newer STRIVE-D"):
        Library.open(tmp_path / "lib")
    con = sqlite3.connect(tmp_path / "lib" / "library.sqlite")
    assert con.execute("SELECT COUNT(*) FROM videos").fetchone()[0] == 1


def test_failed_write_rolls_back(tmp_path):
    lib = Library.open(tmp_path / "lib", create=True)
    lib.add_video(synth_video("a", seed=1))
    bad = synth_video("b", seed=2)
    bad.tracks.append(bad.tracks[0])  # duplicate (video_id, track) primary key
    with pytest.raises(sqlite3.IntegrityError):
        lib.add_video(bad)
    assert lib.video_ids() == ["a"]
    assert lib.conn.execute("SELECT COUNT(*) FROM tracks WHERE video_id='b'").fetchone()[0] == 0


def test_locked_database_clear_message(tmp_path):
    lib = Library.open(tmp_path / "lib", create=True)
    other = sqlite3.connect(tmp_path / "lib" / "library.sqlite", isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")
    try:
        lib2 = Library.open(tmp_path / "lib", timeout_s=0.2)
        with pytest.raises(LibraryLockedError, match="locked by another process"):
            lib2.add_video(synth_video("z", seed=3))
        lib2.close()
    finally:
        other.execute("ROLLBACK")
        other.close()
    lib.add_video(synth_video("z", seed=3))
    assert lib.video_ids() == ["z"]


def test_not_a_library(tmp_path):
    (tmp_path / "lib").mkdir()
    con = sqlite3.connect(tmp_path / "lib" / "library.sqlite")
    con.execute("CREATE TABLE x(a)")
    con.commit()
    with pytest.raises(LibraryError, match="not a STRIVE-D library"):
        Library.open(tmp_path / "lib")


def test_content_version_and_remove(tmp_path):
    lib = Library.open(tmp_path / "lib", create=True)
    v0 = lib.content_version
    lib.add_video(synth_video("a", seed=1))
    assert lib.content_version == v0 + 1
    lib.remove_video("a")
    assert len(lib) == 0 and lib.content_version == v0 + 2


def test_column_cache_matches_scan_and_invalidates(tmp_path, bench_records):
    from strived.rulelib.hand_rules import hand_rule
    from strived.rules import RuleScorer, parse_rule
    from strived.rules.columns import TrackColumns

    lib = Library.open(tmp_path / "lib", create=True)
    lib.add_videos(bench_records[:10])
    rule = parse_rule(hand_rule("lead_brake"))
    first = RuleScorer(lib).score(rule).scores  # scans the database, writes the cache
    assert any(p.name.startswith("cols-") for p in lib.cache_dir.iterdir())
    again = RuleScorer(lib).score(rule).scores  # memory-mapped cache + feature files
    np.testing.assert_array_equal(first, again)
    ref = RuleScorer.from_records(bench_records[:10]).score(rule).scores
    np.testing.assert_allclose(first, ref, atol=1e-12)
    lib.add_video(bench_records[10])  # content changes: the old cache must not be used
    cols = TrackColumns.from_library(lib)
    assert len(cols.video_ids) == 11
    assert len([p for p in lib.cache_dir.iterdir() if p.name.startswith("cols-")]) == 1


def test_feature_cache_is_incremental(tmp_path, bench_records, monkeypatch):
    """Adding a video reuses cached features of the unchanged ones and computes only the new."""
    from strived.rulelib.hand_rules import hand_rule
    from strived.rules import RuleScorer, parse_rule
    from strived.rules import kernels as K

    lib = Library.open(tmp_path / "lib", create=True)
    lib.add_videos(bench_records[:12])
    rule = parse_rule(hand_rule("lead_brake"))
    RuleScorer(lib).score(rule)
    RuleScorer(lib).columns.window_change("distance", 3.0, "negative")   # every track's feature
    seen = []
    real = K.window_change

    def spy(s, v, w):
        seen.append(s.n)
        return real(s, v, w)
    monkeypatch.setattr(K, "window_change", spy)
    lib.add_video(bench_records[12])
    lib.add_video(bench_records[3])  # rewritten: its features must be recomputed too
    got = RuleScorer(lib).score(rule).scores
    n_new = len(bench_records[12].tracks) + len(bench_records[3].tracks)
    # the score computes at most the new tracks (only the candidates of videos passing the gates)
    n_scored = sum(seen)
    assert n_scored <= n_new
    ref = RuleScorer.from_records(bench_records[:13]).score(rule).scores
    np.testing.assert_allclose(got, ref, atol=1e-12)
    seen.clear()
    full = RuleScorer(lib).columns.window_change("distance", 3.0, "negative")   # every track now
    assert n_scored + sum(seen) == n_new          # the unchanged videos' features were reused
    np.testing.assert_allclose(full, RuleScorer.from_records(bench_records[:13]).columns
                               .window_change("distance", 3.0, "negative"), atol=1e-12)


def test_version_1_library_is_upgraded_in_place(tmp_path):
    lib = Library.open(tmp_path / "lib", create=True)
    lib.add_video(synth_video("a", seed=1))
    # make it look like a version-1 library (before the rev columns existed)
    lib.conn.execute("ALTER TABLE videos DROP COLUMN rev")
    lib.conn.execute("ALTER TABLE summaries DROP COLUMN rev")
    lib.meta_set("schema_version", 1)
    lib.close()
    lib = Library.open(tmp_path / "lib")
    assert lib.meta_get("schema_version") == SCHEMA_VERSION
    cols = [r[1] for r in lib.conn.execute("PRAGMA table_info(videos)")]
    assert "rev" in cols and lib.video_ids() == ["a"]
    lib.add_video(synth_video("b", seed=2))
    assert lib.video_ids() == ["a", "b"]


def test_nested_transaction_rolls_back_inner_only(tmp_path):
    lib = Library.open(tmp_path / "lib", create=True)
    with lib.transaction():
        lib.add_video(synth_video("a", seed=1))
        with pytest.raises(RuntimeError):
            with lib.transaction():
                lib.add_video(synth_video("b", seed=2))
                raise RuntimeError("boom")
    assert lib.video_ids() == ["a"]


def test_migration_tolerates_columns_already_present(tmp_path):
    """Libraries written between the rev columns and the version bump already have them."""
    lib = Library.open(tmp_path / "lib", create=True)
    lib.add_video(synth_video("a", seed=1))
    lib.meta_set("schema_version", 1)
    lib.close()
    lib = Library.open(tmp_path / "lib")
    assert lib.meta_get("schema_version") == SCHEMA_VERSION and lib.video_ids() == ["a"]


def test_marks_set_replace_clear_and_count(tmp_path):
    with Library.open(tmp_path / "lib", create=True) as lib:
        v0 = lib.content_version
        lib.set_mark("a car cuts in", "v1", True, "cut_in_right")
        lib.set_mark("a car cuts in", "v2", False)
        lib.set_mark("we brake", "v1", False, "ego_brake")
        assert lib.marks_for("a car cuts in") == {"v1": True, "v2": False}
        lib.set_mark("a car cuts in", "v1", False, "cut_in_right")        # replaced, not added
        assert lib.marks_for("a car cuts in") == {"v1": False, "v2": False}
        assert lib.count_marks() == 3
        lib.set_mark("a car cuts in", "v2", None)                          # cleared
        assert lib.marks_for("a car cuts in") == {"v1": False} and lib.count_marks() == 2
        assert lib.marks_for("nothing") == {}
        row = lib.conn.execute("SELECT event, created_at FROM marks WHERE query='we brake'").fetchone()
        assert row[0] == "ego_brake" and row[1]
        assert lib.content_version == v0          # marks are not indexed content
    with Library.open(tmp_path / "lib") as lib:   # written for good
        assert lib.marks_for("we brake") == {"v1": False}


def test_saved_searches_roundtrip_replace_list_and_delete(tmp_path):
    spec = {"format": "strived.saved_search/1", "rule": {"entity": {"role": "ego"}},
            "hits": [{"rank": 1, "video_id": "v1", "score": 0.03, "relevance": 0.8}]}
    with Library.open(tmp_path / "lib", create=True) as lib:
        assert lib.saved_search("x") is None and lib.saved_searches() == []
        lib.save_search("cut-ins", "a car cuts in", spec)
        got = lib.saved_search("cut-ins")
        assert got["query"] == "a car cuts in" and got["spec"] == spec and got["created_at"]
        lib.save_search("brakes", "we brake", {"hits": []})
        lib.save_search("cut-ins", "a car cuts in from the left", dict(spec, hits=[]))   # replaced
        assert lib.saved_search("cut-ins")["query"] == "a car cuts in from the left"
        assert sorted(n for n, _q, _t in lib.saved_searches()) == ["brakes", "cut-ins"]
        assert lib.delete_saved_search("brakes") and not lib.delete_saved_search("brakes")
        assert [n for n, _q, _t in lib.saved_searches()] == ["cut-ins"]


def test_video_profiles_cached_across_processes_and_refreshed_on_change(tmp_path):
    """A new process reads the calibration profiles from a cache file keyed by the content version;
    a change of the library, or a damaged file, gives the database's answer again."""
    import json as _json

    from strived.store import Library
    from tests.core.synth import synth_video

    lib = Library.open(tmp_path / "lib", create=True)
    a, b = synth_video("a", seed=1), synth_video("b", seed=2)
    b.info.attrs["perception"] = {"perception_version": 2}
    lib.add_videos([a, b])
    assert lib.video_profiles() == {"a": "tracks", "b": "video"}
    cache = lib.cache_dir / "video_profiles.json"
    assert _json.loads(cache.read_text())["video"] == ["b"]
    lib.close()
    again = Library.open(tmp_path / "lib")                 # a new Library: no in-memory cache
    assert again.video_profiles() == {"a": "tracks", "b": "video"}
    c = synth_video("c", seed=3)
    c.info.attrs["perception"] = {"perception_version": 2}
    again.add_videos([c])
    assert again.video_profiles() == {"a": "tracks", "b": "video", "c": "video"}
    again.close()
    cache.write_text("{not json")
    third = Library.open(tmp_path / "lib")
    assert third.video_profiles() == {"a": "tracks", "b": "video", "c": "video"}
    third.close()


def test_availability_is_interned_and_read_from_the_cache_file(tmp_path):
    """Videos with the same availability record share one dict; a new process reads them from
    a small file keyed by the content version (stale after a change: read from the rows again)."""
    import json

    from strived.evaluation.synth import make_video

    rng = np.random.default_rng(1)
    lib = Library.open(tmp_path / "lib", create=True)
    lib.add_videos([make_video(k, rng) for k in range(5)])
    av = lib.availability()
    assert len(av) == 5 and av["v000000"] and len({id(d) for d in av.values()}) == 1
    f = lib.cache_dir / "video_availability.json"
    d = json.loads(f.read_text())
    assert d["which"] == [0] * 5 and d["kinds"][0] == av["v000000"]
    d["kinds"][0] = {"speed": {"status": "marker"}}
    f.write_text(json.dumps(d))
    lib2 = Library.open(tmp_path / "lib")
    assert lib2.availability()["v000003"] == {"speed": {"status": "marker"}}     # read from the file
    lib2.close()
    lib.add_video(make_video(7, rng))
    av = lib.availability()
    assert len(av) == 6 and av["v000007"]["speed"]["status"] != "marker"
    assert av["v000003"]["speed"]["status"] != "marker"
    lib.close()


def test_thumbnails_are_written_by_the_store(tmp_path):
    import pytest as _pt

    from strived.store import Library
    from tests.core.synth import synth_video

    lib = Library.open(tmp_path / "lib", create=True)
    lib.add_videos([synth_video("a", seed=1), synth_video("b", seed=2)])
    lib.put_thumbnail("a", b"\xff\xd8jpeg", 192, 108)
    assert lib.thumbnail("a") == b"\xff\xd8jpeg" and lib.thumbnail("b") is None
    assert lib.thumbnail_ids() == {"a"}
    with _pt.raises(RuntimeError):
        with lib.transaction():
            lib.put_thumbnail("b", b"x")
            raise RuntimeError("rolled back")
    assert lib.thumbnail_ids() == {"a"}
    lib.close()

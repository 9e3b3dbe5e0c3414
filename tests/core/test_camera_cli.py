"""`strived camera list|show|set|split|merge`: videos grouped by the camera that recorded them."""

import json

import numpy as np
import pytest

from strived.cli import main
from strived.perception.camera_id import name_pattern, signature
from strived.records import VideoInfo, VideoRecords
from strived.store import Library

cv2 = pytest.importorskip("cv2")


def _write(path, size, n=5, fps=10.0):
    wr = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), fps, size)
    for k in range(n):
        wr.write(np.full((size[1], size[0], 3), 40 + 10 * k, np.uint8))
    wr.release()
    return path


@pytest.fixture
def two_cameras(tmp_path):
    """Three BlackVue-named 320x180 clips and two FILE####-named 256x144 clips, in a library."""
    files = [_write(tmp_path / f"2024050{k}_120000_NF.mp4", (320, 180)) for k in range(1, 4)]
    files += [_write(tmp_path / f"FILE000{k}.MP4", (256, 144)) for k in range(1, 3)]
    lib_dir = tmp_path / "lib"
    with Library.open(lib_dir, create=True) as lib:
        for f in files:
            cap = cv2.VideoCapture(str(f))
            w, h = int(cap.get(3)), int(cap.get(4))
            cap.release()
            t = np.arange(5) / 10.0
            info = VideoInfo(id=f.stem, path=str(f), fps=10.0, n_frames=5, width=w, height=h,
                             attrs={"codec": "mp4v",
                                    "camera": {"focal_px": 150.0 if w == 320 else 120.0,
                                               "focal_source": "road_flow" if w == 320 else "assumed_fov",
                                               "horizon_y": 90.0, "horizon_source": "cars"}})
            lib.add_video(VideoRecords(info=info, frame_idx=np.arange(5), t=t,
                                       ego={"speed": np.full(5, 10.0)}, tracks=[]))
    return lib_dir


def _json(capsys, argv):
    capsys.readouterr()
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_name_patterns_and_signature_evidence(tmp_path):
    assert name_pattern("20240501_120000_NF.mp4") == "blackvue"
    assert name_pattern("2023_0412_101500_007F.MP4") == "viofo/novatek"
    assert name_pattern("GX010123.MP4") == "gopro"
    assert name_pattern("clip_0042.mp4") == "name:clip_####"
    f = _write(tmp_path / "FILE0001.MP4", (256, 144))
    s = signature(f, 256, 144, 10.0, "mp4v", {"burnin": {"status": "read", "unit": "km/h",
                                                        "region": {"strip": "bottom"}}})
    ev = s["evidence"]
    assert ev["size"] == "256x144" and ev["fps"] == 10.0 and ev["name_pattern"] == "generic-dvr"
    assert ev["overlay"] == "bottom km/h" and "overlay" not in s["key"]    # evidence, not the key
    assert ev["reencoded"] is True and "encoder=" not in s["key"]          # FFmpeg's tag says nothing


def test_camera_list_show_set_split_merge_end_to_end(two_cameras, capsys):
    L = ["--library", str(two_cameras)]
    groups = _json(capsys, ["camera", "list", "--json", *L])
    assert sorted(sorted(g["videos"]) for g in groups) == [
        ["20240501_120000_NF", "20240502_120000_NF", "20240503_120000_NF"], ["FILE0001", "FILE0002"]]
    bv = next(g for g in groups if len(g["videos"]) == 3)
    fl = next(g for g in groups if len(g["videos"]) == 2)

    shown = _json(capsys, ["camera", "show", str(bv["id"]), "--json", *L])
    assert shown["evidence"]["size"] == {"320x180": 3} and shown["evidence"]["name_pattern"] == {"blackvue": 3}
    assert shown["estimated"]["focal_px"]["value"] == 150.0 and len(shown["estimated"]["focal_px"]["clips"]) == 3
    other = _json(capsys, ["camera", "show", str(fl["id"]), "--json", *L])
    assert other["estimated"]["focal_px"]["value"] is None           # only the assumed default: unknown
    assert "unknown" in other["estimated"]["focal_px"]["note"]

    assert main(["camera", "set", str(bv["id"]), "--name", "front BlackVue", "--confirm",
                 "--focal-px", "1000", "--height-m", "1.4", *L]) == 0
    assert "front BlackVue (confirmed)" in capsys.readouterr().out
    shown = _json(capsys, ["camera", "show", str(bv["id"]), "--json", *L])
    assert shown["known"] == {"focal_px": 1000.0, "camera_height_m": 1.4} and shown["confirmed"]

    assert main(["camera", "split", str(bv["id"]), "20240503_120000_NF", *L]) == 0
    groups = _json(capsys, ["camera", "list", "--json", *L])
    assert len(groups) == 3
    new = next(g for g in groups if g["videos"] == ["20240503_120000_NF"])
    # a later listing keeps the user's split (the video is not regrouped by its signature)
    assert _json(capsys, ["camera", "list", "--json", *L]) == groups

    assert main(["camera", "merge", str(bv["id"]), str(new["id"]), *L]) == 0
    groups = _json(capsys, ["camera", "list", "--json", *L])
    assert len(groups) == 2 and len(next(g for g in groups if g["id"] == bv["id"])["videos"]) == 3

    capsys.readouterr()
    assert main(["camera", "list", *L]) == 0
    text = capsys.readouterr().out
    assert "front BlackVue (confirmed): 3 video(s), 320x180 @ 10.0 fps" in text and "focal_px=1000" in text


def test_camera_bad_input_is_a_clear_error_and_changes_nothing(two_cameras, capsys):
    L = ["--library", str(two_cameras)]
    groups = _json(capsys, ["camera", "list", "--json", *L])
    cid = groups[0]["id"]
    for argv, msg in ((["camera", "show", "99", *L], "no camera group 99"),
                      (["camera", "set", str(cid), "--horizon-frac", "0.99", *L], "horizon_frac must be between"),
                      (["camera", "set", str(cid), "--clear", "zoom", *L], "unknown camera value 'zoom'"),
                      (["camera", "split", str(cid), "not-a-video", *L], "not in camera group"),
                      (["camera", "merge", str(cid), str(cid), *L], "at least one other group")):
        capsys.readouterr()
        assert main(argv) == 1, argv
        assert msg in capsys.readouterr().err
    assert _json(capsys, ["camera", "list", "--json", *L]) == groups


def test_removed_videos_leave_their_group(two_cameras, capsys):
    L = ["--library", str(two_cameras)]
    _json(capsys, ["camera", "list", "--json", *L])
    with Library.open(two_cameras) as lib:
        lib.remove_video("FILE0001")
        lib.remove_video("FILE0002")
    groups = _json(capsys, ["camera", "list", "--json", *L])
    assert [len(g["videos"]) for g in groups] == [3]

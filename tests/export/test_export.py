"""strived.export: clip lists, FiftyOne, OpenLABEL, frame-accurate cutting, safe failures."""

import csv
import errno
import json
import os

import numpy as np
import pytest

from strived.errors import Cancelled
from strived.export import (ExportError, cut_clip_reencode, export_results, fast_copy_available,
                            to_fiftyone, write_atomic)


def _clip(path, n=40, fps=10.0):
    import cv2

    vw = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), fps, (160, 96))
    for i in range(n):
        img = np.zeros((96, 160, 3), np.uint8)
        for b in range(8):
            img[0:12, b * 20:(b + 1) * 20] = 255 if (i >> b) & 1 else 0
        vw.write(img)
    vw.release()


def _code(bgr):
    return sum(1 << b for b in range(8) if bgr[3:9, b * 20 + 5:b * 20 + 15].mean() > 127)


def _rows(path):
    return [{"rank": 1, "video_id": "v1", "video_path": str(path), "start_s": 1.0, "end_s": 2.0,
             "start_frame": 10, "end_frame": 20, "fps": 10.0, "score": 0.03,
             "per_source": {"rule": {"rank": 1, "score": 0.9}, "dense": {"rank": 4, "score": 0.3}},
             "event": "cut_in", "confidence": 0.8, "mode": "reused", "query": "q",
             "library_version": 1, "index_version": 7},
            {"rank": 2, "video_id": "rec_only", "video_path": None, "start_s": 0.0, "end_s": 3.0,
             "start_frame": 0, "end_frame": 30, "fps": 10.0, "score": 0.02, "per_source": {},
             "event": "cut_in", "confidence": 0.8, "mode": "reused", "query": "q",
             "library_version": 1, "index_version": 7}]


def test_all_formats_and_frame_accurate_clips(tmp_path):
    src = tmp_path / "v1.mp4"
    _clip(src)
    out = tmp_path / "out"
    events = []
    rep = export_results(_rows(src), out, formats=["csv", "json", "fiftyone", "openlabel"],
                         clips="reencode", context={"query": "q", "rule": {"x": 1},
                                                    "match": {"event": "cut_in"}, "index_version": 7},
                         progress=events.append)
    assert len(rep.clips) == 1 and rep.skipped[0][0] == "rec_only"
    rows = list(csv.DictReader(open(out / "clips.csv")))
    assert rows[0]["rule_score"] == "0.9" and rows[0]["dense_rank"] == "4" and rows[0]["clip_path"]
    doc = json.load(open(out / "clips.json"))
    assert doc["rule"] == {"x": 1} and doc["clips"][0]["end_frame"] == 20
    fo = json.load(open(out / "fiftyone" / "labels.json"))
    assert fo["labels"]["v1"][0]["support"] == [11, 21] and fo["classes"] == ["cut_in"]
    ol = json.load(open(out / "openlabel" / "v1.json"))["openlabel"]
    assert ol["actions"]["0"]["frame_intervals"] == [{"frame_start": 10, "frame_end": 20}]
    import cv2

    cap = cv2.VideoCapture(rep.clips[0])
    codes = []
    while True:
        ok, f = cap.read()
        if not ok:
            break
        codes.append(_code(f))
    assert codes == list(range(10, 21))
    assert events and events[-1].done == events[-1].total
    assert not [p for p in out.rglob("*.partial*")]


def test_readonly_folder_and_full_disk_leave_nothing(tmp_path, monkeypatch):
    src = tmp_path / "v1.mp4"
    _clip(src)
    ro = tmp_path / "ro"
    ro.mkdir()
    os.chmod(ro, 0o500)
    if os.geteuid() != 0:
        with pytest.raises(ExportError, match="read-only"):
            export_results(_rows(src), ro, formats=["csv"])
        assert os.listdir(ro) == []
    out = tmp_path / "full"
    real_open = open

    def full_open(path, mode="r", *a, **k):
        fh = real_open(path, mode, *a, **k)
        if "w" in mode and str(path).endswith(".partial") and "clips.json" in str(path):
            fh.close()
            raise OSError(errno.ENOSPC, "No space left on device")
        return fh

    monkeypatch.setattr("builtins.open", full_open)
    with pytest.raises(ExportError, match="disk is full"):
        export_results(_rows(src), out, formats=["csv", "json"])
    monkeypatch.undo()
    assert sorted(os.listdir(out)) == []              # csv was rolled back too: all or nothing


def test_cancel_mid_clip_removes_partial(tmp_path):
    src = tmp_path / "v1.mp4"
    _clip(src)
    (tmp_path / "o").mkdir()
    with pytest.raises(Cancelled):
        cut_clip_reencode(str(src), tmp_path / "o" / "c.mp4", 0, 39, cancel=lambda: True)
    assert os.listdir(tmp_path / "o") == []


def test_fast_copy_unavailable_is_clear(tmp_path):
    if fast_copy_available():
        pytest.skip("ffmpeg present")
    with pytest.raises(ExportError, match="unavailable"):
        export_results(_rows(tmp_path / "x.mp4"), tmp_path / "o", clips="copy")


def test_write_atomic_and_fiftyone_timestamps(tmp_path):
    p = write_atomic(tmp_path / "a.txt", "hi")
    assert open(p).read() == "hi"
    lab, data = to_fiftyone([{"video_id": "v", "video_path": "/v.mp4", "start_s": 1.0, "end_s": 2.0,
                              "start_frame": None, "end_frame": None, "score": 0.5}], "ev")
    assert json.loads(lab)["labels"]["v"][0]["timestamps"] == [1.0, 2.0]
    assert json.loads(data) == {"v": "/v.mp4"}


def test_clips_use_the_best_codec_this_machine_has(tmp_path, monkeypatch):
    """H.264 when OpenCV can open an H.264 writer here, else MPEG-4 Part 2; the written clip says
    which (its FourCC) and still decodes frame-exactly."""
    import cv2

    import strived.export as ex

    probe = cv2.VideoWriter(str(tmp_path / "p.mp4"), cv2.VideoWriter_fourcc(*"avc1"), 10.0, (64, 48))
    h264 = probe.isOpened()
    probe.release()
    monkeypatch.setattr(ex, "_CODEC", [])
    monkeypatch.delenv("STRIVED_EXPORT_CODEC", raising=False)
    assert ex.clip_codec() == ("avc1" if h264 else "mp4v")
    src = tmp_path / "src.mp4"
    _clip(src)
    out = cut_clip_reencode(str(src), tmp_path / "c.mp4", 5, 14)
    cap = cv2.VideoCapture(out)
    fourcc = int(cap.get(cv2.CAP_PROP_FOURCC)).to_bytes(4, "little").decode("ascii", "replace").lower()
    codes = []
    while True:
        ok, f = cap.read()
        if not ok:
            break
        codes.append(_code(f))
    cap.release()
    assert codes == list(range(5, 15))
    assert fourcc in (("avc1", "h264") if h264 else ("mp4v", "fmp4"))   # FFmpeg names MPEG-4 Part 2 FMP4
    # forcing a codec is honoured
    monkeypatch.setenv("STRIVED_EXPORT_CODEC", "mp4v")
    assert ex.clip_codec() == "mp4v"

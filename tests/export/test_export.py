"""strived.export: clip lists, FiftyOne, OpenLABEL, frame-accurate cutting, safe failures."""

import csv
import errno
import json
import os

import numpy as np
import pytest

from strived.errors import Cancelled
from tests.faults.conftest import fast_embedder  # noqa: F401  (the fixture)
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


def test_clips_are_h264_through_pyav_and_frame_exact(tmp_path, monkeypatch):
    """PyAV's wheels ship FFmpeg with libx264: re-encoded clips are H.264 (not MPEG-4 Part 2,
    which many tools reject) on every machine, and still decode frame-exactly."""
    import cv2

    import strived.clipwriter as cw
    import strived.export as ex

    monkeypatch.setattr(cw, "_CHOSEN", [])
    monkeypatch.delenv("STRIVED_EXPORT_CODEC", raising=False)
    assert ex.clip_codec() == "libx264"
    src = tmp_path / "src.mp4"
    _clip(src)
    out = cut_clip_reencode(str(src), tmp_path / "c.mp4", 5, 14)
    cap = cv2.VideoCapture(out)
    fourcc = int(cap.get(cv2.CAP_PROP_FOURCC)).to_bytes(4, "little").decode("ascii", "replace").lower()
    fps = cap.get(cv2.CAP_PROP_FPS)
    codes = []
    while True:
        ok, f = cap.read()
        if not ok:
            break
        codes.append(_code(f))
    cap.release()
    assert codes == list(range(5, 15)) and fourcc in ("avc1", "h264") and fps == pytest.approx(10.0)
    # forcing an OpenCV codec is honoured (the stated fallback where PyAV is missing)
    monkeypatch.setenv("STRIVED_EXPORT_CODEC", "mp4v")
    assert ex.clip_codec() == "mp4v"
    out2 = cut_clip_reencode(str(src), tmp_path / "d.mp4", 5, 14)
    cap = cv2.VideoCapture(out2)
    fourcc = int(cap.get(cv2.CAP_PROP_FOURCC)).to_bytes(4, "little").decode("ascii", "replace").lower()
    cap.release()
    assert fourcc in ("mp4v", "fmp4")   # FFmpeg names MPEG-4 Part 2 FMP4


def test_exports_carry_the_event_apart_from_the_padded_clip_and_relevance_as_confidence(tmp_path):
    """The clip is padded by a lead-in/out; the event's own frames stay the event's in every
    format, and the confidence written is the calibrated relevance (never the fused rank value)."""
    from strived.export import pad_rows

    rows = _rows(tmp_path / "v1.mp4")
    rows[0].update(event_start_s=1.0, event_end_s=2.0, event_start_frame=10, event_end_frame=20, relevance=0.62)
    rows[1].update(event_start_s=None, event_end_s=None, event_start_frame=None, event_end_frame=None,
                   relevance=None)
    padded = pad_rows(rows, 0.5, 0.5, {"v1": (40, 3.9), "rec_only": (31, 3.0)})
    assert (padded[0]["start_frame"], padded[0]["end_frame"]) == (5, 25)
    assert (padded[0]["event_start_frame"], padded[0]["event_end_frame"]) == (10, 20)
    out = tmp_path / "out"
    export_results(padded, out, formats=["csv", "fiftyone", "openlabel"], context={"query": "q"})
    c = list(csv.DictReader(open(out / "clips.csv")))
    assert (c[0]["start_frame"], c[0]["end_frame"], c[0]["event_start_frame"], c[0]["event_end_frame"]) == \
        ("5", "25", "10", "20")
    assert c[0]["relevance"] == "0.62" and c[1]["relevance"] == "" and c[1]["event_start_s"] == ""
    fo = json.load(open(out / "fiftyone" / "labels.json"))["labels"]
    assert fo["v1"][0] == {"label": "match", "confidence": 0.62, "support": [11, 21], "clip_support": [6, 26]}
    assert "confidence" not in fo["rec_only"][0]          # not estimated: not written as a number
    ol = json.load(open(out / "openlabel" / "v1.json"))["openlabel"]
    assert ol["actions"]["0"]["frame_intervals"] == [{"frame_start": 10, "frame_end": 20}]
    assert ol["frame_intervals"] == [{"frame_start": 5, "frame_end": 25}]
    nums = {n["name"]: n["val"] for n in ol["actions"]["0"]["action_data"]["num"]}
    assert nums == {"relevance": 0.62, "rank": 1}


def test_cli_lead_in_and_out_widen_the_clip_not_the_event(tmp_path, fast_embedder):  # noqa: F811
    from strived.cli import main
    from strived.store import Library
    from tests.faults.conftest import synth_records

    lib_dir = tmp_path / "lib"
    with Library.open(lib_dir, create=True) as lib:
        lib.add_videos(synth_records(3))
    out = tmp_path / "out"
    assert main(["export-results", "a car cuts in", str(out), "--library", str(lib_dir), "--format", "csv",
                 "--lead-in", "1.5", "--lead-out", "1"]) == 0
    rows = [r for r in csv.DictReader(open(out / "clips.csv")) if r["event_start_s"]]
    assert rows
    for r in rows:
        assert float(r["start_s"]) == pytest.approx(max(0.0, float(r["event_start_s"]) - 1.5), abs=1e-3)
        assert float(r["end_s"]) >= float(r["event_end_s"])
    with pytest.raises(SystemExit):
        main(["export-results", "car", str(out), "--library", str(lib_dir), "--lead-in", "-1"])


def _openlabel_schema():
    import importlib.resources

    ref = importlib.resources.files("openlabel_checker") / "schema_data" / "openlabel_json_schema-v1.0.0.json"
    return json.loads(ref.read_text(encoding="utf-8"))


def test_openlabel_export_validates_against_the_asam_schema(tmp_path):
    """Every OpenLABEL file we write is valid ASAM OpenLABEL 1.0.0 (the schema as shipped in the
    `openlabel-checker` package), padded or not, with or without a relevance."""
    import jsonschema

    from strived.export import pad_rows

    schema = _openlabel_schema()
    validator = jsonschema.validators.validator_for(schema)(schema)
    rows = _rows(tmp_path / "v1.mp4")
    rows[0].update(event_start_s=1.0, event_end_s=2.0, event_start_frame=10, event_end_frame=20, relevance=0.62)
    out = tmp_path / "out"
    export_results(pad_rows(rows, 0.5, 0.5), out, formats=["openlabel"], context={"query": "q"})
    files = sorted((out / "openlabel").glob("*.json"))
    assert len(files) == 2
    for f in files:
        doc = json.loads(f.read_text())
        errors = [f"{list(e.path)}: {e.message}" for e in validator.iter_errors(doc)]
        assert errors == [], (f.name, errors)
    bad = json.loads(files[0].read_text())
    bad["openlabel"]["actions"]["0"]["frame_intervals"] = [{"frame_start": "ten"}]   # the check can fail
    assert list(validator.iter_errors(bad))


def test_fiftyone_reads_our_export_when_installed(tmp_path):
    """FiftyOne's own importer parses the export (support = the event's frames, confidence = the
    relevance). fiftyone is ~1 GB and needs MongoDB to build a dataset, so it is not installed by
    the project; this runs where a user has it."""
    pytest.importorskip("fiftyone")
    import fiftyone.utils.data as foud

    rows = _rows(tmp_path / "v1.mp4")
    rows[0].update(event_start_s=1.0, event_end_s=2.0, event_start_frame=10, event_end_frame=20, relevance=0.62)
    out = tmp_path / "out"
    export_results(rows[:1], out, formats=["fiftyone"], context={"query": "q", "match": {"event": "cut_in"}})
    imp = foud.FiftyOneTemporalDetectionDatasetImporter(dataset_dir=str(out / "fiftyone"), data_path="data.json")
    with imp:
        items = list(imp)
    assert len(items) == 1
    det = items[0][2].detections[0]
    assert det.label == "cut_in" and list(det.support) == [11, 21] and det.confidence == 0.62

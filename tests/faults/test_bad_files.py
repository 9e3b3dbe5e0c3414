"""Bad files in the footage folder: each fails alone with a reason, the good videos are indexed
(issue 15 item 3: a symlink loop named *.mp4 used to stop the whole folder; item 9: unreadable
sub-folders were skipped silently)."""

from __future__ import annotations

import os
import shutil

import pytest

from strived.indexing.job import index_folder
from strived.store import Library
from tests.perception.conftest import FakeDetector, write_video


@pytest.fixture
def folder(tmp_path):
    src = tmp_path / "footage"
    (src / "sub").mkdir(parents=True)
    write_video(src / "good1.mp4", n_frames=12)
    write_video(src / "sub" / "good2.mov", n_frames=12)
    return src


def _index(src, tmp_path):
    lib = Library.open(tmp_path / "lib", create=True)
    try:
        rep = index_folder(src, lib, detector=FakeDetector())
        return rep, lib.video_ids()
    finally:
        lib.close()


def _bad_cases(src):
    """name -> how to make it; every one is a *.mp4 the indexer finds."""
    def loop(p):
        os.symlink(p.with_name("loop_b.mp4"), p)
        os.symlink(p, p.with_name("loop_b.mp4"))

    def truncated(p):
        write_video(p.parent.parent / "full_tmp.mp4", n_frames=30)
        data = (p.parent.parent / "full_tmp.mp4").read_bytes()
        p.write_bytes(data[: len(data) // 3])
        (p.parent.parent / "full_tmp.mp4").unlink()

    return {
        "zero.mp4": lambda p: p.write_bytes(b""),
        "garbage.mp4": lambda p: p.write_bytes(os.urandom(4096)),
        "text.mp4": lambda p: p.write_text("this is not a video\n" * 50),
        "truncated.mp4": truncated,
        "loop_a.mp4": loop,
        "self.mp4": lambda p: os.symlink(p, p),
        "dangling.mp4": lambda p: os.symlink(p.with_name("nowhere.mp4"), p),
        "folder.mp4": lambda p: p.mkdir(),
    }


@pytest.mark.parametrize("case", list(_bad_cases(__import__("pathlib").Path("."))))
def test_one_bad_file_never_stops_the_folder(folder, tmp_path, case):
    _bad_cases(folder)[case](folder / case)
    rep, ids = _index(folder, tmp_path)
    assert sorted(ids) == ["good1", "sub__good2"]
    failed = {os.path.basename(p): why for p, why in rep.failed}
    if case == "folder.mp4":   # a folder is walked into, not opened as a video
        assert not failed
    else:
        assert case in failed, (case, rep.failed)
        assert all(why and "Traceback" not in why for why in failed.values())


def test_symlink_loop_reason_is_named(folder, tmp_path):
    os.symlink(folder / "b.mp4", folder / "a.mp4")
    os.symlink(folder / "a.mp4", folder / "b.mp4")
    rep, ids = _index(folder, tmp_path)
    assert sorted(ids) == ["good1", "sub__good2"]
    assert {os.path.basename(p) for p, _ in rep.failed} == {"a.mp4", "b.mp4"}
    assert all("symlink loop" in why for _, why in rep.failed)


def test_all_bad_files_at_once(folder, tmp_path):
    for name, make in _bad_cases(folder).items():
        make(folder / name)
    rep, ids = _index(folder, tmp_path)
    assert sorted(ids) == ["good1", "sub__good2"] and not rep.ok
    assert len(rep.failed) >= 7


def test_unreadable_subfolder_is_reported(folder, tmp_path, monkeypatch, capsys, fast_embedder):
    locked = folder / "locked"
    locked.mkdir()
    write_video(locked / "hidden_from_us.mp4", n_frames=12)
    real_scandir = os.scandir

    def scandir(path="."):
        if os.path.abspath(path) == str(locked):
            raise PermissionError(13, "Permission denied", str(locked))
        return real_scandir(path)
    monkeypatch.setattr(os, "scandir", scandir)  # root reads any folder: refuse this one as a user's OS would
    rep, ids = _index(folder, tmp_path)
    assert sorted(ids) == ["good1", "sub__good2"]
    assert rep.unreadable == [(str(locked), "Permission denied")]
    assert "could not be read" in rep.summary()

    import argparse

    from strived.commands import index

    ap = argparse.ArgumentParser()
    index.register(ap.add_subparsers())
    args = ap.parse_args(["index", str(folder), "--library", str(tmp_path / "lib2"), "--quiet",
                          "--detector", "fake", "--workers", "1"])   # the fake lives in this process
    monkeypatch.setattr("strived.perception.detect.make_detector", lambda *a, **k: FakeDetector())
    rc = args.func(args)
    err = capsys.readouterr().err
    assert rc == 0 and f"cannot read folder {locked}: Permission denied" in err


def test_a_file_name_that_is_not_utf8_is_reported_not_a_crash(tmp_path, fast_embedder):
    """Bytes that are not UTF-8 in a file name (another system's encoding) could not be stored:
    indexing crashed with a UnicodeEncodeError. Now that file is reported by name, the rest go on."""
    src = tmp_path / "trip"
    src.mkdir()
    write_video(src / "good.mp4", n_frames=12)
    try:   # bytes paths: OpenCV itself crashes (segfault) on such a name, which is why it is refused
        shutil.copyfile(os.fsencode(str(src / "good.mp4")), os.fsencode(str(src)) + b"/bad\xffname.mp4")
    except (OSError, UnicodeError):
        pytest.skip("this file system refuses names that are not UTF-8")
    with Library.open(tmp_path / "lib", create=True) as lib:
        rep = index_folder(src, lib, detector=FakeDetector())
        assert rep.indexed == ["good"]
        assert [(p.rsplit("/", 1)[-1], why) for p, why in rep.failed] == \
            [("bad\\xffname.mp4", "its file name is not valid UTF-8: rename the file to index it")]


class _Payload:
    """A pickle that, if it were ever run, would create the file named in ``marker``."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


@pytest.mark.parametrize("kind", ["hf", "onnx"])
def test_a_pickle_named_as_a_model_is_a_message_and_never_runs(tmp_path, kind):
    """Issue 37: a pickle named as a model file. Nothing of it runs; the user reads why, no traceback."""
    import pickle

    from tests.faults.conftest import run_cli

    marker = tmp_path / "pwned"
    videos = tmp_path / "v"
    videos.mkdir()
    write_video(videos / "a.mp4", n_frames=6)
    model = tmp_path / "model"
    model.mkdir()
    if kind == "hf":
        (model / "config.json").write_text('{"model_type": "detr"}')
        (model / "pytorch_model.bin").write_bytes(pickle.dumps(_Payload(marker)))
        spec = f"hf:{model}"
    else:
        (model / "m.onnx").write_bytes(pickle.dumps(_Payload(marker)))
        spec = f"onnx:{model / 'm.onnx'}"
    r = run_cli("index", str(videos), "--library", str(tmp_path / "lib"), "--detector", spec,
                "--workers", "1", timeout=300)
    assert r.returncode != 0 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert "cannot load" in r.stderr
    if kind == "hf":
        assert "pickle holding more than tensors" in r.stderr and "weights_only=False" not in r.stderr
    assert not marker.exists()

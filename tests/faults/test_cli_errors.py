"""Issue 15 item 9: the smaller holes. Bad arguments and bad input files are clear messages with
a non-zero exit, never tracebacks or silently wrong results."""

from __future__ import annotations

import os

import pytest

from strived.cli import main

from .conftest import run_cli


def _run(capsys, *argv):
    try:
        rc = main(list(argv))
    except SystemExit as e:  # argparse rejects a bad argument with exit status 2
        rc = e.code
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return rc, out, err


@pytest.mark.parametrize("top", ["-1", "0", "x", "1.5"])
def test_top_must_be_positive(make_library, capsys, top):
    folder = make_library(2, text_index=False)
    rc, out, err = _run(capsys, "search", "car", "--library", str(folder), f"--top={top}")
    assert rc == 2 and "--top" in err


def test_top_one_returns_exactly_one(make_library, capsys):
    folder = make_library(4)
    rc, out, err = _run(capsys, "search", "car", "--library", str(folder), "--top", "1", "--json")
    import json

    assert rc == 0 and len(json.loads(out)["hits"]) == 1


@pytest.mark.parametrize("fps", ["0", "-5", "nan", "inf", "abc", "1e9"])
def test_index_fps_is_validated(tmp_path, capsys, fps):
    (tmp_path / "v").mkdir()
    rc, out, err = _run(capsys, "index", str(tmp_path / "v"), "--library", str(tmp_path / "lib"),
                        f"--fps={fps}")
    assert rc == 2 and "--fps" in err
    assert not (tmp_path / "lib").exists()


@pytest.mark.parametrize("weights,msg", [("{bad", "not valid JSON"), ("[1, 2]", "JSON object"),
                                         ('{"rule": -1}', ">= 0"), ('{"colour": 1}', "unknown source"),
                                         ('{"rule": NaN}', "finite"), ('{"rule": 0, "bm25": 0}', "above 0"),
                                         ('{"rule": "1"}', "finite number")])
def test_bad_weights(make_library, capsys, weights, msg):
    folder = make_library(2, text_index=False)
    rc, out, err = _run(capsys, "search", "car", "--library", str(folder), "--weights", weights)
    assert rc == 1 and msg in err


@pytest.mark.parametrize("content,msg", [(b"[" * 200000, "nested too deeply"),
                                         (b'{"event": "caf\xe9"}', "not UTF-8"),
                                         (b"{", "not valid JSON")])
@pytest.mark.parametrize("command", ["search", "export-results"])
def test_bad_rule_files(make_library, tmp_path, capsys, content, msg, command):
    folder = make_library(2, text_index=False)
    rule = tmp_path / "rule.json"
    rule.write_bytes(content)
    argv = [command, "car"] + ([str(tmp_path / "out")] if command == "export-results" else [])
    rc, out, err = _run(capsys, *argv, "--library", str(folder), "--rule", str(rule))
    assert rc == 1 and msg in err


def test_missing_rule_file(make_library, tmp_path, capsys):
    folder = make_library(1, text_index=False)
    rc, out, err = _run(capsys, "search", "car", "--library", str(folder), "--rule", str(tmp_path / "nope.json"))
    assert rc == 1 and "cannot read" in err


def test_export_errors_are_messages(make_library, tmp_path, capsys):
    folder = make_library(2, text_index=False)
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    rc, out, err = _run(capsys, "export", str(blocker), "--library", str(folder))
    assert rc == 1 and "export folder" in err
    rc, out, err = _run(capsys, "export", str(tmp_path / "ok"), "--library", str(folder), "--video", "nope")
    assert rc == 1 and "no video 'nope'" in err and not (tmp_path / "ok").exists()
    rc, out, err = _run(capsys, "export", str(tmp_path / "ok"), "--library", str(folder))
    assert rc == 0 and sorted(os.listdir(tmp_path / "ok")) == ["v00.json", "v01.json"]


def test_deeply_nested_rule_through_a_real_process(make_library, tmp_path):
    folder = make_library(1, text_index=False)
    rule = tmp_path / "deep.json"
    rule.write_text('{"all": ' * 5000 + "{}" + "}" * 5000)
    r = run_cli("search", "car", "--library", str(folder), "--rule", str(rule), "--sources", "rule")
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr[-500:]


def test_a_mistyped_footage_folder_creates_nothing(tmp_path, capsys):
    """`strived index` on a folder that does not exist says so and leaves no empty library behind
    (issue 37, destructive defaults)."""
    rc, out, err = _run(capsys, "index", str(tmp_path / "dashcma"), "--library", str(tmp_path / "lib"))
    assert rc == 2 and "does not exist" in err and "nothing was created" in err
    assert not (tmp_path / "lib").exists()
    (tmp_path / "file.mp4").write_bytes(b"x")
    rc, out, err = _run(capsys, "index", str(tmp_path / "file.mp4"), "--library", str(tmp_path / "lib"))
    assert rc == 2 and "is not a folder" in err and not (tmp_path / "lib").exists()


@pytest.mark.parametrize("query", ["", "   ", "\t"])
def test_an_empty_query_is_refused_not_answered(make_library, capsys, query):
    folder = make_library(2, text_index=False)
    rc, out, err = _run(capsys, "search", query, "--library", str(folder))
    assert rc == 1 and "the query is empty" in err and out == ""


def test_control_sequences_from_data_never_reach_the_terminal(make_library, capsys):
    """A query (or any data the CLI prints: LLM reasons, step names, class names) carrying an
    escape sequence is printed without it (issue 37: OSC 52 could set the clipboard)."""
    from strived.commands.terminal import CleanStream, clean

    assert clean("a\x1b]52;c;SGVsbG8=\x07b\x9b2Jc\r\n\t") == "a]52;c;SGVsbG8=b2Jc\r\n\t"
    import json

    folder = make_library(2, text_index=False)
    ego = {"role": "ego", "class_filter": None, "selection": "any", "agg_mode": "any"}
    soft = {"type": "temporal_change", "field": "speed", "window_seconds": 2, "magnitude": 2, "weight": 1}
    rule = {"event": "x", "sequence": [
        {"name": "brake \x1b]52;c;SGVsbG8=\x07 now", "entity": ego, "hard_gates": [],
         "soft_scores": [dict(soft, direction="negative")]},
        {"name": "then \x1b[2J go", "entity": ego, "hard_gates": [], "soft_scores": [dict(soft, direction="positive")],
         "gap": {"min_seconds": 0, "max_seconds": 5}}]}
    path = folder / "rule.json"
    path.write_text(json.dumps(rule))
    rc, out, err = _run(capsys, "search", "x", "--rule", str(path), "--library", str(folder), "--explain")
    assert rc == 0 and "brake ]52;c;SGVsbG8= now" in out        # the step name, printed without its escapes
    assert "\x1b" not in out + err and "\x07" not in out + err
    import io

    buf = io.StringIO()
    s = CleanStream(buf)
    assert s.write("x\x1by") == 3 and buf.getvalue() == "xy"


def test_ray_addresses_and_resources_are_checked_before_any_wait():
    """A mistyped --ray address, a port where nothing listens, or tasks asking for more CPUs or
    GPUs than the cluster has are refused with a message within seconds (issue 37: they waited
    forever or raised a traceback)."""
    import socket
    import time

    from strived.errors import StrivedError
    from strived.indexing.ray_backend import check_feasible, check_ray_address

    for bad in ("localhost", "127.0.0.1:", "127.0.0.1:99999", ":6379"):
        with pytest.raises(StrivedError, match="HOST:PORT"):
            check_ray_address(bad)
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()                                  # a port where nothing listens
    t0 = time.perf_counter()
    with pytest.raises(StrivedError, match="no Ray head node answers"):
        check_ray_address(f"127.0.0.1:{port}")
    assert time.perf_counter() - t0 < 6
    check_ray_address("local")
    check_feasible({"CPU": 2.0}, 1.0, 0.0)
    with pytest.raises(StrivedError, match="--ray-cpus 100"):
        check_feasible({"CPU": 2.0}, 100.0, 0.0)
    with pytest.raises(StrivedError, match="--ray-gpus 1"):
        check_feasible({"CPU": 2.0}, 1.0, 1.0)


_LIB = '{"format": "strived.rule_library/1", '


@pytest.mark.parametrize("body,msg", [
    ('"events": []}', "must be JSON objects"),
    ('"events": "x"}', "must be JSON objects"),
    ('"events": null}', "must be JSON objects"),
    ('"events": {}, "provenance": [1]}', "must be JSON objects"),
    ('"events": {"ego_brake": 3}}', "event ego_brake: each event must be a JSON object with a 'rule'"),
    ('"events": {"ego_brake": {}}}', "with a 'rule'"),
    ('"events": {"ego_brake": {"rule": 3}}}', "event ego_brake"),
    ('"events": {"ego_brake": {"rule": {}, "iterations": "x"}}}', "event ego_brake"),
    ('"events": {}, "version": [1]}', "must be strings"),
    ('"events": {"\\ud800": {}}}', "unknown event"),
])
def test_malformed_rule_libraries_are_messages(make_library, tmp_path, capsys, body, msg):
    """Issue 37: nine malformed `--rule-library` shapes (and a lone surrogate as an event name) were
    tracebacks (AttributeError, TypeError, KeyError, ValueError)."""
    folder = make_library(2, text_index=False)
    path = tmp_path / "lib.json"
    path.write_text(_LIB + body, encoding="utf-8")
    rc, out, err = _run(capsys, "search", "car", "--library", str(folder), "--rule-library", str(path))
    assert rc == 1 and msg in err, err


@pytest.mark.parametrize("field,value", [("iterations", '"x"'), ("n_pos", "[1]"), ("ap", '"high"'),
                                         ("ap", "7")])
def test_rule_library_counts_and_aps_are_checked(tmp_path, capsys, field, value):
    from strived.rulelib.library import RuleLibrary, RuleLibraryError, load_default_library

    d = load_default_library().to_dict()
    entry = d["events"]["ego_brake"]
    path = tmp_path / "lib.json"
    import json

    entry[field] = json.loads(value)
    path.write_text(json.dumps(d), encoding="utf-8")
    with pytest.raises(RuleLibraryError, match=f"event ego_brake: '{field}'"):
        RuleLibrary.load(path)

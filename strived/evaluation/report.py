"""`strived bench` and `strived report`: the speed benchmarks gathered into one run, and the
evaluation + performance report (markdown with PNG plots) of a benchmark folder.

The benchmark scripts live in the repository's ``benchmarks/`` folder (not in an installed wheel).
They run as subprocesses, each in its own interpreter (their timings and peak RSS are then their
own), and what they print is parsed; the raw output is kept so nothing is lost when a script's
wording changes. A missing script or an unparsable one is reported as such, never replaced.

Plots are drawn with numpy + OpenCV (already dependencies): no plotting library is needed, and the
PNG bytes depend only on the numbers plotted.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from ..errors import StrivedError
from ..jobs import CancelFn, ProgressFn, check_cancel, report

# ---------------------------------------------------------------------------------------------
# the paper's figures (DrivingDojo, 583 videos, mean per query; tables "latency" and "per-stage
# latency breakdown")
PAPER = {"corpus_videos": 583, "rule_ms": 254.16, "bm25_ms": 1.3, "dense_ms": 129.0,
         "branches_ms": 384.0, "total_ms": 3096.66, "rule_synthesis_ms": 1987.0, "router_ms": 725.0}

# name -> (script, quick args, full args, parser name). Full args are each script's own defaults.
BENCHES: dict[str, tuple[str, list[str], list[str]]] = {
    "core": ("bench_core.py", ["--videos", "1000", "--naive-subset", "20"], []),
    "perception": ("bench_perception.py", ["--clips", "1", "--overlays", ""], ["--overlays", ""]),
    "retrieval": ("bench_retrieval.py", ["--sizes", "1000", "--bm25-sizes", "1000", "10000", "--reps", "5"], []),
    "calibration": ("bench_calibration.py", ["--videos", "200"], []),
    "app": ("bench_app.py", ["--videos", "1000"], []),
    "egomotion": ("bench_egomotion.py", [], []),
    "detection": ("bench_detection.py", ["--quick"], []),
}
BENCH_ORDER = tuple(BENCHES)
# benchmarks that write their figures as JSON (``--json PATH``) instead of being parsed from stdout
JSON_BENCHES = ("egomotion", "detection")


def benchmarks_dir() -> Path:
    """The repository's benchmarks/ folder (beside the ``strived`` package of a source checkout)."""
    env = os.environ.get("STRIVED_BENCHMARKS")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[2] / "benchmarks"


def parse_only(only: str | None) -> list[str]:
    if not only:
        return list(BENCH_ORDER)
    names = [s.strip() for s in only.split(",") if s.strip()]
    bad = [n for n in names if n not in BENCHES]
    if bad:
        raise StrivedError(f"unknown benchmark(s) {bad}; valid: {', '.join(BENCH_ORDER)}")
    return [n for n in BENCH_ORDER if n in names]


# ---------------------------------------------------------------------------------------------
# parsers: what each script prints -> numbers. Each returns {} when nothing matched.

_NUM = r"([-+]?\d[\d,]*\.?\d*(?:e[-+]?\d+)?)"


def _f(s: str) -> float:
    return float(s.replace(",", ""))


def parse_core(text: str) -> dict:
    out: dict = {}
    if m := re.search(r"corpus: (\d+) videos", text):
        out["videos"] = int(m.group(1))
    if m := re.search(r"import \(excluding synthetic generation [\d.]+ s\): " + _NUM + " s", text):
        out["import_s"] = _f(m.group(1))
    if m := re.search(r"library size on disk: " + _NUM + " MB", text):
        out["library_mb"] = _f(m.group(1))
    if m := re.search(r"open library \((\d+) videos\): " + _NUM + " ms", text):
        out["open_ms"] = _f(m.group(2))
    if m := re.search(r"load columns into memory: " + _NUM + " s", text):
        out["load_columns_s"] = _f(m.group(1))
    rules = []
    pat = re.compile(r"score one rule \[(.+?)\] over (\d+) videos: first " + _NUM + r" ms.*?warm "
                     + _NUM + r" ms.*?\n\s*naive reference: " + _NUM
                     + r" ms/video on (\d+) videos .*?speed-up x" + _NUM + r" \(warm\), x" + _NUM
                     + r" \(first\); max \|diff\| " + _NUM)
    for m in pat.finditer(text):
        rules.append({"rule": m.group(1), "videos": int(m.group(2)), "first_ms": _f(m.group(3)),
                      "disk_ms": None, "warm_ms": _f(m.group(4)),
                      "naive_ms_per_video": _f(m.group(5)), "naive_subset": int(m.group(6)),
                      "speedup_warm": _f(m.group(7)), "speedup_first": _f(m.group(8)),
                      "max_abs_diff": _f(m.group(9))})
    # a new process: memory-mapped column cache, the first rule's features read from disk
    if rules and (m := re.search(r"new process: open " + _NUM + r" ms, columns from cache " + _NUM
                                 + r" ms, first score \(features from disk\) " + _NUM + r" ms", text)):
        out["new_process"] = {"open_ms": _f(m.group(1)), "columns_ms": _f(m.group(2)),
                              "first_score_ms": _f(m.group(3))}
        rules[0]["disk_ms"] = _f(m.group(3))
    if rules:
        out["rules"] = rules
    if m := re.search(r"peak RSS: " + _NUM + " MB", text):
        out["peak_rss_mb"] = _f(m.group(1))
    return out


def parse_perception(text: str) -> dict:
    out: dict = {}
    clips = []
    for m in re.finditer(r"^(\S+)\s+" + _NUM + r" s video,\s+(\d+) frames, wall\s+" + _NUM + r" s, RT x\s*"
                         + _NUM + r", tracks\s+(\d+) \| (.*)$", text, re.MULTILINE):
        fps = {k: _f(v) if v != "inf" else None for k, v in re.findall(r"(\w+)=(\S+)", m.group(7))}
        clips.append({"clip": m.group(1), "video_s": _f(m.group(2)), "frames": int(m.group(3)),
                      "wall_s": _f(m.group(4)), "realtime_factor": _f(m.group(5)),
                      "tracks": int(m.group(6)), "stage_fps": fps})
    if clips:
        out["clips"] = clips
    if m := re.search(r"OVERALL " + _NUM + r" s of video, (\d+) frames in " + _NUM + r" s: real-time factor x"
                      + _NUM + ", " + _NUM + " frames/s end to end", text):
        out["overall"] = {"video_s": _f(m.group(1)), "frames": int(m.group(2)), "wall_s": _f(m.group(3)),
                          "realtime_factor": _f(m.group(4)), "fps_end_to_end": _f(m.group(5))}
    if m := re.search(r"per-stage frames/s: (.*)", text):
        out["stage_fps"] = {k: _f(v) for k, v in re.findall(r"(\w+) " + _NUM, m.group(1))}
    if m := re.search(r"peak RSS " + _NUM + " MB", text):
        out["peak_rss_mb"] = _f(m.group(1))
    rng = {}
    for m in re.finditer(r"^\s+(known camera|estimated horizon)\s*: n=(\d+), median relative distance error "
                         + _NUM + ", P90 " + _NUM, text, re.MULTILINE):
        rng[m.group(1)] = {"n": int(m.group(2)), "median_rel_err": _f(m.group(3)), "p90_rel_err": _f(m.group(4))}
    if rng:
        out["kitti_ranging"] = rng
    return out


def parse_retrieval(text: str) -> dict:
    out: dict = {}
    sec = {}
    for part in re.split(r"^## ", text, flags=re.MULTILINE)[1:]:
        head, _, body = part.partition("\n")
        sec[head.strip()] = (head, body)
    bm = []
    for head, (h, body) in sec.items():
        if head.startswith("BM25"):
            for m in re.finditer(r"^\s*(\d+)\s+" + r"\s+".join([_NUM] * 4) + r"\s+(True|False)", body, re.MULTILINE):
                bm.append({"docs": int(m.group(1)), "bm25s_ms": _f(m.group(2)), "rank_bm25_ms": _f(m.group(3)),
                           "bm25s_build_s": _f(m.group(4)), "rank_bm25_build_s": _f(m.group(5)),
                           "agree": m.group(6) == "True"})
        elif head.startswith("Dense"):
            dn = []
            for m in re.finditer(r"^\s*(\d+)\s+(\d+)\s+" + r"\s+".join([_NUM] * 4) + r"\s*$", body, re.MULTILINE):
                dn.append({"videos": int(m.group(1)), "rows": int(m.group(2)), "exact_ms": _f(m.group(3)),
                           "hnsw_ms": _f(m.group(4)), "recall_at_10": _f(m.group(5)), "hnsw_build_s": _f(m.group(6))})
            if dn:
                out["dense"] = dn
        elif head.startswith("Router"):
            if m := re.search(r"offline router: " + _NUM + " ms", body):
                out["router_offline_ms"] = _f(m.group(1))
            if m := re.search(r"LLM router, cached answer.*?: " + _NUM + " ms", body):
                out["router_llm_cached_ms"] = _f(m.group(1))
        elif head.startswith("Query embedding"):
            if m := re.search(_NUM + r" ms", head):
                out["query_embedding_ms"] = _f(m.group(1))
        elif head.startswith("Whole"):
            m_n = re.search(r"at (\d+) videos", head)
            m_t = re.search(r"search \(excluding query embedding and rule scoring\): " + _NUM + " ms", body)
            m_mode = re.search(r"mode: dense (\S+)", body)
            if m_n and m_t:
                out.setdefault("whole", []).append({"videos": int(m_n.group(1)), "search_ms": _f(m_t.group(1)),
                                                    "dense_mode": m_mode.group(1) if m_mode else None})
    if bm:
        out["bm25"] = bm
    if "(query embedding skipped" in text:
        out["query_embedding_skipped"] = True
    return out


def parse_calibration(text: str) -> dict:
    m = re.search(r"\{.*\}", text, re.DOTALL)
    if not m:
        return {}
    try:
        d = json.loads(m.group(0))
    except json.JSONDecodeError:
        return {}
    return d if isinstance(d, dict) else {}


def parse_app(text: str) -> dict:
    out: dict = {}
    if m := re.search(r"^seek 720p (\S+) (\{.*\})$", text, re.MULTILINE):
        try:
            out["seek"] = ast.literal_eval(m.group(2))
            out["seek_clip"] = m.group(1)
        except (ValueError, SyntaxError):
            pass
    if m := re.search(r"cold start (\d+) videos: process wall " + _NUM + " s", text):
        out["cold_start"] = {"videos": int(m.group(1)), "wall_s": _f(m.group(2))}
    if m := re.search(r"^searching (\d+) videos \(" + _NUM + r" s\): (\{.*?\})", text, re.MULTILINE):
        try:
            out["search_stall"] = {"videos": int(m.group(1)), "wall_s": _f(m.group(2)), **ast.literal_eval(m.group(3))}
        except (ValueError, SyntaxError):
            pass
    if m := re.search(r"^indexing (\d+) clips \(" + _NUM + r" s\): (\{.*?\})", text, re.MULTILINE):
        try:
            out["index_stall"] = {"clips": int(m.group(1)), "wall_s": _f(m.group(2)), **ast.literal_eval(m.group(3))}
        except (ValueError, SyntaxError):
            pass
    return out


PARSERS = {"core": parse_core, "perception": parse_perception, "retrieval": parse_retrieval,
           "calibration": parse_calibration, "app": parse_app}


# ---------------------------------------------------------------------------------------------
# running


def bench_command(name: str, quick: bool) -> list[str]:
    """The command line (as a user would type it from the repo root) for one benchmark."""
    script, qargs, fargs = BENCHES[name]
    return ["python", f"benchmarks/{script}", *(qargs if quick else fargs)]


def _shell(cmd: list[str]) -> str:
    return " ".join(a if a and not re.search(r"[\s'\"]", a) else f"'{a}'" for a in cmd)


def run_benchmarks(only: list[str] | None = None, *, quick: bool = False, bench_dir: Path | None = None,
                   timeout_s: float = 1800.0, progress: ProgressFn = None, cancel: CancelFn = None,
                   echo=None) -> dict:
    """Run the benchmark scripts as subprocesses; returns {"mode", "benchmarks": {name: result}, "ratios"}.

    Each result: status (ok | missing | failed | timeout | unparsed), command, wall_s, rc, parsed
    figures, and the last lines of its output."""
    bench_dir = Path(bench_dir) if bench_dir else benchmarks_dir()
    names = only or list(BENCH_ORDER)
    res: dict = {"mode": "quick" if quick else "full", "benchmarks_dir": str(bench_dir), "benchmarks": {}}
    env = dict(os.environ)
    env.setdefault("QT_QPA_PLATFORM", "offscreen")
    repo = bench_dir.parent
    env["PYTHONPATH"] = os.pathsep.join([str(repo)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    for k, name in enumerate(names):
        check_cancel(cancel)
        script, qargs, fargs = BENCHES[name]
        path = bench_dir / script
        cmd = bench_command(name, quick)
        r: dict = {"command": _shell(cmd), "script": str(path)}
        if not path.exists():
            r.update(status="missing", reason=f"{script} not found in {bench_dir}")
            res["benchmarks"][name] = r
            report(progress, "bench", k + 1, len(names), item=name)
            continue
        if echo:
            echo(f"[{k + 1}/{len(names)}] {name}: {r['command']}")
        t0 = time.perf_counter()
        extra: list[str] = []
        json_path = None
        if name in JSON_BENCHES:
            import tempfile

            fd, json_path = tempfile.mkstemp(prefix=f"strived-bench-{name}-", suffix=".json")
            os.close(fd)
            extra = ["--json", json_path]
        try:
            p = subprocess.run([sys.executable, str(path), *(qargs if quick else fargs), *extra], cwd=repo, env=env,
                               capture_output=True, text=True, timeout=timeout_s, check=False)
            out_text, rc = p.stdout + ("\n" + p.stderr if p.stderr.strip() else ""), p.returncode
            status = "ok" if rc == 0 else "failed"
        except subprocess.TimeoutExpired as e:
            out_text = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
            rc, status = None, "timeout"
        r["wall_s"] = round(time.perf_counter() - t0, 1)
        r["rc"] = rc
        if json_path is not None:
            try:
                parsed = json.loads(Path(json_path).read_text(encoding="utf-8") or "{}")
            except (OSError, ValueError):
                parsed = {}
            finally:
                Path(json_path).unlink(missing_ok=True)
        else:
            parsed = PARSERS[name](out_text)
        if status == "ok" and not parsed:
            status = "unparsed"
        r["status"] = status
        r["figures"] = parsed
        lines = [ln for ln in out_text.splitlines() if ln.strip() and "it/s]" not in ln]
        r["output_tail"] = lines[-40:]
        if status != "ok":
            r["reason"] = (f"exit code {rc}" if status == "failed" else
                           f"ran past {timeout_s:.0f} s" if status == "timeout" else
                           "its output did not match the expected lines (see output_tail)")
        if echo:
            echo(f"      {status} in {r['wall_s']:.1f} s" + (f" ({r['reason']})" if r.get("reason") else ""))
        res["benchmarks"][name] = r
        report(progress, "bench", k + 1, len(names), item=name)
    res["ratios"] = bench_ratios(res)
    return res


# ---------------------------------------------------------------------------------------------
# ratios


def _row(group, name, value, unit, ref=None, ref_label="", ratio=None, kind="", note="", bench=""):
    return {"group": group, "name": name, "value": value, "unit": unit, "reference": ref,
            "reference_label": ref_label, "ratio": ratio, "kind": kind, "note": note, "benchmark": bench}


def _faster(ref, ours):
    if ref is None or ours is None or ours <= 0:
        return None
    return ref / ours


def bench_ratios(res: dict) -> list[dict]:
    """Rows: each fast path vs its reference, each latency vs the paper's, throughput, memory, targets.
    ``ratio`` is reference / ours for times (> 1 = ours is faster)."""
    B = {k: v.get("figures") or {} for k, v in res.get("benchmarks", {}).items()}
    rows: list[dict] = []
    n583 = PAPER["corpus_videos"]
    core = B.get("core", {})
    for r in core.get("rules", []):
        n = r["videos"]
        naive_total = r["naive_ms_per_video"] * n
        kind = re.search(r"\((\w+)\)", r["rule"])
        short = f"{kind.group(1)} rule" if kind else r["rule"]
        rows.append(_row("fast path vs reference", f"rule scoring, warm, {short}, {n} videos",
                         r["warm_ms"], "ms", naive_total, f"naive reference (extrapolated from {r['naive_subset']})",
                         _faster(naive_total, r["warm_ms"]), "speed-up",
                         f"{r['rule']}; max |diff| {r['max_abs_diff']:.0e}", "core"))
        rows.append(_row("fast path vs reference", f"rule scoring, first run, {short}, {n} videos",
                         r["first_ms"], "ms", naive_total, "naive reference", _faster(naive_total, r["first_ms"]),
                         "speed-up", f"{r['rule']}; computes the window features", "core"))
    if core.get("rules"):
        r = core["rules"][0]
        for label, key, what in (("warm", "warm_ms", "same rule again, window features in memory"),
                                 ("new process", "disk_ms", "window features from the on-disk cache"),
                                 ("first run", "first_ms", "window features computed")):
            if r.get(key) is None:
                continue
            ours = r[key] * n583 / r["videos"]
            rows.append(_row("latency vs the paper", f"rule matching ({label}), scaled to {n583} videos", ours, "ms",
                             PAPER["rule_ms"], f"paper {PAPER['rule_ms']:.0f} ms / {n583} videos",
                             _faster(PAPER["rule_ms"], ours), "paper",
                             f"{what}; measured at {r['videos']} synthetic videos x 3000 object-frames", "core"))
    ret = B.get("retrieval", {})
    for b in ret.get("bm25", []):
        rows.append(_row("fast path vs reference", f"BM25 query, bm25s vs rank_bm25, {b['docs']} docs", b["bm25s_ms"],
                         "ms", b["rank_bm25_ms"], "rank_bm25", _faster(b["rank_bm25_ms"], b["bm25s_ms"]), "speed-up",
                         "same top-100" if b["agree"] else "RANKINGS DIFFER", "retrieval"))
    for d in ret.get("dense", []):
        rows.append(_row("fast path vs reference", f"dense query, HNSW vs exact, {d['videos']} videos ({d['rows']} segments)",
                         d["hnsw_ms"], "ms", d["exact_ms"], "exact scan", _faster(d["exact_ms"], d["hnsw_ms"]),
                         "speed-up", f"recall@10 {d['recall_at_10']:.3f}", "retrieval"))
    bm = sorted(ret.get("bm25", []), key=lambda b: b["docs"])
    if bm:
        b = next((x for x in bm if x["docs"] >= n583), bm[-1])
        rows.append(_row("latency vs the paper", f"BM25 per query, {b['docs']} docs", b["bm25s_ms"], "ms",
                         PAPER["bm25_ms"], f"paper {PAPER['bm25_ms']} ms / {n583} videos",
                         _faster(PAPER["bm25_ms"], b["bm25s_ms"]), "paper", "bm25s backend", "retrieval"))
    dn = sorted(ret.get("dense", []), key=lambda d: d["videos"])
    emb = ret.get("query_embedding_ms")
    if dn:
        d = next((x for x in dn if x["videos"] >= n583), dn[-1])
        ours = min(d["exact_ms"], d["hnsw_ms"]) + (emb or 0.0)
        rows.append(_row("latency vs the paper", f"dense per query, {d['videos']} videos", ours, "ms",
                         PAPER["dense_ms"], f"paper {PAPER['dense_ms']:.0f} ms / {n583} videos",
                         _faster(PAPER["dense_ms"], ours), "paper",
                         ("search + uncached MiniLM query embedding" if emb is not None else
                          "search only (query embedding not measured)"), "retrieval"))
    whole = sorted(ret.get("whole", []), key=lambda w: w["videos"])

    def _whole(w):
        rule = core["rules"][0]["warm_ms"] * w["videos"] / core["rules"][0]["videos"] if core.get("rules") else None
        ours = w["search_ms"] + (emb or 0.0) + (rule or 0.0)
        what = ("router + BM25 + dense " + (w.get("dense_mode") or "") + " + RRF"
                + (" + query embedding" if emb is not None else "")
                + (" + rule scoring (core, warm, scaled)" if rule is not None else " (rule scoring not measured)"))
        if rule is not None and core["rules"][0].get("disk_ms") is not None:
            r0 = core["rules"][0]
            what += (f"; the first query of a new process reads the rule's window features from disk: "
                     f"+{_fmt_num((r0['disk_ms'] - r0['warm_ms']) * w['videos'] / r0['videos'])} ms")
        return ours, what

    for w in whole:
        ours, what = _whole(w)
        rows.append(_row("latency vs the paper", f"retrieval branches per query, {w['videos']} videos", ours, "ms",
                         PAPER["branches_ms"], f"paper ~{PAPER['branches_ms']:.0f} ms (BM25 + dense + rule matching)",
                         _faster(PAPER["branches_ms"], ours), "paper", what, "retrieval"))
    if whole:
        w = next((x for x in whole if x["videos"] >= n583), whole[-1])
        ours, _ = _whole(w)
        rows.append(_row("latency vs the paper", f"whole offline query, {w['videos']} videos", ours, "ms",
                         PAPER["total_ms"], "paper 3.10 s (incl. 2.7 s of LLM rule synthesis + router)",
                         _faster(PAPER["total_ms"], ours), "paper", "no LLM: offline matcher/adapter and router",
                         "retrieval"))
    if "router_offline_ms" in ret:
        rows.append(_row("latency vs the paper", "fusion router, offline", ret["router_offline_ms"], "ms",
                         PAPER["router_ms"], "paper's LLM router 725 ms", _faster(PAPER["router_ms"], ret["router_offline_ms"]),
                         "paper", "", "retrieval"))
    cal = B.get("calibration", {})
    if "resolve_ms_per_query" in cal:
        rows.append(_row("latency vs the paper", "rule resolution (matcher + adapter), offline",
                         cal["resolve_ms_per_query"], "ms", PAPER["rule_synthesis_ms"],
                         "paper's LLM rule synthesis 1,987 ms", _faster(PAPER["rule_synthesis_ms"], cal["resolve_ms_per_query"]),
                         "paper", f"target <= {cal.get('target_resolve_ms', 20)} ms", "calibration"))
    if "calibrate_all_s" in cal:
        rows.append(_row("targets", f"calibrate all {cal.get('events', '?')} events on {cal.get('videos', '?')} videos",
                         cal["calibrate_all_s"], "s", cal.get("target_calibrate_s", 60), "target",
                         _faster(cal.get("target_calibrate_s", 60), cal["calibrate_all_s"]), "target",
                         "" if cal.get("videos") == 1000 else "the target is set for 1,000 videos", "calibration"))
    per = B.get("perception", {})
    for st, v in (per.get("stage_fps") or {}).items():
        rows.append(_row("indexing throughput", f"perception stage {st}", v, "frames/s", None, "", None, "throughput",
                         "sampled frames per second of stage time", "perception"))
    if "overall" in per:
        o = per["overall"]
        rows.append(_row("indexing throughput", "perception end to end", o["fps_end_to_end"], "frames/s", None, "", None,
                         "throughput", f"real-time factor x{o['realtime_factor']:.2f} on {o['video_s']:.0f} s of video",
                         "perception"))
    for name, key in (("core", "peak_rss_mb"), ("perception", "peak_rss_mb")):
        if key in B.get(name, {}):
            extra = f", {core.get('videos')} videos" if name == "core" else ""
            rows.append(_row("memory", f"peak RSS, {name} benchmark{extra}", B[name][key], "MB", None, "", None,
                             "memory", "", name))
    if "library_mb" in core:
        rows.append(_row("memory", f"library on disk, {core.get('videos')} videos", core["library_mb"], "MB", None, "",
                         None, "memory", "", "core"))
    if "open_ms" in core:
        rows.append(_row("targets", f"open library, {core.get('videos')} videos", core["open_ms"], "ms", 1000, "target",
                         _faster(1000, core["open_ms"]), "target",
                         "" if core.get("videos") == 10000 else "the target is set for 10,000 videos", "core"))
    rows += _accuracy_rows(B)
    app = B.get("app", {})
    for key, label in (("search_stall", "UI stall p99 while searching"), ("index_stall", "UI stall p99 while indexing")):
        if key in app:
            rows.append(_row("targets", label, app[key]["p99_ms"], "ms", 50, "target", _faster(50, app[key]["p99_ms"]),
                             "target", "", "app"))
    if "cold_start" in app:
        rows.append(_row("targets", f"app cold start, {app['cold_start']['videos']} videos", app["cold_start"]["wall_s"], "s",
                         3, "target", _faster(3, app["cold_start"]["wall_s"]), "target",
                         "" if app["cold_start"]["videos"] == 10000 else "the target is set for 10,000 videos", "app"))
    if "seek" in app and "after_scan" in app["seek"]:
        rows.append(_row("targets", "player seek 720p, median", app["seek"]["after_scan"]["median_ms"], "ms", 50, "target",
                         _faster(50, app["seek"]["after_scan"]["median_ms"]), "target", "", "app"))
    return rows


def _accuracy_rows(B: dict) -> list[dict]:
    """Perception accuracy against ground truth: ego motion (egomotion benchmark) and detection,
    tracking and ranging (detection benchmark), as written by their ``--json`` files."""
    rows: list[dict] = []
    ego = B.get("egomotion") or {}
    tg = ego.get("targets") or {"speed_mae": 1.0, "coverage": 0.8, "yaw_rate_mae": 0.03}
    for seq, cams in (ego.get("sequences") or {}).items():
        for cam, m in (cams or {}).items():
            if not isinstance(m, dict) or "speed_mae" not in m:
                continue
            g = "ego motion vs ground truth (KITTI)"
            rows.append(_row(g, f"{seq} ({cam} camera): speed MAE", m.get("speed_mae"), "m/s",
                             tg["speed_mae"], "target", _faster(tg["speed_mae"], m.get("speed_mae")), "target",
                             f"coverage {100 * (m.get('speed_coverage') or 0):.0f} % (target >= "
                             f"{100 * tg['coverage']:.0f} %); accel MAE {_fmt_num(m.get('accel_mae'))} m/s²",
                             "egomotion"))
            rows.append(_row(g, f"{seq} ({cam} camera): yaw-rate MAE", m.get("yaw_rate_mae"), "rad/s",
                             tg["yaw_rate_mae"], "target", _faster(tg["yaw_rate_mae"], m.get("yaw_rate_mae")),
                             "target", f"coverage {100 * (m.get('yaw_rate_coverage') or 0):.0f} %", "egomotion"))
    det = B.get("detection") or {}
    g = "detection, tracking, ranging vs ground truth (KITTI 0000)"
    for label, d in (det.get("detection") or {}).items():
        if isinstance(d, dict) and "mean" in d:
            per = ", ".join(f"{c} {d[c]['AP50']:.2f}" for c in ("car", "pedestrian", "bicycle")
                            if isinstance(d.get(c), dict) and d[c].get("AP50") is not None)
            rows.append(_row(g, f"detection AP@0.5 (mean), {label}", d["mean"]["AP50"], "", None, "", None,
                             "accuracy", f"{per}; {_fmt_num(d.get('fps'))} frames/s", "detection"))
    for label, t in (det.get("tracking") or {}).items():
        if isinstance(t, dict) and "idf1" in t:
            lab = t.get("labelled_only") or {}
            rows.append(_row(g, f"tracking IDF1, {label}", t["idf1"], "", None, "", None, "accuracy",
                             f"MOTA {t['mota']:.2f}; labelled objects only: IDF1 {lab.get('idf1', float('nan')):.2f}, "
                             f"MOTA {lab.get('mota', float('nan')):.2f}", "detection"))
    for label, r in (det.get("ranging") or {}).items():
        if isinstance(r, dict) and r.get("distance_rel_median") is not None:
            rows.append(_row(g, f"ranging, detector boxes, {label}: distance relative error (median)",
                             r["distance_rel_median"], "", None, "", None, "accuracy",
                             f"P90 {_fmt_num(r.get('distance_rel_p90'))}; |loc_x| median "
                             f"{_fmt_num(r.get('loc_x_abs_median_m'))} m; {r.get('n_matched')} of "
                             f"{r.get('n_gt')} labelled boxes matched", "detection"))
    return rows


def _fmt_num(v: float | None) -> str:
    if v is None:
        return "-"
    a = abs(v)
    return f"{v:,.0f}" if a >= 100 else f"{v:.1f}" if a >= 10 else f"{v:.2f}" if a >= 0.1 else f"{v:.3f}"


def fmt_ratio(row: dict) -> str:
    r = row["ratio"]
    if r is None:
        return ""
    if row["kind"] == "target":
        return "meets target" if r >= 1 else f"misses target (x{1 / r:.1f} over)"
    return f"x{_fmt_num(r)} faster" if r >= 1 else f"x{_fmt_num(1 / r)} slower"


def format_bench(res: dict) -> str:
    lines = [f"strived bench ({res['mode']}), scripts in {res['benchmarks_dir']}"]
    for name, r in res["benchmarks"].items():
        if r["status"] == "missing":
            lines.append(f"  {name:<12} MISSING  {r['reason']}")
        else:
            lines.append(f"  {name:<12} {r['status']:<8} {r.get('wall_s', 0):6.1f} s  {r['command']}"
                         + (f"   ({r['reason']})" if r.get("reason") else ""))
    groups: dict[str, list[dict]] = {}
    for row in res["ratios"]:
        groups.setdefault(row["group"], []).append(row)
    for g, rows in groups.items():
        lines += ["", g.upper() if g != "latency vs the paper" else
                  f"LATENCY VS THE PAPER (DrivingDojo, {PAPER['corpus_videos']} videos, mean per query; ours: median)"]
        for row in rows:
            ref = (f"  vs {_fmt_num(row['reference'])} {row['unit']} {row['reference_label']}"
                   if row["reference"] is not None else "")
            rat = fmt_ratio(row)
            note = f"  [{row['note']}]" if row["note"] else ""
            lines.append(f"  {row['name']}: {_fmt_num(row['value'])} {row['unit']}{ref}"
                         + (f"  -> {rat}" if rat else "") + note)
    if not res["ratios"]:
        lines += ["", "no figures (every selected benchmark is missing or failed)"]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# plots (numpy + OpenCV)

_FONT = 0  # cv2.FONT_HERSHEY_SIMPLEX
# BGR, colour-blind-friendly (Okabe-Ito)
PALETTE = [(178, 114, 0), (0, 159, 230), (115, 158, 0), (66, 228, 240), (167, 121, 204), (0, 94, 213),
           (233, 180, 86), (100, 100, 100)]


def _ascii(s: str) -> str:
    return (s.replace("\u00d7", "x").replace("\u2264", "<=").replace("\u2265", ">=").replace("\u2013", "-")
            .encode("ascii", "replace").decode())


class Canvas:
    def __init__(self, w: int, h: int):
        import numpy as np

        self.img = np.full((h, w, 3), 255, np.uint8)

    def text(self, x, y, s, scale=0.45, color=(30, 30, 30), anchor="l", thick=1):
        import cv2

        s = _ascii(str(s))
        (tw, th), _ = cv2.getTextSize(s, _FONT, scale, thick)
        x0 = int(x - (tw if anchor == "r" else tw / 2 if anchor == "c" else 0))
        cv2.putText(self.img, s, (x0, int(y + th / 2)), _FONT, scale, color, thick, cv2.LINE_AA)
        return tw

    def vtext(self, x, y, s, scale=0.45, color=(30, 30, 30)):
        """Text rotated 90 degrees counter-clockwise, its end (right side before rotation) at (x, y)."""
        import cv2
        import numpy as np

        s = _ascii(str(s))
        (tw, th), base = cv2.getTextSize(s, _FONT, scale, 1)
        patch = np.full((th + base + 4, tw + 4, 3), 255, np.uint8)
        cv2.putText(patch, s, (2, th + 2), _FONT, scale, color, 1, cv2.LINE_AA)
        patch = cv2.rotate(patch, cv2.ROTATE_90_COUNTERCLOCKWISE)
        ph, pw = patch.shape[:2]
        x0, y0 = int(x - pw / 2), int(y - ph)
        H, W = self.img.shape[:2]
        xa, ya, xb, yb = max(0, x0), max(0, y0), min(W, x0 + pw), min(H, y0 + ph)
        if xb > xa and yb > ya:
            self.img[ya:yb, xa:xb] = np.minimum(self.img[ya:yb, xa:xb], patch[ya - y0:yb - y0, xa - x0:xb - x0])

    def rect(self, x0, y0, x1, y1, color, fill=True):
        import cv2

        cv2.rectangle(self.img, (int(x0), int(y0)), (int(x1), int(y1)), color, -1 if fill else 1)

    def line(self, x0, y0, x1, y1, color=(150, 150, 150), thick=1):
        import cv2

        cv2.line(self.img, (int(x0), int(y0)), (int(x1), int(y1)), color, thick, cv2.LINE_AA)

    def save(self, path: Path) -> Path:
        import cv2

        ok, buf = cv2.imencode(".png", self.img, [cv2.IMWRITE_PNG_COMPRESSION, 9])
        if not ok:
            raise StrivedError(f"could not encode {path}")
        Path(path).write_bytes(buf.tobytes())
        return Path(path)


def plot_metrics(res: dict, path: Path) -> Path:
    """Grouped bars: MRR, mAP, Acc@1/3/5/10 (%) per method."""
    from ..retrieval.metrics import ACC_KS

    cols = ["MRR", "mAP"] + [f"Acc@{k}" for k in ACC_KS]
    methods = list(res["methods"])
    gw, bw = 14 * len(cols) + 22, 14
    left, top, ph = 60, 60, 330
    W = max(700, left + gw * len(methods) + 30)
    H = top + ph + 150
    c = Canvas(W, H)
    c.text(left, 18, f"{res['benchmark']}: retrieval metrics per method ({res['n_queries']} queries, "
                     f"{res['n_items_searchable']}/{res['n_items']} items searchable; {res.get('calibration', '')})",
           0.5, thick=1)
    for i, col in enumerate(cols):  # legend
        x = left + i * 95
        c.rect(x, 36, x + 12, 48, PALETTE[i])
        c.text(x + 16, 42, col, 0.42)
    y0 = top + ph
    for v in range(0, 101, 20):
        y = y0 - ph * v / 100
        c.line(left, y, W - 20, y, (225, 225, 225))
        c.text(left - 6, y, f"{v}%", 0.4, anchor="r")
    for mi, m in enumerate(methods):
        gx = left + mi * gw + 12
        for ci, col in enumerate(cols):
            v = res["methods"][m][col]
            x = gx + ci * bw
            c.rect(x, y0 - ph * v, x + bw - 2, y0, PALETTE[ci])
        c.vtext(gx + gw / 2 - 8, y0 + 8 + _text_w(m, 0.45), m, 0.45)
    c.line(left, y0, W - 20, y0, (60, 60, 60))
    return c.save(path)


def _text_w(s: str, scale: float) -> int:
    import cv2

    return cv2.getTextSize(_ascii(s), _FONT, scale, 1)[0][0]


RANK_BINS = [(1, 1, (60, 140, 20), "1"), (2, 3, (100, 200, 90), "2-3"), (4, 5, (130, 225, 200), "4-5"),
             (6, 10, (90, 190, 250), "6-10"), (11, 10**9, (110, 120, 235), ">10")]


def _rank_color(r):
    if r is None:
        return (215, 215, 215)
    for a, b, col, _ in RANK_BINS:
        if a <= r <= b:
            return col
    return RANK_BINS[-1][2]


def plot_ranks(res: dict, path: Path) -> Path:
    """Heat map: rank of the first relevant item, queries x methods."""
    methods = list(res["methods"])
    qs = res["queries"]
    cw, ch, left = 62, 24, 260
    label_h = max([_text_w(m, 0.45) for m in methods] + [40]) + 16
    top = 34 + label_h
    W = max(620, left + cw * len(methods) + 20)
    H = top + ch * len(qs) + 60
    c = Canvas(W, H)
    c.text(10, 16, f"{res['benchmark']}: rank of the first relevant item (grey: none retrieved / excluded)", 0.5)
    for mi, m in enumerate(methods):
        c.vtext(left + mi * cw + cw / 2, top - 8, m, 0.45)
    for qi, q in enumerate(qs):
        y = top + qi * ch
        c.text(8, y + ch / 2, f"{q['id']} {(q.get('event') or '')[:22]} (n={q['n_relevant']})", 0.42)
        for mi, m in enumerate(methods):
            r = q["methods"].get(m, {}).get("rank_of_first_relevant")
            x = left + mi * cw
            c.rect(x + 1, y + 1, x + cw - 1, y + ch - 1, _rank_color(r))
            c.text(x + cw / 2, y + ch / 2, "-" if r is None else str(r), 0.42, anchor="c")
    y = top + ch * len(qs) + 24
    x = left
    for a, b, col, lab in RANK_BINS + [(0, 0, (215, 215, 215), "none")]:
        c.rect(x, y - 8, x + 16, y + 8, col)
        x += 22 + c.text(x + 22, y, lab, 0.42) + 18
    return c.save(path)


def plot_latency(rows: list[dict], path: Path) -> Path | None:
    """Horizontal bars on a log axis: each of our latencies next to the paper's (or the reference)."""
    import math

    sel = [r for r in rows if r["group"] in ("latency vs the paper", "fast path vs reference")
           and r["value"] is not None and r["reference"] is not None and r["unit"] == "ms"]
    if not sel:
        return None
    left, bar_h, gap = 470, 13, 10
    top = 64
    W = 1180
    H = top + len(sel) * (2 * bar_h + gap) + 60
    c = Canvas(W, H)
    c.text(10, 16, "Latency: ours (blue) vs the paper or the reference implementation (grey), log scale, ms", 0.5)
    c.text(10, 38, f"paper: DrivingDojo, {PAPER['corpus_videos']} videos, mean per query; ours: median, this machine",
           0.42, color=(90, 90, 90))
    vals = [v for r in sel for v in (r["value"], r["reference"]) if v > 0]
    lo = 10 ** math.floor(math.log10(min(vals)))
    hi = 10 ** math.ceil(math.log10(max(vals)))
    span = max(1e-9, math.log10(hi) - math.log10(lo))
    pw = W - left - 150

    def X(v):
        return left + pw * (math.log10(max(v, lo)) - math.log10(lo)) / span

    y_end = top + len(sel) * (2 * bar_h + gap)
    e = math.log10(lo)
    while e <= math.log10(hi) + 1e-9:
        x = X(10 ** e)
        c.line(x, top - 6, x, y_end, (225, 225, 225))
        c.text(x, y_end + 12, _fmt_num(10 ** e), 0.4, anchor="c")
        e += 1
    for i, r in enumerate(sel):
        y = top + i * (2 * bar_h + gap)
        name = r["name"] if len(r["name"]) <= 62 else r["name"][:60] + ".."
        c.text(left - 8, y + bar_h, name, 0.4, anchor="r")
        c.rect(left, y, X(r["value"]), y + bar_h - 1, PALETTE[0])
        c.text(X(r["value"]) + 4, y + bar_h / 2, _fmt_num(r["value"]), 0.38)
        c.rect(left, y + bar_h, X(r["reference"]), y + 2 * bar_h - 1, (170, 170, 170))
        c.text(X(r["reference"]) + 4, y + 1.5 * bar_h, f"{_fmt_num(r['reference'])} ({fmt_ratio(r)})", 0.38,
               color=(80, 80, 80))
    return c.save(path)


def plot_stage_fps(rows: list[dict], path: Path) -> Path | None:
    """Bars of perception throughput per stage (log axis: decode and detect differ by orders)."""
    import math

    sel = [r for r in rows if r["group"] == "indexing throughput" and r["value"]]
    if not sel:
        return None
    left, bh, top, W = 230, 18, 44, 900
    H = top + len(sel) * (bh + 8) + 40
    c = Canvas(W, H)
    c.text(10, 16, "Indexing: sampled frames per second of stage time (log scale; higher is faster)", 0.5)
    hi = 10 ** math.ceil(math.log10(max(r["value"] for r in sel)))
    lo = min(1.0, 10 ** math.floor(math.log10(min(r["value"] for r in sel))))
    pw = W - left - 90

    def X(v):
        return left + pw * (math.log10(max(v, lo)) - math.log10(lo)) / max(1e-9, math.log10(hi) - math.log10(lo))

    y_end = top + len(sel) * (bh + 8)
    e = math.log10(lo)
    while e <= math.log10(hi) + 1e-9:
        c.line(X(10 ** e), top - 4, X(10 ** e), y_end, (225, 225, 225))
        c.text(X(10 ** e), y_end + 12, _fmt_num(10 ** e), 0.4, anchor="c")
        e += 1
    for i, r in enumerate(sel):
        y = top + i * (bh + 8)
        c.text(left - 8, y + bh / 2, r["name"].replace("perception ", "").replace("stage ", ""), 0.45, anchor="r")
        c.rect(left, y, X(r["value"]), y + bh, PALETTE[2] if "end to end" not in r["name"] else PALETTE[5])
        c.text(X(r["value"]) + 5, y + bh / 2, _fmt_num(r["value"]), 0.42)
    return c.save(path)


# ---------------------------------------------------------------------------------------------
# the report


def evaluate(bench_dir, *, library=None, index_videos=False, methods=None, cv_folds=5, progress=None,
             cancel=None) -> dict:
    """What `strived eval` does, as a function: prepare the library, build text indexes, run every method."""
    from ..engine import build_text_index
    from . import methods as _m  # noqa: F401  (registers the methods)
    from .bench import load_benchmark
    from .runner import DEFAULT_METHODS, prepare_library, run_eval

    bench = load_benchmark(bench_dir)
    lib = prepare_library(bench, Path(library) if library else None, index_videos=index_videos, progress=progress,
                          cancel=cancel)
    with lib:
        note = build_text_index(lib, progress=progress, cancel=cancel)
        res = run_eval(bench, lib, tuple(methods or DEFAULT_METHODS), cv_folds=cv_folds, progress=progress,
                       cancel=cancel)
        if note:
            res.setdefault("notices", []).append(note)
    return res


def benchmark_profile(bench_dir) -> dict:
    """Counts that say what a benchmark folder is: items with video / records, sources by id prefix,
    queries, relevant and ambiguous labels."""
    from .bench import load_benchmark

    b = load_benchmark(bench_dir)
    groups: dict[str, dict] = {}
    for it in b.items:
        key = re.split(r"[_\-]", it.id, maxsplit=1)[0] or it.id
        g = groups.setdefault(key, {"items": 0, "video": 0, "records": 0, "example_source": it.source})
        g["items"] += 1
        g["video"] += it.video is not None
        g["records"] += it.records is not None
    return {"name": b.name, "description": b.description, "n_items": len(b.items),
            "n_video": sum(it.video is not None for it in b.items),
            "n_records": sum(it.records is not None for it in b.items),
            "n_records_only": sum(it.video is None for it in b.items),
            "n_queries": len(b.queries), "n_relevant": sum(len(q.relevant) for q in b.queries),
            "n_ambiguous": sum(len(q.ambiguous) for q in b.queries),
            "n_spans": sum(len(q.spans) for q in b.queries),
            "license_note": _manifest_key(b.folder, "license_note"),
            "labels_doc": "LABELS.md" if (b.folder / "LABELS.md").exists() else None,
            "groups": dict(sorted(groups.items()))}


def _manifest_key(folder: Path, key: str) -> str:
    try:
        v = json.loads((Path(folder) / "manifest.json").read_text(encoding="utf-8")).get(key)
    except (OSError, json.JSONDecodeError, AttributeError):
        return ""
    return v if isinstance(v, str) else ""


def _cell(s) -> str:
    """Text safe inside a markdown table cell."""
    return str(s).replace("|", "\\|").replace("\n", " ")


def _pct(v) -> str:
    return "-" if v is None else f"{100 * v:.1f}"


def render_markdown(ev: dict, bench: dict | None, profile: dict, ctx: dict, plots: dict[str, str]) -> str:
    from ..retrieval.metrics import ACC_KS

    cols = ["MRR", "mAP"] + [f"Acc@{k}" for k in ACC_KS]
    p = profile
    L: list[str] = [f"# STRIVE-D evaluation and performance report: `{ev['benchmark']}`", ""]
    L += [f"Generated by `{ctx['command']}`" + (f" at commit `{ctx['commit']}`" if ctx.get("commit") else "")
          + (f" on {ctx['date']}" if ctx.get("date") else "") + ".",
          f"Machine: {ctx.get('machine', 'unknown')}. Raw numbers: [`eval.json`](eval.json) (the `strived eval --json` "
          "document, docs/formats.md section 3)" + (", [`bench.json`](bench.json)" if bench else "") + ".", ""]

    # --- framing
    L += ["## What this benchmark is (read this before the numbers)", ""]
    L.append(f"- **{p['n_items']} items**: {p['n_video']} video clips and {p['n_records']} track-record files "
             f"({p['n_records_only']} items have records only, no images); **{p['n_queries']} queries** with "
             f"{p['n_relevant']} relevant and {p['n_ambiguous']} ambiguous (item, query) labels"
             + (f", {p['n_spans']} labelled time spans" if p["n_spans"] else "") + ".")
    if p["description"]:
        L.append(f"- Description from its manifest: {_cell(p['description'])}")
    if p.get("license_note"):
        L.append(f"- Licences (manifest): {_cell(p['license_note'])}")
    if p["labels_doc"]:
        L.append(f"- How it was labelled: see the benchmark's own `{p['labels_doc']}` (labels made and checked by hand, "
                 "per item and per event, with the evidence in `events.csv`).")
    if "bench-dev" in ev["benchmark"]:
        L += [("- bench-dev is the **development split**: clips from real dashcam datasets (DAD, CCD, IDD, Korean/US "
              "dashcams, Udacity) re-checked by eye on contact sheets, and real 3D tracks (KITTI tracking 10 s windows "
              "with OXTS / ORB-SLAM3 ego motion, Argoverse 2 logs, comma2k19 radar windows) labelled from explicit "
              "numeric rules plus a hand check of every candidate. Several queries have 1-3 relevant items: one "
              "query moves Acc@k by 5 points."),
              ("- **Everything in this report is a development number, not a held-out one.** The product's rule forms, "
              "the hand-written rules (`rule-hand`), the offline matcher's lexicon, the router and the summary "
              "templates were written while looking at this split.")]
    L.append(f"- Calibration: **{ev.get('calibration', '')}**. "
             + ("With cross-fitting, every calibrated number that scores an item was fitted without that item's "
                "fold (folds by source and sequence), so the calibrated-library rows are out-of-sample *with "
                "respect to calibration*; they are still in-sample with respect to the design decisions above."
                if "cross" in ev.get("calibration", "") else
                "The shipped library is used as it is; if it was calibrated on this benchmark, its rows are "
                "in-sample."))
    L.append("- The paper's own benchmarks (**DrivingDojo** with its 41 annotated queries over 583 videos, **MM-AU**, "
             "**CarCrash**) are not available offline, so the paper's table (e.g. STRIVE-D Acc@1 26.8, MRR 38.7 on "
             "DrivingDojo) is **not reproduced here** and the numbers below are not comparable to it in absolute "
             "terms. What can be compared is the *shape*: whether fusion beats each source alone, and what each "
             "ablation costs.")
    L.append("- The paper's perception and dense models (OWL-V2, Metric3D, Qwen3-VL-Embedding, SigLIP) do not ship "
             "offline; the product's defaults (YOLOv3-tiny + ByteTrack + geometric ranging; MiniLM over text "
             "generated from perception) are much weaker, which mostly hurts the dense and BM25 rows.")
    if ev.get("not_searchable"):
        L.append(f"- {len(ev['not_searchable'])} items have no records in the library (videos not indexed): every "
                 f"method ranks only the {ev['n_items_searchable']} searchable items and counts the others as not "
                 "retrieved. Run with `--index-videos` to perceive them.")
    else:
        L.append(f"- All {ev['n_items']} items are searchable" + (" (video items indexed by the product's own "
                 "perception)" if p["n_video"] else "") + ".")
    if p["groups"]:
        L += ["", "| items (id prefix) | n | video | records | example source |", "|---|---|---|---|---|"]
        for k, g in p["groups"].items():
            src = _cell(g["example_source"] or "")
            src = src if len(src) <= 90 else src[:88] + ".."
            L.append(f"| `{k}` | {g['items']} | {g['video']} | {g['records']} | {src} |")
    L.append("")

    # --- metrics
    L += ["## Retrieval metrics", "",
          (f"Reproduce: `{ctx['eval_command']}`. Values in % (means over the {ev['n_queries']} queries; "
          "ambiguous items are left out of each query's ranking)."), ""]
    if "--library" in ctx["eval_command"]:
        L[-1:-1] = ["", ("`--library` names the library this run used (it already held the benchmark's items); without it "
                    "the command uses a cache library per benchmark, and the first run with `--index-videos` "
                    "perceives the video items into it (minutes).")]
    if "metrics" in plots:
        L += [f"![metrics per method]({plots['metrics']})", ""]
    L += ["| method | " + " | ".join(cols) + " | top-1 span overlap (n) | median ms/query | description |",
          "|---" * (len(cols) + 4) + "|"]
    from .runner import METHODS

    for m, v in ev["methods"].items():
        loc = ev["localisation"].get(m, {})
        lat = ev.get("latency_ms", {}).get(m, {}).get("median")
        desc = METHODS[m][1] if m in METHODS else ""
        L.append(f"| `{m}` | " + " | ".join(_pct(v[c]) for c in cols)
                 + f" | {_pct(loc.get('span_overlap'))} ({loc.get('top1_relevant_with_span', 0)})"
                 + f" | {_fmt_num(lat)} | {desc} |")
    for m, why in ev.get("skipped", {}).items():
        L.append(f"\n- `{m}` could not run: {why}")
    if "full" in ev["methods"]:
        f = ev["methods"]["full"]
        singles = {m: ev["methods"][m] for m in ("rule", "dense", "bm25") if m in ev["methods"]}
        if singles:
            best = max(singles, key=lambda m: (singles[m]["MRR"], m))
            L += ["", f"**Fusion vs the best single source by MRR** (`{best}`), points: "
                  + ", ".join(f"{c} {_pct(f[c])} vs {_pct(singles[best][c])} ({100 * (f[c] - singles[best][c]):+.1f})"
                              for c in cols) + "."]
        abl = [m for m in ev["methods"] if m.startswith("full-")]
        if abl:
            L += ["", "Ablations, change against `full` (points; negative = the removed part helped):", ""]
            L += ["| ablation | " + " | ".join(f"d{c}" for c in cols) + " |", "|---" * (len(cols) + 1) + "|"]
            for m in abl:
                L.append(f"| `{m}` | " + " | ".join(f"{100 * (ev['methods'][m][c] - f[c]):+.1f}" for c in cols) + " |")
    L.append("")

    # --- per query
    methods = list(ev["methods"])
    L += ["## Per query", "", "Rank of the first relevant item per method (`-`: none retrieved); AP of `full`.", ""]
    if "ranks" in plots:
        L += [f"![rank heat map]({plots['ranks']})", ""]
    L += ["| query | event | text | n rel | " + " | ".join(f"`{m}`" for m in methods) + " | AP full |",
          "|---" * (5 + len(methods)) + "|"]
    for q in ev["queries"]:
        cells = []
        for m in methods:
            r = q["methods"].get(m, {}).get("rank_of_first_relevant")
            cells.append("-" if r is None else str(r))
        ap = q["methods"].get("full", {}).get("AP")
        L.append(f"| {q['id']} | {q.get('event') or ''} | {_cell(q['text'])} | {q['n_relevant']} | "
                 + " | ".join(cells) + f" | {'-' if ap is None else f'{ap:.2f}'} |")
    L.append("")

    # --- localisation
    L += ["## Localisation of the peak span", "",
          ("For each query whose top-1 item (ambiguous items removed) is relevant and has a labelled span: does the "
          "method's span (the rule's peak window, or the best dense segment) overlap the labelled span?"), "",
          "| method | top-1 relevant with a labelled span | overlap | queries |", "|---|---|---|---|"]
    for m in methods:
        loc = ev["localisation"].get(m, {})
        qids = [q["id"] + ("" if q["methods"][m].get("top1_span_overlaps_truth") else " (miss)")
                for q in ev["queries"] if "top1_span_overlaps_truth" in q["methods"].get(m, {})]
        L.append(f"| `{m}` | {loc.get('top1_relevant_with_span', 0)} | {_pct(loc.get('span_overlap'))} | "
                 f"{', '.join(qids) or '-'} |")
    L.append("")

    # --- performance
    L += ["## Performance", ""]
    if not bench:
        L += ["Not measured in this run (`--bench none`). Run `strived bench` for the figures.", ""]
    else:
        L += [f"From `{ctx['bench_command']}` ({bench['mode']} sizes"
              + ("; the full sizes are the scripts' defaults, `strived bench`" if bench["mode"] == "quick" else "")
              + "). The machine is shared and small (see above): read ratios more than absolute times. Each row "
              "names the benchmark script; the command that reproduces it is in the table below.", ""]
        for key, title in (("latency", "latency"), ("stage_fps", "indexing throughput")):
            if key in plots:
                L += [f"![{title}]({plots[key]})", ""]
        groups: dict[str, list[dict]] = {}
        for row in bench["ratios"]:
            groups.setdefault(row["group"], []).append(row)
        for g, rows in groups.items():
            L += [f"### {g[0].upper() + g[1:]}", "", "| figure | ours | reference | ratio | note | benchmark |",
                  "|---|---|---|---|---|---|"]
            for r in rows:
                ref = (f"{_fmt_num(r['reference'])} {r['unit']} ({r['reference_label']})"
                       if r["reference"] is not None else "")
                L.append(f"| {_cell(r['name'])} | {_fmt_num(r['value'])} {r['unit']} | {_cell(ref)} | {fmt_ratio(r)} "
                         f"| {_cell(r['note'])} | {r['benchmark']} |")
            L.append("")
        if ev.get("latency_ms"):
            L += ["### Per-query latency of each method on this benchmark", "",
                  (f"Measured during the evaluation above ({ev['n_items_searchable']} items; median and max over the "
                  "queries). The methods run one after another over the same queries and share caches: the first "
                  "method that embeds a query pays for the query embedding, and the first query of a calibrated "
                  "method with cross-fitting pays for calibrating the folds (the max); later methods reuse both."), "",
                  "| method | median ms | max ms |", "|---|---|---|"]
            for m, v in ev["latency_ms"].items():
                L.append(f"| `{m}` | {_fmt_num(v.get('median'))} | {_fmt_num(v.get('max'))} |")
            L.append("")
        L += ["### Benchmarks run", "", "| benchmark | status | wall s | command (from the repository root) |",
              "|---|---|---|---|"]
        for name, r in bench["benchmarks"].items():
            L.append(f"| {name} | {r['status']}{': ' + r['reason'] if r.get('reason') else ''} | "
                     f"{r.get('wall_s', '-')} | `{r['command']}` |")
        L.append("")
        perc = bench["benchmarks"].get("perception", {}).get("figures", {})
        if perc.get("kitti_ranging"):
            L += [("Ranging error on KITTI ground truth (ground-truth boxes, geometric ranging), from the perception "
                  "benchmark:"), ""]
            for k, v in perc["kitti_ranging"].items():
                L.append(f"- {k}: n={v['n']}, median relative distance error {v['median_rel_err']:.3f}, "
                         f"P90 {v['p90_rel_err']:.3f}")
            L.append("")
    L += ["## Reproduce", "", "```", ctx["command"], ctx["eval_command"],
          "strived bench            # every speed benchmark at full size (minutes)",
          "strived bench --quick --only core,retrieval", "```", "",
          "See `docs/evaluation.md` for running the same evaluation on your own labelled folder.", ""]
    return "\n".join(L)


def _git_commit(repo: Path) -> str | None:
    try:
        p = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=repo, capture_output=True, text=True, timeout=10, check=False)
        if p.returncode != 0:
            return None
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "strived", "benchmarks"], cwd=repo,
                               capture_output=True, text=True, timeout=10, check=False).stdout.strip()
        return p.stdout.strip() + (" + uncommitted changes" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return None


def _machine() -> str:
    import platform

    cpu = platform.processor() or platform.machine()
    try:
        for ln in Path("/proc/cpuinfo").read_text().splitlines():
            if ln.startswith("model name"):
                cpu = ln.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} CPUs, {platform.system()} {platform.release()}, Python {platform.python_version()}"


def write_report(ev: dict, bench: dict | None, bench_dir, out, ctx: dict) -> list[Path]:
    """Write README.md, eval.json, bench.json (when measured) and the PNG plots into ``out``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    plots: dict[str, str] = {}
    if ev["methods"]:
        written.append(plot_metrics(ev, out / "metrics.png"))
        plots["metrics"] = "metrics.png"
        written.append(plot_ranks(ev, out / "ranks.png"))
        plots["ranks"] = "ranks.png"
    if bench:
        if p := plot_latency(bench["ratios"], out / "latency.png"):
            written.append(p)
            plots["latency"] = "latency.png"
        if p := plot_stage_fps(bench["ratios"], out / "stage_fps.png"):
            written.append(p)
            plots["stage_fps"] = "stage_fps.png"
        (out / "bench.json").write_text(json.dumps(bench, indent=2) + "\n")
        written.append(out / "bench.json")
    (out / "eval.json").write_text(json.dumps(ev, indent=2) + "\n")
    written.append(out / "eval.json")
    md = render_markdown(ev, bench, benchmark_profile(bench_dir), ctx, plots)
    (out / "README.md").write_text(md, encoding="utf-8")
    written.append(out / "README.md")
    return written


def make_context(command: str, eval_command: str, bench_command: str = "") -> dict:
    return {"command": command, "eval_command": eval_command, "bench_command": bench_command,
            "commit": _git_commit(Path(__file__).resolve().parents[2]), "date": time.strftime("%Y-%m-%d"),
            "machine": _machine()}

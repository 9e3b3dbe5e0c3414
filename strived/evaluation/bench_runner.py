"""`strived bench`: run the speed and accuracy benchmarks, each in its own process, and collect the
figures each writes as JSON.

Every benchmark takes ``--json PATH`` and writes its figures there (a JSON object; the keys are
listed in each script's docstring and read by `strived.evaluation.ratios`). Nothing is parsed
out of what a benchmark prints: the printout is for people, and its last lines are kept in the
result (``output_tail``) for debugging. A benchmark that is missing, fails, runs past its time or
writes no JSON is reported as such, never replaced.

Most benchmarks are the scripts in the repository's ``benchmarks/`` folder (not in an installed
wheel); ``scale`` is the ``strived bench scale`` sub-command (`strived.evaluation.scale`).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from ..errors import StrivedError
from ..jobs import CancelFn, ProgressFn, check_cancel, report
from .ratios import bench_ratios


@dataclass(frozen=True)
class BenchSpec:
    """One benchmark: a script in benchmarks/ (``script``) or a ``strived`` sub-command (``cli``),
    with its quick arguments and its full arguments (the benchmark's own defaults unless given)."""

    script: str = ""
    quick: tuple[str, ...] = ()
    full: tuple[str, ...] = ()
    cli: tuple[str, ...] = ()


BENCHES: dict[str, BenchSpec] = {
    "core": BenchSpec("bench_core.py", ("--videos", "1000", "--naive-subset", "20")),
    "perception": BenchSpec("bench_perception.py", ("--clips", "1", "--overlays", ""), ("--overlays", "")),
    "retrieval": BenchSpec("bench_retrieval.py",
                           ("--sizes", "1000", "--bm25-sizes", "1000", "10000", "--reps", "5")),
    "calibration": BenchSpec("bench_calibration.py", ("--videos", "200")),
    "app": BenchSpec("bench_app.py", ("--videos", "1000")),
    # quick: random dense vectors (embedding 5,000 segments with MiniLM takes minutes on a small CPU);
    # the JSON says so (``dense_vectors``); full: the script's defaults (real vectors up to 2,000 videos)
    "search": BenchSpec("bench_search.py", ("--videos", "1000", "--reps", "3", "--dense", "random", "--no-llm-case")),
    "scale": BenchSpec(cli=("bench", "scale"), quick=("--videos", "200")),
    "egomotion": BenchSpec("bench_egomotion.py"),
    "detection": BenchSpec("bench_detection.py", ("--quick",)),
}
BENCH_ORDER = tuple(BENCHES)


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


def bench_args(name: str, quick: bool, extra: list[str] | tuple[str, ...] = ()) -> list[str]:
    spec = BENCHES[name]
    return [*(spec.quick if quick else spec.full), *extra]


def bench_command(name: str, quick: bool, extra: list[str] | tuple[str, ...] = ()) -> list[str]:
    """The command line (as a user would type it from the repo root) for one benchmark."""
    spec = BENCHES[name]
    head = ["strived", *spec.cli] if spec.cli else ["python", f"benchmarks/{spec.script}"]
    return [*head, *bench_args(name, quick, extra)]


def _shell(cmd: list[str]) -> str:
    return " ".join(a if a and not re.search(r"[\s'\"]", a) else f"'{a}'" for a in cmd)


def _read_figures(path: Path) -> tuple[dict | list | None, str]:
    """The JSON a benchmark wrote, or (None, why not)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        return None, f"could not read its --json file: {e}"
    if not text.strip():
        return None, "it wrote nothing to its --json file"
    try:
        doc = json.loads(text)
    except ValueError as e:
        return None, f"its --json file is not JSON: {e}"
    if not isinstance(doc, (dict, list)) or not doc:
        return None, "its --json file holds no figures"
    return doc, ""


def run_benchmarks(only: list[str] | None = None, *, quick: bool = False, bench_dir: Path | None = None,
                   timeout_s: float = 1800.0, extra: dict[str, list[str]] | None = None, progress: ProgressFn = None,
                   cancel: CancelFn = None, echo=None) -> dict:
    """Run the benchmarks as subprocesses, each with ``--json`` into a temporary file; returns
    {"mode", "benchmarks_dir", "benchmarks": {name: result}, "ratios"}.

    Each result: status (ok | missing | failed | timeout | no-figures), command, wall_s, rc, the
    figures it wrote (``figures``), the last lines of its output, and ``reason`` unless ok.
    ``extra`` adds arguments to a benchmark's command line (e.g. ``{"scale": ["--cache", DIR]}``)."""
    bench_dir = Path(bench_dir) if bench_dir else benchmarks_dir()
    names = only or list(BENCH_ORDER)
    extra = extra or {}
    res: dict = {"mode": "quick" if quick else "full", "benchmarks_dir": str(bench_dir), "benchmarks": {}}
    env = dict(os.environ)
    env.setdefault("QT_QPA_PLATFORM", "offscreen")
    repo = bench_dir.parent
    pkg_root = Path(__file__).resolve().parents[2]
    paths = list(dict.fromkeys([str(repo), str(pkg_root)]))
    env["PYTHONPATH"] = os.pathsep.join(paths + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    for k, name in enumerate(names):
        check_cancel(cancel)
        spec = BENCHES[name]
        args = bench_args(name, quick, extra.get(name, ()))
        r: dict = {"command": _shell(bench_command(name, quick, extra.get(name, ())))}
        if spec.cli:
            argv = [sys.executable, "-m", "strived", *spec.cli, *args]
            cwd = pkg_root
        else:
            path = bench_dir / spec.script
            r["script"] = str(path)
            if not path.exists():
                r.update(status="missing", reason=f"{spec.script} not found in {bench_dir}")
                res["benchmarks"][name] = r
                report(progress, "bench", k + 1, len(names), item=name)
                continue
            argv = [sys.executable, str(path), *args]
            cwd = repo
        if echo:
            echo(f"[{k + 1}/{len(names)}] {name}: {r['command']}")
        fd, tmp = tempfile.mkstemp(prefix=f"strived-bench-{name}-", suffix=".json")
        os.close(fd)
        json_path = Path(tmp)
        t0 = time.perf_counter()
        try:
            p = subprocess.run([*argv, "--json", str(json_path)], cwd=cwd, env=env, capture_output=True, text=True,
                               timeout=timeout_s, check=False)
            out_text, rc = p.stdout + ("\n" + p.stderr if p.stderr.strip() else ""), p.returncode
            status = "ok" if rc == 0 else "failed"
        except subprocess.TimeoutExpired as e:
            out_text = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
            rc, status = None, "timeout"
        r["wall_s"] = round(time.perf_counter() - t0, 1)
        r["rc"] = rc
        try:
            figures, why = _read_figures(json_path)
        finally:
            json_path.unlink(missing_ok=True)
        if status == "ok" and figures is None:
            status = "no-figures"
        r["status"] = status
        r["figures"] = figures if figures is not None else {}
        lines = [ln for ln in out_text.splitlines() if ln.strip() and "it/s]" not in ln]
        r["output_tail"] = lines[-40:]
        if status != "ok":
            r["reason"] = (f"exit code {rc}" if status == "failed" else
                           f"ran past {timeout_s:.0f} s" if status == "timeout" else
                           f"{why} (see output_tail)")
        if echo:
            echo(f"      {status} in {r['wall_s']:.1f} s" + (f" ({r['reason']})" if r.get("reason") else ""))
        res["benchmarks"][name] = r
        report(progress, "bench", k + 1, len(names), item=name)
    res["ratios"] = bench_ratios(res)
    return res


def load_bench_json(path) -> dict:
    """A `strived bench --json` file, its ratios recomputed from the figures it holds."""
    try:
        bench = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise StrivedError(f"--bench-json {path}: {e}") from None
    if not isinstance(bench, dict) or "ratios" not in bench or not isinstance(bench.get("benchmarks"), dict):
        raise StrivedError(f"--bench-json {path}: not a `strived bench --json` file")
    bench["ratios"] = bench_ratios(bench)
    return bench

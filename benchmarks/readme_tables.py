"""The README's figure tables, generated from the committed benchmark JSON they quote (issue 35:
"the README's performance section a short table generated from the committed JSON").

    python benchmarks/readme_tables.py            # rewrite the tables between the README's markers
    python benchmarks/readme_tables.py --check    # exit 1 when the README differs from the JSON

Each row names the file it comes from; `tests/core/test_readme_figures.py` runs ``--check``, so a
figure in the README cannot drift from its source. The history of the figures (every session's
measurements) is in `docs/report/README.md` and the folders it links.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
GEN = ROOT / "docs" / "report" / "generalization"
TP = ROOT / "docs" / "report" / "throughput"

#: (label, file, protocol note) of the evaluation table: mAP / Acc@1 per method, in %
EVAL_ROWS = [
    ("**unseen**: design holdout, shipped files (`--cv 0`), re-indexed from scratch (perception v10), "
     "session 16", "holdout_s16.json"),
    ("unseen: the same, perception v9, session 15", "holdout_s15.json"),
    ("unseen: design holdout, shipped files, end of issue 31 (perception v8)", "holdout_after.json"),
    ("unseen: design holdout, shipped files, start of issue 31", "holdout_before.json"),
    ("design split, leave one source out (`--cv source`), perception v10, session 16", "design_loso_s16.json"),
    ("design split, leave one source out, perception v8", "design_loso.json"),
    ("design split + mirrored clips, leave one source out", "design_loso_with_mirrors.json"),
    ("bench-dev video items, random 5 folds (`--cv 5`), for comparison only", "dev_video_cv5.json"),
    ("bench-dev all items, random 5 folds (`--cv 5`), for comparison only", "dev_all_cv5.json"),
]
METHODS = ("full", "equal", "rule", "dense", "bm25", "rule-hand")


def _load(path: Path):
    return json.loads(path.read_text(encoding="utf-8"))


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _cell(m: dict | None) -> str:
    if not m:
        return "—"
    return f"{100 * m['mAP']:.1f} / {100 * m['Acc@1']:.1f}"


def eval_table() -> str:
    head = "| protocol | items / queries | " + " | ".join(METHODS) + " | source |"
    lines = [head, "|" + "---|" * (len(METHODS) + 3)]
    for label, name in EVAL_ROWS:
        d = _load(GEN / name)
        cells = " | ".join(_cell(d["methods"].get(k)) for k in METHODS)
        lines.append(f"| {label} | {d['n_items']} / {d['n_queries']} | {cells} | `{name}` |")
    return "\n".join(lines)


def _scale_row(key: str, fmt) -> str:
    rows = {r["videos"]: r for r in _load(ROOT / "docs/report/scale/scale.json")}
    return " / ".join(fmt(rows[n][key]) for n in (1000, 10000, 100000))


def _index_runs(name: str) -> dict[int, dict]:
    d = _load(TP / name)
    return {r["workers"]: r for r in d.get("runs", [d])}      # one run's file, or several


def _ratio(name: str) -> dict:
    return {r["name"]: r for r in _load(ROOT / "docs/report/bench.json")["ratios"]}[name]


def perf_rows() -> list[tuple[str, str, str]]:
    """(what, figure, source) rows of the performance table."""
    cpu, gpu, gpu1 = (_index_runs("bench_index_cpu2_benchdev_s16.json"), _index_runs("bench_index_gpu.json"),
                      _index_runs("bench_index_gpu_w1.json"))
    ego = _load(ROOT / "docs/report/perception_v2/s12/egomotion_s12_v8.json")["sequences"]
    mae = sorted(s["calib"]["speed_mae"] for s in ego.values())
    mae_est = sorted(s["estimated"]["speed_mae"] for s in ego.values())
    sim = {r["videos"]: r["new_process"] for r in _load(ROOT / "docs/report/similar/latency.json")["rows"]}
    rule = _ratio("rule scoring, warm, object rule, 10000 videos")
    stall_i = _load(ROOT / "docs/report/app/bench_app_index_stall.json")["index_stall"]
    stall_s = _load(ROOT / "docs/report/app/bench_app_search_stall_1000.json")["search_stall"]
    sample = _load(ROOT / "docs/report/app/bench_sample.json")["runs"][0]
    return [
        ("search without an LLM (rule + dense + BM25 + fusion + spans), p50 over repeated queries, at "
         "1k / 10k / 100k videos (synthetic libraries, real MiniLM vectors, one new process per size)", _scale_row("search_p50_ms", lambda v: f"{v:.1f} ms"),
         "docs/report/scale/scale.json"),
        ("peak memory (RSS) of that process at 1k / 10k / 100k", _scale_row("rss_mb", lambda v: f"{v / 1024:.2f} GB"),
         "docs/report/scale/scale.json"),
        ("HNSW recall@10 against exact search at 1k / 10k / 100k",
         _scale_row("dense_recall_at_10", lambda v: f"{v:.3f}"), "docs/report/scale/scale.json"),
        ("a rule window never used before, first search, 1k / 10k / 100k",
         _scale_row("first_new_window_ms", lambda v: f"{v / 1000:.2f} s"), "docs/report/scale/scale.json"),
        ("first search of a new process (whole `engine.search`, no LLM), 1k / 10k videos; what grows "
         "with the library is read from files written at index time (100k not built: 1.3–1.9 s projected "
         "from the growth, mostly hnswlib parsing its graph)",
         " / ".join(f"{r['first_search_ms']:.0f} ms" for r in sorted(_load(ROOT / "docs/report/scale/scale_s16.json"),
                                                               key=lambda r: r["videos"])),
         "docs/report/scale/scale_s16.json"),
        ("one rule over 10,000 videos × 20 s × 15 tracks, warm", f"{rule['value']:g} {rule['unit']} "
         f"(×{rule['ratio']:,.0f} the per-video loop, identical)", "docs/report/bench.json"),
        ("whole `strived index`, bench-dev's 27 real clips, this 2-core CPU, perception v10 with the burnt-in "
         "speed OCR probe: 1 / 2 workers", f"×{cpu[1]['realtime_x']:.2f} / ×{cpu[2]['realtime_x']:.2f} real time",
         "docs/report/throughput/bench_index_cpu2_benchdev_s16.json"),
        ("the same on an H200 with 16 cores (25 clips, CUDA detector): 1 / 16 workers",
         f"×{gpu1[1]['realtime_x']:.2f} / ×{gpu[16]['realtime_x']:.2f} real time",
         "docs/report/throughput/bench_index_gpu*.json"),
        ("ego speed error on KITTI, camera known / estimated (perception v8)",
         f"{mae[0]:.2f}–{mae[-1]:.2f} / {mae_est[0]:.2f}–{mae_est[-1]:.2f} m/s",
         "docs/report/perception_v2/s12/egomotion_s12_v8.json"),
        ("more like this at 10k videos, first call of a new process: ego / track example",
         f"{sim[10000]['ego']['first_ms'] / 1000:.2f} / {sim[10000]['track']['first_ms'] / 1000:.2f} s",
         "docs/report/similar/latency.json"),
        ("app: longest UI stall while indexing / at the first search over 1,000 videos",
         f"{stall_i['max_ms']:.0f} / {stall_s['max_ms']:.0f} ms", "docs/report/app/"),
        ("app: Try the sample, start to first results (new process)", f"{sample['seconds_to_first_results']:.1f} s",
         "docs/report/app/bench_sample.json"),
    ]


def perf_table() -> str:
    lines = ["| what (this 2-core CPU unless said) | figure | source |", "|---|---|---|"]
    lines += [f"| {a} | {b} | `{c}` |" for a, b, c in perf_rows()]
    return "\n".join(lines)


BLOCKS = {"eval": eval_table, "perf": perf_table}


def render(text: str) -> str:
    """``text`` with every generated block replaced by its table from the JSON."""
    for name, make in BLOCKS.items():
        begin, end = f"<!-- generated:{name} -->", f"<!-- end:{name} -->"
        a, b = text.index(begin) + len(begin), text.index(end)
        text = text[:a] + "\n" + make() + "\n" + text[b:]
    return text


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when the README differs from the JSON")
    args = ap.parse_args(argv)
    text = README.read_text(encoding="utf-8")
    new = render(text)
    if args.check:
        if new != text:
            print("README figures differ from the committed JSON: run python benchmarks/readme_tables.py",
                  file=sys.stderr)
            return 1
        return 0
    README.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

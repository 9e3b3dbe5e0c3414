"""`strived eval`: run every available method over a benchmark folder and report the paper's metrics.

Methods live in a registry (name -> callable(ctx, query) -> ranked ids + spans). A method that
cannot run here (a missing module or index) is reported under "skipped" with the reason, never
silently replaced. Items are ranked inside the benchmark's own library (records imported, videos
indexed when asked); an item the method does not rank counts as not retrieved.
"""

from __future__ import annotations

import hashlib
import re
import os
import time
from pathlib import Path

from ..errors import StrivedError
from ..indexing.job import index_folder
from ..jobs import CancelFn, ProgressFn, check_cancel, report
from ..records import VideoRecords
from ..retrieval.metrics import ACC_KS, query_metrics, summarize
from ..store import Library
from . import methods as _methods  # noqa: F401  (fills METHODS)
from .bench import Benchmark
from .registry import (DEFAULT_METHODS, METHODS, EvalContext, MethodFn, MethodOutput,  # noqa: F401
                       MethodUnavailable, method)


def bench_library_dir(bench: Benchmark) -> Path:
    base = Path(os.environ.get("STRIVED_CACHE", Path.home() / ".cache" / "strived"))
    h = hashlib.sha1(str(bench.folder.resolve()).encode()).hexdigest()[:10]
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", bench.name).strip("_") or "bench"
    return base / "bench" / f"{safe}-{h}"


def prepare_library(bench: Benchmark, library_dir: Path | None = None, *, index_videos: bool = False,
                    progress: ProgressFn = None, cancel: CancelFn = None):
    """Open (creating) the benchmark's library and import every records item not yet in it."""
    lib = Library.open(library_dir or bench_library_dir(bench), create=True)
    todo = [it for it in bench.items if it.records is not None and not lib.has_video(it.id)]
    recs = []
    for k, it in enumerate(todo):
        rec = VideoRecords.load(it.records)
        if rec.info.id != it.id:
            rec.info.id = it.id
        recs.append(rec)
        report(progress, "import", k + 1, len(todo), item=it.id)
    if recs:
        lib.add_videos(recs)
    if index_videos:
        vids = [it for it in bench.items if it.video is not None and not lib.has_video(it.id)]
        if vids:
            # video ids are file names without extension under their folder, as the manifest's ids
            for folder in sorted({it.video.parent for it in vids}):
                index_folder(folder, lib, progress=progress, cancel=cancel)
            lost = [it.id for it in vids if not lib.has_video(it.id)]
            if lost:
                report(progress, "index", len(vids), len(vids),
                       message=f"{len(lost)} video items could not be indexed: {', '.join(lost[:5])}")
    return lib


def _span_iou(span, truths) -> float:
    """The best temporal IoU of ``span`` with any labelled span (0 when none overlaps)."""
    if not span or not truths:
        return 0.0
    best = 0.0
    for a, b in truths:
        inter = min(span[1], b) - max(span[0], a)
        union = max(span[1], b) - min(span[0], a)
        if inter > 0 and union > 0:
            best = max(best, inter / union)
    return best


def _span_overlap(span, truths) -> bool:
    if not span or not truths:
        return False
    return any(min(span[1], b) - max(span[0], a) > 0 for a, b in truths)


def _calibration_text(cv_folds, rule_library) -> str:
    if rule_library is not None:
        return f"rule library {rule_library.version} as it is"
    if cv_folds == "source":
        return "cross-fitted, leave one source out (rule numbers, router and relevance nested)"
    if cv_folds:
        return f"cross-fitted, {cv_folds} folds by source and sequence"
    return "shipped library as it is"


def per_source_metrics(bench: Benchmark, rankings: dict[str, list[str]]) -> dict[str, dict]:
    """Each source's figures: per query, the ranking restricted to that source's items, scored
    against its relevant items (queries without one in the source are left out)."""
    group = {it.id: it.group for it in bench.items}
    out = {}
    for g in sorted(set(group.values())):
        rows = []
        for q in bench.queries:
            rel = [r for r in q.relevant if group.get(r) == g]
            if not rel:
                continue
            ranked = [v for v in rankings.get(q.id, []) if group.get(v) == g]
            rows.append(query_metrics(ranked, rel, [a for a in q.ambiguous if group.get(a) == g]))
        if rows:
            m = summarize(rows)
            out[g] = {"n_queries": len(rows), "n_items": sum(1 for v in group.values() if v == g),
                      "mAP": m["mAP"], "Acc@1": m["Acc@1"], "MRR": m["MRR"]}
    return out


def run_eval(bench: Benchmark, library, methods=DEFAULT_METHODS, *, llm=None, cv_folds: "int | str" = 0,
             rule_library=None, progress: ProgressFn = None, cancel: CancelFn = None) -> dict:
    """Evaluate ``methods`` on every query. Returns the docs/formats.md section 3 document.

    ``cv_folds`` > 0 cross-fits the calibrated library (out-of-sample numbers on the benchmark
    the shipped library was fitted on); ``"source"`` leaves one source out at a time, with the
    rule numbers and the fusion router fitted inside each fold."""
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise StrivedError(f"unknown method(s) {unknown}; valid: {', '.join(METHODS)}")
    if rule_library is not None:
        cv_folds = 0          # the user's library is evaluated as it is
    ctx = EvalContext(bench, library, llm, cv_folds, rule_library)
    items = set(bench.item_ids)
    in_lib = set(library.video_ids()) & items
    out = {"benchmark": bench.name, "n_items": len(bench.items), "n_queries": len(bench.queries),
           "calibration": _calibration_text(cv_folds, rule_library),
           "n_items_searchable": len(in_lib),
           "not_searchable": sorted(items - in_lib),
           "methods": {}, "skipped": {}, "localisation": {}, "latency_ms": {}, "per_source": {},
           "queries": []}
    per_q: dict[str, dict] = {q.id: {"id": q.id, "text": q.text, "event": q.event,
                                     "n_relevant": len(q.relevant), "methods": {}} for q in bench.queries}
    total = len(methods) * len(bench.queries)
    done = 0
    for m in methods:
        fn = METHODS[m][0]
        rows, loc_hits, loc_n, lat, ranked_by_q = [], 0, 0, [], {}
        top3 = []   # (overlaps, IoU) of every relevant hit with a labelled span in the first 3
        try:
            for q in bench.queries:
                check_cancel(cancel)
                t0 = time.perf_counter()
                res = fn(ctx, q)
                lat.append((time.perf_counter() - t0) * 1e3)
                ranked = [v for v in res.ranking if v in items]
                ranked_by_q[q.id] = ranked
                qm = query_metrics(ranked, q.relevant, q.ambiguous)
                rows.append(qm)
                clean = [v for v in ranked if v not in set(q.ambiguous)]
                entry = {"rank_of_first_relevant": qm["rank_of_first_relevant"], "AP": qm["AP"],
                         "top": clean[:10]}
                if clean and clean[0] in q.relevant and q.spans.get(clean[0]):
                    loc_n += 1
                    ok = _span_overlap(res.spans.get(clean[0]), q.spans[clean[0]])
                    loc_hits += ok
                    entry["top1_span"] = list(res.spans[clean[0]]) if res.spans.get(clean[0]) else None
                    entry["top1_span_overlaps_truth"] = ok
                for v in clean[:3]:
                    if v in q.relevant and q.spans.get(v):
                        top3.append((_span_overlap(res.spans.get(v), q.spans[v]),
                                     _span_iou(res.spans.get(v), q.spans[v])))
                per_q[q.id]["methods"][m] = entry
                done += 1
                report(progress, "eval", done, total, item=f"{m} {q.id}")
        except MethodUnavailable as e:
            out["skipped"][m] = str(e)
            for q in bench.queries:
                per_q[q.id]["methods"].pop(m, None)
            done += len(bench.queries) - len(rows)
            continue
        out["methods"][m] = summarize(rows)
        out["per_source"][m] = per_source_metrics(bench, ranked_by_q)
        out["localisation"][m] = {"top1_relevant_with_span": loc_n,
                                  "span_overlap": (loc_hits / loc_n) if loc_n else None,
                                  "top3_relevant_with_span": len(top3),
                                  "top3_span_overlap": (sum(o for o, _ in top3) / len(top3)) if top3 else None,
                                  "top3_mean_iou": (sum(i for _, i in top3) / len(top3)) if top3 else None}
        lat.sort()
        out["latency_ms"][m] = {"median": lat[len(lat) // 2] if lat else None, "max": lat[-1] if lat else None}
    out["queries"] = list(per_q.values())
    return out


def format_table(res: dict) -> str:
    cols = ["MRR", "mAP"] + [f"Acc@{k}" for k in ACC_KS]
    lines = [f"benchmark {res['benchmark']}: {res['n_items']} items ({res['n_items_searchable']} searchable), "
             f"{res['n_queries']} queries; values in %"]
    lines.append(f"{'method':<12}" + "".join(f"{c:>8}" for c in cols) + f"{'loc':>8}{'loc@3':>8}{'IoU@3':>8}")
    pct = lambda x: f"{100 * x:8.1f}" if x is not None else f"{'-':>8}"  # noqa: E731
    for m, v in res["methods"].items():
        loc = res["localisation"].get(m, {})
        lines.append(f"{m:<12}" + "".join(f"{100 * v[c]:8.1f}" for c in cols) + pct(loc.get("span_overlap")) +
                     pct(loc.get("top3_span_overlap")) + pct(loc.get("top3_mean_iou")))
    lines.append("loc: top-1 relevant hit's span overlaps its label; loc@3 / IoU@3: every relevant hit in the "
                 "first 3 (overlap rate, mean temporal IoU)")
    for m, why in res["skipped"].items():
        lines.append(f"{m:<12}  skipped: {why}")
    return "\n".join(lines)


def format_per_source(res: dict) -> str:
    """mAP / Acc@1 per source (rows) and method (columns), in %: where the gap between sources is."""
    ps = res.get("per_source") or {}
    methods = [m for m in res["methods"] if ps.get(m)]
    if not methods:
        return ""
    groups = sorted({g for m in methods for g in ps[m]})
    lines = ["per source: mAP / Acc@1 in %, over the queries with a relevant item of that source "
             "(ranking restricted to its items)",
             f"{'source':<34}{'nq':>4}" + "".join(f"{m[:13]:>14}" for m in methods)]
    for g in groups:
        nq = next((ps[m][g]["n_queries"] for m in methods if g in ps[m]), 0)
        cells = [f"{100 * ps[m][g]['mAP']:5.1f}/{100 * ps[m][g]['Acc@1']:5.1f}" if g in ps[m] else "-"
                 for m in methods]
        lines.append(f"{g[:33]:<34}{nq:>4}" + "".join(f"{c:>14}" for c in cells))
    return "\n".join(lines)


def format_queries(res: dict) -> str:
    methods = list(res["methods"])
    lines = [f"{'query':<6}{'event':<22}{'n':>3} " + "".join(f"{m[:10]:>11}" for m in methods)
             + "   (rank of first relevant)"]
    for q in res["queries"]:
        cells = []
        for m in methods:
            r = q["methods"].get(m, {}).get("rank_of_first_relevant")
            cells.append(f"{'-' if r is None else r:>11}")
        lines.append(f"{q['id']:<6}{(q['event'] or '')[:21]:<22}{q['n_relevant']:>3} " + "".join(cells))
    return "\n".join(lines)


def format_markdown(res: dict) -> str:
    cols = ["MRR", "mAP"] + [f"Acc@{k}" for k in ACC_KS]
    out = [f"**{res['benchmark']}**: {res['n_items']} items ({res['n_items_searchable']} searchable), "
           f"{res['n_queries']} queries. Values in %.", "",
           "| method | " + " | ".join(cols) + " | top-1 span overlap | top-3 span overlap (n) | top-3 mean IoU |",
           "|---" * (len(cols) + 4) + "|"]
    p0 = lambda x: "-" if x is None else f"{100 * x:.0f}"  # noqa: E731
    for m, v in res["methods"].items():
        loc = res["localisation"].get(m, {})
        out.append(f"| {m} | " + " | ".join(f"{100 * v[c]:.1f}" for c in cols) +
                   f" | {p0(loc.get('span_overlap'))} | {p0(loc.get('top3_span_overlap'))} "
                   f"({loc.get('top3_relevant_with_span', 0)}) | {p0(loc.get('top3_mean_iou'))} |")
    if res["skipped"]:
        out.append("")
        for m, why in res["skipped"].items():
            out.append(f"- `{m}` skipped: {why}")
    out += ["", "| query | event | n rel | " + " | ".join(res["methods"]) + " |",
            "|---" * (3 + len(res["methods"])) + "|"]
    for q in res["queries"]:
        cells = [str(q["methods"].get(m, {}).get("rank_of_first_relevant") or "-") for m in res["methods"]]
        out.append(f"| {q['id']} | {q['event']} | {q['n_relevant']} | " + " | ".join(cells) + " |")
    return "\n".join(out)

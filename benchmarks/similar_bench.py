"""More like this (issue 36): retrieval quality on bench-dev's labelled spans and latency at scale.

Quality (``quality``): bench-dev's records items in a library (with its BM25 texts and dense
index). Every confirmed span of events.csv whose event has at least two confirmed spans there is
used once as the example (the span only, as a timeline selection: no track), and
`strived.similar.more_like_this` ranks the library's moments. AP of the other confirmed spans of
the same event: a moment is a hit when it overlaps (in time, same item) a relevant span not hit
before; moments overlapping an ambiguous span of that event are left out of the ranking. Mean per
event, beside the AP of the event's text query (`engine.search` with the queries.json text, same
library, same AP over its hits' spans) and the same two at the item level (a hit = an item with a
confirmed span of the event).

Latency (``latency``): `strived bench scale`'s synthetic libraries (`scale_build.build`, cached), one
new process per size: "more like this" on a 3 s span, for the ego and for a track, first call with
no grid cache, then a new process's first call (grid cached on disk) and warm calls (median of 5).

    python benchmarks/similar_bench.py quality --json docs/report/similar/quality.json
    python benchmarks/similar_bench.py latency --videos 1000 10000 --cache DIR --json docs/report/similar/latency.json
"""

from __future__ import annotations

import argparse
import csv
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

BENCH = REPO.parent / "shared" / "data" / "bench-dev"
#: events.csv (event, side) -> the queries.json event they are the answers of
_SIDED = {"cut_in", "ego_turn", "overtaken"}


def event_key(event: str, side: str) -> str:
    return f"{event}_{side}" if event in _SIDED and side in ("left", "right") else event


def load_spans(bench_dir: Path, items: set[str]) -> dict[str, dict[str, list]]:
    """event key -> {"confirmed": [(item, t0, t1)], "ambiguous": [...]} over ``items``."""
    out: dict[str, dict[str, list]] = {}
    with open(bench_dir / "events.csv", newline="") as fh:
        for r in csv.DictReader(fh):
            if r["item"] not in items:
                continue
            d = out.setdefault(event_key(r["event"], r["side"]), {"confirmed": [], "ambiguous": []})
            d["confirmed" if r["status"] == "confirmed" else "ambiguous"].append(
                (r["item"], float(r["t_start_s"]), float(r["t_end_s"])))
    return out


def span_ap(moments: list[tuple[str, float, float]], relevant: list, ambiguous: list) -> float:
    """AP of ``relevant`` spans in a ranked list of (item, t0, t1) moments (module doc)."""
    if not relevant:
        return float("nan")
    over = lambda m, s: m[0] == s[0] and m[1] < s[2] and m[2] > s[1]  # noqa: E731
    hit_done = [False] * len(relevant)
    hits = rank = 0
    total = 0.0
    for m in moments:
        j = next((i for i, s in enumerate(relevant) if not hit_done[i] and over(m, s)), None)
        if j is None and any(over(m, s) for s in ambiguous):
            continue
        rank += 1
        if j is not None:
            hit_done[j] = True
            hits += 1
            total += hits / rank
    return total / len(relevant)


def item_ap(items: list[str], relevant: set[str], ambiguous: set[str]) -> float:
    if not relevant:
        return float("nan")
    hits = rank = 0
    total = 0.0
    for v in dict.fromkeys(items):
        if v in ambiguous - relevant:
            continue
        rank += 1
        if v in relevant:
            hits += 1
            total += hits / rank
    return total / len(relevant)


def quality(out_json: Path | None) -> dict:
    from strived.engine import build_text_index, search
    from strived.evaluation.bench import load_benchmark
    from strived.evaluation.runner import prepare_library
    from strived.similar import more_like_this

    bench = load_benchmark(BENCH)
    lib_dir = Path("/tmp/similar-bench-dev-records")
    lib = prepare_library(bench, lib_dir)
    build_text_index(lib)
    ids = set(lib.video_ids())
    spans = load_spans(BENCH, ids)
    queries = {q.event: q for q in bench.queries if q.event}
    per_event = {}
    for key, d in sorted(spans.items()):
        conf, amb = d["confirmed"], d["ambiguous"]
        if len(conf) < 2:
            continue
        aps, item_aps, used = [], [], set()
        for ex in conf:
            r = more_like_this(lib, ex[0], ex[1], ex[2], None, top_k=len(ids))
            used.update(r.used["sources"])
            moments = [(m.video_id, m.t0, m.t1) for m in r.moments]
            others = [s for s in conf if s != ex]
            aps.append(span_ap(moments, others, amb))
            # item level: the example's own item counts only if it holds another span
            rel_items = {s[0] for s in others}
            item_aps.append(item_ap([m[0] for m in moments], rel_items, {s[0] for s in amb}))
        row = {"examples": len(conf), "similar_span_ap": statistics.fmean(aps),
               "similar_item_ap": statistics.fmean(item_aps), "sources": sorted(used)}
        q = queries.get(key)
        if q is not None:
            resp = search(lib, q.text, top_k=len(ids))
            hits = [(h.video_id, *(h.span_s or (0.0, 1e9))) for h in resp.hits]
            row.update(query=q.text, text_span_ap=span_ap(hits, conf, amb),
                       text_item_ap=item_ap([h[0] for h in hits], {s[0] for s in conf}, {s[0] for s in amb}))
        else:
            row.update(query=None, text_span_ap=None, text_item_ap=None)
        per_event[key] = row
        print(f"{key:22s} n={len(conf):2d}  similar span AP {row['similar_span_ap']:.3f} item AP "
              f"{row['similar_item_ap']:.3f}   text span AP {_f(row['text_span_ap'])} item AP {_f(row['text_item_ap'])}")
    both = [r for r in per_event.values() if r["text_span_ap"] is not None]
    res = {"bench": "bench-dev (records items)", "items": len(ids), "per_event": per_event,
           "mean": {k: statistics.fmean(r[k] for r in both)
                    for k in ("similar_span_ap", "similar_item_ap", "text_span_ap", "text_item_ap")},
           "events_with_query": len(both),
           "example": "span only (no track), as a timeline selection; sources signals + dense"}
    print("mean over events with a query:", {k: round(v, 3) for k, v in res["mean"].items()})
    lib.close()
    if out_json:
        out_json.parent.mkdir(parents=True, exist_ok=True)
        out_json.write_text(json.dumps(res, indent=1))
    return res


def _f(x) -> str:
    return "  -  " if x is None else f"{x:.3f}"


_CHILD = r"""
import json, statistics, sys, time
t = time.perf_counter()
from strived.store import Library
from strived.similar import more_like_this
lib = Library.open(sys.argv[1])
out = {"open_ms": (time.perf_counter() - t) * 1e3}
def call(track):
    t = time.perf_counter()
    r = more_like_this(lib, "v000123", 5.0, 8.0, track, top_k=10)
    return (time.perf_counter() - t) * 1e3, r
for name, track in (("ego", None), ("track", 3)):
    ms, r = call(track)
    warm = [call(track)[0] for _ in range(5)]
    out[name] = {"first_ms": ms, "warm_median_ms": statistics.median(warm), "windows": r.used["windows"],
                 "windows_compared": r.used["windows_compared"], "sources": r.used["sources"],
                 "first_timings_ms": r.timings_ms}
print(json.dumps(out))
"""


def _child(folder: Path) -> dict:
    p = subprocess.run([sys.executable, "-c", _CHILD, str(folder)], capture_output=True, text=True,
                       cwd=REPO, env={**__import__("os").environ, "PYTHONPATH": str(REPO)})
    if p.returncode != 0:
        raise RuntimeError(p.stderr[-2000:])
    return json.loads(p.stdout.strip().splitlines()[-1])


def latency(sizes: list[int], cache: Path, out_json: Path | None, no_build: bool = False) -> dict:
    from strived.evaluation.scale_build import build

    rows = []
    for n in sizes:
        if no_build:      # a library imported by `scale_build.build` whose later stages may not have run
            folder = cache / f"lib-{n}"
        else:
            folder, _ = build(cache, n, echo=lambda s: print(s, file=sys.stderr))
        for old in (folder / "cache").glob("similar-*"):
            shutil.rmtree(old, ignore_errors=True)
        t = time.perf_counter()
        cold = _child(folder)                 # no grid cache: built and written by this call
        cold["process_s"] = time.perf_counter() - t
        warm = _child(folder)                 # a new process, grid cache on disk
        rows.append({"videos": n, "no_grid_cache": cold, "new_process": warm,
                     "dense_index_built": (folder / "BUILT.json").is_file()})
        print(f"{n:>6} videos: ego first {cold['ego']['first_ms']:.0f} ms (no grid cache) / "
              f"{warm['ego']['first_ms']:.0f} ms (new process), warm {warm['ego']['warm_median_ms']:.0f} ms; "
              f"track first {warm['track']['first_ms']:.0f} ms, warm {warm['track']['warm_median_ms']:.0f} ms "
              f"({warm['track']['windows']:,} windows)")
    res = {"rows": rows, "span_s": 3.0, "machine_note": "2 shared CPU cores"}
    if out_json:
        out_json.parent.mkdir(parents=True, exist_ok=True)
        out_json.write_text(json.dumps(res, indent=1))
    return res


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="what", required=True)
    q = sub.add_parser("quality")
    q.add_argument("--json", type=Path, default=None)
    lat = sub.add_parser("latency")
    lat.add_argument("--videos", type=int, nargs="+", default=[1000, 10000])
    lat.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "strived" / "bench-scale")
    lat.add_argument("--json", type=Path, default=None)
    lat.add_argument("--no-build", action="store_true",
                     help="measure CACHE/lib-N as it is (its dense index may not be built yet)")
    a = p.parse_args(argv)
    if a.what == "quality":
        quality(a.json)
    else:
        latency(a.videos, a.cache, a.json, a.no_build)
    return 0


if __name__ == "__main__":
    sys.exit(main())

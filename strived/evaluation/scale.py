"""`strived bench scale`: a synthetic library of N videos, built once (or reused from a cache
folder), then measured whole in a new process, the way a user meets it.

Build (`strived.evaluation.scale_build`): N synthetic videos imported into a library, their texts,
the dense index with REAL all-MiniLM-L6-v2 vectors, the column cache, the rule features of the
shipped rules and the saved BM25 index (what `strived index` / `import` leave on disk).

Measure (a new Python process, so nothing is warm but the OS page cache): open the library, then
10 queries of different event families through the whole `engine.search` (no LLM: rule + dense +
BM25 + fusion + spans), first pass (its first search is ``first_search_ms``: what the process
loads, the query encoder included) and three repeated passes; the rule source alone on a library
event (warm) and on a window never seen before; dense and BM25 alone; HNSW recall@10 against
exact search over all segment vectors; peak RSS of the measuring process.

The JSON has exactly the keys of `KEYS`.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Sequence

import numpy as np

from .. import engine
from ..retrieval import sources as S
from ..rules import RuleScorer, parse_rule
from ..store import Library
from .scale_build import Echo, build, child_env, run_stage

KEYS = ("videos", "build_s", "disk_mb", "open_ms", "first_search_ms", "rss_mb", "search_p50_ms", "search_p95_ms",
        "rule_warm_ms", "first_new_window_ms", "dense_ms", "dense_recall_at_10", "bm25_ms",
        "dense_vectors")
PAPER_QUERY_MS = 3100.0
QUERIES = (
    "a car cuts into our lane from the right",
    "the ego car brakes hard",
    "pedestrian crossing the road in front of us",
    "a truck passes very close to us",
    "the ego vehicle turns left at a junction",
    "someone overtakes us on the left",
    "a cyclist rides across the street ahead",
    "the car in front slows down suddenly",
    "a bus changes lanes on the highway",
    "we are stopped at a red light",
)
_CUT_IN = {"event": "cut_in", "entity": {"class_filter": ["car", "truck"], "agg_mode": "any"},
           "hard_gates": [{"field": "distance", "op": "lt", "value": 40.0}],
           "soft_scores": [{"type": "temporal_change", "field": "loc_x", "window_seconds": 4.0,
                            "magnitude": 14.0}]}


def _pct(xs: Sequence[float], p: float) -> float:
    xs = sorted(xs)
    return float(xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))])


def _dir_mb(folder: Path) -> float:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 1e6


# ---------------------------------------------------------------------------------------- measure

def _rss_mb() -> float:
    """Peak resident memory of this process. Linux: ``VmHWM`` (the peak of this program's own
    memory: ``ru_maxrss`` carries over the peak of the process it was forked from, e.g. a bench
    process that just built a library with torch loaded); elsewhere ``ru_maxrss``."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except (OSError, ValueError, IndexError):
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _mem() -> str:
    """Peak RSS so far, and (Linux) the resident memory now split into anonymous (the process's
    own arrays) and file-backed (memory-mapped files) pages."""
    out = f"peak RSS so far {_rss_mb():.0f} MB"
    try:
        d = {}
        for line in open("/proc/self/status"):
            k, v = line.split(":", 1)
            if k in ("RssAnon", "RssFile"):
                d[k] = int(v.split()[0]) / 1024
        return out + f" (now {d['RssAnon']:.0f} MB own + {d['RssFile']:.0f} MB mapped files)"
    except (OSError, KeyError, ValueError):
        return out


def exact_top_videos(idx, qvec: np.ndarray, k: int, rows_per_read: int = 65536) -> list[str]:
    """The ``k`` best videos by exact search (max cosine over a video's live segment rows; ties
    by id) over the dense index's vectors, read from its file in slices (the oracle of the recall
    figure: it does not map every vector into the measuring process). Falls back to the index's
    own exact search when its vectors are not a file."""
    vec = idx.vectors
    if not isinstance(vec, np.memmap) or not getattr(vec, "filename", None):
        return [h[0] for h in idx.search_videos(qvec, k, exact=True)]
    q = np.asarray(qvec, np.float32).reshape(-1)
    n, dim = vec.shape
    best = np.full(len(idx.video_ids), -np.inf, np.float32)
    with open(vec.filename, "rb") as fh:
        for a in range(0, n, rows_per_read):
            b = min(n, a + rows_per_read)
            fh.seek(int(vec.offset) + a * dim * 4)
            part = np.fromfile(fh, np.float32, (b - a) * dim).reshape(b - a, dim)
            sims = part @ q
            sims[~idx.alive[a:b]] = -np.inf
            np.maximum.at(best, idx.code[a:b], sims)
    cand = np.flatnonzero(np.isfinite(best))
    order = sorted(cand.tolist(), key=lambda c: (-float(best[c]), idx.video_ids[c]))
    return [idx.video_ids[c] for c in order[:k]]


def _built_info(folder: Path) -> dict:
    try:
        return json.loads((folder / "BUILT.json").read_text())
    except (OSError, ValueError):
        return {}


def measure(folder: Path, echo: Echo = print) -> dict:
    """Every figure of `KEYS` but ``build_s``, measured in this process (call it in a new one)."""
    t0 = time.perf_counter()
    lib = Library.open(folder)             # includes SQLite's page check (libraries <= 256 MiB)
    open_ms = (time.perf_counter() - t0) * 1e3
    n = len(lib)
    first, warm = [], []
    for q in QUERIES:
        t0 = time.perf_counter()
        resp = engine.search(lib, q)
        first.append((time.perf_counter() - t0) * 1e3)
        if set(resp.sources_used) != {"rule", "dense", "bm25"}:
            raise RuntimeError(f"{q!r}: sources used {resp.sources_used}; notices {resp.notices}")
    for _ in range(3):
        for q in QUERIES:
            t0 = time.perf_counter()
            engine.search(lib, q)
            warm.append((time.perf_counter() - t0) * 1e3)
    echo(f"  first search of the process {first[0]:.0f} ms; first pass over the 10 queries p50 "
         f"{statistics.median(first):.0f} ms, max {max(first):.0f} ms; {_mem()}")

    sc = RuleScorer(lib)
    rule = parse_rule(_CUT_IN)
    sc.score(rule)
    rw = []
    for _ in range(5):
        t0 = time.perf_counter()
        sc.score(rule)
        rw.append((time.perf_counter() - t0) * 1e3)
    # a window no search has used: a value unique to this run
    fresh = dict(_CUT_IN, soft_scores=[dict(_CUT_IN["soft_scores"][0],
                                            window_seconds=round(2.0 + (time.time_ns() % 10**6) / 10**6 * 3, 6))])
    t0 = time.perf_counter()
    sc.score(parse_rule(fresh))
    new_window_ms = (time.perf_counter() - t0) * 1e3
    echo(f"  rule source: warm {statistics.median(rw):.1f} ms, new window {new_window_ms:.0f} ms; "
         f"{_mem()}")

    S._query_vecs.clear()
    dense = []
    for q in QUERIES:
        t0 = time.perf_counter()
        S.dense_ranking(lib, q, top_k=50)
        dense.append((time.perf_counter() - t0) * 1e3)
    idx = S.open_dense_index(lib)
    emb = S.library_embedder(lib)
    probes = list(QUERIES) + lib.sample_segment_texts(90)
    recall = []
    for q in probes:
        v = S._query_vector(emb, q)
        approx = [h[0] for h in idx.search_videos(v, 10, exact=False)]
        exact = exact_top_videos(idx, v, 10)
        recall.append(len(set(approx) & set(exact)) / max(1, len(exact)))
    echo(f"  dense: p50 {statistics.median(dense):.1f} ms (query embedded each time), recall@10 "
         f"{np.mean(recall):.4f} over {len(probes)} probes; {_mem()}")
    bm = []
    S.bm25_ranking(lib, QUERIES[0], top_k=50)
    for q in QUERIES:
        t0 = time.perf_counter()
        S.bm25_ranking(lib, q, top_k=50)
        bm.append((time.perf_counter() - t0) * 1e3)
    out = {"videos": n, "build_s": None, "disk_mb": round(_dir_mb(Path(folder)), 1),
           "open_ms": round(open_ms, 1), "first_search_ms": round(first[0], 1),
           "rss_mb": round(_rss_mb(), 1),
           "search_p50_ms": round(statistics.median(warm), 2), "search_p95_ms": round(_pct(warm, 95), 2),
           "rule_warm_ms": round(statistics.median(rw), 2), "first_new_window_ms": round(new_window_ms, 1),
           "dense_ms": round(statistics.median(dense), 2),
           "dense_recall_at_10": round(float(np.mean(recall)), 4), "bm25_ms": round(statistics.median(bm), 2),
           "dense_vectors": _built_info(Path(folder)).get("dense_vectors", "unknown")}
    lib.close()
    return out


def memory_parts(folder: Path, echo: Echo = print) -> dict[str, float]:
    """The own (anonymous) memory each part of a search adds in this process (call it in a new
    one; Linux): the query encoder, the dense index, the BM25 index, availability and profiles,
    the track columns, 10 searches, 30 more, a window never seen before. {part: MB}."""
    import gc

    def own() -> float:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("RssAnon"):
                    return int(line.split()[1]) / 1024
        raise OSError("no RssAnon in /proc/self/status")
    out: dict[str, float] = {}
    last = [own()]

    def part(name: str) -> None:
        gc.collect()
        now = own()
        out[name] = round(now - last[0], 1)
        last[0] = now
        echo(f"  {name:52} +{out[name]:7.1f} MB own (total {now:7.1f} MB; {_mem()})")
    out["python, numpy, strived"] = round(last[0], 1)
    echo(f"  {'python, numpy, strived':52} {last[0]:8.1f} MB own")
    lib = Library.open(folder)
    part("open the library")
    S._query_vector(S.library_embedder(lib), "a car")
    part("query encoder")
    idx = S.open_dense_index(lib)
    part(f"dense index ({'HNSW graph' if idx.uses_hnsw else 'exact'}; vectors mapped)")
    S.bm25_ranking(lib, "car")
    part("BM25 index")
    lib.availability()
    lib.video_profiles()
    part("availability + profiles")
    sc = engine.scorer_for(lib)
    sc.columns
    part("track columns (mapped)")
    for q in QUERIES:
        engine.search(lib, q)
    part("10 searches")
    for _ in range(3):
        for q in QUERIES:
            engine.search(lib, q)
    part("30 more searches")
    fresh = dict(_CUT_IN, soft_scores=[dict(_CUT_IN["soft_scores"][0],
                                            window_seconds=round(2.0 + (time.time_ns() % 10**6) / 10**6 * 3, 6))])
    sc.score(parse_rule(fresh))
    part("a window never seen before")
    lib.close()
    return out


def run(n: int, cache_root: Path, echo: Echo = print) -> dict:
    """Build (or reuse) then measure in a new process; the figures of `KEYS`."""
    folder, info = build(cache_root, n, echo)
    fb = info.get("features_bytes")
    if fb is not None:
        echo(f"  rule features computed at build time (as `strived index` does): {fb / 1e6:.1f} MB on disk, "
             f"{fb / max(n, 1):,.0f} bytes/video")
    env = child_env()
    p = subprocess.run([sys.executable, "-m", "strived.evaluation.scale", str(folder)],
                       capture_output=True, text=True, env=env)
    for line in p.stderr.splitlines():
        echo(line)
    if p.returncode != 0:
        raise RuntimeError(f"measuring process failed ({p.returncode})")
    res = json.loads(p.stdout.strip().splitlines()[-1])
    res["build_s"] = info["build_s"]
    cli = cli_first_query_s(folder, env)
    echo(f"  `strived search` in a new process (whole command, wall): median {statistics.median(cli):.2f} s "
         f"over {len(cli)} queries (max {max(cli):.2f} s)")
    return {k: res[k] for k in KEYS}


def cli_first_query_s(folder: Path, env: dict, queries: Sequence[str] = QUERIES[:3]) -> list[float]:
    """Wall seconds of whole `strived search QUERY -L LIB` commands, each a new process (what a
    user waits for at the prompt)."""
    out = []
    for q in queries:
        t0 = time.perf_counter()
        p = subprocess.run([sys.executable, "-m", "strived", "search", q, "-L", str(folder), "--top", "10"],
                           capture_output=True, text=True, env=env)
        out.append(time.perf_counter() - t0)
        if p.returncode != 0:
            raise RuntimeError(f"strived search failed: {p.stderr[-500:]}")
    return out


def format_table(rows: list[dict]) -> str:
    head = f"{'':24}" + "".join(f"{r['videos']:>12,}" for r in rows)
    lines = [head]
    for k in KEYS[1:]:
        vals = []
        for r in rows:
            v = r[k]
            vals.append(f"{v:>12}" if isinstance(v, str) else f"{v:>12,.4g}" if k == "dense_recall_at_10"
                        else f"{v:>12,.1f}")
        lines.append(f"{k:24}" + "".join(vals))
    lines.append(f"{'paper 3.1 s / p50':24}" + "".join(f"{'x' + format(PAPER_QUERY_MS / r['search_p50_ms'], ',.0f'):>12}"
                                                      for r in rows))
    return "\n".join(lines)


def _main(argv: Sequence[str] | None = None) -> int:
    """``python -m strived.evaluation.scale LIB`` measures LIB (JSON on stdout);
    ``--memory-parts LIB`` prints the own memory each part of a search adds (`memory_parts`);
    ``--build N CACHE [--threads T]`` builds (or resumes) lib-N under CACHE, each stage in a
    process of its own; ``--stage NAME CACHE N [--threads T]`` runs one stage (used by --build)."""
    import argparse

    argv = list(sys.argv[1:] if argv is None else argv)
    echo = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731
    if argv and argv[0] == "--memory-parts":
        print(json.dumps(memory_parts(Path(argv[1]), echo=echo)))
        return 0
    if argv and argv[0] in ("--build", "--stage"):
        p = argparse.ArgumentParser(prog="python -m strived.evaluation.scale")
        p.add_argument("--build", nargs=2, metavar=("N", "CACHE"))
        p.add_argument("--stage", nargs=3, metavar=("NAME", "CACHE", "N"))
        p.add_argument("--threads", type=int, default=None)
        p.add_argument("--embed-bf16", action="store_true",
                       help="embed under torch's CPU bfloat16 autocast (about 2x on AVX-512 BF16 CPUs)")
        a = p.parse_args(argv)
        if a.build:
            folder, info = build(Path(a.build[1]), int(a.build[0]), echo, threads=a.threads,
                                 stage_processes=True, bf16=a.embed_bf16)
            echo(f"built {folder}: {json.dumps(info)}")
        else:
            run_stage(a.stage[0], Path(a.stage[1]), int(a.stage[2]), echo, threads=a.threads,
                      bf16=a.embed_bf16)
        return 0
    res = measure(Path(argv[0]), echo=echo)
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(_main())

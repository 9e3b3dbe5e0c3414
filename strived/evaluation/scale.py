"""`strived bench scale`: a synthetic library of N videos, built once (or reused from a cache
folder), then measured whole in a new process, the way a user meets it.

Build (in this process): N synthetic videos (`synth.make_video`: 20 s, 10 fps, 15 tracks) imported
into a library, their BM25 summaries and segment descriptions generated, the dense index built
with REAL all-MiniLM-L6-v2 vectors of those descriptions (identical texts are embedded once and
kept in ``CACHE/embeddings.sqlite``, so a larger N reuses the smaller one's work), and the column
cache written (what the first search of a freshly indexed library does).

Measure (a new Python process, so nothing is warm but the OS page cache): open the library, then
10 queries of different event families through the whole `engine.search` (no LLM: rule + dense +
BM25 + fusion + spans), first pass and three repeated passes; the rule source alone on a library
event (warm) and on a window never seen before; dense and BM25 alone; HNSW recall@10 against
exact search over all segment vectors; peak RSS of the measuring process.

The JSON has exactly the keys of `KEYS`.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

KEYS = ("videos", "build_s", "disk_mb", "open_ms", "rss_mb", "search_p50_ms", "search_p95_ms",
        "rule_warm_ms", "first_new_window_ms", "dense_ms", "dense_recall_at_10", "bm25_ms",
        "dense_vectors")
BUILD_VERSION = 1
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
Echo = Callable[[str], None]


def _pct(xs: Sequence[float], p: float) -> float:
    xs = sorted(xs)
    return float(xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))])


def _dir_mb(folder: Path) -> float:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 1e6


# ------------------------------------------------------------------------------------------ build

class CachedTextEmbedder:
    """The default MiniLM embedder with a persistent cache keyed by text: same name, version and
    vectors (the library records MiniLM, and searches embed queries with MiniLM itself)."""

    def __init__(self, inner, cache_file: Path):
        self.inner = inner
        self.name, self.version, self.dim, self.kind = inner.name, inner.version, inner.dim, inner.kind
        self.db = sqlite3.connect(str(cache_file))
        self.db.execute("CREATE TABLE IF NOT EXISTS emb(key TEXT PRIMARY KEY, vec BLOB)")
        self.tag = f"{inner.name}|{inner.version}|"
        self.embedded = self.reused = 0

    def load(self):
        return self.inner.load()

    def embed_texts(self, texts: Sequence[str]) -> np.ndarray:
        keys = [hashlib.sha1((self.tag + t).encode()).hexdigest() for t in texts]
        have: dict[str, np.ndarray] = {}
        uniq = list(dict.fromkeys(keys))
        for i in range(0, len(uniq), 900):
            part = uniq[i:i + 900]
            for k, b in self.db.execute(f"SELECT key, vec FROM emb WHERE key IN ({','.join('?' * len(part))})",
                                        part):
                have[k] = np.frombuffer(b, np.float32)
        need = {}
        for k, t in zip(keys, texts):
            if k not in have and k not in need:
                need[k] = t
        if need:
            vecs = self.inner.embed_texts(list(need.values()))
            rows = []
            for k, v in zip(need, vecs):
                have[k] = np.asarray(v, np.float32)
                rows.append((k, have[k].tobytes()))
            with self.db:
                self.db.executemany("INSERT OR REPLACE INTO emb VALUES (?,?)", rows)
        self.embedded += len(need)
        self.reused += len(texts) - len(need)
        return np.stack([have[k] for k in keys]) if keys else np.zeros((0, self.dim), np.float32)

    def embed_segments(self, video, segments) -> np.ndarray:
        return self.embed_texts([s[3] for s in segments])


def build(cache_root: Path, n: int, echo: Echo = print) -> tuple[Path, dict]:
    """The library of ``n`` synthetic videos under ``cache_root/lib-N`` (built unless a complete
    build of this version is there); returns (folder, build info)."""
    from ..retrieval.sources import ensure_text_index, get_default_embedder
    from ..retrieval.summaries import build_texts
    from ..rules import RuleScorer
    from ..store import Library
    from .synth import make_video

    cache_root.mkdir(parents=True, exist_ok=True)
    folder = cache_root / f"lib-{n}"
    done = folder / "BUILT.json"
    if done.is_file():
        try:
            info = json.loads(done.read_text())
            if info.get("videos") == n and info.get("version") == BUILD_VERSION:
                echo(f"reusing {folder} (built in {info['build_s']:.0f} s)")
                return folder, info
        except (ValueError, KeyError):
            pass
    shutil.rmtree(folder, ignore_errors=True)
    t_all = time.perf_counter()
    lib = Library.open(folder, create=True)
    rng = np.random.default_rng(0)
    batch, step = [], max(1, n // 10)
    for k in range(n):
        batch.append(make_video(k, rng))
        if len(batch) == 500 or k == n - 1:
            lib.add_videos(batch)
            batch = []
        if (k + 1) % step == 0:
            echo(f"  import {k + 1}/{n}")
    import_s = time.perf_counter() - t_all
    t0 = time.perf_counter()
    build_texts(lib)
    texts_s = time.perf_counter() - t0
    echo(f"  BM25 summaries + segment texts: {texts_s:.1f} s ({texts_s / max(n, 1) * 1e3:.2f} ms/video)")
    t0 = time.perf_counter()
    emb = CachedTextEmbedder(get_default_embedder(), cache_root / "embeddings.sqlite")
    rep = ensure_text_index(lib, emb)
    if rep.dense_unavailable:
        raise RuntimeError(f"dense index not built: {rep.dense_unavailable}")
    dense_s = time.perf_counter() - t0
    echo(f"  dense index (real MiniLM vectors; {emb.embedded} texts embedded, {emb.reused} "
         f"identical texts reused): {dense_s:.1f} s")
    t0 = time.perf_counter()
    RuleScorer(lib).columns        # the column cache a first search writes
    cols_s = time.perf_counter() - t0
    n_seg = lib.conn.execute("SELECT COUNT(*) FROM segments").fetchone()[0]
    lib.close()
    info = {"videos": n, "version": BUILD_VERSION, "build_s": round(time.perf_counter() - t_all, 1),
            "import_s": round(import_s, 1), "texts_s": round(texts_s, 1),
            "texts_ms_per_video": round(texts_s / max(n, 1) * 1e3, 3), "dense_s": round(dense_s, 1),
            "columns_s": round(cols_s, 1), "segments": int(n_seg), "texts_embedded": emb.embedded,
            "dense_vectors": "real"}
    done.write_text(json.dumps(info, indent=1))
    return folder, info


# ---------------------------------------------------------------------------------------- measure

def _rss_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _built_info(folder: Path) -> dict:
    try:
        return json.loads((folder / "BUILT.json").read_text())
    except (OSError, ValueError):
        return {}


def measure(folder: Path, echo: Echo = print) -> dict:
    """Every figure of `KEYS` but ``build_s``, measured in this process (call it in a new one)."""
    from .. import engine
    from ..retrieval import sources as S
    from ..rules import RuleScorer, parse_rule
    from ..store import Library

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
         f"{statistics.median(first):.0f} ms, max {max(first):.0f} ms; peak RSS so far {_rss_mb():.0f} MB")

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
         f"peak RSS so far {_rss_mb():.0f} MB")

    S._query_vecs.clear()
    dense = []
    for q in QUERIES:
        t0 = time.perf_counter()
        S.dense_ranking(lib, q, top_k=50)
        dense.append((time.perf_counter() - t0) * 1e3)
    idx = S.open_dense_index(lib)
    emb = S.library_embedder(lib)
    probes = list(QUERIES) + [r[0] for r in lib.conn.execute(
        "SELECT text FROM segments ORDER BY (rowid * 2654435761) % 1000003 LIMIT 90")]
    recall = []
    for q in probes:
        v = S._query_vector(emb, q)
        approx = [h[0] for h in idx.search_videos(v, 10, exact=False)]
        exact = [h[0] for h in idx.search_videos(v, 10, exact=True)]
        recall.append(len(set(approx) & set(exact)) / max(1, len(exact)))
    echo(f"  dense: p50 {statistics.median(dense):.1f} ms (query embedded each time), recall@10 "
         f"{np.mean(recall):.4f} over {len(probes)} probes; peak RSS so far {_rss_mb():.0f} MB")
    bm = []
    S.bm25_ranking(lib, QUERIES[0], top_k=50)
    for q in QUERIES:
        t0 = time.perf_counter()
        S.bm25_ranking(lib, q, top_k=50)
        bm.append((time.perf_counter() - t0) * 1e3)
    out = {"videos": n, "build_s": None, "disk_mb": round(_dir_mb(Path(folder)), 1),
           "open_ms": round(open_ms, 1),
           "rss_mb": round(_rss_mb(), 1),
           "search_p50_ms": round(statistics.median(warm), 2), "search_p95_ms": round(_pct(warm, 95), 2),
           "rule_warm_ms": round(statistics.median(rw), 2), "first_new_window_ms": round(new_window_ms, 1),
           "dense_ms": round(statistics.median(dense), 2),
           "dense_recall_at_10": round(float(np.mean(recall)), 4), "bm25_ms": round(statistics.median(bm), 2),
           "dense_vectors": _built_info(Path(folder)).get("dense_vectors", "unknown")}
    lib.close()
    return out


def run(n: int, cache_root: Path, echo: Echo = print) -> dict:
    """Build (or reuse) then measure in a new process; the figures of `KEYS`."""
    folder, info = build(cache_root, n, echo)
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
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


def _main() -> int:
    res = measure(Path(sys.argv[1]), echo=lambda s: print(s, file=sys.stderr, flush=True))
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(_main())

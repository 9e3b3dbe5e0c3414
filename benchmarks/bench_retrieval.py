"""Per-query latency of the dense and sparse sources, the router and fusion at 1k and 10k videos.

    .venv/bin/python benchmarks/bench_retrieval.py [--sizes 1000 10000] [--bm25-sizes 1000 10000 100000]
        [--reps 20] [--json PATH]

Synthetic but realistic: summaries are drawn from the generated-summary vocabulary, vectors are
random unit 384-d rows (5 segments per video, like 20 s clips at 4 s segments). Medians over
repeated queries; the machine is shared, so read ratios more than absolute numbers. ``--json PATH``
also writes the figures (keys: bm25[], dense[], router_offline_ms, router_llm_cached_ms,
query_embedding_ms (null with query_embedding_skipped = the reason), whole[], dense_vectors).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from strived.retrieval.dense import DenseIndex  # noqa: E402
from strived.retrieval.router import offline_route, route  # noqa: E402
from strived.retrieval.sparse import BM25Index  # noqa: E402

VOCAB = ("car truck lorry bus pedestrian person bicycle cyclist bike motorcycle motorbike scooter "
         "object ego drives slowly fast highway speed about km stationary standing still waiting "
         "turns left right brakes hard sharp slowdown stops starts moving approaches comes very "
         "close crosses front from moves into our lane ahead out overtakes red blue white black "
         "silver grey green yellow night daytime day dark rain snow fog city street kitti av2 "
         "comma2k19 source log segment tracking sequence frames objects colours nearest").split()
QUERIES = ["a red car cuts into our lane from the right", "ego vehicle turns left at a junction",
           "pedestrian walking across the road in front of the car", "the ego car is standing still",
           "a truck or bus passes extremely close to us", "someone overtakes us on the left at night",
           "a cyclist rides across the street ahead of us", "normal highway cruising"]


def _median_ms(fn, reps: int) -> float:
    ts = []
    for i in range(reps):
        t0 = time.perf_counter()
        fn(i)
        ts.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ts)


def _corpus(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choices(VOCAB, k=rng.randint(25, 60)) + [f"clip{i}"]) for i in range(n)]


def bench_bm25(sizes, reps):
    print("\n## BM25 (per query, median ms; index build s)")
    print(f"{'docs':>8} {'bm25s q':>9} {'rank_bm25 q':>12} {'bm25s build':>12} {'rank_bm25 build':>16} agree")
    rows = []
    for n in sizes:
        ids, texts = [f"v{i:06d}" for i in range(n)], _corpus(n)
        t0 = time.perf_counter(); a = BM25Index(ids, texts, "bm25s"); ta = time.perf_counter() - t0
        t0 = time.perf_counter(); b = BM25Index(ids, texts, "rank_bm25"); tb = time.perf_counter() - t0
        qa = _median_ms(lambda i: a.search(QUERIES[i % len(QUERIES)], 1000), reps)
        rb = max(3, reps // 5) if n >= 100_000 else reps
        qb = _median_ms(lambda i: b.search(QUERIES[i % len(QUERIES)], 1000), rb)
        agree = all([x for x, _ in a.search(q, 100)] == [x for x, _ in b.search(q, 100)] for q in QUERIES[:3])
        print(f"{n:>8} {qa:>9.2f} {qb:>12.2f} {ta:>12.2f} {tb:>16.2f} {agree}")
        rows.append({"docs": n, "bm25s_ms": round(qa, 4), "rank_bm25_ms": round(qb, 4), "bm25s_build_s": round(ta, 4),
                     "rank_bm25_build_s": round(tb, 4), "agree": agree})
    return rows


class _Emb:
    name, version, dim, kind = "bench", "1", 384, "text-of-perception"


def bench_dense(sizes, reps, segs=5):
    print("\n## Dense (384-d, 5 segments/video; per query, median ms)")
    print(f"{'videos':>8} {'rows':>7} {'exact':>8} {'hnsw':>8} {'recall@10':>10} {'hnsw build s':>13}")
    rng = np.random.default_rng(0)
    out = []
    for n in sizes:
        with tempfile.TemporaryDirectory() as d:
            idx = DenseIndex.open(d, _Emb(), exact_max_rows=1)   # force an HNSW graph too
            vecs = rng.normal(size=(n * segs, 384)).astype(np.float32)
            vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
            for v in range(n):
                idx.add(f"v{v:06d}", [(k, 4.0 * k, 4.0 * k + 4) for k in range(segs)],
                        vecs[v * segs:(v + 1) * segs])
            t0 = time.perf_counter(); idx.finish_updates(); tb = time.perf_counter() - t0
            qs = rng.normal(size=(reps, 384)).astype(np.float32)
            qs /= np.linalg.norm(qs, axis=1, keepdims=True)
            te = _median_ms(lambda i: idx.search_videos(qs[i], None, exact=True), reps)
            th = _median_ms(lambda i: idx.search_videos(qs[i], 100, exact=False), reps)
            rec = []
            for q in qs:
                e = {v for v, _, _ in idx.search_videos(q, 10, exact=True)}
                h = {v for v, _, _ in idx.search_videos(q, 10, exact=False)}
                rec.append(len(e & h) / 10)
            print(f"{n:>8} {n * segs:>7} {te:>8.2f} {th:>8.2f} {np.mean(rec):>10.3f} {tb:>13.1f}")
            out.append({"videos": n, "rows": n * segs, "exact_ms": round(te, 4), "hnsw_ms": round(th, 4),
                        "recall_at_10": float(np.mean(rec)), "hnsw_build_s": round(tb, 3)})
    return out


def bench_router_and_cache(reps):
    print("\n## Router (per query, median ms)")
    t = _median_ms(lambda i: offline_route(QUERIES[i % len(QUERIES)]), reps * 10)
    print(f"offline router: {t:.3f} ms")
    from strived.llm import LLMCache, LLMClient, LLMConfig
    from strived.llm.local_server import free_port
    from strived.retrieval import router as R

    with tempfile.TemporaryDirectory() as d:
        cache = LLMCache(Path(d) / "c.sqlite")
        client = LLMClient(LLMConfig(base_url=f"http://127.0.0.1:{free_port()}/v1", enabled=True,
                                     model="m"), cache=cache)
        from strived.llm.cache import cache_key
        for q in QUERIES:   # what a first LLM answer leaves in the cache
            key = cache_key("fusion_router", "m", R.ROUTER_SYSTEM, "Query: " + R.quote_data(q, 300),
                            R.ROUTER_SCHEMA, (R.PROMPT_VERSION,))
            cache.put(key, "fusion_router", "m", {"motion": "x", "dense": 1.0, "rule": 0.5, "bm25": 0.0})
        tc = _median_ms(lambda i: route(QUERIES[i % len(QUERIES)], client), reps * 5)
        assert route(QUERIES[0], client).source == "llm" and client.n_requests == 0
        print(f"LLM router, cached answer (repeat query; server down): {tc:.3f} ms")
    return t, tc


def bench_query_embedding(reps):
    """Median ms of one uncached MiniLM query embedding; (None, reason) when it cannot run."""
    try:
        from strived.retrieval.embedders import MiniLMTextEmbedder
        e = MiniLMTextEmbedder()
        e.embed_texts(["warm up"])
    except Exception as ex:  # noqa: BLE001
        print(f"\n(query embedding skipped: {ex})")
        return None, f"{type(ex).__name__}: {ex}"
    t = _median_ms(lambda i: e.embed_texts([QUERIES[i % len(QUERIES)] + f" {i}"]), reps)
    print(f"\n## Query embedding (MiniLM, CPU, uncached): {t:.1f} ms")
    return t, None


def bench_full(n, reps, t_router, t_embed):
    print(f"\n## Whole no-LLM search at {n} videos (router + bm25s + dense + weighted RRF)")
    from strived.retrieval.fusion import weighted_rrf

    ids, texts = [f"v{i:06d}" for i in range(n)], _corpus(n)
    bm = BM25Index(ids, texts, "bm25s")
    rng = np.random.default_rng(1)
    with tempfile.TemporaryDirectory() as d:
        idx = DenseIndex.open(d, _Emb())
        vecs = rng.normal(size=(n * 5, 384)).astype(np.float32)
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        for v in range(n):
            idx.add(ids[v], [(k, 4.0 * k, 4.0 * k + 4) for k in range(5)], vecs[v * 5:(v + 1) * 5])
        idx.finish_updates()
        qv = rng.normal(size=(reps, 384)).astype(np.float32)
        qv /= np.linalg.norm(qv, axis=1, keepdims=True)   # an embedder's query vectors are unit length
        rule_rank = list(rng.permutation(ids))   # stand-in ranking for the rule source

        def one(i):
            q = QUERIES[i % len(QUERIES)]
            w = offline_route(q).weights
            b = [v for v, _ in bm.search(q)]
            dn = [v for v, _, _ in idx.search_videos(qv[i])]
            return weighted_rrf({"rule": rule_rank, "dense": dn, "bm25": b}, w)

        t = _median_ms(one, reps)
        print(f"mode: dense {'HNSW' if idx.uses_hnsw else 'exact'} over {n * 5} segments")
        print(f"search (excluding query embedding and rule scoring): {t:.1f} ms")
        if t_embed is not None:
            print(f"+ query embedding uncached {t_embed:.1f} ms = {t + t_embed:.1f} ms "
                  "(a repeated query's vector is cached: 0 ms)")
        return {"videos": n, "search_ms": round(t, 4), "dense_mode": "HNSW" if idx.uses_hnsw else "exact"}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    ap.add_argument("--bm25-sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--json", default=None, help="also write the figures to this JSON file")
    a = ap.parse_args(argv)
    fig: dict = {"reps": a.reps, "dense_vectors": "random",
                 "dense_vectors_note": "random unit 384-d vectors: latency is real, ranking quality is not"}
    fig["bm25"] = bench_bm25(a.bm25_sizes, a.reps)
    fig["dense"] = bench_dense(a.sizes, a.reps)
    t_router, t_cached = bench_router_and_cache(a.reps)
    fig["router_offline_ms"], fig["router_llm_cached_ms"] = round(t_router, 5), round(t_cached, 5)
    t_embed, why = bench_query_embedding(a.reps)
    fig["query_embedding_ms"] = None if t_embed is None else round(t_embed, 3)
    if why:
        fig["query_embedding_skipped"] = why
    fig["whole"] = [bench_full(n, a.reps, t_router, t_embed) for n in a.sizes]
    if a.json:
        Path(a.json).write_text(json.dumps(fig, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {a.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

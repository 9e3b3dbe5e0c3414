"""Whole query path (issue 4): `strived.engine.search(library, query)` end to end at 1k and 10k
synthetic videos, without an LLM and with a cached LLM answer.

    .venv/bin/python benchmarks/bench_search.py [--videos 1000 10000] [--keep DIR] [--reps 10]
        [--dense auto|real|random] [--no-llm-case] [--profile] [--json PATH]

Per size: builds (or, with ``--keep DIR``, reuses ``DIR/lib-N``) a library of N synthetic videos
(`bench_core.make_video`: 20 s x 10 fps x 15 tracks), builds the BM25 summaries and segment texts
as `ensure_text_index` does (`build_texts`), and the dense index either with real MiniLM
embeddings of the segment texts (``real``) or, because embedding 50k segments is too slow on a
small CPU, with deterministic random unit vectors inserted through `DenseIndex.add` (``random``;
``auto`` = real up to 2,000 videos). The query embedding is always the real MiniLM call, timed
with and without its cache. Then times ~10 representative queries through `engine.search`:
the first call of each query (cold: uncached query vector) and repeated calls (warm), p50/p95,
with the breakdown from ``resp.timings_ms``. The cached-LLM case points `strived.llm` at a fake
OpenAI-compatible server on 127.0.0.1 that answers the matcher and router prompts validly; the
second identical query must be served from the LLM cache (asserted: zero new requests).

The machine may be shared: the load average is printed next to the figures. ``--json PATH`` also
writes the figures: ``query_embedding`` and one entry of ``sizes`` per library size (videos,
dense_vectors "real" or "random" - random vectors make dense ranking quality meaningless, their
latency is real -, cold/warm p50/p95, the warm breakdown, the rule's us/video, the target, and
``llm`` for the cached-LLM case or null when it was not run); ``dense_vectors_random`` is true when
any size used random vectors.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_core import make_video  # noqa: E402

from strived import engine  # noqa: E402
from strived.llm.fake_server import FakeOpenAI  # noqa: E402
from strived.store import Library  # noqa: E402

QUERIES = [
    "a car cuts into our lane from the right",
    "the ego car brakes hard",
    "pedestrian crossing the road in front of us",
    "a truck passes very close to us",
    "the ego vehicle turns left at a junction",
    "someone overtakes us on the left at night",
    "a cyclist rides across the street ahead",
    "the car in front slows down suddenly",
    "a red car changes lanes on the highway",
    "normal highway cruising",
]
PAPER_QUERY_S = 3.1                 # paper: per query, with its LLM stages
PAPER_RULE_MS, PAPER_RULE_N = 254.0, 583


def load() -> str:
    return "load %.2f %.2f %.2f" % os.getloadavg()


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


# ----------------------------------------------------------------------------------------- build

def build_library(folder: Path, n: int, dense_mode: str) -> Library:
    from strived.retrieval.sources import ensure_text_index, get_default_embedder, open_dense_index
    from strived.retrieval.summaries import build_texts

    done = folder / "BUILT.json"
    if done.is_file():
        info = json.loads(done.read_text())
        print(f"reusing library {folder} ({info})")
        return Library.open(folder), info.get("dense", "unknown")
    folder.mkdir(parents=True, exist_ok=True)
    lib = Library.open(folder, create=True)
    rng = np.random.default_rng(0)
    t0 = time.perf_counter()
    batch = []
    for k in range(n):
        batch.append(make_video(k, rng))
        if len(batch) == 500:
            lib.add_videos(batch)
            batch = []
    if batch:
        lib.add_videos(batch)
    print(f"  generate + import {n} videos: {time.perf_counter() - t0:.1f} s  ({load()})", flush=True)
    t0 = time.perf_counter()
    r = build_texts(lib)
    print(f"  build_texts (summaries + segment texts): {r.n_built} videos in "
          f"{time.perf_counter() - t0:.1f} s", flush=True)
    emb = get_default_embedder()
    t0 = time.perf_counter()
    if dense_mode == "real":
        ensure_text_index(lib, emb)
        print(f"  dense index, real MiniLM segment embeddings: {time.perf_counter() - t0:.1f} s", flush=True)
    else:
        idx = open_dense_index(lib, emb, rebuild=True)
        stamps = dict(lib.conn.execute("SELECT video_id, updated_at FROM summaries"))
        segs: dict[str, list] = {}
        for vid, seg, a, b in lib.conn.execute("SELECT video_id, seg, t0, t1 FROM segments "
                                               "ORDER BY video_id, seg"):
            segs.setdefault(vid, []).append((seg, a, b))
        vrng = np.random.default_rng(12345)
        for vid in sorted(segs):
            v = vrng.normal(size=(len(segs[vid]), emb.dim)).astype(np.float32)
            v /= np.linalg.norm(v, axis=1, keepdims=True)
            idx.add(vid, segs[vid], v, stamps[vid])
        idx.finish_updates()
        print(f"  dense index, RANDOM unit vectors ({len(idx)} segments, "
              f"{'HNSW' if idx.uses_hnsw else 'exact'}): {time.perf_counter() - t0:.1f} s", flush=True)
        # what the engine would do next: must find everything fresh (nothing re-embedded)
        rep = ensure_text_index(lib, emb)
        assert rep.dense_embedded == 0 and rep.texts_built == 0, rep
    done.write_text(json.dumps({"videos": n, "dense": dense_mode}))
    return lib, dense_mode


# ------------------------------------------------------------------------------------ fake LLM

def fake_answer(body: dict) -> dict:
    """Valid matcher and router answers (the fake endpoint's script for this benchmark)."""
    system = body["messages"][0]["content"]
    user = body["messages"][-1]["content"].lower()
    if "fusion weights" in system:
        return {"motion": "other object", "dense": 0.6, "rule": 1.0, "bm25": 0.1}
    if "library event" in system:
        ev = ("ego_brake" if "brake" in user else "cut_in" if "cut" in user else
              "ego_turn_left" if "left" in user and "turn" in user else "cut_in")
        return {"event": ev, "confidence": 0.9, "reason": "fake"}
    raise AssertionError("unexpected prompt: " + system[:80])


# ------------------------------------------------------------------------------------- measure

def time_query_embedding(reps: int):
    from strived.retrieval import sources as S

    emb = S.get_default_embedder()
    t0 = time.perf_counter()
    emb.embed_texts(["warm up"])
    load_s = time.perf_counter() - t0
    unc = []
    for i in range(reps):
        t0 = time.perf_counter()
        emb.embed_texts([QUERIES[i % len(QUERIES)] + f" #{i}"])
        unc.append((time.perf_counter() - t0) * 1e3)
    S._query_vector(emb, "cache probe")
    cac = []
    for _ in range(reps):
        t0 = time.perf_counter()
        S._query_vector(emb, "cache probe")
        cac.append((time.perf_counter() - t0) * 1e3)
    print(f"query embedding (MiniLM, CPU): model load+first {load_s:.1f} s; uncached p50 "
          f"{statistics.median(unc):.1f} ms p95 {pct(unc, 95):.1f} ms; cached p50 "
          f"{statistics.median(cac) * 1e3:.1f} us  ({load()})")
    return {"model_load_first_s": round(load_s, 3), "uncached_p50_ms": round(statistics.median(unc), 3),
            "uncached_p95_ms": round(pct(unc, 95), 3), "cached_p50_us": round(statistics.median(cac) * 1e3, 3),
            "load": load()}


def bench_size(lib: Library, n: int, reps: int, llm_case: bool, profile: bool) -> dict:
    """Times `engine.search` on one library; prints them and returns them (the JSON's ``sizes`` entry)."""
    from strived.retrieval import sources as S

    print(f"\n## engine.search at {n} videos  ({load()})")
    t0 = time.perf_counter()
    engine.search(lib, "warm up: caches columns, indexes, rule library")
    first_search_ms = (time.perf_counter() - t0) * 1e3
    print(f"first search in the process (loads columns, BM25, dense index, rule library): "
          f"{first_search_ms:.0f} ms")
    first = []
    for q in QUERIES:   # first use of each rule form on this library computes its window features
        t0 = time.perf_counter()
        engine.search(lib, q)
        first.append((time.perf_counter() - t0) * 1e3)
    print(f"first use of each query's rule (window features computed, then cached on disk): "
          f"p50 {statistics.median(first):.0f} ms, max {max(first):.0f} ms")
    S._query_vecs.clear()
    cold, warm, parts = [], [], {}
    resp = None
    for q in QUERIES:
        t0 = time.perf_counter()
        resp = engine.search(lib, q)
        cold.append((time.perf_counter() - t0) * 1e3)
        for _ in range(reps):
            t0 = time.perf_counter()
            resp = engine.search(lib, q)
            warm.append((time.perf_counter() - t0) * 1e3)
            tm = resp.timings_ms
            for k, v in tm.items():
                parts.setdefault(k, []).append(v)
            parts.setdefault("fusion+rest", []).append(tm["total"] - sum(v for k, v in tm.items()
                                                                         if k != "total"))
        assert resp.hits and set(resp.sources_used) == {"rule", "dense", "bm25"}, resp.notices
    print(f"{'':28}{'p50 ms':>9}{'p95 ms':>9}")
    print(f"{'cold (query vec uncached)':28}{statistics.median(cold):>9.1f}{pct(cold, 95):>9.1f}")
    print(f"{'warm (repeated query)':28}{statistics.median(warm):>9.1f}{pct(warm, 95):>9.1f}")
    for k in ("resolve_rule", "rule", "dense", "bm25", "router", "fusion+rest", "spans", "total"):
        if k in parts:
            print(f"{'  warm ' + k:28}{statistics.median(parts[k]):>9.2f}{pct(parts[k], 95):>9.2f}")
    print(f"hits per query: {len(resp.hits)} (spans for top 20); last query's rule: {resp.match.get('event')}"
          f" ({resp.match.get('mode')})")
    p50 = statistics.median(warm)
    print(f"vs paper: {PAPER_QUERY_S * 1e3:.0f} ms/query (with LLM stages) / {p50:.1f} ms = "
          f"x{PAPER_QUERY_S * 1e3 / p50:.0f}; cold x{PAPER_QUERY_S * 1e3 / statistics.median(cold):.0f}. "
          f"Rule matching: paper {PAPER_RULE_MS:.0f} ms / {PAPER_RULE_N} videos = "
          f"{PAPER_RULE_MS / PAPER_RULE_N * 1e3:.0f} us/video; here "
          f"{statistics.median(parts['rule']):.1f} ms / {n} = "
          f"{statistics.median(parts['rule']) / n * 1e3:.2f} us/video "
          f"(x{PAPER_RULE_MS / PAPER_RULE_N / (statistics.median(parts['rule']) / n):.0f})")
    target = "MET" if p50 <= 100 and statistics.median(cold) <= 100 else "MISSED"
    print(f"issue 4 target (<= 100 ms without LLM at {n}): {target}")
    out = {"videos": n, "reps": reps, "queries": len(QUERIES), "load": load(),
           "first_search_ms": round(first_search_ms, 2),
           "first_use_p50_ms": round(statistics.median(first), 2), "first_use_max_ms": round(max(first), 2),
           "cold_p50_ms": round(statistics.median(cold), 3), "cold_p95_ms": round(pct(cold, 95), 3),
           "warm_p50_ms": round(p50, 3), "warm_p95_ms": round(pct(warm, 95), 3),
           "warm_parts_p50_ms": {k: round(statistics.median(v), 4) for k, v in parts.items()},
           "warm_parts_p95_ms": {k: round(pct(v, 95), 4) for k, v in parts.items()},
           "hits": len(resp.hits),
           "rule_us_per_video": round(statistics.median(parts["rule"]) / n * 1e3, 4),
           "target_ms": 100.0, "target_met": target == "MET", "llm": None}

    if profile:
        import cProfile
        import pstats
        pr = cProfile.Profile()
        pr.enable()
        for q in QUERIES:
            engine.search(lib, q)
        pr.disable()
        pstats.Stats(pr).sort_stats("cumulative").print_stats(25)

    if llm_case:
        from strived.llm import LLMClient, LLMConfig

        fake = FakeOpenAI(answer=fake_answer)
        with tempfile.TemporaryDirectory() as d:
            client = LLMClient(LLMConfig(base_url=fake.base_url, enabled=True, model="fake",
                                         timeout_s=10), cache=Path(d) / "llm.sqlite")
            first, again = [], []
            for q in QUERIES:
                t0 = time.perf_counter()
                r1 = engine.search(lib, q, llm=client)
                first.append((time.perf_counter() - t0) * 1e3)
                assert r1.match.get("source") == "llm" and r1.match.get("router") == "llm", r1.match
                before = len(fake.requests)
                for _ in range(max(1, reps // 2)):
                    t0 = time.perf_counter()
                    r2 = engine.search(lib, q, llm=client)
                    again.append((time.perf_counter() - t0) * 1e3)
                assert len(fake.requests) == before, "repeat query reached the LLM server"
                assert [h.video_id for h in r2.hits] == [h.video_id for h in r1.hits]
            client.close() if hasattr(client, "close") else None
        fake.close()
        print(f"cached-LLM case (fake loopback server: matcher + router): first query "
              f"p50 {statistics.median(first):.1f} ms ({len(fake.requests)} requests for "
              f"{len(QUERIES)} queries); repeated query p50 {statistics.median(again):.1f} ms "
              f"p95 {pct(again, 95):.1f} ms, 0 new requests (asserted); vs paper "
              f"x{PAPER_QUERY_S * 1e3 / statistics.median(again):.0f}  ({load()})")
        out["llm"] = {"server": "fake loopback (matcher + router answers)",
                      "first_p50_ms": round(statistics.median(first), 3), "requests": len(fake.requests),
                      "repeat_p50_ms": round(statistics.median(again), 3), "repeat_p95_ms": round(pct(again, 95), 3),
                      "repeat_new_requests": 0}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--videos", type=int, nargs="+", default=[1000, 10000])
    ap.add_argument("--keep", default=None, help="build libraries under DIR/lib-N and reuse them")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--dense", choices=("auto", "real", "random"), default="auto")
    ap.add_argument("--no-llm-case", action="store_true")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--build-only", action="store_true")
    ap.add_argument("--json", default=None, help="also write the figures to this JSON file")
    a = ap.parse_args(argv)
    base = Path(a.keep) if a.keep else Path(tempfile.mkdtemp(prefix="strived-bench-search-"))
    print(f"machine: {os.cpu_count()} CPUs; {load()}")
    libs, dense_used = {}, {}
    for n in a.videos:
        mode = a.dense if a.dense != "auto" else ("real" if n <= 2000 else "random")
        print(f"\nlibrary of {n} videos (dense segment vectors: {mode}"
              f"{' - RANDOM unit vectors, not MiniLM: dense ranking quality is meaningless, latency is real' if mode == 'random' else ''})")
        t0 = time.perf_counter()
        libs[n], dense_used[n] = build_library(base / f"lib-{n}", n, mode)
        print(f"  ready in {time.perf_counter() - t0:.1f} s")
    if a.build_only:
        return 0
    print()
    fig: dict = {"machine": {"cpus": os.cpu_count(), "load": load()}, "paper_query_ms": PAPER_QUERY_S * 1e3,
                 "query_embedding": time_query_embedding(max(10, a.reps)), "sizes": []}
    for n in a.videos:
        r = bench_size(libs[n], n, a.reps, not a.no_llm_case, a.profile)
        # what the dense index of this library holds (a reused --keep library keeps its build's mode)
        r["dense_vectors"] = dense_used[n]
        if dense_used[n] == "random":
            r["dense_vectors_note"] = "RANDOM unit vectors, not MiniLM: dense ranking quality is meaningless, latency is real"
        fig["sizes"].append(r)
        libs[n].close()
    fig["dense_vectors_random"] = any(r["dense_vectors"] == "random" for r in fig["sizes"])
    if a.json:
        Path(a.json).write_text(json.dumps(fig, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {a.json}")
    if not a.keep:
        import shutil
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The synthetic library of `strived bench scale` (`strived.evaluation.scale` measures it).

Build (in this process, or each stage in a process of its own): N synthetic videos
(`synth.make_video`: 20 s, 10 fps, 15 tracks) imported into a library, their BM25 summaries and
segment descriptions generated, the dense index built with REAL all-MiniLM-L6-v2 vectors of those
descriptions (identical texts are embedded once and kept in ``CACHE/embeddings.sqlite``, so a
larger N reuses the smaller one's work), the column cache written, the rule features of the
shipped rules computed and the BM25 index saved (what `strived index` / `import` leave on disk).
Resumable: see `build`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from ..retrieval import sources
from ..retrieval.summaries import build_texts
from ..rule_source import warm_rule_features
from ..rules import RuleScorer
from ..store import Library
from ..store.embeddings import EmbeddingFile
from ..store.texts import count_segments_at
from .synth import make_video

BUILD_VERSION = 1
Echo = Callable[[str], None]


class CachedTextEmbedder:
    """The default MiniLM embedder with a persistent cache keyed by text: same name, version and
    vectors (the library records MiniLM, and searches embed queries with MiniLM itself)."""

    def __init__(self, inner, cache_file: Path):
        self.inner = inner
        self.name, self.version, self.dim, self.kind = inner.name, inner.version, inner.dim, inner.kind
        self.file = EmbeddingFile(cache_file)
        self.tag = f"{inner.name}|{inner.version}|"
        self.embedded = self.reused = 0

    def load(self):
        return self.inner.load()

    def embed_texts(self, texts: Sequence[str]) -> np.ndarray:
        keys = [hashlib.sha1((self.tag + t).encode()).hexdigest() for t in texts]
        have = self.file.vectors(list(dict.fromkeys(keys)))
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
            self.file.put(rows)
        self.embedded += len(need)
        self.reused += len(texts) - len(need)
        return np.stack([have[k] for k in keys]) if keys else np.zeros((0, self.dim), np.float32)

    def embed_segments(self, video, segments) -> np.ndarray:
        return self.embed_texts([s[3] for s in segments])

    def missing(self, texts: Sequence[str]) -> list[str]:
        """The distinct texts of ``texts`` that the cache does not hold."""
        by_key = {hashlib.sha1((self.tag + t).encode()).hexdigest(): t for t in texts}
        for k in self.file.held(list(by_key)):
            by_key.pop(k, None)
        return list(by_key.values())


#: build stages, in order; each is resumable and recorded in ``BUILDING.json`` when done.
#: ``features``: the rule features of the shipped library rules and the other answers a first
#: search reads, as `strived index` / `import` compute them (`engine.build_text_index`:
#: `sources.prime_search_answers`, `rule_source.warm_rule_features`); a build made before that
#: stage existed gets it on its next use
STAGES = ("import", "texts", "embed", "dense", "columns", "features", "bm25")
IMPORT_BATCH = 500
#: distinct texts per embedding call of the build: sorted by length first, so a chunk's batches
#: pad little (each chunk is committed to the embedding cache as it finishes)
EMBED_CHUNK = 1024
#: texts per forward pass in the build (measured on this 2-core CPU: see docs/scale.md)
EMBED_BATCH = 32


def _load_state(folder: Path, n: int) -> dict | None:
    try:
        st = json.loads((folder / "BUILDING.json").read_text())
    except (OSError, ValueError):
        return None
    if st.get("videos") != n or st.get("version") != BUILD_VERSION or not isinstance(st.get("stages"), dict):
        return None
    return st


def _save_state(folder: Path, st: dict) -> None:
    tmp = folder / f"BUILDING.json.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(st, indent=1))
    tmp.replace(folder / "BUILDING.json")


def build(cache_root: Path, n: int, echo: Echo = print, *, threads: int | None = None,
          stage_processes: bool = False, bf16: bool = False) -> tuple[Path, dict]:
    """The library of ``n`` synthetic videos under ``cache_root/lib-N`` (built unless a complete
    build of this version is there); returns (folder, build info).

    Resumable: an interrupted build continues where it stopped (``BUILDING.json`` records the
    stages done and how far the import went, with the generator's state after the last committed
    batch of videos; texts, embeddings and the dense index are incremental, and the embeddings of
    finished chunks are in ``CACHE/embeddings.sqlite``). ``threads`` sets torch's threads for the
    embedding stage; ``stage_processes`` runs every stage in a process of its own (its memory is
    given back between stages, and a stage runs the code as it is when the stage starts).
    ``bf16`` embeds under torch's CPU bfloat16 autocast (same model and weights; on a CPU with
    AVX-512 BF16 about twice the texts per second; cosine to the float32 vectors ≥ 0.9999 on the
    synthetic texts, see docs/scale.md); the texts embedded that way are counted in the build
    info."""
    cache_root.mkdir(parents=True, exist_ok=True)
    folder = cache_root / f"lib-{n}"
    info = _built(folder, n)
    if info is not None and all(f"{s}_s" in info for s in STAGES):
        echo(f"reusing {folder} (built in {info['build_s']:.0f} s)")
        return folder, info
    st = _load_state(folder, n) if folder.is_dir() else None
    if info is not None:        # complete but for stages added since: those are run now
        st = st or {"videos": n, "version": BUILD_VERSION, "imported": n, "runs": info.get("build_runs", 1),
                    "stages": {s: info[f"{s}_s"] for s in STAGES if f"{s}_s" in info}}
        echo(f"reusing {folder}; running the stages added since it was built: "
             f"{', '.join(s for s in STAGES if s not in st['stages'])}")
    if st is None:
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        st = {"videos": n, "version": BUILD_VERSION, "stages": {}, "imported": 0, "runs": 0}
    elif info is None:
        echo(f"resuming the build in {folder} (stages done: {', '.join(st['stages']) or 'none'}; "
             f"{st.get('imported', 0):,} videos imported)")
    st["runs"] = int(st.get("runs", 0)) + 1
    _save_state(folder, st)
    for stage in STAGES:
        if stage in st["stages"]:
            continue
        if stage_processes:
            env = child_env()
            cmd = [sys.executable, "-m", "strived.evaluation.scale", "--stage", stage, str(cache_root), str(n)]
            if threads:
                cmd += ["--threads", str(threads)]
            if bf16:
                cmd += ["--embed-bf16"]
            r = subprocess.run(cmd, env=env)
            if r.returncode != 0:
                raise RuntimeError(f"build stage {stage} failed ({r.returncode})")
            st = _load_state(folder, n) or st
            if stage not in st["stages"]:
                raise RuntimeError(f"build stage {stage} did not finish")
        else:
            run_stage(stage, cache_root, n, echo, threads=threads, bf16=bf16)
            st = _load_state(folder, n) or st
    info = _finish(folder, st)
    return folder, info


def _built(folder: Path, n: int) -> dict | None:
    """The info of a complete build of this version of ``n`` videos in ``folder``, else None."""
    try:
        info = json.loads((folder / "BUILT.json").read_text())
    except (OSError, ValueError):
        return None
    ok = isinstance(info, dict) and info.get("videos") == n and info.get("version") == BUILD_VERSION
    return info if ok and isinstance(info.get("build_s"), (int, float)) else None


def features_bytes(folder: Path) -> int:
    """Bytes of the rule feature files of a library's cache folder (``feat-*``, ``ident-*``)."""
    cache = folder / "cache"
    return sum(p.stat().st_size for pat in ("feat-*.npy", "ident-*.npy") for p in cache.glob(pat)
               if p.is_file())


def _finish(folder: Path, st: dict) -> dict:
    n_seg = count_segments_at(folder)
    stages = st["stages"]
    n = st["videos"]
    info = {"videos": n, "version": BUILD_VERSION,
            "build_s": round(sum(float(v) for v in stages.values()), 1),
            "import_s": round(stages.get("import", 0.0), 1), "texts_s": round(stages.get("texts", 0.0), 1),
            "texts_ms_per_video": round(stages.get("texts", 0.0) / max(n, 1) * 1e3, 3),
            "embed_s": round(stages.get("embed", 0.0), 1), "dense_s": round(stages.get("dense", 0.0), 1),
            "columns_s": round(stages.get("columns", 0.0), 1), "bm25_s": round(stages.get("bm25", 0.0), 1),
            "segments": int(n_seg), "texts_embedded": int(st.get("texts_embedded", 0)),
            "embed_texts_per_s": st.get("embed_texts_per_s"),
            "texts_embedded_bf16": int(st.get("texts_embedded_bf16", 0)), "build_runs": st.get("runs", 1),
            "dense_vectors": "real"}
    if "features" in stages:        # (a build made before that stage existed has none: `build`)
        info.update(features_s=round(stages["features"], 1), features_bytes=features_bytes(folder))
    (folder / "BUILT.json").write_text(json.dumps(info, indent=1))
    return info


def run_stage(stage: str, cache_root: Path, n: int, echo: Echo = print, *, threads: int | None = None,
              bf16: bool = False) -> None:
    """Run one build stage of ``cache_root/lib-N`` (resuming it where it stopped) and record it."""
    folder = cache_root / f"lib-{n}"
    st = _load_state(folder, n)
    if st is None:
        raise RuntimeError(f"{folder} has no build in progress")
    lib = Library.open(folder, create=(stage == "import"))
    t0 = time.perf_counter()
    spent = float(st.get("partial", {}).get(stage, 0.0))     # time of earlier, interrupted runs

    def checkpoint(**kw):
        st.update(kw)
        st.setdefault("partial", {})[stage] = spent + time.perf_counter() - t0
        _save_state(folder, st)
    try:
        if stage == "import":
            _stage_import(lib, n, st, checkpoint, echo)
        elif stage == "texts":
            build_texts(lib)
            echo(f"  BM25 summaries + segment texts: {time.perf_counter() - t0:.1f} s "
                 f"({(time.perf_counter() - t0) / max(n, 1) * 1e3:.2f} ms/video)")
        elif stage == "embed":
            _stage_embed(lib, cache_root, st, checkpoint, echo, threads, bf16)
        elif stage == "dense":
            emb = CachedTextEmbedder(sources.get_default_embedder(), cache_root / "embeddings.sqlite")
            rep = sources.ensure_text_index(lib, emb)
            if rep.dense_unavailable:
                raise RuntimeError(f"dense index not built: {rep.dense_unavailable}")
            echo(f"  dense index (real MiniLM vectors; {emb.embedded} texts embedded here, {emb.reused} "
                 f"from the cache): {time.perf_counter() - t0:.1f} s")
        elif stage == "columns":
            RuleScorer(lib).columns        # the column cache a first search writes
            echo(f"  column cache: {time.perf_counter() - t0:.1f} s")
        elif stage == "features":
            sources.prime_search_answers(lib)      # (done by the dense stage since; a build made before)
            k = warm_rule_features(lib)
            echo(f"  rule features of the {k} shipped library rules (as `strived index` computes them): "
                 f"{time.perf_counter() - t0:.1f} s, {features_bytes(folder) / max(n, 1):,.0f} bytes/video")
        elif stage == "bm25":
            sources.save_bm25_index(lib)
            echo(f"  BM25 index saved: {time.perf_counter() - t0:.1f} s")
        else:
            raise ValueError(f"unknown build stage {stage!r}")
    finally:
        lib.close()
    st["stages"][stage] = round(spent + time.perf_counter() - t0, 1)
    st.get("partial", {}).pop(stage, None)
    _save_state(folder, st)


def _stage_import(lib, n: int, st: dict, checkpoint, echo: Echo) -> None:
    rng = np.random.default_rng(0)
    k0 = int(st.get("imported", 0))
    if k0:
        rng.bit_generator.state = st["rng"]   # the generator as it was after video k0 - 1
    batch, step = [], max(1, n // 10)
    for k in range(k0, n):
        batch.append(make_video(k, rng))
        if len(batch) == IMPORT_BATCH or k == n - 1:
            # a batch committed just before an interruption (its checkpoint not yet written)
            lib.add_videos([r for r in batch if not lib.has_video(r.info.id)])
            checkpoint(imported=k + 1, rng=rng.bit_generator.state)
            batch = []
        if (k + 1) % step == 0:
            echo(f"  import {k + 1}/{n}")


def _stage_embed(lib, cache_root: Path, st: dict, checkpoint, echo: Echo, threads: int | None,
                 bf16: bool = False) -> None:
    """Embed every distinct segment text not in the cache yet, shortest first, in committed
    chunks (the dense stage then finds every vector in the cache); ``bf16``: under torch's CPU
    bfloat16 autocast (counted in ``texts_embedded_bf16``)."""
    inner = sources.get_default_embedder()
    emb = CachedTextEmbedder(inner, cache_root / "embeddings.sqlite")
    texts = lib.distinct_segment_texts()
    todo = emb.missing(texts)
    todo.sort(key=lambda t: (len(t), t))
    echo(f"  embedding: {len(texts):,} distinct segment texts, {len(todo):,} not in the cache")
    if not todo:
        return
    if threads:
        import torch

        torch.set_num_threads(int(threads))
    if hasattr(inner, "batch_size"):
        inner.batch_size = EMBED_BATCH
    inner.load()
    if bf16:
        import torch

        precision = lambda: torch.autocast("cpu", dtype=torch.bfloat16)  # noqa: E731
        echo("  embedding under CPU bfloat16 autocast")
    else:
        precision = contextlib.nullcontext
    t0 = time.perf_counter()
    done_here = 0
    last_log = t0
    for i in range(0, len(todo), EMBED_CHUNK):
        part = todo[i:i + EMBED_CHUNK]
        with precision():
            emb.embed_texts(part)
        done_here += len(part)
        rate = done_here / (time.perf_counter() - t0)
        extra = {"texts_embedded_bf16": int(st.get("texts_embedded_bf16", 0)) + len(part)} if bf16 else {}
        checkpoint(texts_embedded=int(st.get("texts_embedded", 0)) + len(part), embed_texts_per_s=round(rate, 1),
                   **extra)
        now = time.perf_counter()
        if now - last_log >= 60 or i + EMBED_CHUNK >= len(todo):
            left = len(todo) - done_here
            echo(f"  embedded {done_here:,}/{len(todo):,} texts ({rate:.1f} texts/s over "
                 f"{now - t0:.0f} s; about {left / max(rate, 1e-9) / 3600:.1f} h left at that rate) "
                 f"[{time.strftime('%H:%M:%S')}]")
            last_log = now


def child_env() -> dict:
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env

"""BM25 summaries and segment texts: the whole text build of a library, timed in this process.

    .venv/bin/python benchmarks/bench_texts.py LIB [--json PATH]

Copies LIB's database (not its caches) to a temporary folder, then times
``summaries.build_texts(force=True)`` over all its videos: reading each
video's records, describing the whole video and each 4 s segment, and writing the rows, as the
indexer and `strived bench scale`'s "texts" stage do. Prints wall and CPU milliseconds per
video and a digest of every text written (identical digests = identical texts, e.g. before and
after a change: run it from each checkout on the same LIB).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sqlite3
import sys
import tempfile
import time
from pathlib import Path


def run(lib_dir: Path) -> dict:
    from strived.retrieval.summaries import build_texts
    from strived.store import Library

    with tempfile.TemporaryDirectory(prefix="strived-texts-") as tmp:
        dst = Path(tmp)
        src = sqlite3.connect(f"file:{lib_dir / 'library.sqlite'}?mode=ro", uri=True)
        out = sqlite3.connect(str(dst / "library.sqlite"))
        src.backup(out)
        src.close()
        out.close()
        lib = Library.open(dst)
        t0, c0 = time.perf_counter(), time.process_time()
        res = build_texts(lib, force=True)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        h = hashlib.sha256()
        for row in lib.conn.execute("SELECT video_id, text FROM summaries ORDER BY video_id"):
            h.update(repr(row).encode())
        for row in lib.conn.execute("SELECT video_id, seg, t0, t1, text FROM segments ORDER BY video_id, seg"):
            h.update(repr(row).encode())
        n_seg = lib.conn.execute("SELECT COUNT(*) FROM segments").fetchone()[0]
        lib.close()
    n = max(res.n_built, 1)
    return {"videos": res.n_built, "segments": int(n_seg), "wall_ms_per_video": round(wall / n * 1e3, 2),
            "cpu_ms_per_video": round(cpu / n * 1e3, 2), "texts_sha256": h.hexdigest()[:16]}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("library", type=Path)
    p.add_argument("--json", type=Path, default=None)
    a = p.parse_args(argv)
    if not (a.library / "library.sqlite").is_file():
        print(f"no library at {a.library}", file=sys.stderr)
        return 2
    res = run(a.library)
    print(f"{res['videos']:,} videos, {res['segments']:,} segments: {res['wall_ms_per_video']:.2f} ms/video "
          f"wall, {res['cpu_ms_per_video']:.2f} ms/video CPU; texts {res['texts_sha256']}")
    if a.json:
        a.json.write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

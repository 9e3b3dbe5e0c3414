"""Indexing on a Ray cluster (Ray Data): throughput with 1 and 2 worker nodes on real clips.

    .venv/bin/python benchmarks/bench_ray.py [--clips N] [--json PATH]

Starts a local multi-node Ray cluster (`ray.cluster_utils.Cluster`: a head node with no CPUs and
K worker nodes with one CPU each, all on loopback), indexes the same N real dashcam clips from
``../shared/data/bench-dev/videos`` (the shortest ones) into a fresh library with
``index_folder(..., ray_address=cluster)``, and prints the wall time and videos per second for
K = 1 and K = 2, measured in this one run. Each node is a separate set of processes, as on a real
cluster; on a machine with C cores, more than C workers cannot help.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "bench-dev" / "videos"


def shortest_clips(n: int) -> list[Path]:
    import cv2

    lens = []
    for p in sorted(SHARED.glob("*.mp4")):
        cap = cv2.VideoCapture(str(p))
        fps, frames = cap.get(cv2.CAP_PROP_FPS) or 0, cap.get(cv2.CAP_PROP_FRAME_COUNT) or 0
        cap.release()
        if fps > 0 and frames > 0:
            lens.append((frames / fps, p))
    return [p for _, p in sorted(lens)[:n]]


def run(k: int, clips: list[Path], work: Path) -> dict:
    import ray
    from ray.cluster_utils import Cluster

    from strived.indexing.job import index_folder
    from strived.store.library import Library

    src = work / f"videos-{k}"
    src.mkdir(parents=True)
    for c in clips:
        os.symlink(c, src / c.name)
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0})
    for _ in range(k):
        cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False, configure_logging=False)
    try:
        with Library.open(work / f"lib-{k}", create=True) as lib:
            t0 = time.perf_counter()
            rep = index_folder(src, lib, ray_address=cluster.address)
            wall = time.perf_counter() - t0
            video_s = sum(lib.get_video(v).duration_s for v in lib.video_ids())
    finally:
        ray.shutdown()
        cluster.shutdown()
    if rep.failed:
        raise SystemExit(f"failed: {rep.failed}")
    return {"workers": k, "videos": len(rep.indexed), "video_s": round(video_s, 1), "wall_s": round(wall, 1),
            "videos_per_s": round(len(rep.indexed) / wall, 3)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clips", type=int, default=6)
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    if not SHARED.is_dir():
        print(f"no clips at {SHARED}")
        return 1
    clips = shortest_clips(a.clips)
    print(f"machine: {os.cpu_count()} CPUs; load {os.getloadavg()[0]:.2f}; {len(clips)} real clips: "
          + ", ".join(c.stem for c in clips))
    work = Path(tempfile.mkdtemp(prefix="strived-bench-ray-"))
    rows = []
    try:
        for k in (1, 2):
            r = run(k, clips, work)
            rows.append(r)
            print(f"{k} worker node(s): {r['videos']} videos ({r['video_s']} s of video) in {r['wall_s']} s "
                  f"= {r['videos_per_s']} videos/s  (load {os.getloadavg()[0]:.2f})", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    speedup = rows[1]["videos_per_s"] / rows[0]["videos_per_s"]
    print(f"2 workers vs 1: x{speedup:.2f}")
    if a.json:
        Path(a.json).write_text(json.dumps({"runs": rows, "speedup_2_vs_1": round(speedup, 3),
                                            "cpus": os.cpu_count()}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

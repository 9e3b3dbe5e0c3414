"""`strived bench index FOLDER`: the whole `strived index` command on a folder, as a user meets it.

Runs ``strived index FOLDER`` in a new process into a new, empty library (so model loading, worker
start-up, perception, writing and the text index are all inside the figure) and reports video
seconds per wall second of the whole command, the per-stage shares of the perception work (stage
seconds summed over the worker processes), the device, the CPU count and the peak memory of the
largest process.
"""

from __future__ import annotations

import json
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ..errors import StrivedError

KEYS = ("folder", "videos", "failed", "video_s", "wall_s", "realtime_x", "perception_wall_s", "text_index_s",
        "stage_s", "stage_share", "workers", "cpu_count", "device", "gpu", "peak_rss_mb", "python",
        "text_index_note", "command")


def _gpu_name(device: str | None) -> str | None:
    if device != "cuda":
        return None
    try:
        import torch

        return torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    except Exception:  # torch missing or no driver: the name is not known
        return None


def run(folder: Path, *, workers: int = 0, device: str = "auto", fps: float = 10.0,
        library: Path | None = None, extra: list[str] | None = None, echo=None) -> dict:
    """Index ``folder`` into a new library with the real CLI; return the figures (``KEYS``)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise StrivedError(f"{folder} is not a folder")
    with tempfile.TemporaryDirectory(prefix="strived-bench-index-") as tmp:
        lib = Path(library) if library else Path(tmp) / "library"
        stats_path = Path(tmp) / "stats.json"
        cmd = [sys.executable, "-m", "strived", "index", str(folder), "--library", str(lib), "--quiet",
               "--workers", str(workers), "--device", device, "--fps", str(fps),
               "--stats-json", str(stats_path), *(extra or [])]
        if echo:
            echo("$ strived " + " ".join(cmd[3:]))
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        if proc.returncode != 0 or not stats_path.is_file():
            raise StrivedError(f"strived index failed (exit {proc.returncode}): {proc.stderr.strip()[-800:]}")
        stats = json.loads(stats_path.read_text(encoding="utf-8"))
    stage = stats.get("stage_s") or {}
    tot = sum(stage.values()) or 1.0
    out = {
        "folder": str(folder), "videos": stats["videos"], "failed": stats["failed"],
        "video_s": stats["video_s"], "wall_s": round(wall, 3),
        "realtime_x": round(stats["video_s"] / wall, 3) if wall > 0 else None,
        "perception_wall_s": stats["perception_wall_s"], "text_index_s": stats["text_index_s"],
        "stage_s": stage, "stage_share": {k: round(v / tot, 3) for k, v in stage.items()},
        "workers": stats["workers"], "cpu_count": stats["cpu_count"], "device": stats["device"],
        "gpu": _gpu_name(stats["device"]), "peak_rss_mb": round(peak_kb / 1024.0, 1),
        "python": platform.python_version(), "text_index_note": stats.get("text_index_note"),
        "command": " ".join(["strived", *cmd[3:]]),
    }
    return out


def format_row(r: dict) -> str:
    shares = ", ".join(f"{k} {v:.0%}" for k, v in sorted(r["stage_share"].items(), key=lambda kv: -kv[1]))
    dev = r["device"] + (f" ({r['gpu']})" if r.get("gpu") else "")
    return (f"{r['videos']} videos, {r['video_s']:.0f} s of video in {r['wall_s']:.1f} s wall: "
            f"x{r['realtime_x']:.2f} real time  [{r['workers']} worker(s), {r['cpu_count']} CPUs, {dev}; "
            f"perception {r['perception_wall_s']:.1f} s, text index {r['text_index_s']:.1f} s; "
            f"peak RSS {r['peak_rss_mb']:.0f} MB]\n  stage shares: {shares}")


"""Long-file benchmark (issue 33): peak memory and throughput of `strived index` on one long file.

    .venv/bin/python benchmarks/bench_long_file.py [--minutes 10] [--bench ../shared/data/bench-dev]
        [--work /tmp/strived-long] [--workers 0] [--json PATH] [--keep]

Builds one long 1080p30 H.264 file by concatenating the real bench-dev clips in turn (each scaled
to 1920x1080, its frames repeated or dropped to 30 fps by their time stamps) until ``--minutes``
of video, then runs ``strived index`` on it in a new process and samples the resident memory of
that process and its workers (``/proc``, every 0.2 s). Reports the peak of their sum, the largest
single process, wall time, real-time factor, and what the library holds (segments, tracks).
The file is generated: say so wherever its figures are quoted.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def build_long_file(clips: list[Path], out: Path, minutes: float, fps: int = 30,
                    size: tuple[int, int] = (1920, 1080)) -> dict:
    """Concatenate ``clips`` (cycling) into ``out`` until ``minutes`` of video; returns what went in."""
    import av
    import cv2

    n_out = int(round(minutes * 60 * fps))
    used: list[str] = []
    with av.open(str(out), "w") as container:
        stream = container.add_stream("libx264", rate=fps)
        stream.width, stream.height, stream.pix_fmt = size[0], size[1], "yuv420p"
        stream.options = {"preset": "ultrafast", "crf": "23", "g": str(2 * fps)}
        k = 0
        while k < n_out:
            for clip in clips:
                cap = cv2.VideoCapture(str(clip))
                src_fps = cap.get(cv2.CAP_PROP_FPS) or 30.0
                used.append(clip.name)
                j, img = 0, None
                while k < n_out:
                    ok, frame = cap.read()
                    if not ok:
                        break
                    img = cv2.resize(frame, size, interpolation=cv2.INTER_LINEAR)
                    j += 1
                    # the output frames whose instants fall in this source frame's interval
                    n_here = int(round(j * fps / src_fps)) - int(round((j - 1) * fps / src_fps))
                    for _ in range(n_here):
                        if k >= n_out:
                            break
                        vf = av.VideoFrame.from_ndarray(img, format="bgr24")
                        for pkt in stream.encode(vf):
                            container.mux(pkt)
                        k += 1
                cap.release()
                if k >= n_out:
                    break
        for pkt in stream.encode():
            container.mux(pkt)
    return {"frames": n_out, "fps": fps, "size": list(size), "clips_used": len(used),
            "distinct_clips": len(set(used))}


def _tree_rss(pid: int) -> tuple[int, int]:
    """(sum, largest) resident bytes of ``pid`` and its descendants, read from /proc."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{d}/statm") as fh:
                rss[int(d)] = int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(d))
    todo, seen = [pid], []
    while todo:
        p = todo.pop()
        seen.append(p)
        todo.extend(children.get(p, []))
    vals = [rss.get(p, 0) for p in seen]
    return sum(vals), max(vals) if vals else 0


def run_index(folder: Path, lib: Path, workers: int) -> dict:
    cmd = [sys.executable, "-m", "strived", "index", str(folder), "--library", str(lib), "--quiet",
           "--workers", str(workers)]
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=dict(os.environ, PYTHONPATH=str(REPO)))
    peak_sum = peak_one = 0
    timeline: list[list[float]] = []    # [seconds, largest sum in the 30 s before] (flat = bounded)
    while p.poll() is None:
        s, one = _tree_rss(p.pid)
        peak_sum, peak_one = max(peak_sum, s), max(peak_one, one)
        now = time.monotonic() - t0
        if not timeline or now - timeline[-1][0] >= 30:
            timeline.append([round(now), 0])
        timeline[-1][1] = max(timeline[-1][1], round(s / 2**20))
        time.sleep(0.2)
    out, err = p.communicate()
    return {"rc": p.returncode, "wall_s": round(time.monotonic() - t0, 1), "peak_rss_sum_mb": round(peak_sum / 2**20),
            "peak_rss_largest_process_mb": round(peak_one / 2**20), "rss_sum_mb_timeline": timeline,
            "stdout": out.strip()[-500:],
            "stderr": err.strip()[-500:]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--bench", type=Path, default=REPO.parent / "shared" / "data" / "bench-dev")
    ap.add_argument("--work", type=Path, default=Path("/tmp/strived-long"))
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--keep", action="store_true", help="reuse a long file already built in --work")
    a = ap.parse_args()
    src = a.work / "footage"
    src.mkdir(parents=True, exist_ok=True)
    video = src / f"long_{a.minutes:g}min_1080p30.mp4"
    built = None
    t0 = time.monotonic()
    if not (a.keep and video.exists()):
        clips = sorted((a.bench / "videos").glob("*.mp4"))
        built = build_long_file(clips, video, a.minutes)
    build_s = time.monotonic() - t0
    lib = a.work / "library"
    if lib.exists():
        import shutil

        shutil.rmtree(lib)
    res = run_index(src, lib, a.workers)
    sys.path.insert(0, str(REPO))
    from strived.store import Library

    with Library.open(lib) as L:
        vid = L.video_ids()[0] if L.video_ids() else None
        rec = L.get_video(vid) if vid else None
    video_s = a.minutes * 60
    fig = {"generated_file": f"{a.minutes:g} min, 1920x1080, 30 fps, H.264: the bench-dev clips concatenated "
                             "in turn and scaled (a generated file, not a recording)",
           "file_mb": round(video.stat().st_size / 2**20, 1), "build": built, "build_s": round(build_s, 1),
           "cpu_count": os.cpu_count(), "workers_requested": a.workers, **res,
           "realtime_x": round(video_s / res["wall_s"], 3) if res["rc"] == 0 else None,
           "segments": (rec.info.attrs.get("segments") if rec else None),
           "samples": len(rec.t) if rec else 0, "tracks": len(rec.tracks) if rec else 0}
    print(json.dumps(fig, indent=2))
    if a.json:
        a.json.write_text(json.dumps(fig, indent=2) + "\n", encoding="utf-8")
    return 0 if res["rc"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

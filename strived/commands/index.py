"""`strived index FOLDER --library LIB`: perceive a folder of dashcam videos into a library."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from ..errors import StrivedError
from ._common import default_library, positive_float


def register(subparsers) -> None:
    p = subparsers.add_parser("index", help="index a folder of videos (detect, track, range, ego motion)",
                              description="Index every video under FOLDER (mp4 mov mkv avi ts) into the "
                                          "library. Incremental and resumable: run it again after a crash, "
                                          "a Ctrl-C or new footage.")
    p.add_argument("folder", help="folder with videos (searched recursively)")
    p.add_argument("--library", "-L", "-l", default=default_library(),
                   help="library folder, created if missing (default: $STRIVED_LIBRARY or ./strived-library)")
    p.add_argument("--fps", type=positive_float(max_value=240.0), default=10.0,
                   help="sampling rate in frames per second, > 0 and at most 240 (default 10)")
    p.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    p.add_argument("--detector", default=None,
                   help="nanodet-g (default, offline), yolov3-tiny (offline), onnx:PATH (YOLO-style ONNX) or hf:DIR "
                        "(transformers object-detection folder)")
    p.add_argument("--ray", metavar="ADDRESS", default=None,
                   help="run perception on this Ray cluster with Ray Data ('local' starts one; HOST:6379 "
                        "joins a running cluster; videos must be on storage every node mounts at the same "
                        "path; see docs/scale.md)")
    p.add_argument("--ray-cpus", type=positive_float(max_value=256.0), default=1.0,
                   help="CPUs each video's perception task asks the cluster for (default 1)")
    p.add_argument("--ray-gpus", type=_gpus, default=0.0,
                   help="GPUs (or a fraction) each task asks for, e.g. 0.25 to share a GPU by four (default 0)")
    p.add_argument("--workers", type=int, default=0, metavar="N",
                   help="perception processes on this machine, several videos in flight (default 0: one "
                        "per CPU core, at most 8; 1: in this process)")
    p.add_argument("--stats-json", default=None, metavar="PATH",
                   help="write this run's figures (video seconds, wall seconds, per-stage seconds, workers, "
                        "device) as JSON; `strived bench index` reads it")
    p.add_argument("--retry-failed", action="store_true", help="retry files that failed before")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def _gpus(text: str) -> float:
    """argparse type: a GPU share per task, 0 or more (finite)."""
    import argparse
    import math

    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, found {text!r}") from None
    if not math.isfinite(v) or v < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, found {text}")
    return v


class _Bar:
    """A one-line progress bar on stderr (no dependencies)."""

    def __init__(self, stream=sys.stderr, width: int = 28):
        self.stream, self.width = stream, width
        self.last = 0.0
        self.videos = (0, 0)

    def __call__(self, ev) -> None:
        now = time.monotonic()
        if ev.stage == "videos":
            self.videos = (ev.done, ev.total)
        elif ev.stage == "frames":
            self.videos = (ev.extra.get("videos_done", self.videos[0]), ev.extra.get("videos_total", self.videos[1]))
            if now - self.last < 0.2 and ev.done < ev.total:
                return
        else:
            return
        self.last = now
        vd, vt = self.videos
        frac = (vd + (ev.fraction if ev.stage == "frames" else 0.0)) / vt if vt else 1.0
        fill = int(self.width * min(1.0, frac))
        name = (ev.item or "").rsplit("/", 1)[-1][-30:]
        self.stream.write(f"\r[{'#' * fill}{'.' * (self.width - fill)}] {vd}/{vt} videos {frac:6.1%} {name:<30}")
        self.stream.flush()

    def done(self) -> None:
        self.stream.write("\n")
        self.stream.flush()


def _write_stats(path: str, rep, text_s: float, note: str | None) -> None:
    """The figures of one run, for `strived bench index` (stage seconds are summed over workers)."""
    import json
    import os

    from ..perception.detect import resolve_device  # lazy: loads numpy

    stats = {"videos": len(rep.indexed), "failed": len(rep.failed), "video_s": round(rep.video_s, 3),
             "perception_wall_s": round(rep.elapsed_s, 3), "text_index_s": round(text_s, 3),
             "stage_s": {k: round(v, 3) for k, v in sorted(rep.timings_s.items())},
             "workers": rep.workers, "cpu_count": os.cpu_count(),
             "device": rep.device or resolve_device("auto", "nanodet-g"), "text_index_note": note}
    Path(path).write_text(json.dumps(stats, indent=2) + "\n", encoding="utf-8")


def run(args) -> int:
    from ..indexing.job import index_folder  # lazy: loads numpy
    from ..store.library import Library  # lazy: loads numpy

    # a mistyped footage folder creates nothing (no empty library left behind)
    if not Path(args.folder).is_dir():
        what = "is not a folder" if Path(args.folder).exists() else "does not exist"
        print(f"error: {args.folder} {what} (nothing was created)", file=sys.stderr)
        return 2
    try:
        lib = Library.open(args.library, create=True)
    except StrivedError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    try:  # never index into a read-only or damaged library (SQLite would go on writing pages)
        lib.ensure_writable()
    except StrivedError as e:
        lib.close()
        print(f"error: {e}", file=sys.stderr)
        return 2
    bar = None if args.quiet else _Bar()
    try:
        rep = index_folder(args.folder, lib, sample_fps=args.fps, detector=args.detector, device=args.device,
                           progress=bar, retry_failed=args.retry_failed, ray_address=args.ray,
                           ray_cpus=args.ray_cpus, ray_gpus=args.ray_gpus, workers=args.workers)
        t_text, note = time.perf_counter(), None
        if not rep.cancelled and len(lib):
            from ..engine import build_text_index  # lazy: loads numpy

            note = build_text_index(lib)  # BM25 texts, dense index, rule features (incremental)
            if note:
                print(f"note: {note}", file=sys.stderr)
        text_s = time.perf_counter() - t_text
        if not rep.cancelled and len(lib):
            from ..drives import refresh as refresh_drives  # lazy: loads numpy

            refresh_drives(lib)        # consecutive files of one camera -> drives (`strived drives`)
        if args.stats_json:
            _write_stats(args.stats_json, rep, text_s, note)
    except KeyboardInterrupt:
        if bar:
            bar.done()
        print("interrupted: finished videos are saved; run the same command again to resume", file=sys.stderr)
        return 130
    except FileNotFoundError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except StrivedError as e:
        if bar:
            bar.done()
        print(f"error: {e}", file=sys.stderr)
        return 1
    finally:
        lib.close()
    if bar:
        bar.done()
    print(rep.summary())
    for path, err in rep.failed:
        print(f"  FAILED {path}: {err.removeprefix(path + ': ')}", file=sys.stderr)
    for path, err in rep.skipped_failed:
        print(f"  not retried {path}: {err} (use --retry-failed)", file=sys.stderr)
    for old, new in rep.relinked:
        print(f"  moved {old} -> {new} (same content: relinked, not redone)", file=sys.stderr)
    for path in rep.missing:
        print(f"  missing {path} (indexed before; file gone)", file=sys.stderr)
    for path, why in rep.unreadable:
        print(f"  cannot read folder {path}: {why} (its videos were not indexed)", file=sys.stderr)
    if rep.missing or rep.missing_elsewhere:
        n = len(rep.missing) + rep.missing_elsewhere
        print(f"  {n} video{'s' if n > 1 else ''} of the library point to files that are gone: "
              "`strived relink OLD NEW` if they moved, `strived remove --missing` to drop them",
              file=sys.stderr)
    return 0 if rep.ok else 1

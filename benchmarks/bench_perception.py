"""Perception benchmark: per-stage speed on real clips, overlays to check by eye, ranging error on KITTI.

    .venv/bin/python benchmarks/bench_perception.py [--bench ../shared/data/bench-dev] [--clips N]
        [--overlays /tmp/perception_overlays] [--fps 10] [--json PATH]

Prints, per clip and overall: sampled frames, per-stage throughput (sampled frames per second of
stage time), wall time, real-time factor (video seconds / wall seconds) and peak RSS. Then the cut-in
check on kr_blackbox_test_video, then the ranging error on KITTI ground truth (boxes + GT depth in
the records, KITTI camera: f=721.5 px, c_x=609.6, horizon=172.9 px, camera height 1.65 m).
``--json PATH`` also writes the figures (keys: clips[], overall, stage_fps, peak_rss_mb,
kitti_ranging, tracks_per_clip, skipped_clips; a stage that took no time has frames/s null).
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path

import numpy as np

DEFAULT_CLIPS = ["kr_blackbox_test_video", "udacity_solidWhiteRight", "dad_test_pos_000487",
                 "dashcam_us_highway_overtake", "idd_mm_0003500_0003700", "ccd_000003"]
STAGES = ("decode", "detect", "track", "ranging", "ego_motion", "lanes", "attributes")


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def bench_clips(videos: Path, names: list[str], fps: float, overlays: Path | None, fig: dict,
                device: str = "auto", batch: int | None = None, overlap: bool | None = None) -> dict:
    from strived.perception.detect import make_detector
    from strived.perception.overlay import save_overlays
    from strived.perception.pipeline import PerceptionConfig, perceive_video

    from strived.perception.detect import DEFAULT_DETECTOR

    det = make_detector(DEFAULT_DETECTOR, device)
    cfg = PerceptionConfig(sample_fps=fps)
    if batch:
        cfg.batch_size = int(batch)
    fig["detector"] = dict(det.config)
    fig["batch_size"] = cfg.batch_size
    fig["overlap"] = overlap
    print(f"detector: {det.config}")
    tot = {s: 0.0 for s in STAGES}
    tot_n, tot_wall, tot_video = 0, 0.0, 0.0
    recs = {}
    for name in names:
        path = videos / f"{name}.mp4"
        if not path.exists():
            print(f"skip {name}: not found")
            fig.setdefault("skipped_clips", []).append(name)
            continue
        t0 = time.perf_counter()
        res = perceive_video(path, video_id=name, config=cfg, detector=det, overlap=overlap)
        wall = time.perf_counter() - t0
        video_s = res.duration_s + 1.0 / fps
        n = res.n_sampled
        stage_fps = {s: (n / res.timings_s[s] if res.timings_s.get(s) else float("inf")) for s in STAGES}
        print(f"{name:32s} {video_s:5.1f} s video, {n:4d} frames, wall {wall:5.1f} s, "
              f"RT x{video_s / wall:4.2f}, tracks {len(res.records.tracks):3d} | "
              + " ".join(f"{s}={stage_fps[s]:.0f}" for s in STAGES))
        fig.setdefault("clips", []).append(
            {"clip": name, "video_s": round(video_s, 3), "frames": n, "wall_s": round(wall, 3),
             "realtime_factor": round(video_s / wall, 4), "tracks": len(res.records.tracks),
             "stage_fps": {s: (round(v, 2) if np.isfinite(v) else None) for s, v in stage_fps.items()}})
        for s in STAGES:
            tot[s] += res.timings_s.get(s, 0.0)
        tot_n += n
        tot_wall += wall
        tot_video += video_s
        recs[name] = res.records
        if overlays:
            times = list(np.linspace(0.5, max(0.6, res.duration_s - 0.5), 4))
            if name == "kr_blackbox_test_video":
                times += [3.0, 3.5, 4.0, 4.4, 6.5, 8.0]
            save_overlays(path, res.records, overlays, times)
    print(f"\nOVERALL {tot_video:.1f} s of video, {tot_n} frames in {tot_wall:.1f} s: real-time factor "
          f"x{tot_video / max(tot_wall, 1e-9):.2f}, {tot_n / max(tot_wall, 1e-9):.1f} frames/s end to end")
    print("per-stage frames/s: " + ", ".join(f"{s} {tot_n / tot[s]:.0f}" for s in STAGES if tot[s] > 0))
    print(f"peak RSS {peak_rss_mb():.0f} MB")
    if tot_n:
        fig["overall"] = {"video_s": round(tot_video, 3), "frames": tot_n, "wall_s": round(tot_wall, 3),
                          "realtime_factor": round(tot_video / max(tot_wall, 1e-9), 4),
                          "fps_end_to_end": round(tot_n / max(tot_wall, 1e-9), 3)}
        fig["stage_fps"] = {s: round(tot_n / tot[s], 2) for s in STAGES if tot[s] > 0}
    fig["peak_rss_mb"] = round(peak_rss_mb(), 1)
    return recs


def cut_in_check(rec) -> None:
    """Print tracks ahead of the ego car (|loc_x| < 12 m, distance < 40 m) during 2-6 s."""
    print("\nkr_blackbox_test_video tracks during the cut-in (labelled 3.0-5.5 s):")
    for tr in rec.tracks:
        t = rec.t[tr.pos]
        m = (t >= 2.0) & (t <= 6.5)
        if m.sum() < 3:
            continue
        x, z = tr.fields["loc_x"][m], tr.fields["distance"][m]
        print(f"  track {tr.track_id} {tr.cls} {tr.attrs.get('color', '')}: "
              + ", ".join(f"t={a:.1f} x={b:+.1f} z={c:.0f}" for a, b, c in zip(t[m][::2], x[::2], z[::2])))
        if abs(x[-1]) < abs(x[0]) - 1.0:
            print(f"    -> loc_x moves toward 0 ({x[0]:+.1f} -> {x[-1]:+.1f} m) while ahead")


def kitti_ranging(records_dir: Path, max_distance_m: float = 40.0) -> dict:
    """Relative distance error per camera setting: {setting: {n, median_rel_err, p90_rel_err}}
    (medians null when no box was usable)."""
    from strived.perception.geometry import CameraModel, horizon_from_boxes, range_boxes
    from strived.records import VideoRecords

    kitti = CameraModel(1242, 375, 721.5, 609.6, 172.9, camera_height_m=1.65,
                        focal_source="config", horizon_source="config")
    rows = {"known camera": [], "estimated horizon": []}
    per_cls: dict[str, list[float]] = {}
    files = sorted(records_dir.glob("kitti_*.json"))
    for f in files:
        rec = VideoRecords.load(f)
        boxes, cls, gt = [], [], []
        for tr in rec.tracks:
            if tr.bbox is None:
                continue
            for k in range(len(tr)):
                d = tr.fields["distance"][k]
                if np.isfinite(d) and 0 < d < max_distance_m and np.isfinite(tr.bbox[k]).all():
                    boxes.append(tr.bbox[k])
                    cls.append(tr.cls)
                    gt.append(d)
        if not boxes:
            continue
        boxes, gt = np.array(boxes), np.array(gt)
        z, _ = range_boxes(boxes, cls, kitti)
        err = np.abs(z - gt) / gt
        rows["known camera"].extend(err[np.isfinite(err)])
        for c, e in zip(cls, err):
            if np.isfinite(e):
                per_cls.setdefault(c, []).append(e)
        hz = horizon_from_boxes(boxes, cls, kitti)
        cam = kitti.with_horizon(hz if hz is not None else 375 * 0.5, "estimated")
        z2, _ = range_boxes(boxes, cls, cam)
        e2 = np.abs(z2 - gt) / gt
        rows["estimated horizon"].extend(e2[np.isfinite(e2)])
    print(f"\nKITTI ranging (GT boxes + GT depth from {len(files)} records files, objects < {max_distance_m:.0f} m):")
    out: dict = {}
    for k, v in rows.items():
        v = np.array(v)
        if not len(v):
            print(f"  {k:18s}: n=0 (no KITTI records with boxes and ground-truth depth)")
            out[k] = {"n": 0, "median_rel_err": None, "p90_rel_err": None,
                      "reason": "no KITTI records with boxes and ground-truth depth"}
            continue
        print(f"  {k:18s}: n={len(v)}, median relative distance error {np.median(v):.3f}, "
              f"P90 {np.percentile(v, 90):.3f}")
        out[k] = {"n": int(len(v)), "median_rel_err": round(float(np.median(v)), 5),
                  "p90_rel_err": round(float(np.percentile(v, 90)), 5)}
    for c, v in sorted(per_cls.items()):
        print(f"    {c:12s} n={len(v):5d} median {np.median(v):.3f}")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bench", default=str(Path(__file__).resolve().parents[2] / "shared" / "data" / "bench-dev"))
    ap.add_argument("--clips", type=int, default=len(DEFAULT_CLIPS))
    ap.add_argument("--all", action="store_true", help="every clip in videos/")
    ap.add_argument("--fps", type=float, default=10.0)
    ap.add_argument("--overlays", default="/tmp/perception_overlays")
    ap.add_argument("--json", default=None, help="also write the figures to this JSON file")
    ap.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"),
                    help="where the detector runs (auto: a CUDA GPU when there is one)")
    ap.add_argument("--batch", type=int, default=None, help="frames per detector call (default: the pipeline's)")
    ap.add_argument("--overlap", default="auto", choices=("auto", "on", "off"),
                    help="detector one batch ahead in a second thread (auto: when it runs on CUDA)")
    a = ap.parse_args(argv)
    bench = Path(a.bench)
    if not bench.exists():
        print(f"no benchmark at {bench}", file=sys.stderr)
        return 2
    names = sorted(p.stem for p in (bench / "videos").glob("*.mp4")) if a.all else DEFAULT_CLIPS[: a.clips]
    fig: dict = {"fps": a.fps}
    recs = bench_clips(bench / "videos", names, a.fps, Path(a.overlays) if a.overlays else None, fig, a.device, a.batch,
                       overlap={"auto": None, "on": True, "off": False}[a.overlap])
    if "kr_blackbox_test_video" in recs:
        cut_in_check(recs["kr_blackbox_test_video"])
    fig["kitti_ranging"] = kitti_ranging(bench / "records")
    fig["tracks_per_clip"] = {k: len(r.tracks) for k, r in recs.items()}
    json.dump(fig["tracks_per_clip"], sys.stdout)
    print()
    if a.json:
        Path(a.json).write_text(json.dumps(fig, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {a.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

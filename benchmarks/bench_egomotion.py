"""Ego-motion benchmark: speed, acceleration and yaw rate from video against KITTI ground truth.

    .venv/bin/python benchmarks/bench_egomotion.py [--data ../shared/data] [--detector nanodet-g|yolov3-tiny|none]
        [--fps 10] [--json PATH]

Runs the real pipeline (``perceive_video``: decode, detector, tracker, ego motion) on each sequence
of ``DATA/egomotion/`` twice:

  (a) "calib":     camera.json from the KITTI calibration (focal, c_x, horizon = c_y, height 1.65 m);
  (b) "estimated": no camera.json (assumed 90 deg FOV, 1.3 m height, horizon from cars/lanes/flow).

Prints per sequence and camera: speed MAE (m/s), speed bias (median error), accel MAE (m/s^2),
yaw-rate MAE (rad/s), coverage (share of sampled frames with a value) and the median speed
confidence, against the ground truth of the sampled frames (``gt.csv`` row = the frame's index).

``--degrade 0.5:8`` runs the same on copies re-encoded the way cheap dashcams and re-uploaded clips
look (SCALE times the resolution, a 0.7 px blur, JPEG quality Q per frame; built in a temporary
folder, same ground truth): a synthetic degradation of the real frames that reproduces the
"no road texture" / "not a flat road" failures of compressed real dashcam clips with ground truth.
``--weather rain`` / ``--weather tunnel`` runs it on copies with synthetic heavy rain (haze, streaks new
in every frame, blurred drops sliding down the windscreen) or a tunnel (dark, orange cast, ceiling lamps
sweeping outwards), same ground truth; every run also reports the largest speed error among values shown
with confidence >= 0.5 ("never a confident wrong number").
``run(data_dir) -> dict`` returns the same numbers (``strived bench``). Skips when the data is absent.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from pathlib import Path

import numpy as np

SEQUENCES = ("kitti_raw_0005", "kitti_odometry_06", "kitti_odometry_01")
KITTI_CAMERA_HEIGHT_M = 1.65
DEGRADE_BLUR_PX = 0.7          # --degrade: Gaussian blur (px of the scaled copy) before JPEG
GT_COLUMNS = {"speed": ("vf_mps", "speed_mps"), "accel": ("af_mps2", "accel_mps2"),
              "yaw_rate": ("wu_yaw_rate_left_rps", "yaw_rate_left_rps")}
TARGETS = {"speed_mae": 1.0, "coverage": 0.8, "yaw_rate_mae": 0.03}


def egomotion_dir(data_dir: str | Path) -> Path:
    """``data_dir`` may be the shared data root or its ``egomotion`` folder."""
    p = Path(data_dir)
    return p if (p / SEQUENCES[0]).is_dir() or p.name == "egomotion" else p / "egomotion"


def read_gt(seq_dir: Path) -> dict[str, np.ndarray]:
    with open(seq_dir / "gt.csv", newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    out = {"frame": np.array([int(r["frame"]) for r in rows]), "t_s": np.array([float(r["t_s"]) for r in rows])}
    for field, names in GT_COLUMNS.items():
        col = next(c for c in names if c in rows[0])
        out[field] = np.array([float(r[col]) for r in rows])
    return out


def read_kitti_projection(seq_dir: Path) -> np.ndarray:
    """The 3x4 projection matrix of the camera the video shows (P_rect_02 for raw, P0 for odometry)."""
    for name, key in (("calib_cam_to_cam.txt", "P_rect_02:"), ("calib.txt", "P0:")):
        f = seq_dir / name
        if not f.exists():
            continue
        lines = f.read_text(encoding="utf-8").splitlines()
        for ln in lines:
            if ln.startswith(key):
                return np.array([float(v) for v in ln.split()[1:13]]).reshape(3, 4)
        for ln in lines:  # odometry calib files without keys: first line is P0
            vals = ln.split()
            if len(vals) >= 12:
                try:
                    return np.array([float(v) for v in vals[:12]]).reshape(3, 4)
                except ValueError:
                    continue
    raise FileNotFoundError(f"no KITTI calibration in {seq_dir}")


def kitti_camera_config(seq_dir: Path, width: int) -> dict:
    P = read_kitti_projection(seq_dir)
    return {"focal_px": float(P[0, 0]), "cx": float(P[0, 2]), "horizon_y": float(P[1, 2]),
            "camera_height_m": KITTI_CAMERA_HEIGHT_M, "width": int(width)}


def calibration_width(seq_dir: Path, video_width: int) -> int:
    """Width of the images the calibration is in: the recorded images' (meta.json "width"), so
    that a re-encoded copy at another size (``--degrade``) gets it rescaled by camera.json."""
    meta = seq_dir / "meta.json"
    if meta.is_file():
        try:
            return int(json.loads(meta.read_text(encoding="utf-8")).get("width") or video_width)
        except (ValueError, TypeError):
            return int(video_width)
    return int(video_width)


class NoDetector:
    """A detector that finds nothing (to time / test ego motion without the detector's boxes)."""

    name = "none"
    device = "cpu"
    config = {"detector": "none"}

    def detect(self, frames):
        return [np.zeros((0, 6), np.float32) for _ in frames]


def _mae(est: np.ndarray, gt: np.ndarray) -> float:
    ok = np.isfinite(est) & np.isfinite(gt)
    return float(np.mean(np.abs(est[ok] - gt[ok]))) if ok.any() else float("nan")


def evaluate_sequence(seq_dir: Path, camera: str, detector, fps: float = 10.0) -> dict:
    from strived.perception.pipeline import PerceptionConfig, perceive_video
    from strived.perception.video import probe_video

    gt = read_gt(seq_dir)
    video = seq_dir / "video.mp4"
    probe = probe_video(video)
    cam_cfg = kitti_camera_config(seq_dir, calibration_width(seq_dir, probe.width)) if camera == "calib" else {}
    cfg = PerceptionConfig(sample_fps=fps, telemetry=False) if "telemetry" in PerceptionConfig.__dataclass_fields__ \
        else PerceptionConfig(sample_fps=fps)
    t0 = time.perf_counter()
    # camera_config={} means "no camera.json": perceive_video falls back to the estimated camera
    res = perceive_video(video, video_id=seq_dir.name, config=cfg, detector=detector,
                         camera_config=cam_cfg, root=seq_dir)
    wall = time.perf_counter() - t0
    rec = res.records
    rows = np.searchsorted(gt["frame"], rec.frame_idx)
    rows = np.clip(rows, 0, len(gt["frame"]) - 1)
    out = {"frames": int(len(rec.t)), "wall_s": round(wall, 2),
           "ego_ms_per_frame": round(1000.0 * res.timings_s.get("ego_motion", 0.0) / max(1, len(rec.t)), 1)}
    for field in ("speed", "accel", "yaw_rate"):
        est = np.asarray(rec.ego[field], np.float64)
        out[f"{field}_mae"] = _mae(est, gt[field][rows])
        out[f"{field}_coverage"] = float(np.isfinite(est).mean()) if len(est) else 0.0
    sp = np.asarray(rec.ego["speed"], np.float64)
    ok = np.isfinite(sp)
    out["speed_bias"] = float(np.median(sp[ok] - gt["speed"][rows][ok])) if ok.any() else float("nan")
    out["coverage"] = out["speed_coverage"]
    conf = np.asarray(rec.ego.get("speed_conf", np.full(len(sp), np.nan)), np.float64)
    out["speed_conf_median"] = float(np.nanmedian(conf)) if np.isfinite(conf).any() else float("nan")
    sure = ok & (np.nan_to_num(conf) >= 0.5)
    out["speed_max_err_conf50"] = float(np.max(np.abs(sp[sure] - gt["speed"][rows][sure]))) if sure.any() \
        else float("nan")
    cam = rec.info.attrs.get("camera", {})
    out["camera"] = {k: cam.get(k) for k in ("focal_px", "cx", "horizon_y", "camera_height_m", "horizon_source")}
    out["ego_horizon"] = rec.info.attrs.get("ego_motion", {})
    return out


class HeavyRain:
    """Synthetic heavy rain over real frames: grey haze (contrast lost), bright streaks that are new in
    every frame, and blurred drops on the windscreen that slide down slowly (a synthetic degradation)."""

    def __init__(self, seed: int = 0, n_streaks: int = 1800, n_drops: int = 120):
        self.rng = np.random.default_rng(seed)
        self.n_streaks, self.n_drops = n_streaks, n_drops
        self.drops = None

    def __call__(self, frame: np.ndarray, k: int) -> np.ndarray:
        import cv2

        h, w = frame.shape[:2]
        rng = self.rng
        if self.drops is None:
            self.drops = np.stack([rng.uniform(0, w, self.n_drops), rng.uniform(0, h, self.n_drops),
                                   rng.uniform(4, 18, self.n_drops)], 1)
        g = frame.astype(np.float32) * 0.65 + 0.35 * 170.0
        streaks = np.zeros((h, w), np.float32)
        for x, y, n in zip(rng.uniform(0, w, self.n_streaks), rng.uniform(0, h, self.n_streaks),
                           rng.uniform(15, 45, self.n_streaks)):
            cv2.line(streaks, (int(x), int(y)), (int(x + 0.25 * n), int(y + n)), 1.0, 1, cv2.LINE_AA)
        g += 90.0 * cv2.GaussianBlur(streaks, (0, 0), 0.8)[..., None]
        lens = np.zeros((h, w), np.float32)
        for x, y, r in self.drops:
            cv2.circle(lens, (int(x), int((y + 2.0 * k) % h)), int(r), 1.0, -1, cv2.LINE_AA)
        g = g * (1 - lens[..., None]) + cv2.GaussianBlur(g, (0, 0), 6) * lens[..., None]
        return np.clip(g, 0, 255).astype(np.uint8)


class Tunnel:
    """Synthetic tunnel over real frames: very dark, orange cast, sensor noise, bright ceiling lamps
    sweeping outwards from the vanishing point in every frame."""

    def __init__(self, seed: int = 1):
        self.rng = np.random.default_rng(seed)

    def __call__(self, frame: np.ndarray, k: int) -> np.ndarray:
        import cv2

        h, w = frame.shape[:2]
        g = frame.astype(np.float32) * np.array([0.10, 0.16, 0.22]) + self.rng.normal(0, 3, frame.shape)
        for j in range(6):
            s = (k * 0.15 + j / 6) % 1.0
            for side in (-1, 1):
                cv2.circle(g, (int(w / 2 + side * s * s * w * 0.6), max(0, int(h * 0.35 * (1 - s * s)))),
                           int(3 + 20 * s * s), (120, 200, 255), -1)
        return np.clip(g, 0, 255).astype(np.uint8)


WEATHER = {"rain": HeavyRain, "tunnel": Tunnel}


def degrade_copy(root: Path, dst: Path, scale: float, quality: int, blur_px: float = DEGRADE_BLUR_PX,
                 weather: str | None = None) -> Path:
    """Copies of the sequences at ``scale`` x the resolution, blurred (``blur_px`` > 0) and JPEG-compressed
    per frame, with ``weather`` (a key of WEATHER) drawn over the frames first."""
    import shutil

    import cv2

    for seq in SEQUENCES:
        out = dst / seq
        out.mkdir(parents=True, exist_ok=True)
        for f in (root / seq).iterdir():
            if f.is_file() and f.name != "video.mp4":
                shutil.copy(f, out / f.name)
        cap = cv2.VideoCapture(str(root / seq / "video.mp4"))
        fps = cap.get(cv2.CAP_PROP_FPS) or 10.0
        writer = None
        draw = WEATHER[weather]() if weather else None
        k = 0
        try:
            while True:
                ok, frame = cap.read()
                if not ok:
                    break
                if draw is not None:
                    frame = draw(frame, k)
                k += 1
                if scale != 1.0:
                    frame = cv2.resize(frame, None, fx=scale, fy=scale, interpolation=cv2.INTER_AREA)
                if blur_px > 0:
                    frame = cv2.GaussianBlur(frame, (0, 0), blur_px)
                frame = cv2.imdecode(cv2.imencode(".jpg", frame, [cv2.IMWRITE_JPEG_QUALITY, int(quality)])[1], 1)
                if writer is None:
                    writer = cv2.VideoWriter(str(out / "video.mp4"), cv2.VideoWriter_fourcc(*"mp4v"), fps,
                                             (frame.shape[1], frame.shape[0]))
                writer.write(frame)
        finally:
            cap.release()
            if writer is not None:
                writer.release()
    return dst


def run(data_dir: str | Path, detector: str = "nanodet-g", fps: float = 10.0,
        degrade: tuple[float, int] | None = None, weather: str | None = None) -> dict:
    """Evaluate every sequence with (a) the KITTI camera and (b) the estimated camera
    (on degraded copies with ``degrade = (scale, jpeg_quality)`` and/or ``weather``)."""
    root = egomotion_dir(data_dir)
    if not all((root / s / "video.mp4").exists() for s in SEQUENCES):
        return {"status": "skipped", "reason": f"KITTI ego-motion sequences not found under {root}"}
    if degrade is not None or weather is not None:
        import tempfile

        # weather alone: full size, no extra blur, near-lossless JPEG
        scale, quality, blur = (*degrade, DEGRADE_BLUR_PX) if degrade is not None else (1.0, 95, 0.0)
        with tempfile.TemporaryDirectory(prefix="strived-egodeg-") as tmp:
            res = run(degrade_copy(root, Path(tmp), scale, quality, blur, weather=weather), detector, fps)
        res["degraded"] = {"scale": scale, "jpeg_quality": quality, "blur_px": blur, "weather": weather,
                           "note": "synthetic degradation of the real KITTI frames"}
        return res
    if detector == "none":
        det = NoDetector()
    else:
        from strived.perception.detect import make_detector

        det = make_detector(detector, "cpu")
    results: dict = {"status": "ok", "detector": detector, "fps": fps, "targets": TARGETS, "sequences": {}}
    for camera in ("calib", "estimated"):
        for seq in SEQUENCES:
            r = evaluate_sequence(root / seq, camera, det, fps)
            results["sequences"].setdefault(seq, {})[camera] = r
    for camera in ("calib", "estimated"):
        rs = [results["sequences"][s][camera] for s in SEQUENCES]
        results[f"meets_targets_{camera}"] = bool(all(
            r["speed_mae"] <= TARGETS["speed_mae"] and r["coverage"] >= TARGETS["coverage"]
            and r["yaw_rate_mae"] <= TARGETS["yaw_rate_mae"] for r in rs))
    return results


def print_results(res: dict) -> None:
    if res.get("status") != "ok":
        print(f"skip: {res.get('reason')}")
        return
    if res.get("degraded"):
        d = res["degraded"]
        print(f"DEGRADED copies (synthetic): {d['scale']} x resolution, blur {d['blur_px']} px, "
              f"JPEG quality {d['jpeg_quality']}" + (f", weather: {d['weather']}" if d.get("weather") else ""))
    print(f"detector {res['detector']}, sampled at {res['fps']} fps; targets: speed MAE <= "
          f"{TARGETS['speed_mae']} m/s, coverage >= {TARGETS['coverage']:.0%}, yaw-rate MAE <= "
          f"{TARGETS['yaw_rate_mae']} rad/s")
    hdr = (f"{'sequence':20s} {'camera':9s} {'speed MAE':>9s} {'bias':>6s} {'accel MAE':>9s} "
           f"{'yaw MAE':>8s} {'coverage':>8s} {'conf':>5s} {'max|err|@conf>=.5':>17s} {'horizon':>8s} {'ego ms/fr':>9s}")
    print(hdr)
    for camera in ("calib", "estimated"):
        for seq, by_cam in res["sequences"].items():
            r = by_cam[camera]
            hz = r.get("ego_horizon", {}).get("horizon_y")
            print(f"{seq:20s} {camera:9s} {r['speed_mae']:9.3f} {r['speed_bias']:+6.2f} {r['accel_mae']:9.3f} "
                  f"{r['yaw_rate_mae']:8.4f} {r['coverage']:8.1%} {r['speed_conf_median']:5.2f} "
                  f"{r.get('speed_max_err_conf50', float('nan')):17.2f} "
                  f"{(hz if hz is not None else float('nan')):8.1f} {r['ego_ms_per_frame']:9.1f}")
        print(f"  {camera}: meets targets on every sequence: {res[f'meets_targets_{camera}']}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    here = Path(__file__).resolve().parents[1]
    ap.add_argument("--data", default=str(here.parent / "shared" / "data"))
    ap.add_argument("--detector", default="nanodet-g", help="nanodet-g (default), yolov3-tiny or none")
    ap.add_argument("--fps", type=float, default=10.0)
    ap.add_argument("--json", default=None, help="write the numbers to this JSON file")
    ap.add_argument("--degrade", default=None, metavar="SCALE:QUALITY",
                    help="run on re-encoded copies, e.g. 0.5:8 = half resolution, JPEG quality 8")
    ap.add_argument("--weather", default=None, choices=sorted(WEATHER),
                    help="run on copies with synthetic heavy rain or a tunnel drawn over the frames")
    args = ap.parse_args()
    sys.path.insert(0, str(here))
    degrade = None
    if args.degrade:
        try:
            sc, qu = args.degrade.split(":")
            degrade = (float(sc), int(qu))
            if not (0.05 <= degrade[0] <= 1.0 and 1 <= degrade[1] <= 100):
                raise ValueError
        except ValueError:
            ap.error("--degrade takes SCALE:QUALITY with 0.05 <= SCALE <= 1 and 1 <= QUALITY <= 100, e.g. 0.5:8")
    res = run(args.data, detector=args.detector, fps=args.fps, degrade=degrade, weather=args.weather)
    print_results(res)
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=1, default=float), encoding="utf-8")
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()

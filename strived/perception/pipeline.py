"""One video in, one `VideoRecords` out: decode -> detect -> track -> range -> lanes -> ego -> attributes.

Frames stream through in small batches (memory stays flat); per-object fields are computed at the
end of the video, when the camera's horizon can be estimated from everything seen and each track's
series can be smoothed over time.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from ..jobs import CancelFn, ProgressFn, check_cancel, report
from . import attributes, signals
from .detect import CLASSES, DEFAULT_DETECTOR, Detector, make_detector
from .ego.estimator import EgoMotionEstimator
from .geometry import (CameraModel, horizon_from_boxes, lane_rel_from_offset, load_camera_config,
                       range_boxes, smooth_series)
from .lanes import LaneObservation, detect_lanes, lane_rel_from_lines
from .shots import ShotCuts, split_at_cuts
from .track import ByteTracker
from .video import iter_frames, probe_video

PERCEPTION_VERSION = 9   # 4: tracks and ego pairs do not span shot cuts (shots.py); 5: road fits judged
                         # against the noise floor (ego.noise_floor.fit_ratio: compressed video keeps its speed);
                         # 6: ... only where the floor's flow agrees with the plane's (rain: no wrong speed);
                         # 7: NanoDet's near pass (vehicles at contact range); "stopped" only on scenery;
                         # 8: no vehicle yaw where the camera is shaken (jolt); ego series held, not
                         # extrapolated, beyond the first/last accepted fit; 9: the speed the
                         # dashcam prints on the frame, read by OCR (burnin.py)


@dataclass
class PerceptionConfig:
    """Settings that change what perception produces (stored with every indexed video)."""

    sample_fps: float = 10.0
    detector: str = DEFAULT_DETECTOR
    device: str = "auto"
    batch_size: int = 4
    work_width: int = 640          # width of the grayscale copy used for optical flow and lanes
    min_track_hits: int = 3        # tracks seen on fewer sampled frames are dropped as noise
    lost_buffer_s: float = 1.5     # how long a lost track may come back with the same id
    lanes: bool = True
    ego_speed: bool = True         # publish ego speed/accel estimated from the road (perception/ego/)
    smooth_window_s: float = 0.35  # per-track smoothing of distance / lateral offset ("median" filter)
    telemetry: bool = True         # read the camera's own GPS (NMEA/GPX sidecar, GoPro GPMF) when present
    signal_filter: str = "robust"  # "robust": Kalman/RTS + track quality + lane hysteresis (signals.py);
    #                                "median": the v1 median+mean window (kept for measurement)
    burnin: bool = True            # read a speed printed on the frame (tesseract OCR, when installed)
    near_pass: bool = True         # NanoDet-g: also detect at 320 px, for vehicles at contact range
    thumbnail_width: int = 320
    max_color_samples: int = 8

    def to_dict(self) -> dict:
        return {"perception_version": PERCEPTION_VERSION, **asdict(self)}


def detector_options(cfg: PerceptionConfig) -> dict:
    """Constructor options of ``cfg.detector`` that the config sets (the NanoDet near pass)."""
    if not cfg.near_pass and (cfg.detector or DEFAULT_DETECTOR) == "nanodet-g":
        return {"near_width": 0}
    return {}


@dataclass
class PerceptionResult:
    """What perceiving one video produced."""

    records: object                 # strived.records.VideoRecords
    thumbnail_jpeg: bytes | None
    thumbnail_size: tuple[int, int] | None
    timings_s: dict = field(default_factory=dict)
    n_sampled: int = 0
    duration_s: float = 0.0


class _Timer:
    def __init__(self):
        self.s: dict[str, float] = {}

    def add(self, stage: str, t0: float) -> float:
        now = time.perf_counter()
        self.s[stage] = self.s.get(stage, 0.0) + now - t0
        return now


def perceive_video(path: str | os.PathLike, *, video_id: str | None = None,
                   config: PerceptionConfig | None = None, detector: Detector | None = None,
                   camera_config: dict | None = None, root: str | os.PathLike | None = None,
                   progress: ProgressFn = None, cancel: CancelFn = None,
                   overlap: bool | None = None,
                   time_range: tuple[float, float] | None = None) -> PerceptionResult:
    """Run perception on one video file and return its records, thumbnail and stage timings.

    ``overlap``: the detector works on the next batch in a second thread while this one runs ego
    motion, tracking and the rest on the current batch (same results, batch order kept; the
    network and OpenCV release the GIL). ``None`` (default): only when the detector runs on a CUDA
    GPU; on the CPU both stages already keep every core busy (measured on 2 cores: no gain).

    ``camera_config``: a camera.json dict; when None the nearest ``camera.json`` between the video's
    folder and ``root`` is used, else the camera is estimated. Raises ``VideoDecodeError`` for files
    that cannot be decoded and ``Cancelled`` when ``cancel()`` turns true (checked every batch).

    ``time_range``: (start, end) in seconds: perceive only the frames in that range (one segment
    of a long file, `long_file.py`), as if the video held only those; times stay the file's.
    """
    import cv2

    from ..records import EGO_FIELDS, OBJECT_FIELDS, Track, VideoInfo, VideoRecords

    cfg = config or PerceptionConfig()
    path = Path(path)
    probe = probe_video(path)
    det = detector or make_detector(cfg.detector, cfg.device, **detector_options(cfg))
    if hasattr(det, "reset"):  # a detector reused across videos plans from this video's frames only
        det.reset()
    cam_cfg = camera_config if camera_config is not None else load_camera_config(path, root)
    W, H = probe.width, probe.height
    cam = CameraModel.from_config(W, H, cam_cfg) if cam_cfg else CameraModel.from_frame_size(W, H)
    tracker = ByteTracker(lost_buffer_frames=max(1, int(round(cfg.lost_buffer_s * cfg.sample_fps))),
                          **getattr(det, "tracker_params", {}))  # score thresholds suited to this detector
    ego = EgoMotionEstimator()
    burn = None
    if cfg.burnin:
        from .burnin import BurnInReader

        burn = BurnInReader()
    shots = ShotCuts()
    timer = _Timer()

    frame_idx: list[int] = []
    t_list: list[float] = []
    obs_pos: list[int] = []
    obs_tid: list[int] = []
    obs_det: list[np.ndarray] = []
    lane_obs: list[LaneObservation | None] = []
    brightness: list[float] = []
    color: dict[int, list[np.ndarray]] = {}
    thumb: tuple[float, np.ndarray] | None = None
    thumb_t = 0.3 * probe.duration_s
    expected = _expected_frames(probe.duration_s, cfg.sample_fps, time_range)

    def detect(batch) -> list[np.ndarray]:
        t0 = time.perf_counter()
        dets = det.detect([f.image for f in batch])
        timer.add("detect", t0)
        return dets

    def process(batch, dets) -> None:
        nonlocal thumb
        t0 = time.perf_counter()
        for f, d in zip(batch, dets):
            j = len(t_list)
            frame_idx.append(f.frame_idx)
            t_list.append(f.t_s)
            scale = min(1.0, cfg.work_width / f.image.shape[1])
            small = cv2.resize(f.image, None, fx=scale, fy=scale, interpolation=cv2.INTER_AREA) \
                if scale < 1.0 else f.image
            gray = cv2.cvtColor(small, cv2.COLOR_BGR2GRAY)
            ego.feed(gray, f.t_s, d[:, :4], cam, scale, classes=d[:, 5], scores=d[:, 4])
            shots.feed(small, d[:, :4] * scale)
            t0 = timer.add("ego_motion", t0)
            # camera-motion compensation: the ego estimator's previous->current frame warp
            pairs = tracker.update(d, warp=getattr(ego, "last_warp", None))
            for tid, di in pairs:
                obs_pos.append(j)
                obs_tid.append(tid)
                obs_det.append(d[di])
            t0 = timer.add("track", t0)
            lane_obs.append(detect_lanes(gray, cam.horizon_y, scale) if cfg.lanes else None)
            t0 = timer.add("lanes", t0)
            brightness.append(attributes.upper_brightness(gray))
            for tid, di in pairs:
                votes = color.setdefault(tid, [])
                if len(votes) < cfg.max_color_samples and (len(votes) == 0 or j % 3 == 0):
                    v = attributes.color_votes(f.image, d[di], CLASSES[int(d[di, 5])])
                    if v is not None:
                        votes.append(v)
            if thumb is None or abs(f.t_s - thumb_t) < abs(thumb[0] - thumb_t):
                thumb = (f.t_s, f.image)
            t0 = timer.add("attributes", t0)
            if burn is not None:
                burn.feed(f.image, f.t_s)
                t0 = timer.add("burnin", t0)

    from concurrent.futures import ThreadPoolExecutor

    if overlap is None:
        overlap = getattr(det, "device", "cpu") == "cuda"
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="strived-detect") if overlap else None
    pending = None   # (batch, detections or their future) sent to the detector, not processed yet

    def advance(batch) -> None:
        """Send ``batch`` to the detector and process the batch sent before it."""
        nonlocal pending
        sent = None
        if batch:
            sent = (batch, pool.submit(detect, batch) if pool is not None else detect(batch))
        if pending is not None:
            done, dets = pending
            process(done, dets.result() if pool is not None else dets)
        pending = sent

    try:
        batch = []
        t0 = time.perf_counter()
        for f in _frames(path, cfg.sample_fps, probe, time_range):
            timer.add("decode", t0)
            batch.append(f)
            if len(batch) >= cfg.batch_size:
                check_cancel(cancel)
                advance(batch)
                batch = []
                report(progress, "frames", len(t_list), max(expected, len(t_list)), item=str(path))
            t0 = time.perf_counter()
        timer.add("decode", t0)
        check_cancel(cancel)
        advance(batch)
        advance([])
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)   # at most the one batch in flight
    report(progress, "frames", len(t_list), len(t_list), item=str(path))

    t0 = time.perf_counter()
    t_arr = np.asarray(t_list, dtype=np.float64)
    n = len(t_arr)
    obs_pos_a = np.asarray(obs_pos, dtype=np.int64)
    obs_tid_a = np.asarray(obs_tid, dtype=np.int64)
    dets_a = np.asarray(obs_det, dtype=np.float32).reshape(-1, 6)
    # an edited clip: no track and no ego frame pair spans a cut between two shots
    cuts = shots.cuts()
    ego.mark_cuts(cuts)
    obs_tid_a, origin = split_at_cuts(obs_pos_a, obs_tid_a, cuts,
                                      next_id=int(obs_tid_a.max()) + 1 if len(obs_tid_a) else 1)
    confirmed = set(tracker.confirmed_ids) | {new for new, old in origin.items() if old in tracker.confirmed_ids}
    for new, old in origin.items():
        if old in color:
            color[new] = color[old]
    sample_dt = 1.0 / cfg.sample_fps if cfg.sample_fps > 0 else 0.1
    quality: dict[int, dict] = {}
    for tid in sorted(confirmed):
        m = obs_tid_a == tid
        if int(m.sum()) >= cfg.min_track_hits:
            quality[tid] = signals.track_quality(t_arr, obs_pos_a[m], dets_a[m, 4], sample_dt)
    keep_ids = [tid for tid, q in quality.items()
                if cfg.signal_filter != "robust" or signals.publishable(q)]
    track_cls = {tid: CLASSES[tracker.track_class(origin.get(tid, tid))] for tid in keep_ids}

    # Horizon: camera.json > cars standing on the road > lane vanishing point > default.
    if cam.horizon_source != "config":
        keep_mask = np.isin(obs_tid_a, keep_ids)
        hz = horizon_from_boxes(dets_a[keep_mask, :4], [track_cls[t] for t in obs_tid_a[keep_mask]], cam)
        source = "cars"
        if hz is None:
            vps = [o.vanishing_point() for o in lane_obs if o is not None]
            vps = [v[1] for v in vps if v is not None and 0.2 * H < v[1] < 0.8 * H]
            hz, source = (float(np.median(vps)), "lanes") if len(vps) >= 10 else (None, "default")
        if hz is not None:
            cam = cam.with_horizon(float(np.clip(hz, 0.25 * H, 0.75 * H)), source)
    lanes_per_frame = _smooth_lanes(t_arr, lane_obs)

    tracks = []
    for new_id, tid in enumerate(keep_ids, start=1):
        m = obs_tid_a == tid
        pos = obs_pos_a[m]
        d = dets_a[m]
        cls_name = track_cls[tid]
        z, x = range_boxes(d[:, :4], [cls_name] * len(d), cam)
        tt = t_arr[pos]
        if cfg.signal_filter == "robust":
            z, x = signals.smooth_track_fields(tt, z, x)
        else:
            z = smooth_series(tt, z, cfg.smooth_window_s, log=True)
            x = smooth_series(tt, x, cfg.smooth_window_s)
        lane = lane_rel_from_offset(x, cam.lane_width_m)
        xc, yb = 0.5 * (d[:, 0] + d[:, 2]), d[:, 3]
        for k, p in enumerate(pos):
            lines = lanes_per_frame[p]
            if lines is not None and yb[k] > cam.horizon_y + 2:
                (la, lb), (ra, rb) = lines
                width_m = ((ra - la) * yb[k] + rb - lb) * cam.camera_height_m / (yb[k] - cam.horizon_y)
                if 2.5 <= width_m <= 5.0:  # a plausible ego lane, not a crossing's stripes
                    lr = lane_rel_from_lines(xc[k:k + 1], yb[k:k + 1], *lines)[0]
                    if np.isfinite(lr):
                        lane[k] = lr
        lane = np.round(smooth_series(tt, lane, 0.5))
        if cfg.signal_filter == "robust":
            lane = signals.lane_with_hysteresis(tt, lane)
        fields = {"distance": z, "loc_x": x, "loc_z": z, "lane_rel": lane,
                  "bbox_area": (d[:, 2] - d[:, 0]) * (d[:, 3] - d[:, 1]), "score": d[:, 4]}
        attrs = {"quality": quality[tid]}
        col = attributes.dominant_color(color.get(tid, []))
        if col:
            attrs["color"] = col
        tracks.append(Track(track_id=new_id, cls=cls_name, pos=pos.astype(np.int32),
                            fields={f: np.asarray(fields[f], np.float32) for f in OBJECT_FIELDS},
                            bbox=d[:, :4].astype(np.float32), attrs=attrs))
    t0 = timer.add("ranging", t0)
    ego_series = ego.series(cam)
    if not cfg.ego_speed:
        ego_series = _without_speed(ego_series)
    timer.add("ego_motion", t0)

    lanes_found = sum(1 for o in lane_obs if o is not None and o.left is not None and o.right is not None)
    video_attrs = {
        "daynight": attributes.day_night(brightness),
        "camera": cam.to_dict(),
        "perception": {**cfg.to_dict(), "detector_config": getattr(det, "config", {"detector": det.name})},
        "lanes_found_frac": round(lanes_found / max(1, n), 3),
        "rotation_deg": probe.rotation_deg,
        "shot_cuts_s": [round(float(t_arr[j]), 3) for j in cuts],
        "codec": probe.codec,
        "speed_source": "video_ground_plane" if ego_series["status"]["speed"]["estimated"] else None,
        "ego_motion": {"horizon_y": round(float(ego_series["horizon_y"]), 2),
                       "horizon_source": ego_series["horizon_source"],
                       **(ego_series.get("camera_estimate") or {})},
    }
    fps = probe.fps if probe.fps > 0 else (1.0 / float(np.median(np.diff(t_arr))) if n > 1 else 1.0)
    info = VideoInfo(id=video_id or path.stem, path=str(path.resolve()), fps=float(fps),
                     n_frames=int(probe.n_frames or (frame_idx[-1] + 1 if frame_idx else 0)),
                     width=W, height=H, source=None, attrs=video_attrs)
    rec = VideoRecords(info=info, frame_idx=np.asarray(frame_idx, np.int64), t=t_arr,
                       ego={k: np.asarray(ego_series[k], np.float64) for k in EGO_FIELDS if k in ego_series},
                       tracks=tracks)
    _merge_telemetry(rec, path, cam_cfg, cfg, ego_series.get("status") or {})
    if burn is not None:
        from .burnin import merge_burnin

        merge_burnin(rec, burn.finish(), rec.info.attrs["availability"])

    jpeg, size = None, None
    if thumb is not None:
        img = thumb[1]
        s = min(1.0, cfg.thumbnail_width / img.shape[1])
        small = cv2.resize(img, None, fx=s, fy=s, interpolation=cv2.INTER_AREA) if s < 1 else img
        ok, buf = cv2.imencode(".jpg", small, [cv2.IMWRITE_JPEG_QUALITY, 80])
        if ok:
            jpeg, size = buf.tobytes(), (small.shape[1], small.shape[0])
    return PerceptionResult(rec, jpeg, size, dict(timer.s), n, float(t_arr[-1] - t_arr[0]) if n > 1 else 0.0)


def _frames(path: Path, sample_fps: float, probe, time_range: tuple[float, float] | None):
    if time_range is None:
        return iter_frames(path, sample_fps, probe=probe)
    from .long_file import iter_frames_range

    return iter_frames_range(path, sample_fps, time_range[0], time_range[1], probe=probe)


def _expected_frames(duration_s: float, sample_fps: float, time_range: tuple[float, float] | None) -> int:
    """Sampled frames the video (or its ``time_range``) should give, 0 when its length is unknown."""
    if not duration_s:
        return 0
    a, b = time_range if time_range is not None else (0.0, duration_s)
    return max(1, int(math.ceil((min(b, duration_s) - a) * sample_fps)))


def _merge_telemetry(rec, path: Path, cam_cfg: dict | None, cfg: PerceptionConfig, ego_status: dict) -> None:
    """Ego speed / yaw rate / accel from the camera's own GPS where it has some (NMEA or GPX
    sidecar, GoPro GPMF), video estimates elsewhere; per-field availability with its source and
    reason in ``rec.info.attrs["availability"]``."""
    from .telemetry import find_telemetry_report

    avail: dict[str, dict] = {}
    for f, st in ego_status.items():
        if isinstance(st, dict):
            avail[f] = {"source": st.get("source") or "video", "reason": st.get("reason")}
            if st.get("quality") is not None:
                avail[f]["quality"] = st.get("quality")
    tel, warnings = (None, [])
    if cfg.telemetry:
        try:
            tel, warnings = find_telemetry_report(path, camera_config=cam_cfg)
        except Exception as e:  # a telemetry bug must never lose the video's perception  # noqa: BLE001
            tel, warnings = None, [f"telemetry not read: {type(e).__name__}: {e}"]
    if warnings:
        rec.info.attrs["telemetry_warnings"] = [str(w)[:300] for w in warnings[:10]]
    if tel is not None:
        got = tel.resample(rec.t)
        used = []
        for f in ("speed", "yaw_rate", "accel"):
            v = np.asarray(got.get(f), np.float64)
            if v.shape == rec.t.shape and np.isfinite(v).any():
                ok = np.isfinite(v)
                rec.ego[f] = np.where(ok, v, rec.ego[f])
                src = f"telemetry:{got.get('source') or tel.source}"
                avail[f] = {"source": src if ok.all() else f"{src}+video",
                            "reason": None if ok.all() else "telemetry covers part of the video; video "
                                                            "estimates elsewhere"}
                used.append(f)
        if "speed" in used:
            rec.ego["speed_conf"] = np.where(np.isfinite(np.asarray(got["speed"], float)), 1.0,
                                             rec.ego.get("speed_conf", np.full(len(rec.t), np.nan)))
        rec.info.attrs["telemetry"] = {"source": tel.source, "fields": used,
                                       "alignment": getattr(tel, "alignment", None)}
    conf = np.asarray(rec.ego.get("speed_conf", []), np.float64)
    sp = np.asarray(rec.ego.get("speed", []), np.float64)
    if "speed" in avail and conf.shape == sp.shape and np.isfinite(conf[np.isfinite(sp)]).any():
        avail["speed"]["quality"] = float(np.nanmedian(conf[np.isfinite(sp)]))
    rec.info.attrs["availability"] = avail


def _smooth_lanes(t_s: np.ndarray, obs: list, window_s: float = 1.0, min_count: int = 3):
    """Per frame, the median ego-lane lines over a centred window (None where too few were found)."""
    n = len(t_s)
    out: list = [None] * n
    both = [i for i, o in enumerate(obs) if o is not None and o.left is not None and o.right is not None]
    if len(both) < min_count:
        return out
    tb = t_s[both]
    params = np.array([[*obs[i].left, *obs[i].right] for i in both])
    lo = np.searchsorted(tb, t_s - window_s / 2, side="left")
    hi = np.searchsorted(tb, t_s + window_s / 2, side="right")
    for i in range(n):
        if hi[i] - lo[i] >= min_count:
            p = np.median(params[lo[i]:hi[i]], axis=0)
            out[i] = ((p[0], p[1]), (p[2], p[3]))
    return out


def _without_speed(ego_series: dict) -> dict:
    """Ego series with speed and accel withheld (``PerceptionConfig.ego_speed = False``)."""
    out = dict(ego_series)
    for k in ("speed", "accel", "speed_conf"):
        out[k] = np.full(len(out[k]), np.nan)
    out["status"] = dict(out["status"])
    for k in ("speed", "accel"):
        out["status"][k] = {"estimated": False, "coverage": 0.0, "reason": "disabled in the settings",
                            "source": "video"}
    return out

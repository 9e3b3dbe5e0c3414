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

from ..jobs import CancelFn, ProgressFn
from ..records import EGO_FIELDS, VideoInfo, VideoRecords
from .burnin import BurnInReader, merge_burnin
from .detect import DEFAULT_DETECTOR, Detector, make_detector
from .ego.estimator import EgoMotionEstimator
from .geometry import CameraModel, load_camera_config
from .long_file import iter_frames_range
from .shots import ShotCuts
from .stages import FrameLoop, Timer, build_tracks, fit_horizon, observations, run_frames, thumbnail, video_attrs
from .telemetry import find_telemetry_report
from .track import ByteTracker
from .video import iter_frames, probe_video

PERCEPTION_VERSION = 10  # 4: tracks and ego pairs do not span shot cuts (shots.py); 5: road fits judged
                         # against the noise floor (ego.noise_floor.fit_ratio: compressed video keeps its speed);
                         # 6: ... only where the floor's flow agrees with the plane's (rain: no wrong speed);
                         # 7: NanoDet's near pass (vehicles at contact range); "stopped" only on scenery;
                         # 8: no vehicle yaw where the camera is shaken (jolt); ego series held, not
                         # extrapolated, beyond the first/last accepted fit; 9: the speed the
                         # dashcam prints on the frame, read by OCR (burnin.py); 10: no road fit nearer
                         # than 3 camera heights (a bonnet hides it: ego.config.ROAD_MIN_DEPTH_H)


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
    cfg = config or PerceptionConfig()
    path = Path(path)
    probe = probe_video(path)
    loop, cam_cfg = _setup(path, probe, cfg, detector, camera_config, root)
    if overlap is None:
        overlap = getattr(loop.det, "device", "cpu") == "cuda"
    run_frames(loop, _frames(path, cfg.sample_fps, probe, time_range), overlap=overlap,
               expected=_expected_frames(probe.duration_s, cfg.sample_fps, time_range), item=str(path),
               progress=progress, cancel=cancel)

    timer = loop.timer
    t0 = time.perf_counter()
    obs = observations(loop)
    cam = fit_horizon(loop.cam, obs, loop.lane_obs, probe.height)
    tracks = build_tracks(obs, cam, _smooth_lanes(obs.t, loop.lane_obs), loop.color, cfg)
    t0 = timer.add("ranging", t0)
    ego_series = loop.ego.series(cam)
    if not cfg.ego_speed:
        ego_series = _without_speed(ego_series)
    timer.add("ego_motion", t0)

    rec = _records(path, video_id, probe, loop, obs, tracks, video_attrs(loop, cam, probe, obs, ego_series),
                   ego_series)
    _merge_telemetry(rec, path, cam_cfg, cfg, ego_series.get("status") or {})
    if loop.burn is not None:
        merge_burnin(rec, loop.burn.finish(), rec.info.attrs["availability"])
    jpeg, size = thumbnail(loop.thumb, cfg.thumbnail_width)
    n = len(obs.t)
    return PerceptionResult(rec, jpeg, size, dict(timer.s), n, float(obs.t[-1] - obs.t[0]) if n > 1 else 0.0)


def _setup(path: Path, probe, cfg: PerceptionConfig, detector: Detector | None, camera_config: dict | None,
           root) -> tuple[FrameLoop, dict | None]:
    """The frame loop for this video: detector, camera, tracker and estimators; and the camera.json
    dict used (None: the camera is estimated)."""
    det = detector or make_detector(cfg.detector, cfg.device, **detector_options(cfg))
    if hasattr(det, "reset"):  # a detector reused across videos plans from this video's frames only
        det.reset()
    cam_cfg = camera_config if camera_config is not None else load_camera_config(path, root)
    W, H = probe.width, probe.height
    cam = CameraModel.from_config(W, H, cam_cfg) if cam_cfg else CameraModel.from_frame_size(W, H)
    tracker = ByteTracker(lost_buffer_frames=max(1, int(round(cfg.lost_buffer_s * cfg.sample_fps))),
                          **getattr(det, "tracker_params", {}))  # score thresholds suited to this detector
    burn = None
    if cfg.burnin:
        burn = BurnInReader()
    loop = FrameLoop(cfg, det, cam, tracker=tracker, ego=EgoMotionEstimator(), shots=ShotCuts(), burn=burn,
                     thumb_t=0.3 * probe.duration_s, timer=Timer())
    return loop, cam_cfg


def _records(path: Path, video_id: str | None, probe, loop: FrameLoop, obs, tracks: list, attrs: dict,
             ego_series: dict) -> VideoRecords:
    t_arr, frame_idx, n = obs.t, loop.frame_idx, len(obs.t)
    fps = probe.fps if probe.fps > 0 else (1.0 / float(np.median(np.diff(t_arr))) if n > 1 else 1.0)
    info = VideoInfo(id=video_id or path.stem, path=str(path.resolve()), fps=float(fps),
                     n_frames=int(probe.n_frames or (frame_idx[-1] + 1 if frame_idx else 0)),
                     width=probe.width, height=probe.height, source=None, attrs=attrs)
    return VideoRecords(info=info, frame_idx=np.asarray(frame_idx, np.int64), t=t_arr,
                        ego={k: np.asarray(ego_series[k], np.float64) for k in EGO_FIELDS if k in ego_series},
                        tracks=tracks)


def _frames(path: Path, sample_fps: float, probe, time_range: tuple[float, float] | None):
    if time_range is None:
        return iter_frames(path, sample_fps, probe=probe)

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

"""The stages of `pipeline.perceive_video`: the frame loop (per batch: detect, ego feed, track,
lanes, attributes' samples) and the end of the video (tracks kept, horizon, per-track fields,
video attributes, thumbnail)."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ..jobs import CancelFn, ProgressFn, check_cancel, report
from ..records import OBJECT_FIELDS, Track
from . import attributes, signals
from .detect import CLASSES
from .geometry import horizon_from_boxes, lane_rel_from_offset, range_boxes, smooth_series
from .lanes import LaneObservation, detect_lanes, lane_rel_from_lines
from .shots import split_at_cuts


class Timer:
    """Seconds spent per stage."""

    def __init__(self):
        self.s: dict[str, float] = {}

    def add(self, stage: str, t0: float) -> float:
        now = time.perf_counter()
        self.s[stage] = self.s.get(stage, 0.0) + now - t0
        return now


class FrameLoop:
    """What the sampled frames add up to, fed batch by batch: observations per track, lanes,
    brightness, colour votes and the thumbnail's frame."""

    def __init__(self, cfg, det, cam, *, tracker, ego, shots, burn, thumb_t: float, timer: Timer):
        self.cfg, self.det, self.cam = cfg, det, cam
        self.tracker, self.ego, self.shots, self.burn = tracker, ego, shots, burn
        self.thumb_t, self.timer = thumb_t, timer
        self.frame_idx: list[int] = []
        self.t_list: list[float] = []
        self.obs_pos: list[int] = []
        self.obs_tid: list[int] = []
        self.obs_det: list[np.ndarray] = []
        self.lane_obs: list[LaneObservation | None] = []
        self.brightness: list[float] = []
        self.color: dict[int, list[np.ndarray]] = {}
        self.thumb: tuple[float, np.ndarray] | None = None

    def detect(self, batch) -> list[np.ndarray]:
        t0 = time.perf_counter()
        dets = self.det.detect([f.image for f in batch])
        self.timer.add("detect", t0)
        return dets

    def process(self, batch, dets) -> None:
        import cv2

        cfg, cam, timer = self.cfg, self.cam, self.timer
        t0 = time.perf_counter()
        for f, d in zip(batch, dets):
            j = len(self.t_list)
            self.frame_idx.append(f.frame_idx)
            self.t_list.append(f.t_s)
            scale = min(1.0, cfg.work_width / f.image.shape[1])
            small = cv2.resize(f.image, None, fx=scale, fy=scale, interpolation=cv2.INTER_AREA) \
                if scale < 1.0 else f.image
            gray = cv2.cvtColor(small, cv2.COLOR_BGR2GRAY)
            self.ego.feed(gray, f.t_s, d[:, :4], cam, scale, classes=d[:, 5], scores=d[:, 4])
            self.shots.feed(small, d[:, :4] * scale)
            t0 = timer.add("ego_motion", t0)
            # camera-motion compensation: the ego estimator's previous->current frame warp
            pairs = self.tracker.update(d, warp=getattr(self.ego, "last_warp", None))
            for tid, di in pairs:
                self.obs_pos.append(j)
                self.obs_tid.append(tid)
                self.obs_det.append(d[di])
            t0 = timer.add("track", t0)
            self.lane_obs.append(detect_lanes(gray, cam.horizon_y, scale) if cfg.lanes else None)
            t0 = timer.add("lanes", t0)
            self._sample_attributes(f, d, j, pairs, gray)
            t0 = timer.add("attributes", t0)
            if self.burn is not None:
                self.burn.feed(f.image, f.t_s)
                t0 = timer.add("burnin", t0)

    def _sample_attributes(self, f, d, j: int, pairs, gray) -> None:
        self.brightness.append(attributes.upper_brightness(gray))
        for tid, di in pairs:
            votes = self.color.setdefault(tid, [])
            if len(votes) < self.cfg.max_color_samples and (len(votes) == 0 or j % 3 == 0):
                v = attributes.color_votes(f.image, d[di], CLASSES[int(d[di, 5])])
                if v is not None:
                    votes.append(v)
        if self.thumb is None or abs(f.t_s - self.thumb_t) < abs(self.thumb[0] - self.thumb_t):
            self.thumb = (f.t_s, f.image)


def run_frames(loop: FrameLoop, frames, *, overlap: bool, expected: int, item: str,
               progress: ProgressFn, cancel: CancelFn) -> None:
    """Feed ``frames`` through ``loop`` in batches; with ``overlap`` the detector works on the next
    batch in a second thread while the current one is processed (batch order kept)."""
    from concurrent.futures import ThreadPoolExecutor

    cfg, timer = loop.cfg, loop.timer
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="strived-detect") if overlap else None
    pending = None   # (batch, detections or their future) sent to the detector, not processed yet

    def advance(batch) -> None:
        """Send ``batch`` to the detector and process the batch sent before it."""
        nonlocal pending
        sent = None
        if batch:
            sent = (batch, pool.submit(loop.detect, batch) if pool is not None else loop.detect(batch))
        if pending is not None:
            done, dets = pending
            loop.process(done, dets.result() if pool is not None else dets)
        pending = sent

    try:
        batch = []
        t0 = time.perf_counter()
        for f in frames:
            timer.add("decode", t0)
            batch.append(f)
            if len(batch) >= cfg.batch_size:
                check_cancel(cancel)
                advance(batch)
                batch = []
                report(progress, "frames", len(loop.t_list), max(expected, len(loop.t_list)), item=item)
            t0 = time.perf_counter()
        timer.add("decode", t0)
        check_cancel(cancel)
        advance(batch)
        advance([])
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)   # at most the one batch in flight
    report(progress, "frames", len(loop.t_list), len(loop.t_list), item=item)


@dataclass
class Observations:
    """The frame loop's observations as arrays, tracks split at shot cuts, and the tracks kept."""

    t: np.ndarray
    pos: np.ndarray
    tid: np.ndarray
    dets: np.ndarray
    cuts: list
    quality: dict
    keep_ids: list
    track_cls: dict


def observations(loop: FrameLoop) -> Observations:
    """Arrays of the loop's observations; no track and no ego frame pair spans a cut between two
    shots (an edited clip); the confirmed tracks seen often enough and, with the robust filter,
    publishable."""
    cfg, tracker, color = loop.cfg, loop.tracker, loop.color
    t_arr = np.asarray(loop.t_list, dtype=np.float64)
    obs_pos_a = np.asarray(loop.obs_pos, dtype=np.int64)
    obs_tid_a = np.asarray(loop.obs_tid, dtype=np.int64)
    dets_a = np.asarray(loop.obs_det, dtype=np.float32).reshape(-1, 6)
    cuts = loop.shots.cuts()
    loop.ego.mark_cuts(cuts)
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
    return Observations(t_arr, obs_pos_a, obs_tid_a, dets_a, cuts, quality, keep_ids, track_cls)


def fit_horizon(cam, obs: Observations, lane_obs: list, height: int):
    """Horizon: camera.json > cars standing on the road > lane vanishing point > default."""
    if cam.horizon_source == "config":
        return cam
    keep_mask = np.isin(obs.tid, obs.keep_ids)
    hz = horizon_from_boxes(obs.dets[keep_mask, :4], [obs.track_cls[t] for t in obs.tid[keep_mask]], cam)
    source = "cars"
    if hz is None:
        vps = [o.vanishing_point() for o in lane_obs if o is not None]
        vps = [v[1] for v in vps if v is not None and 0.2 * height < v[1] < 0.8 * height]
        hz, source = (float(np.median(vps)), "lanes") if len(vps) >= 10 else (None, "default")
    if hz is not None:
        cam = cam.with_horizon(float(np.clip(hz, 0.25 * height, 0.75 * height)), source)
    return cam


def build_tracks(obs: Observations, cam, lanes_per_frame: list, color: dict, cfg) -> list[Track]:
    """The kept tracks, numbered from 1, with their smoothed per-frame fields."""
    tracks = []
    for new_id, tid in enumerate(obs.keep_ids, start=1):
        m = obs.tid == tid
        pos = obs.pos[m]
        d = obs.dets[m]
        cls_name = obs.track_cls[tid]
        z, x = range_boxes(d[:, :4], [cls_name] * len(d), cam)
        tt = obs.t[pos]
        if cfg.signal_filter == "robust":
            z, x = signals.smooth_track_fields(tt, z, x)
        else:
            z = smooth_series(tt, z, cfg.smooth_window_s, log=True)
            x = smooth_series(tt, x, cfg.smooth_window_s)
        lane = _track_lane(lane_rel_from_offset(x, cam.lane_width_m), d, pos, lanes_per_frame, cam)
        lane = np.round(smooth_series(tt, lane, 0.5))
        if cfg.signal_filter == "robust":
            lane = signals.lane_with_hysteresis(tt, lane)
        fields = {"distance": z, "loc_x": x, "loc_z": z, "lane_rel": lane,
                  "bbox_area": (d[:, 2] - d[:, 0]) * (d[:, 3] - d[:, 1]), "score": d[:, 4]}
        attrs = {"quality": obs.quality[tid]}
        col = attributes.dominant_color(color.get(tid, []))
        if col:
            attrs["color"] = col
        tracks.append(Track(track_id=new_id, cls=cls_name, pos=pos.astype(np.int32),
                            fields={f: np.asarray(fields[f], np.float32) for f in OBJECT_FIELDS},
                            bbox=d[:, :4].astype(np.float32), attrs=attrs))
    return tracks


def _track_lane(lane: np.ndarray, d: np.ndarray, pos: np.ndarray, lanes_per_frame: list, cam) -> np.ndarray:
    """``lane`` (from the lateral offset) replaced by the lane between the detected lane lines
    where a plausible ego lane was seen on the frame."""
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
    return lane


def video_attrs(loop: FrameLoop, cam, probe, obs: Observations, ego_series: dict) -> dict:
    """The video's attributes: day/night, camera, settings, lanes found, cuts, ego estimate."""
    cfg, det, lane_obs = loop.cfg, loop.det, loop.lane_obs
    lanes_found = sum(1 for o in lane_obs if o is not None and o.left is not None and o.right is not None)
    return {
        "daynight": attributes.day_night(loop.brightness),
        "camera": cam.to_dict(),
        "perception": {**cfg.to_dict(), "detector_config": getattr(det, "config", {"detector": det.name})},
        "lanes_found_frac": round(lanes_found / max(1, len(obs.t)), 3),
        "rotation_deg": probe.rotation_deg,
        "shot_cuts_s": [round(float(obs.t[j]), 3) for j in obs.cuts],
        "codec": probe.codec,
        "speed_source": "video_ground_plane" if ego_series["status"]["speed"]["estimated"] else None,
        "ego_motion": {"horizon_y": round(float(ego_series["horizon_y"]), 2),
                       "horizon_source": ego_series["horizon_source"],
                       **(ego_series.get("camera_estimate") or {})},
    }


def thumbnail(thumb: tuple[float, np.ndarray] | None, width: int) -> tuple[bytes | None, tuple[int, int] | None]:
    """(JPEG bytes, (width, height)) of the thumbnail frame scaled to at most ``width``."""
    if thumb is None:
        return None, None
    import cv2

    img = thumb[1]
    s = min(1.0, width / img.shape[1])
    small = cv2.resize(img, None, fx=s, fy=s, interpolation=cv2.INTER_AREA) if s < 1 else img
    ok, buf = cv2.imencode(".jpg", small, [cv2.IMWRITE_JPEG_QUALITY, 80])
    if ok:
        return buf.tobytes(), (small.shape[1], small.shape[0])
    return None, None

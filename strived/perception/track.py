"""ByteTrack multi-object tracker (Zhang et al., ECCV 2022), small and dependency-light.

Constant-velocity Kalman filter over (cx, cy, aspect, height); association by IoU with
``scipy.optimize.linear_sum_assignment``: first high-score detections against all tracked and lost
tracks (IoU fused with the score), then low-score detections against the still-unmatched tracked
ones, then (our addition) re-association of the high detections left over with confirmed tracks
still unmatched by centre distance in box heights, a gate that widens with every missed frame, then
unconfirmed tracks; unmatched high detections start new tracks; a lost track is kept for
``lost_buffer_frames`` frames so a missed detection or a short occlusion does not change its id.
``update(dets, warp)`` first carries every track through the camera's frame-to-frame affine warp
(camera-motion compensation), so a turn or a shake does not break IoU association.
Tracking is class-agnostic (YOLO flips car/truck); each track's class is a score-weighted vote.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .boxes import iou_matrix  # noqa: F401  (re-exported: tests and benchmarks use it from here)

TRACKED, LOST, REMOVED = 0, 1, 2


class KalmanXYAH:
    """Kalman filter on [cx, cy, a, h, vcx, vcy, va, vh] (ByteTrack/DeepSORT parameterisation)."""

    std_pos = 1.0 / 20
    std_vel = 1.0 / 160

    def __init__(self):
        self.F = np.eye(8)
        self.F[:4, 4:] = np.eye(4)
        self.H = np.eye(4, 8)

    def initiate(self, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        mean = np.r_[z, np.zeros(4)]
        h = z[3]
        std = [2 * self.std_pos * h, 2 * self.std_pos * h, 1e-2, 2 * self.std_pos * h,
               10 * self.std_vel * h, 10 * self.std_vel * h, 1e-5, 10 * self.std_vel * h]
        return mean, np.diag(np.square(std))

    def predict(self, mean: np.ndarray, cov: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        h = mean[3]
        std = [self.std_pos * h, self.std_pos * h, 1e-2, self.std_pos * h,
               self.std_vel * h, self.std_vel * h, 1e-5, self.std_vel * h]
        return self.F @ mean, self.F @ cov @ self.F.T + np.diag(np.square(std))

    def update(self, mean: np.ndarray, cov: np.ndarray, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        h = mean[3]
        r = np.diag(np.square([self.std_pos * h, self.std_pos * h, 1e-1, self.std_pos * h]))
        s = self.H @ cov @ self.H.T + r
        k = np.linalg.solve(s, (cov @ self.H.T).T).T
        mean = mean + k @ (z - self.H @ mean)
        cov = cov - k @ s @ k.T
        return mean, cov


def warp_state(mean: np.ndarray, cov: np.ndarray, warp: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Carry a [cx, cy, a, h, vcx, vcy, va, vh] state through a 2x3 affine image warp (camera motion
    compensation): the centre maps through the affine, its velocity through the linear part, and the
    height and its velocity scale with sqrt(|det|) of the linear part; the aspect is unchanged."""
    w = np.asarray(warp, dtype=np.float64).reshape(2, 3)
    m = w[:, :2]
    s = float(np.sqrt(abs(np.linalg.det(m))))
    t = np.zeros((8, 8))
    t[0:2, 0:2] = m
    t[4:6, 4:6] = m
    t[2, 2] = t[6, 6] = 1.0
    t[3, 3] = t[7, 7] = s
    mean = t @ mean
    mean[0:2] += w[:, 2]
    return mean, t @ cov @ t.T


def xyxy_to_xyah(b: np.ndarray) -> np.ndarray:
    w, h = b[2] - b[0], max(b[3] - b[1], 1e-3)
    return np.array([b[0] + w / 2, b[1] + h / 2, w / h, h], dtype=np.float64)


def xyah_to_xyxy(m: np.ndarray) -> np.ndarray:
    w = m[2] * m[3]
    return np.array([m[0] - w / 2, m[1] - m[3] / 2, m[0] + w / 2, m[1] + m[3] / 2])


def linear_assignment(cost: np.ndarray, thresh: float) -> tuple[list[tuple[int, int]], list[int], list[int]]:
    """Minimum-cost matching keeping only pairs with cost <= thresh; returns matches and leftovers."""
    from scipy.optimize import linear_sum_assignment

    n, m = cost.shape
    if n == 0 or m == 0:
        return [], list(range(n)), list(range(m))
    c = np.where(cost > thresh, thresh + 1e4, cost)
    rows, cols = linear_sum_assignment(c)
    matches = [(int(r), int(k)) for r, k in zip(rows, cols) if cost[r, k] <= thresh]
    mr = {r for r, _ in matches}
    mc = {k for _, k in matches}
    return matches, [i for i in range(n) if i not in mr], [j for j in range(m) if j not in mc]


@dataclass
class Track:
    """A tracker's internal state for one object."""

    track_id: int
    mean: np.ndarray
    cov: np.ndarray
    score: float
    start_frame: int
    last_frame: int
    state: int = TRACKED
    activated: bool = False
    hits: int = 1
    class_votes: dict = field(default_factory=dict)

    @property
    def box(self) -> np.ndarray:
        return xyah_to_xyxy(self.mean)

    @property
    def cls(self) -> int:
        return max(self.class_votes.items(), key=lambda kv: (kv[1], -kv[0]))[0]


class ByteTracker:
    """ByteTrack over per-frame detections (rows [x1,y1,x2,y2,score,cls]).

    ``update`` returns ``(track_id, det_index)`` for every track that took a detection this frame,
    including tentative tracks; :attr:`confirmed_ids` says which ids were ever confirmed (seen on two
    frames), so callers can drop one-frame false positives when they write the records.
    """

    def __init__(self, *, high_thresh: float = 0.35, low_thresh: float = 0.1, new_track_thresh: float = 0.4,
                 match_thresh: float = 0.8, second_match_thresh: float = 0.5,
                 unconfirmed_match_thresh: float = 0.7, lost_buffer_frames: int = 15,
                 reassoc_radius: float | None = 0.5, reassoc_growth: float = 0.1, reassoc_max_ratio: float = 1.5,
                 class_thresh: dict[int, tuple[float, float]] | None = None):
        self.high_thresh, self.low_thresh, self.new_track_thresh = high_thresh, low_thresh, new_track_thresh
        # {class index: (high_thresh, new_track_thresh)} for classes a detector scores lower than the rest
        self.class_thresh = {int(k): (float(v[0]), float(v[1])) for k, v in (class_thresh or {}).items()}
        self.match_thresh, self.second_match_thresh = match_thresh, second_match_thresh
        self.unconfirmed_match_thresh = unconfirmed_match_thresh
        self.lost_buffer_frames = lost_buffer_frames
        self.reassoc_radius, self.reassoc_growth = reassoc_radius, reassoc_growth
        self.reassoc_max_ratio = reassoc_max_ratio
        self.kf = KalmanXYAH()
        self.tracks: list[Track] = []
        self.frame_id = 0
        self._next_id = 1
        self.confirmed_ids: set[int] = set()
        self.all_tracks: dict[int, Track] = {}

    def _take(self, t: Track, det: np.ndarray) -> None:
        t.mean, t.cov = self.kf.update(t.mean, t.cov, xyxy_to_xyah(det[:4]))
        t.score = float(det[4])
        t.last_frame = self.frame_id
        t.state = TRACKED
        t.hits += 1
        c = int(det[5])
        t.class_votes[c] = t.class_votes.get(c, 0.0) + float(det[4])

    def _activate(self, t: Track) -> None:
        t.activated = True
        self.confirmed_ids.add(t.track_id)

    def update(self, dets: np.ndarray, warp: np.ndarray | None = None) -> list[tuple[int, int]]:
        """Advance one frame with this frame's detections; return (track_id, det_index) pairs.

        ``warp``: optional 2x3 affine mapping the previous frame's pixel coordinates to this frame's
        (camera motion); every track's state is carried through it before prediction, so boxes of
        objects that stand still in the world stay on them while the camera turns or shakes.
        """
        self.frame_id += 1
        dets = np.asarray(dets, dtype=np.float64).reshape(-1, 6)
        scores = dets[:, 4]
        high, new = self._thresholds(dets[:, 5])
        idx_high = np.nonzero(scores >= high)[0]
        idx_low = np.nonzero((scores >= self.low_thresh) & (scores < high))[0]
        self._predict(warp)
        unconfirmed = [t for t in self.tracks if not t.activated and t.state == TRACKED]
        pool = [t for t in self.tracks if t.activated]
        out: list[tuple[int, int]] = []
        u_trk, rem_high = self._match_high(pool, dets, idx_high, out)
        self._match_low(pool, u_trk, dets, idx_low, out)
        rem_high = self._reassociate(pool, dets, rem_high, out)
        rem_high = self._match_unconfirmed(unconfirmed, dets, rem_high, out)
        self._start_tracks(dets, rem_high, new, out)
        self._forget_lost()
        return out

    def _predict(self, warp: np.ndarray | None) -> None:
        """Carry every track through the camera-motion ``warp`` (ignored unless finite), then predict."""
        if warp is not None:
            warp = np.asarray(warp, dtype=np.float64).reshape(2, 3)
            if not np.isfinite(warp).all():
                warp = None
        for t in self.tracks:
            if warp is not None:
                t.mean, t.cov = warp_state(t.mean, t.cov, warp)
            t.mean, t.cov = self.kf.predict(t.mean, t.cov)

    def _match_high(self, pool: list[Track], dets: np.ndarray, idx_high: np.ndarray,
                    out: list[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
        """1) High-score detections vs tracked + lost tracks (IoU fused with detection score).
        Returns (unmatched pool indices, high detections left over)."""
        scores = dets[:, 4]
        boxes = np.array([t.box for t in pool]).reshape(-1, 4)
        iou = iou_matrix(boxes, dets[idx_high, :4])
        cost = 1 - iou * scores[idx_high][None, :]
        matches, u_trk, u_det = linear_assignment(cost, self.match_thresh)
        for ti, di in matches:
            self._take(pool[ti], dets[idx_high[di]])
            out.append((pool[ti].track_id, int(idx_high[di])))
        return u_trk, idx_high[u_det]

    def _match_low(self, pool: list[Track], u_trk, dets: np.ndarray, idx_low: np.ndarray,
                   out: list[tuple[int, int]]) -> None:
        """2) Low-score detections vs the still-unmatched tracked (not lost) tracks; the rest are lost."""
        r_tracked = [pool[i] for i in u_trk if pool[i].state == TRACKED]
        iou = iou_matrix(np.array([t.box for t in r_tracked]).reshape(-1, 4), dets[idx_low, :4])
        matches, u_trk2, _ = linear_assignment(1 - iou, self.second_match_thresh)
        for ti, di in matches:
            self._take(r_tracked[ti], dets[idx_low[di]])
            out.append((r_tracked[ti].track_id, int(idx_low[di])))
        for i in u_trk2:
            r_tracked[i].state = LOST

    def _reassociate(self, pool: list[Track], dets: np.ndarray, rem_high: np.ndarray,
                     out: list[tuple[int, int]]) -> np.ndarray:
        """2b) Re-association: high detections left over vs confirmed tracks still unmatched (lost now
        or earlier) by centre distance in box heights, a gate that widens with every missed frame,
        instead of IoU (a box predicted across a miss, or a fast crossing, rarely overlaps well).
        Returns the high detections still left over."""
        if self.reassoc_radius is not None and len(rem_high):
            taken = {tid for tid, _ in out}
            waiting = [t for t in pool if t.track_id not in taken]
            if waiting:
                cost = self._reassoc_cost(waiting, dets[rem_high, :4])
                matches, _, u_det = linear_assignment(cost, 1.0)
                for ti, di in matches:
                    self._take(waiting[ti], dets[rem_high[di]])
                    out.append((waiting[ti].track_id, int(rem_high[di])))
                rem_high = rem_high[u_det]
        return rem_high

    def _match_unconfirmed(self, unconfirmed: list[Track], dets: np.ndarray, rem_high: np.ndarray,
                           out: list[tuple[int, int]]) -> np.ndarray:
        """3) Tentative tracks vs remaining high detections: a match confirms, no match removes.
        Returns the high detections still left over."""
        scores = dets[:, 4]
        iou = iou_matrix(np.array([t.box for t in unconfirmed]).reshape(-1, 4), dets[rem_high, :4])
        cost = 1 - iou * scores[rem_high][None, :]
        matches, u_unc, u_det = linear_assignment(cost, self.unconfirmed_match_thresh)
        for ti, di in matches:
            self._take(unconfirmed[ti], dets[rem_high[di]])
            self._activate(unconfirmed[ti])
            out.append((unconfirmed[ti].track_id, int(rem_high[di])))
        for i in u_unc:
            unconfirmed[i].state = REMOVED
        return rem_high[u_det]

    def _start_tracks(self, dets: np.ndarray, rem_high: np.ndarray, new: np.ndarray,
                      out: list[tuple[int, int]]) -> None:
        """4) New tracks from confident leftovers (confirmed at once on the first frame)."""
        scores = dets[:, 4]
        for di in rem_high:
            if scores[di] < new[di]:
                continue
            mean, cov = self.kf.initiate(xyxy_to_xyah(dets[di, :4]))
            t = Track(self._next_id, mean, cov, float(scores[di]), self.frame_id, self.frame_id,
                      class_votes={int(dets[di, 5]): float(scores[di])})
            self._next_id += 1
            if self.frame_id == 1:
                self._activate(t)
            self.tracks.append(t)
            self.all_tracks[t.track_id] = t
            out.append((t.track_id, int(di)))

    def _forget_lost(self) -> None:
        """5) Forget tracks lost for too long."""
        for t in self.tracks:
            if t.state == LOST and self.frame_id - t.last_frame > self.lost_buffer_frames:
                t.state = REMOVED
        self.tracks = [t for t in self.tracks if t.state != REMOVED]

    def _thresholds(self, classes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per detection: the score that makes it a high detection, and the one that starts a track."""
        high = np.full(len(classes), self.high_thresh)
        new = np.full(len(classes), self.new_track_thresh)
        for c, (h, n) in self.class_thresh.items():
            m = classes == c
            high[m], new[m] = h, n
        return high, new

    def _reassoc_cost(self, tracks: list[Track], boxes: np.ndarray) -> np.ndarray:
        """Centre distance between each track's predicted box and each box, in units of the larger box
        height, over the gate ``reassoc_radius + reassoc_growth * (frames missed - 1)`` (so <= 1 is
        inside); pairs whose heights differ by more than ``reassoc_max_ratio`` are excluded (inf)."""
        zs = np.array([xyxy_to_xyah(b) for b in boxes]).reshape(-1, 4)
        cost = np.full((len(tracks), len(zs)), np.inf)
        for i, t in enumerate(tracks):
            h = max(t.mean[3], 1e-3)
            hz = np.maximum(zs[:, 3], 1e-3)
            ratio = np.maximum(hz / h, h / hz)
            gap = max(1, self.frame_id - t.last_frame)
            gate = self.reassoc_radius + self.reassoc_growth * (gap - 1)
            d = np.hypot(zs[:, 0] - t.mean[0], zs[:, 1] - t.mean[1]) / np.maximum(hz, h)
            cost[i] = np.where(ratio <= self.reassoc_max_ratio, d / gate, np.inf)
        return cost

    def predicted_boxes(self) -> dict[int, np.ndarray]:
        """Current Kalman boxes of confirmed, currently tracked tracks (for frames without detection)."""
        return {t.track_id: t.box for t in self.tracks if t.activated and t.state == TRACKED}

    def track_class(self, track_id: int) -> int:
        """Score-weighted majority class of a track (index into the detector's CLASSES)."""
        return self.all_tracks[track_id].cls

"""Hard cuts between sampled frames: edited clips (crash compilations, a switch to another camera).

Across a cut nothing in the picture continues: a track that takes a box in the next shot is a
different object, and a frame pair spanning the cut says nothing about how the ego moved (its
"rotation" and "jolt" are the edit, not the car). A pair is a cut when

* almost none of the corners found in the earlier frame can be followed into the later one and
  back (pyramidal Lucas-Kanade, forward-backward error under 1 px): ``tracked < CUT_MAX_TRACKED``;
* the colours change: half the L1 distance of the two frames' HSV histograms ``> CUT_MIN_HIST``;
* and both neighbouring pairs are ordinary footage (``tracked >= STABLE_MIN_TRACKED``, or no
  neighbour at the clip's ends). An edit joins two steady shots; a camera knocked off its mount
  in a crash, a wiper or a flash of glare loses the corners over several pairs in a row, and
  is footage to keep (the crash's jolt is the signal collision rules read).

Measured on bench-dev's 27 clips and the three KITTI sequences (sampled at 10 fps): the four edits
(kb_highway_dashcam at 0.1 s, kb_highway_dashcam2 at 12.1 s and 14.5 s, mmdet_demo at 2.2 s) have
tracked 0.00-0.09 and histogram distance 0.31-0.65; every other pair of ordinary footage tracks
>= 0.24 (a tunnel entrance in rain) and mostly >= 0.5; ccd_000838's camera falling after its crash
tracks 0.00 on four pairs in a row (not a cut). Runs on a 160-pixel-wide copy.
"""

from __future__ import annotations

import math

import numpy as np

SIG_WIDTH = 160                 # px: the copy the test runs on
CUT_MAX_TRACKED = 0.15          # share of corners followed forward and back
CUT_MIN_HIST = 0.30             # half L1 distance of 8x4x4-bin HSV histograms
STABLE_MIN_TRACKED = 0.40       # neighbouring pairs must look like ordinary footage
FB_MAX_PX = 1.0                 # forward-backward error of a followed corner (px at SIG_WIDTH)
MIN_CORNERS = 10                # fewer corners (a blank or black frame): the pair is not judged


class ShotCuts:
    """Feed the sampled frames in order (BGR or gray, any size); `cuts` lists the indices of the
    frames that start a new shot (the later frame of each cut pair).

    The colour test is cheap and runs on every pair; corners are followed (~5 ms a pair) only for a
    pair whose colours changed and for its two neighbours, so ordinary footage costs ~0.7 ms a frame
    (measured on bench-dev's clips at 640 px)."""

    def __init__(self):
        self._recent: list[tuple[np.ndarray, np.ndarray]] = []   # (gray, corner mask) of the last 3 frames
        self._prev_hist: np.ndarray | None = None
        self.tracked: list[float] = []     # per pair k (frame k -> k + 1): NaN = not needed or not judged
        self.hist_dist: list[float] = []
        self._forced: set[int] = set()     # frames whose shape (aspect) differs from the last: a new shot

    def feed(self, image: np.ndarray, boxes: np.ndarray | None = None) -> None:
        """``boxes``: the frame's detections (xyxy in ``image`` pixels); corners on them are not
        followed (the question is whether the *scene* continues, not a car that sits in the same
        place in both shots)."""
        import cv2

        s = SIG_WIDTH / image.shape[1]
        small = cv2.resize(image, (SIG_WIDTH, max(8, int(round(image.shape[0] * s)))),
                           interpolation=cv2.INTER_AREA)
        if small.ndim == 2:
            small = cv2.cvtColor(small, cv2.COLOR_GRAY2BGR)
        gray = cv2.cvtColor(small, cv2.COLOR_BGR2GRAY)
        hsv = cv2.cvtColor(small, cv2.COLOR_BGR2HSV)
        hist = cv2.calcHist([hsv], [0, 1, 2], None, [8, 4, 4], [0, 180, 0, 256, 0, 256]).ravel()
        hist /= max(float(hist.sum()), 1.0)
        mask = np.full(gray.shape, 255, np.uint8)
        for b in np.asarray(boxes if boxes is not None else [], np.float64).reshape(-1, 4) * s:
            x1, y1 = max(0, int(b[0]) - 1), max(0, int(b[1]) - 1)
            mask[y1:int(math.ceil(b[3])) + 2, x1:int(math.ceil(b[2])) + 2] = 0
        if self._recent and self._recent[-1][0].shape != gray.shape:
            self._recent = []                    # the frame's aspect changed mid-stream: a new shot
            self._forced.add(len(self.hist_dist) + 1)
            self.tracked.append(math.nan)
            self.hist_dist.append(math.nan)
        elif self._prev_hist is not None:
            self.hist_dist.append(0.5 * float(np.abs(hist - self._prev_hist).sum()))
            self.tracked.append(math.nan)
        self._recent = (self._recent + [(gray, mask)])[-3:]
        self._prev_hist = hist
        k = len(self.hist_dist) - 1              # the pair that just ended at this frame
        if k < 0:
            return
        if k + 1 in self._forced:
            return
        if self.hist_dist[k] > CUT_MIN_HIST:     # a candidate: its own pair and the one before it
            self._follow(k, 0)
            if k >= 1:
                self._follow(k - 1, 1)
        elif k >= 1 and self.hist_dist[k - 1] > CUT_MIN_HIST:
            self._follow(k, 0)                   # the pair after a candidate

    def _follow(self, k: int, back: int) -> None:
        """tracked[k] for the pair ending ``back`` frames before the newest one (if still held)."""
        if not math.isnan(self.tracked[k]) or len(self._recent) < back + 2:
            return
        (a, m), (b, _) = self._recent[-2 - back], self._recent[-1 - back]
        if a.shape == b.shape:
            self.tracked[k] = _tracked_share(a, b, m)

    def cuts(self) -> list[int]:
        """Indices of the frames that start a new shot (never 0)."""
        tr = np.asarray(self.tracked, np.float64)
        hd = np.asarray(self.hist_dist, np.float64)
        out = set(self._forced)
        for k in range(len(tr)):
            if not (tr[k] < CUT_MAX_TRACKED and hd[k] > CUT_MIN_HIST):   # NaN compares False
                continue
            before = k == 0 or tr[k - 1] >= STABLE_MIN_TRACKED
            after = k == len(tr) - 1 or tr[k + 1] >= STABLE_MIN_TRACKED
            if before and after:
                out.add(k + 1)
        return sorted(out)


def _tracked_share(a: np.ndarray, b: np.ndarray, mask: np.ndarray | None = None) -> float:
    """Share of a's corners (outside ``mask`` == 0) that Lucas-Kanade follows into b and back to
    within FB_MAX_PX."""
    import cv2

    p = cv2.goodFeaturesToTrack(a, 200, 0.01, 4, mask=mask)
    if p is None or len(p) < MIN_CORNERS:
        return math.nan
    lk = {"winSize": (15, 15), "maxLevel": 3}
    q, st, _ = cv2.calcOpticalFlowPyrLK(a, b, p, None, **lk)
    r, st2, _ = cv2.calcOpticalFlowPyrLK(b, a, q, None, **lk)
    fb = np.linalg.norm((p - r).reshape(-1, 2), axis=1)
    ok = (st.ravel() == 1) & (st2.ravel() == 1) & (fb < FB_MAX_PX)
    return float(ok.mean())


def split_at_cuts(pos: np.ndarray, tid: np.ndarray, cuts: list[int], next_id: int
                  ) -> tuple[np.ndarray, dict[int, int]]:
    """New track ids for observations (sample index ``pos``, track ``tid``) so that no track spans a
    cut: the part of a track after each cut it spans gets a fresh id (from ``next_id`` up).
    Returns the ids and {new id: original id}."""
    tid = np.asarray(tid, np.int64).copy()
    if not cuts or len(tid) == 0:
        return tid, {}
    seg = np.searchsorted(np.asarray(sorted(cuts), np.int64), np.asarray(pos, np.int64), side="right")
    pairs, inv = np.unique(np.stack([tid, seg], axis=1), axis=0, return_inverse=True)
    later = np.r_[False, pairs[1:, 0] == pairs[:-1, 0]]     # not the track's first shot (rows sorted)
    ids = pairs[:, 0].copy()
    ids[later] = next_id + np.arange(int(later.sum()))
    origin = {int(n): int(o) for n, o in zip(ids[later], pairs[later, 0])}
    return ids[np.asarray(inv).ravel()], origin

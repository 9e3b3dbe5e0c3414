"""What every detector backend shares: the class list, COCO label mapping, the error type, the
protocol and the post-processing (per-class NMS, vehicle-class merge)."""

from __future__ import annotations

from typing import Protocol, Sequence

import numpy as np

from ..errors import StrivedError
from .boxes import iou_matrix


CLASSES = ("car", "truck", "bus", "pedestrian", "motorcycle", "bicycle")
CLASS_INDEX = {c: i for i, c in enumerate(CLASSES)}
VEHICLE_CLASSES = ("car", "truck", "bus")
TWO_WHEELERS = ("motorcycle", "bicycle")

# Label names (lower case) other detectors use, mapped onto our classes; anything else is dropped.
LABEL_ALIASES = {
    "car": "car", "truck": "truck", "bus": "bus", "person": "pedestrian", "pedestrian": "pedestrian",
    "motorbike": "motorcycle", "motorcycle": "motorcycle", "bicycle": "bicycle", "bike": "bicycle",
    "van": "car", "scooter": "motorcycle", "cyclist": "bicycle",
}

COCO80 = ("person bicycle car motorbike aeroplane bus train truck boat traffic_light fire_hydrant "
          "stop_sign parking_meter bench bird cat dog horse sheep cow elephant bear zebra giraffe "
          "backpack umbrella handbag tie suitcase frisbee skis snowboard sports_ball kite baseball_bat "
          "baseball_glove skateboard surfboard tennis_racket bottle wine_glass cup fork knife spoon bowl "
          "banana apple sandwich orange broccoli carrot hot_dog pizza donut cake chair couch "
          "potted_plant bed dining_table toilet tv laptop mouse remote keyboard cell_phone microwave "
          "oven toaster sink refrigerator book clock vase scissors teddy_bear hair_drier "
          "toothbrush").split()


class DetectorError(StrivedError):
    """A detector backend cannot be loaded or run."""


class Detector(Protocol):
    """What the pipeline needs from a detector."""

    name: str
    device: str

    def detect(self, frames: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Detect objects in BGR frames; one (n, 6) float32 array [x1,y1,x2,y2,score,cls] per frame."""
        ...


def label_map(names: Sequence[str]) -> np.ndarray:
    """Map a detector's label list to indices into CLASSES (-1 = dropped)."""
    return np.array([CLASS_INDEX.get(LABEL_ALIASES.get(str(n).lower().replace(" ", "_"), ""), -1)
                     for n in names], dtype=np.int64)


def _empty() -> np.ndarray:
    return np.zeros((0, 6), dtype=np.float32)


def _nms_per_class(dets: np.ndarray, iou_thr: float) -> np.ndarray:
    """Greedy per-class NMS over rows sorted by descending score; returns kept row indices (sorted)."""
    n = len(dets)
    if n <= 1:
        return np.arange(n)
    boxes = dets[:, :4].astype(np.float64)
    area = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    alive = np.ones(n, bool)
    for i in range(n):
        if not alive[i]:
            continue
        rest = np.nonzero(alive[i + 1:] & (dets[i + 1:, 5] == dets[i, 5]))[0] + i + 1
        if len(rest) == 0:
            continue
        w = np.clip(np.minimum(boxes[i, 2], boxes[rest, 2]) - np.maximum(boxes[i, 0], boxes[rest, 0]), 0, None)
        h = np.clip(np.minimum(boxes[i, 3], boxes[rest, 3]) - np.maximum(boxes[i, 1], boxes[rest, 1]), 0, None)
        inter = w * h
        iou = inter / np.maximum(area[i] + area[rest] - inter, 1e-9)
        alive[rest[iou >= iou_thr]] = False
    return np.nonzero(alive)[0]


def postprocess(dets: np.ndarray, *, nms_iou: float = 0.45, vehicle_merge_iou: float = 0.7,
                contained: float = 0.85, rider_overlap: float = 0.3, riders: str = "drop") -> np.ndarray:
    """Clean one frame's detections (rows [x1,y1,x2,y2,score,cls]).

    Per-class NMS; then car/truck/bus boxes of the same vehicle (IoU >= ``vehicle_merge_iou``) keep
    only the best-scoring class, and a vehicle box lying >= ``contained`` inside a better-scoring
    vehicle box (YOLOv3-tiny's nested duplicates) is dropped; then a person riding a bicycle/motorcycle (its box bottom half overlaps
    the two-wheeler by >= ``rider_overlap`` of its own area) is dropped, so riders are not pedestrians.
    ``riders="merge"`` also grows the two-wheeler's box to the union with its rider (the KITTI
    "cyclist" box convention, used by the detection benchmark); ``"drop"`` keeps the vehicle-only box.
    """
    if len(dets) == 0:
        return _empty()
    dets = dets[np.argsort(-dets[:, 4], kind="stable")]
    dets = dets[_nms_per_class(dets, nms_iou)]  # vectorised first pass: hundreds of raw boxes -> a few
    # second pass: box i is dropped when a kept better-scoring box j is the same class and overlaps
    # (IoU), or both are vehicles and they are one vehicle (IoU) or one lies inside the other
    # (intersection over the smaller box); the pairwise tests are computed once for all pairs
    b = dets[:, :4].astype(np.float64)
    iou = iou_matrix(b, b)
    iw = np.clip(np.minimum(b[:, None, 2], b[None, :, 2]) - np.maximum(b[:, None, 0], b[None, :, 0]), 0, None)
    ih = np.clip(np.minimum(b[:, None, 3], b[None, :, 3]) - np.maximum(b[:, None, 1], b[None, :, 1]), 0, None)
    area = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    ios = iw * ih / np.maximum(np.minimum(area[:, None], area[None, :]), 1e-9)
    cls = dets[:, 5]
    veh = cls <= 2
    clash = (((cls[:, None] == cls[None, :]) & (iou >= nms_iou))
             | (veh[:, None] & veh[None, :] & ((iou >= vehicle_merge_iou) | (ios >= contained))))
    kept = np.zeros(len(dets), bool)
    for i in range(len(dets)):
        kept[i] = not clash[i, :i][kept[:i]].any()
    dets = dets[kept]
    ped = dets[:, 5] == CLASS_INDEX["pedestrian"]
    two = np.isin(dets[:, 5], [CLASS_INDEX[c] for c in TWO_WHEELERS])
    if ped.any() and two.any():
        p = dets[ped, :4].copy()
        p[:, 1] = (p[:, 1] + p[:, 3]) / 2  # lower half of the person
        w = dets[two, :4]
        ix = np.clip(np.minimum(p[:, None, 2], w[None, :, 2]) - np.maximum(p[:, None, 0], w[None, :, 0]), 0, None)
        iy = np.clip(np.minimum(p[:, None, 3], w[None, :, 3]) - np.maximum(p[:, None, 1], w[None, :, 1]), 0, None)
        area = np.maximum((p[:, 2] - p[:, 0]) * (p[:, 3] - p[:, 1]), 1e-9)
        frac = (ix * iy) / area[:, None]
        rider = frac.max(axis=1) >= rider_overlap
        drop = np.zeros(len(dets), dtype=bool)
        drop[np.nonzero(ped)[0][rider]] = True
        if riders == "merge" and rider.any():
            two_idx = np.nonzero(two)[0]
            for pi in np.nonzero(rider)[0]:
                wi = two_idx[int(frac[pi].argmax())]
                pb = dets[np.nonzero(ped)[0][pi], :4]
                dets[wi, :2] = np.minimum(dets[wi, :2], pb[:2])
                dets[wi, 2:4] = np.maximum(dets[wi, 2:4], pb[2:4])
        dets = dets[~drop]
    return dets.astype(np.float32)

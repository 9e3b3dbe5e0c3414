"""transformers object-detection checkpoints (DETR, YOLOS, RT-DETR, ...) loaded offline."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

import numpy as np

from .detect_base import DetectorError, _empty, label_map, postprocess


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

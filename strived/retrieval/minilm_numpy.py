"""all-MiniLM-L6-v2 forward pass in plain numpy, for fast query embedding in a new process.

The sentence-transformers path (`embedders.MiniLMTextEmbedder`) imports torch and transformers,
which costs several seconds before the first query can be embedded. A query is one short text, so
the same network (BERT encoder, 6 layers, 384 wide, 12 heads, GELU, mean pooling over real tokens,
L2 normalisation) evaluated with numpy on the very same weights file gives the same vector (cosine
≥ 0.99999 to the torch path, a test) in milliseconds, after loading ~90 MB of weights memory-mapped
with ``safetensors`` and the fast tokenizer from its ``tokenizer.json`` (the ``tokenizers``
package, no torch).

Batch embedding while indexing keeps the torch path (batched matrix products, GPU when present).
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Sequence

import numpy as np

_MAX_TOKENS = 256           # the model's max_seq_length (sentence_bert_config.json)


def _erf(x: np.ndarray) -> np.ndarray:
    """erf via the Chebyshev-fitted erfc of Numerical Recipes (fractional error < 1.2e-7),
    below float32 resolution of the activations."""
    z = np.abs(x)
    t = 1.0 / (1.0 + 0.5 * z)
    r = t * np.exp(-z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (
        -0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (
            -0.82215223 + t * 0.17087277)))))))))
    return np.where(x >= 0, 1.0 - r, r - 1.0)


def _gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + _erf(x / np.sqrt(2.0)))


def _layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


class NumpyMiniLM:
    """Encoder of short texts into normalised 384-d rows with the model folder's weights."""

    def __init__(self, model_dir: str | Path):
        self.model_dir = Path(model_dir)
        self._w: dict | None = None
        self._tok = None
        self._lock = threading.Lock()

    def load(self):
        with self._lock:
            if self._w is not None:
                return
            from safetensors.numpy import load_file
            from tokenizers import Tokenizer

            cfg = json.loads((self.model_dir / "config.json").read_text())
            if cfg.get("model_type") != "bert" or cfg.get("hidden_act") != "gelu" \
                    or cfg.get("position_embedding_type", "absolute") != "absolute":
                raise ValueError(f"unsupported model config in {self.model_dir}")
            pool = self.model_dir / "1_Pooling" / "config.json"
            if pool.is_file() and not json.loads(pool.read_text()).get("pooling_mode_mean_tokens"):
                raise ValueError("only mean pooling is supported")
            self.n_layers = int(cfg["num_hidden_layers"])
            self.n_heads = int(cfg["num_attention_heads"])
            self.eps = float(cfg.get("layer_norm_eps", 1e-12))
            self.dim = int(cfg["hidden_size"])
            tok = Tokenizer.from_file(str(self.model_dir / "tokenizer.json"))
            tok.enable_truncation(_MAX_TOKENS)
            tok.no_padding()
            w = load_file(str(self.model_dir / "model.safetensors"))
            # nn.Linear keeps (out, in); store transposed, contiguous, once
            for k in list(w):
                if k.endswith(".weight") and w[k].ndim == 2 and "embeddings" not in k:
                    w[k] = np.ascontiguousarray(w[k].T)
            self._tok, self._w = tok, w

    def _encode_one(self, ids: np.ndarray) -> np.ndarray:
        w = self._w
        n = len(ids)
        x = (w["embeddings.word_embeddings.weight"][ids]
             + w["embeddings.position_embeddings.weight"][:n]
             + w["embeddings.token_type_embeddings.weight"][0])
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], self.eps)
        h = self.n_heads
        d = x.shape[1] // h
        for i in range(self.n_layers):
            p = f"encoder.layer.{i}."
            q = (x @ w[p + "attention.self.query.weight"] + w[p + "attention.self.query.bias"])
            k = (x @ w[p + "attention.self.key.weight"] + w[p + "attention.self.key.bias"])
            v = (x @ w[p + "attention.self.value.weight"] + w[p + "attention.self.value.bias"])
            q, k, v = (a.reshape(n, h, d).transpose(1, 0, 2) for a in (q, k, v))
            s = q @ k.transpose(0, 2, 1) / np.sqrt(d)
            s = np.exp(s - s.max(-1, keepdims=True))
            s /= s.sum(-1, keepdims=True)
            ctx = (s @ v).transpose(1, 0, 2).reshape(n, h * d)
            a = ctx @ w[p + "attention.output.dense.weight"] + w[p + "attention.output.dense.bias"]
            x = _layer_norm(a + x, w[p + "attention.output.LayerNorm.weight"],
                            w[p + "attention.output.LayerNorm.bias"], self.eps)
            f = _gelu(x @ w[p + "intermediate.dense.weight"] + w[p + "intermediate.dense.bias"])
            f = f @ w[p + "output.dense.weight"] + w[p + "output.dense.bias"]
            x = _layer_norm(f + x, w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"],
                            self.eps)
        v = x.mean(0)                      # one unpadded text: every token is real
        return v / max(float(np.linalg.norm(v)), 1e-12)

    def embed_texts(self, texts: Sequence[str]) -> np.ndarray:
        self.load()
        out = np.zeros((len(texts), self.dim), np.float32)
        with _one_blas_thread():
            for i, t in enumerate(texts):
                ids = np.asarray(self._tok.encode(t).ids, np.int64)
                out[i] = self._encode_one(ids)
        return out


_blas_controller: list = []    # one threadpoolctl controller per process (finding the libraries: ~0.6 ms)


def _one_blas_thread():
    """The matrices of one short text are tiny: a multi-threaded BLAS spends more time waking
    threads than multiplying, and on a busy machine one query went from ~20 ms to over 1 s.
    One thread for the duration of the call (threadpoolctl; without it, BLAS as configured).
    The dense index's exact search (one matrix-vector product) uses it too."""
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:
        import contextlib

        return contextlib.nullcontext()
    if not _blas_controller:
        _blas_controller.append(ThreadpoolController())
    return _blas_controller[0].limit(limits=1, user_api="blas")

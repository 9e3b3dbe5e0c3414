"""How strong a match is, in terms a user can threshold.

The fused score (weighted reciprocal rank fusion) orders results but means nothing on its own: a
value of 0.02 has no scale. Two things replace it in what users see:

* **Per-source evidence** (set by the engine on every hit): each source's rank *of* how many videos
  it ranked, the rule score's percentile among the videos the rule judged, the dense cosine and the
  BM25 score (word overlap: never called a similarity).
* **Relevance**: the estimated probability that a reviewer would label the result a match for the
  query, from a logistic model over that evidence (`FEATURES`), fitted on labelled queries
  (`strived eval BENCH --fit-relevance PATH`, cross-fitted leave-one-query-out to measure its
  calibration). The shipped model is ``resources/relevance.json``; its provenance says what it was
  fitted on and how well calibrated it was on held-out queries. A probability fitted on one
  benchmark transfers only as far as the queries and footage resemble it; it is shown as an
  estimate, not a guarantee.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

FORMAT = "strived.relevance/1"
SOURCES = ("rule", "dense", "bm25")
FEATURES = ("bias",
            "rule_ranked", "rule_rr", "rule_score", "rule_pct", "rule_unjudged",
            "dense_ranked", "dense_rr", "dense_cos",
            "bm25_ranked", "bm25_rr", "bm25_rel",
            "fused_rr",
            "event_conf", "no_event")


def hit_features(per_source: dict, fused_rank: int, match: dict | None = None) -> np.ndarray:
    """The feature row of one hit from its ``per_source`` evidence (see the engine) and the
    query's ``match`` (the matcher's answer: ``event`` and its calibrated ``confidence``). The
    query features let the model say that nothing fits a query no library event describes
    ("a recipe for chocolate cake"): a rule adapted from an unrelated exemplar still ranks every
    video, and its top hits look like any query's top hits."""
    f = dict.fromkeys(FEATURES, 0.0)
    f["bias"] = 1.0
    f["fused_rr"] = 1.0 / max(1, fused_rank)
    if match is not None and match.get("mode") == "user":
        f["event_conf"] = 1.0                 # the user's own rule: in scope by definition
    elif match is not None:
        ev = match.get("event")
        f["no_event"] = 1.0 if ev in (None, "none") else 0.0
        f["event_conf"] = float(match.get("confidence") or 0.0) if not f["no_event"] else 0.0
    r = per_source.get("rule")
    if r is not None:
        if r.get("status") == "cannot evaluate":
            f["rule_unjudged"] = 1.0
        elif r.get("rank"):
            f["rule_ranked"] = 1.0
            f["rule_rr"] = 1.0 / r["rank"]
            f["rule_score"] = float(r.get("score") or 0.0)
            f["rule_pct"] = float(r.get("percentile") or 0.0)
    d = per_source.get("dense")
    if d is not None and d.get("rank"):
        f["dense_ranked"] = 1.0
        f["dense_rr"] = 1.0 / d["rank"]
        f["dense_cos"] = float(d.get("score") or 0.0)
    b = per_source.get("bm25")
    if b is not None and b.get("rank"):
        f["bm25_ranked"] = 1.0
        f["bm25_rr"] = 1.0 / b["rank"]
        f["bm25_rel"] = float(b.get("score_vs_best") or 0.0)
    return np.array([f[k] for k in FEATURES], np.float64)


def _sigmoid(z):
    return 1.0 / (1.0 + np.exp(-np.clip(z, -40, 40)))


def fit_logistic(X: np.ndarray, y: np.ndarray, l2: float = 1.0, iters: int = 50) -> np.ndarray:
    """L2-regularised logistic regression by Newton's method (the bias is not penalised)."""
    X = np.asarray(X, np.float64)
    y = np.asarray(y, np.float64)
    w = np.zeros(X.shape[1])
    pen = np.full(X.shape[1], l2)
    pen[0] = 0.0
    for _ in range(iters):
        p = _sigmoid(X @ w)
        g = X.T @ (p - y) + pen * w
        H = (X * (p * (1 - p))[:, None]).T @ X + np.diag(pen) + 1e-9 * np.eye(len(w))
        step = np.linalg.solve(H, g)
        w -= step
        if float(np.abs(step).max()) < 1e-8:
            break
    return w


def calibration_error(p: Sequence[float], y: Sequence[float], bins: int = 10) -> float:
    """Expected calibration error: the share-weighted gap between mean predicted probability and
    observed frequency over ``bins`` equal-width probability bins."""
    p, y = np.asarray(p, float), np.asarray(y, float)
    if not len(p):
        return float("nan")
    idx = np.minimum((p * bins).astype(int), bins - 1)
    err = 0.0
    for b in range(bins):
        m = idx == b
        if m.any():
            err += m.mean() * abs(p[m].mean() - y[m].mean())
    return float(err)


@dataclass
class RelevanceModel:
    weights: np.ndarray
    provenance: dict = field(default_factory=dict)

    def predict(self, X: np.ndarray) -> np.ndarray:
        return _sigmoid(np.atleast_2d(np.asarray(X, np.float64)) @ self.weights)

    def to_dict(self) -> dict:
        return {"format": FORMAT, "features": list(FEATURES),
                "weights": [round(float(w), 6) for w in self.weights], "provenance": self.provenance}

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=1) + "\n")

    @classmethod
    def from_dict(cls, d: dict) -> "RelevanceModel":
        if not isinstance(d, dict) or d.get("format") != FORMAT:
            raise ValueError(f"not a {FORMAT} document")
        if list(d.get("features", [])) != list(FEATURES):
            raise ValueError("relevance model features differ from this version's")
        w = np.asarray(d["weights"], np.float64)
        if w.shape != (len(FEATURES),) or not np.isfinite(w).all():
            raise ValueError("relevance model weights are malformed")
        return cls(w, dict(d.get("provenance") or {}))

    @classmethod
    def load(cls, path: str | Path) -> "RelevanceModel":
        return cls.from_dict(json.loads(Path(path).read_text()))


_DEFAULT: list = []


def default_model() -> RelevanceModel | None:
    """The shipped model (``resources/relevance.json``), or None when absent or unreadable (then
    no relevance is shown, rather than a made-up one)."""
    if not _DEFAULT:
        p = Path(__file__).resolve().parents[2] / "resources" / "relevance.json"
        try:
            _DEFAULT.append(RelevanceModel.load(p))
        except (OSError, ValueError, KeyError):
            _DEFAULT.append(None)
    return _DEFAULT[0]


def fit_with_heldout(groups: list[tuple[np.ndarray, np.ndarray]], l2: float = 1.0) -> tuple[RelevanceModel, dict]:
    """Fit on every group (a query's hits), and measure leave-one-group-out: held-out calibration
    error, Brier score and the base rate. Returns (model on all groups, held-out metrics)."""
    X = np.vstack([g[0] for g in groups])
    y = np.concatenate([g[1] for g in groups])
    held_p, held_y = [], []
    for i in range(len(groups)):
        Xt = np.vstack([g[0] for j, g in enumerate(groups) if j != i])
        yt = np.concatenate([g[1] for j, g in enumerate(groups) if j != i])
        w = fit_logistic(Xt, yt, l2)
        held_p.append(_sigmoid(groups[i][0] @ w))
        held_y.append(groups[i][1])
    hp, hy = np.concatenate(held_p), np.concatenate(held_y)
    metrics = {"examples": int(len(y)), "queries": len(groups), "positive_rate": round(float(y.mean()), 4),
               "heldout_ece": round(calibration_error(hp, hy), 4),
               "heldout_brier": round(float(np.mean((hp - hy) ** 2)), 4),
               "baseline_brier": round(float(np.mean((y.mean() - hy) ** 2)), 4),
               "heldout_auc": round(_auc(hp, hy), 4)}
    return RelevanceModel(fit_logistic(X, y, l2)), metrics


def _auc(p: np.ndarray, y: np.ndarray) -> float:
    pos, neg = p[y > 0.5], p[y <= 0.5]
    if not len(pos) or not len(neg):
        return float("nan")
    order = np.argsort(np.concatenate([pos, neg]), kind="mergesort")
    ranks = np.empty(len(order))
    ranks[order] = np.arange(1, len(order) + 1)
    return float((ranks[:len(pos)].sum() - len(pos) * (len(pos) + 1) / 2) / (len(pos) * len(neg)))


def describe(p: float | None) -> str:
    """A relevance for people: the probability with a plain word."""
    if p is None or not math.isfinite(p):
        return "relevance unknown"
    word = "likely" if p >= 0.6 else "possible" if p >= 0.3 else "unlikely"
    return f"{word} match ({p:.0%})"


#: The paper's optional reranker works over the fused list's first K' = 20 (appendix "Multi-Source
#: Fusion"); the relevance estimate is that reranker here.
RERANK_K = 20


def rerank_by_relevance(hits: list, k: int = RERANK_K) -> list:
    """The first ``k`` hits ordered by their relevance estimate (ties keep the fused order), the
    rest as they were; ranks renumbered. Hits without a relevance are left as they are (the
    model did not apply): then nothing moves."""
    head = hits[:k]
    if not head or any(h.relevance is None for h in head):
        return hits
    order = sorted(range(len(head)), key=lambda i: (-head[i].relevance, i))
    out = [head[i] for i in order] + hits[k:]
    for r, h in enumerate(out, start=1):
        h.rank = r
    return out

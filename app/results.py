"""Table model of a search's ranked hits (testable without a window).

Columns: thumbnail, file, event span, fused score, each source's contribution (rule, dense, BM25),
matched library event + confidence, reused/adapted, the user's relevance mark.
"""

from __future__ import annotations

import os
from typing import Callable

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QSize, Qt
from PySide6.QtGui import QColor, QPixmap

RRF_K = 60  # the paper's weighted RRF constant; contributions are w_s / (RRF_K + rank_s)
SOURCES = ("rule", "dense", "bm25")
SOURCE_TITLES = {"rule": "Rule", "dense": "Dense", "bm25": "BM25"}

HitRole = Qt.ItemDataRole.UserRole + 1
SortRole = Qt.ItemDataRole.UserRole + 2


def format_span(span_s) -> str:
    if not span_s:
        return "–"
    t0, t1 = span_s
    return f"{t0:5.1f}–{t1:5.1f} s"


def contribution(hit, source: str, weights: dict | None) -> float | None:
    """The share of the fused score that ``source`` gave this hit (w_s / (k + rank_s))."""
    ps = (getattr(hit, "per_source", None) or {}).get(source) or {}
    if ps.get("contribution") is not None:
        return float(ps["contribution"])
    rank = ps.get("rank")
    if rank is None:
        return None
    w = (weights or {}).get(source, 1.0)
    return float(w) / (RRF_K + int(rank))


class ResultsModel(QAbstractTableModel):
    """Ranked hits of one SearchResponse, with lazily loaded thumbnails and relevance marks."""

    COLUMNS = ("", "File", "Span", "Score", "Rule", "Dense", "BM25", "Event", "Rule from", "Mark")
    C_THUMB, C_FILE, C_SPAN, C_SCORE, C_RULE, C_DENSE, C_BM25, C_EVENT, C_MODE, C_MARK = range(10)
    THUMB_SIZE = QSize(96, 54)

    def __init__(self, parent=None, thumbnail_loader: Callable[[str], bytes | None] | None = None):
        super().__init__(parent)
        self.response = None
        self.hits: list = []
        self.marks: dict[str, bool] = {}
        self._thumb_loader = thumbnail_loader
        self._thumbs: dict[str, QPixmap | None] = {}

    # -- content
    def set_response(self, response, marks: dict[str, bool] | None = None) -> None:
        self.beginResetModel()
        self.response = response
        self.hits = list(getattr(response, "hits", []) or [])
        self.marks = dict(marks or {})
        self.endResetModel()

    def clear(self) -> None:
        self.set_response(None)

    def set_thumbnail_loader(self, loader) -> None:
        self._thumb_loader = loader
        self._thumbs.clear()

    def hit(self, row: int):
        return self.hits[row] if 0 <= row < len(self.hits) else None

    def row_of(self, video_id: str) -> int:
        for i, h in enumerate(self.hits):
            if h.video_id == video_id:
                return i
        return -1

    def set_mark(self, row: int, relevant: bool | None) -> None:
        h = self.hit(row)
        if h is None:
            return
        if relevant is None:
            self.marks.pop(h.video_id, None)
        else:
            self.marks[h.video_id] = bool(relevant)
        ix = self.index(row, self.C_MARK)
        self.dataChanged.emit(ix, ix)

    @property
    def match(self) -> dict:
        return dict(getattr(self.response, "match", None) or {})

    @property
    def weights(self) -> dict:
        return dict(getattr(self.response, "weights", None) or {})

    # -- Qt model API
    def rowCount(self, parent=QModelIndex()) -> int:
        return 0 if parent.isValid() else len(self.hits)

    def columnCount(self, parent=QModelIndex()) -> int:
        return 0 if parent.isValid() else len(self.COLUMNS)

    def headerData(self, section, orientation, role=Qt.ItemDataRole.DisplayRole):
        if orientation == Qt.Orientation.Horizontal:
            if role == Qt.ItemDataRole.DisplayRole:
                return self.COLUMNS[section]
            if role == Qt.ItemDataRole.ToolTipRole:
                return {self.C_SCORE: "Fused score: Σ_s w_s / (60 + rank_s)",
                        self.C_RULE: "Rule path's share of the fused score (its rank)",
                        self.C_DENSE: "Dense path's share of the fused score (its rank)",
                        self.C_BM25: "BM25 path's share of the fused score (its rank)",
                        self.C_EVENT: "Matched library event and the matcher's confidence",
                        self.C_MODE: "reused = calibrated library rule; adapted = rewritten for "
                                     "this query",
                        self.C_MARK: "Your relevance mark (R = relevant, N = not relevant)"}.get(section)
        elif role == Qt.ItemDataRole.DisplayRole:
            return str(section + 1)
        return None

    def _thumbnail(self, video_id: str):
        if video_id not in self._thumbs:
            pm = None
            if self._thumb_loader is not None:
                try:
                    data = self._thumb_loader(video_id)
                except Exception:  # noqa: BLE001 - a missing thumbnail is not an error
                    data = None
                if data:
                    pm = QPixmap()
                    if pm.loadFromData(bytes(data)):
                        pm = pm.scaled(self.THUMB_SIZE, Qt.AspectRatioMode.KeepAspectRatio,
                                       Qt.TransformationMode.SmoothTransformation)
                    else:
                        pm = None
            self._thumbs[video_id] = pm
        return self._thumbs[video_id]

    def sources_ran(self, hit=None) -> list[str]:
        """The sources that ranked this search (the response's, else the hit's own)."""
        used = list(getattr(self.response, "sources_used", None) or [])
        if not used and hit is not None:
            used = list((getattr(hit, "per_source", None) or {}).keys())
        return used

    def source_text(self, hit, source: str) -> str:
        ps = (hit.per_source or {}).get(source) or {}
        if ps.get("status") == "cannot evaluate":  # unknown, not a non-match
            return "n/a"
        used = self.sources_ran(hit)
        if used == [source]:
            # the only source that ran: no fusion, its share is all of it; show its own score
            rank, raw = ps.get("rank"), ps.get("score")
            if rank is None:
                return "–"
            return f"{float(raw):.2f}  #{rank}" if raw is not None else f"#{rank}"
        c = contribution(hit, source, self.weights)
        if c is None:
            return "–"
        score = float(getattr(hit, "score", 0.0) or 0.0)
        rank = ((hit.per_source or {}).get(source) or {}).get("rank")
        share = 100.0 * c / score if score > 0 else 0.0
        if rank is None:  # this source did not rank the video
            return "–"
        return f"{share:3.0f}%  #{rank}"

    def data(self, index, role=Qt.ItemDataRole.DisplayRole):
        if not index.isValid():
            return None
        h = self.hits[index.row()]
        c = index.column()
        m = self.match
        if role == HitRole:
            return h
        if role == Qt.ItemDataRole.DisplayRole:
            if c == self.C_FILE:
                return os.path.basename(h.path) if h.path else h.video_id
            if c == self.C_SPAN:
                return format_span(h.span_s)
            if c == self.C_SCORE:
                return f"{h.score:.4f}"
            if c in (self.C_RULE, self.C_DENSE, self.C_BM25):
                return self.source_text(h, SOURCES[c - self.C_RULE])
            if c == self.C_EVENT:
                ev = m.get("event")
                conf = m.get("confidence")
                return "–" if not ev else (f"{ev} ({conf:.2f})" if conf is not None else ev)
            if c == self.C_MODE:
                return m.get("mode") or "–"
            if c == self.C_MARK:
                mk = self.marks.get(h.video_id)
                return "" if mk is None else ("R" if mk else "N")
        if role == Qt.ItemDataRole.DecorationRole and c == self.C_THUMB:
            return self._thumbnail(h.video_id)
        if role == Qt.ItemDataRole.SizeHintRole and c == self.C_THUMB:
            return self.THUMB_SIZE
        if role == Qt.ItemDataRole.ToolTipRole:
            if c == self.C_FILE:
                return h.path or f"{h.video_id} (records only, no video file)"
            if c in (self.C_RULE, self.C_DENSE, self.C_BM25):
                s = SOURCES[c - self.C_RULE]
                ps = (h.per_source or {}).get(s) or {}
                w = self.weights.get(s)
                if ps.get("status") == "cannot evaluate":
                    return (f"{SOURCE_TITLES[s]} could not judge this video: "
                            f"{', '.join(ps.get('missing_fields') or [])} not estimated for it")
                if self.sources_ran(h) == [s]:
                    return (f"{SOURCE_TITLES[s]} was the only source that ran: the ranking is its "
                            f"own (rank {ps.get('rank')}, score {ps.get('score')}); no fusion")
                return (f"{SOURCE_TITLES[s]}: rank {ps.get('rank')}, raw score {ps.get('score')}, "
                        f"weight {w}")
            if c == self.C_EVENT:
                return "; ".join(m.get("notices") or []) or None
        if role == Qt.ItemDataRole.ForegroundRole:
            if c == self.C_MARK:
                mk = self.marks.get(h.video_id)
                return None if mk is None else QColor("#7bd88f" if mk else "#ff6b6b")
            if c in (self.C_RULE, self.C_DENSE, self.C_BM25, self.C_SPAN) and \
                    self.data(index) == "–":
                return QColor("#6b717a")
        if role == Qt.ItemDataRole.TextAlignmentRole and c in (
                self.C_SCORE, self.C_RULE, self.C_DENSE, self.C_BM25, self.C_SPAN):
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if role == SortRole:
            return h.rank
        return None

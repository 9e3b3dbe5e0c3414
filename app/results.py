"""Table model of a search's ranked hits (testable without a window).

Columns: thumbnail, file, whether it was already exported, event span, relevance (the calibrated probability that the result
matches, ``strived.retrieval.relevance``), each source's evidence (rule: its absolute score and rank
among the videos it judged; dense: cosine and rank; BM25: rank), the matched library event with its two
calibrated probabilities, reused/adapted, the user's relevance mark. Every number shown means what
its label says; the fused RRF score (a rank sum, not a probability) is only in the tooltip.
"""

from __future__ import annotations

import math
import os
from typing import Callable

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QSize, Qt
from PySide6.QtGui import QColor, QPixmap

from strived.api import describe, spans_overlap

RRF_K = 60  # the paper's weighted RRF constant; contributions are w_s / (RRF_K + rank_s)
SOURCES = ("rule", "dense", "bm25")
SOURCE_TITLES = {"rule": "Rule", "dense": "Dense", "bm25": "BM25", "signals": "Signals"}

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


def _prob(p) -> float | None:
    """A probability, or None when it is missing or not a number (uncalibrated is NaN)."""
    try:
        p = float(p)
    except (TypeError, ValueError):
        return None
    return p if math.isfinite(p) else None


def relevance_text(p) -> str:
    p = _prob(p)
    return "–" if p is None else f"{p:.0%}"


def relevance_tip(p) -> str:
    if _prob(p) is None:
        return ("Relevance unknown: no fitted relevance model applies to this search (e.g. only "
                "one source ran, or the library has no relevance model yet). The rank still "
                "orders the results.")
    return (f"{describe(p)[0].upper()}{describe(p)[1:]}: the estimated probability that this "
            "result shows what you asked for (calibrated on marked searches).")


#: a percentile among fewer judged videos than this is not shown (p100 of 1 video says nothing)
MIN_PERCENTILE_N = 20


def evidence_cell(ps: dict, source: str) -> str:
    """One source's evidence for a hit: rule ``0.93 · 3/240`` (the absolute rule score: a
    percentile over a few judged videos made a weak 0.07 look maximal), dense ``cos 0.61 · 2/240``,
    BM25 ``2/57``; ``n/a`` when the rule could not evaluate the video, ``–`` when the source did
    not rank it."""
    if ps.get("status") == "cannot evaluate":
        return "n/a"
    rank = ps.get("rank")
    if not rank:
        return "–"
    of = ps.get("of")
    pos = f"{rank}/{of}" if of else f"#{rank}"
    tie = ps.get("tie") if source == "rule" else None
    if tie:   # videos sharing one rule score have no order among them
        pos = f"={tie['first']}/{of} ({tie['size']} tied)" if of else f"={tie['first']} ({tie['size']} tied)"
    if source == "rule" and ps.get("score") is not None:
        return f"{float(ps['score']):.2f} · {pos}"
    if source == "dense" and ps.get("score") is not None:
        return f"cos {float(ps['score']):.2f} · {pos}"
    if source == "signals" and ps.get("distance") is not None:
        return f"dist {float(ps['distance']):.2f} · {pos}"
    return pos


def match_text(m: dict) -> str:
    """The matched library event with its calibrated probabilities in words:
    ``lead_brake · event 97% · rule as is 1%``."""
    ev = m.get("event")
    mode = m.get("mode")
    if mode == "user":
        return f"{ev} · your rule" if ev else "your rule"
    if not ev:
        return "–"
    if mode == "hand":
        return f"{ev} · hand-written rule"
    conf, pe = _prob(m.get("confidence")), _prob(m.get("p_event"))
    parts = [ev]
    if pe is not None:
        parts.append(f"event {pe:.0%}")
    if conf is not None:
        calibrated = pe is not None or m.get("source") == "llm"
        parts.append(f"rule as is {conf:.0%}" if calibrated else f"match score {conf:.2f} (uncalibrated)")
    return " · ".join(parts)


def match_tip(m: dict) -> str | None:
    ev = m.get("event")
    if not ev and m.get("mode") != "user":
        return "; ".join(m.get("notices") or []) or None
    lines = []
    mode = m.get("mode")
    if mode == "user":
        lines.append("The rule was given by you (rule editor): no matching, no probability.")
    elif mode == "hand":
        lines.append(f"The hand-written rule of the event “{ev}”.")
    else:
        conf, pe = _prob(m.get("confidence")), _prob(m.get("p_event"))
        if pe is not None:
            lines.append(f"event {pe:.0%}: the calibrated probability that “{ev}” is the event you "
                         "asked for.")
        else:
            lines.append(f"“{ev}”: no calibrated probability that it is the event asked for.")
        if conf is not None:
            if pe is not None or m.get("source") == "llm":
                lines.append(f"rule as is {conf:.0%}: the probability that the library's rule for "
                             f"it fits your query without change (τ = 0.6: at or above, it is "
                             f"reused; below, adapted). Here: {mode or '–'}.")
            else:
                lines.append(f"match score {conf:.2f}: the matcher's uncalibrated score (not a "
                             "probability).")
    lines += list(m.get("notices") or [])
    return "\n".join(lines)


class ResultsModel(QAbstractTableModel):
    """Ranked hits of one SearchResponse, with lazily loaded thumbnails and relevance marks."""

    # the user's mark beside the file: at the end it was off-screen in a 900 px pane
    COLUMNS = ("#", "File", "Mark", "Exp.", "Span", "Relevance", "Rule", "Dense", "BM25", "Event",
               "Rule from")
    (C_THUMB, C_FILE, C_MARK, C_EXPORTED, C_SPAN, C_RELEVANCE, C_RULE, C_DENSE, C_BM25, C_EVENT,
     C_MODE) = range(11)
    THUMB_SIZE = QSize(96, 54)

    def __init__(self, parent=None, thumbnail_loader: Callable[[str], bytes | None] | None = None):
        super().__init__(parent)
        self.response = None
        self.hits: list = []
        self.marks: dict[str, bool] = {}
        self.exports: dict[str, list[dict]] = {}    # video id -> its exports (library_ops)
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

    def remove_videos(self, video_ids) -> None:
        """Drop the rows of videos removed from the library (the ranks shown stay the search's)."""
        gone = set(video_ids)
        keep = [h for h in self.hits if h.video_id not in gone]
        if len(keep) != len(self.hits):
            self.beginResetModel()
            self.hits = keep
            for v in gone:
                self.marks.pop(v, None)
            self.endResetModel()

    def set_exports(self, exports: dict[str, list[dict]]) -> None:
        """The library's exported clips (``library_ops.exports``: video id -> spans exported):
        the "Exp." column marks a row whose span overlaps one of its video's exported spans."""
        self.exports = dict(exports or {})
        if self.hits:
            self.dataChanged.emit(self.index(0, self.C_EXPORTED),
                                  self.index(len(self.hits) - 1, self.C_EXPORTED))

    def exports_of(self, hit) -> tuple[list[dict], list[dict]]:
        """(exports whose span overlaps the hit's span, the video's other exports), oldest first.
        A hit without a span is its whole video (as its export would be)."""
        span = tuple(hit.span_s) if getattr(hit, "span_s", None) else None
        over, other = [], []
        for e in self.exports.get(hit.video_id) or []:
            es = None if e.get("start_s") is None else (e["start_s"], e["end_s"])
            (over if spans_overlap(span, es) else other).append(e)
        return over, other

    def export_text(self, hit) -> str:
        over, other = self.exports_of(hit)
        if over:
            return "✓" if len(over) == 1 else f"✓ {len(over)}×"
        return "○" if other else ""

    def export_tip(self, hit) -> str | None:
        over, other = self.exports_of(hit)
        if not over and not other:
            return "Not exported yet"

        def lines(ex):
            out = []
            for e in list(reversed(ex))[:10]:
                what = (f"clip {e['clip']}" if e.get("clip") else "in the clip list") + \
                    (f", {e['start_s']:.1f}–{e['end_s']:.1f} s" if e.get("start_s") is not None
                     else ", the whole video")
                out.append(f"{e.get('at') or '?'} → {e.get('folder') or '?'}: {what}"
                           + (f" (query “{e['query']}”)" if e.get("query") else ""))
            if len(ex) > 10:
                out.append(f"… and {len(ex) - 10} older")
            return out
        sp = getattr(hit, "span_s", None)
        span = f" ({float(sp[0]):.1f}–{float(sp[1]):.1f} s)" if sp else " (the whole video)"
        head = [f"This span{span} was exported {len(over)}×:"] + lines(over) if over else \
            [f"This span{span} was not exported yet."]
        if other:
            head += [f"Other spans of this video were exported ({len(other)}×):"] + lines(other)
        return "\n".join(head)

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

    @property
    def similar(self) -> bool:
        """A "more like this" list (app/similar_panel.py): the Rule column shows the signals."""
        return bool(self.match.get("similar"))

    def column_source(self, c: int) -> str:
        return "signals" if c == self.C_RULE and self.similar else SOURCES[c - self.C_RULE]

    # -- sorting: every column; ``#`` returns to the search's fused order
    def sort_key(self, h, column: int):
        """The key a column sorts ``h`` by, smaller first (evidence columns are negated, so the
        first click puts the strongest first); None: unknown or not ranked, always last."""
        c = column
        if c in (self.C_THUMB, self.C_EVENT, self.C_MODE):
            return h.rank
        if c == self.C_FILE:
            return (os.path.basename(h.path) if h.path else h.video_id).lower()
        if c == self.C_SPAN:
            return float(h.span_s[0]) if h.span_s else None
        if c == self.C_RELEVANCE:
            rel = getattr(h, "relevance", None)
            return None if rel is None else -float(rel)
        if c == self.C_EXPORTED:
            same, other = self.exports_of(h)
            return -(len(same) + 0.5 * bool(other)) if same or other else None
        if c == self.C_MARK:
            mk = self.marks.get(h.video_id)
            return None if mk is None else (0 if mk else 1)
        ps = (h.per_source or {}).get(self.column_source(c)) or {}
        if not ps.get("rank") or ps.get("status") == "cannot evaluate":
            return None
        if ps.get("distance") is not None:          # signals: the smaller the closer
            return float(ps["distance"])
        if c == self.C_BM25 or ps.get("score") is None:
            return int(ps["rank"])
        return -float(ps["score"])

    def sort(self, column: int, order=Qt.SortOrder.AscendingOrder) -> None:
        """Sort the rows by ``column`` (ties keep the fused order; unknown last in both orders).
        Selection and the current row follow their videos."""
        if not self.hits or not 0 <= column < len(self.COLUMNS):
            return
        self.layoutAboutToBeChanged.emit()
        old = list(self.hits)
        keyed = [(self.sort_key(h, column), h.rank, h) for h in old]
        known = sorted((k for k in keyed if k[0] is not None), key=lambda k: k[1])   # fused order ...
        known.sort(key=lambda k: k[0], reverse=order == Qt.SortOrder.DescendingOrder)  # ... kept in ties
        unknown = sorted((k for k in keyed if k[0] is None), key=lambda k: k[1])
        self.hits = [k[2] for k in known + unknown]
        where = {id(h): r for r, h in enumerate(self.hits)}
        frm = self.persistentIndexList()
        self.changePersistentIndexList(frm, [self.index(where[id(old[ix.row()])], ix.column()) for ix in frm])
        self.layoutChanged.emit()

    # -- Qt model API
    def rowCount(self, parent=QModelIndex()) -> int:
        return 0 if parent.isValid() else len(self.hits)

    def columnCount(self, parent=QModelIndex()) -> int:
        return 0 if parent.isValid() else len(self.COLUMNS)

    def headerData(self, section, orientation, role=Qt.ItemDataRole.DisplayRole):
        if orientation == Qt.Orientation.Horizontal:
            if role == Qt.ItemDataRole.DisplayRole:
                return "Signals" if section == self.C_RULE and self.similar else self.COLUMNS[section]
            if role == Qt.ItemDataRole.ToolTipRole and self.similar and section in (self.C_RULE, self.C_DENSE):
                return ("Signals: the signal distance to the example (0 = the same values; the mean "
                        "difference per compared value, in units of each signal's scale) · rank"
                        if section == self.C_RULE else "Dense: cosine similarity of the moment's "
                        "text to the example span's text · rank/number of videos it ranked")
            if role == Qt.ItemDataRole.ToolTipRole:
                return {self.C_THUMB: "Rank in the search's fused order (the list's own order; click "
                                      "to return to it). Fusing the sources' ranks orders results "
                                      "better than sorting by relevance: measured with sources held "
                                      "out, mAP 47.7 vs 46.9 (docs/report/generalization)",
                        self.C_RELEVANCE: "Estimated probability that the result matches your "
                                          "query (calibrated; – when no model applies). The list is "
                                          "in fused-rank order (#); click to sort by relevance",
                        self.C_RULE: "Rule: the rule score (0 = conditions not met, 1 = fully met) · "
                                     "rank/number of videos it ranked (n/a: fields missing)",
                        self.C_DENSE: "Description search: cosine similarity to the query · "
                                      "rank/number it ranked",
                        self.C_BM25: "Keyword search (BM25): rank/number of videos it ranked",
                        self.C_EVENT: "Matched library event · P(it is the event asked for) · "
                                      "P(its calibrated rule fits the query as is)",
                        self.C_MODE: "reused = calibrated library rule; adapted = rewritten for "
                                     "this query",
                        self.C_MARK: "Your relevance mark (R = relevant, N = not relevant)",
                        self.C_EXPORTED: "Already exported: ✓ this span (2× = twice), ○ only "
                                         "other spans of this video; hover a mark for where "
                                         "and when"}.get(section)
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
        return evidence_cell((hit.per_source or {}).get(source) or {}, source)

    def source_tip(self, hit, source: str) -> str:
        ps = (hit.per_source or {}).get(source) or {}
        t = SOURCE_TITLES[source]
        if ps.get("status") == "cannot evaluate":
            return (f"{t} could not judge this video: "
                    f"{', '.join(ps.get('missing_fields') or []) or 'some fields'} not estimated "
                    "for it (unknown, not a non-match)")
        if source not in self.sources_ran(hit) and not ps:
            return f"{t} did not run for this search"
        rank, of = ps.get("rank"), ps.get("of")
        if not rank:
            return f"{t} did not rank this video" + (f" (it ranked {of})" if of else "")
        lines = [f"{t}: rank {rank}" + (f" of the {of} videos it ranked" if of else "")]
        if source == "rule":
            if ps.get("score") is not None:
                best = f", best of {of} judged" if rank == 1 and of else ""
                lines.append(f"rule score {float(ps['score']):.2f} (how fully the rule's conditions hold: "
                             f"0 not at all, 1 fully){best}")
            if ps.get("percentile") is not None and (of or 0) >= MIN_PERCENTILE_N:
                lines.append(f"scores at least as high as {100 * float(ps['percentile']):.0f}% of "
                             f"the {of} videos the rule judged")
            for fld, share in (ps.get("judged_share") or {}).items():
                lines.append(f"judged on the {100 * float(share):.0f}% of the clip where {fld} is known "
                             "(the rest is unknown)")
        elif source == "dense" and ps.get("score") is not None:
            what = "the example span's text" if self.similar else "the query"
            lines.append(f"cosine similarity to {what} {float(ps['score']):.2f}")
        elif source == "signals" and ps.get("distance") is not None:
            who = f"{ps.get('cls') or 'track'} #{ps['track']}" if ps.get("track") is not None else "the ego"
            lines.append(f"signal distance {float(ps['distance']):.2f} (0 = the same values): {who}, "
                         f"{ps.get('known_points')} values known in both compared")
        elif source == "bm25":
            if ps.get("score_vs_best") is not None:
                lines.append(f"keyword score {100 * float(ps['score_vs_best']):.0f}% of the best "
                             "result's")
        if self.sources_ran(hit) == [source]:
            lines.append("the only source that ran: the ranking is its own (no fusion)")
        else:
            c = contribution(hit, source, self.weights)
            score = float(getattr(hit, "score", 0.0) or 0.0)
            if c is not None and score > 0:
                lines.append(f"weight {ps.get('weight', self.weights.get(source))}; "
                             f"{100 * c / score:.0f}% of the fused rank score")
        return "\n".join(lines)

    def data(self, index, role=Qt.ItemDataRole.DisplayRole):
        if not index.isValid():
            return None
        h = self.hits[index.row()]
        c = index.column()
        m = self.match
        if role == HitRole:
            return h
        if role == Qt.ItemDataRole.DisplayRole:
            if c == self.C_THUMB:
                return str(h.rank)
            if c == self.C_FILE:
                return os.path.basename(h.path) if h.path else h.video_id
            if c == self.C_SPAN:
                return format_span(h.span_s)
            if c == self.C_EXPORTED:
                return self.export_text(h)
            if c == self.C_RELEVANCE:
                return relevance_text(getattr(h, "relevance", None))
            if c in (self.C_RULE, self.C_DENSE, self.C_BM25):
                return self.source_text(h, self.column_source(c))
            if c == self.C_EVENT:
                return match_text(m)
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
                return self.source_tip(h, self.column_source(c))
            if c == self.C_RELEVANCE:
                return relevance_tip(getattr(h, "relevance", None))
            if c == self.C_EXPORTED:
                return self.export_tip(h)
            if c == self.C_EVENT:
                return match_tip(m)
        if role == Qt.ItemDataRole.ForegroundRole:
            if c == self.C_MARK:
                mk = self.marks.get(h.video_id)
                return None if mk is None else QColor("#7bd88f" if mk else "#ff6b6b")
            if c == self.C_EXPORTED:
                return QColor("#7fb8ff" if self.exports_of(h)[0] else "#6b717a")
            if c in (self.C_RULE, self.C_DENSE, self.C_BM25, self.C_SPAN, self.C_RELEVANCE) \
                    and self.data(index) in ("–", "n/a"):
                return QColor("#6b717a")
        if role == Qt.ItemDataRole.TextAlignmentRole and c in (
                self.C_RELEVANCE, self.C_RULE, self.C_DENSE, self.C_BM25, self.C_SPAN):
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if role == Qt.ItemDataRole.TextAlignmentRole and c == self.C_EXPORTED:
            return int(Qt.AlignmentFlag.AlignCenter)
        if role == SortRole:
            return h.rank
        return None

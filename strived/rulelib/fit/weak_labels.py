"""Weak labels for calibration: which auxiliary videos are positive for which library event.

Four sources, merged by `WeakLabels.merge`:

* captions -> events with the offline lexicon extractor (`extract_events_lexicon`, negation-aware)
  or the LLM extractor (`llm_fit.extract_events_llm`);
* a per-video label file (`load_label_file`: CSV ``video_id,event[,label]`` or JSON);
* relevance marks made in the app (`marks_from_library`: the library's ``marks`` table);
* a benchmark folder's own labels (`labels_from_benchmark`: queries.json relevant/ambiguous and
  events.csv rows mapped to library events).

A video that a source covers but does not name for an event is a negative for it (the paper's
rule); ``ignore`` holds videos left out of an event's AP (ambiguous instances).
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from pathlib import Path

from ...errors import StrivedError
from ...events import EVENT_KEYS, get_event
from ..lexicon import extract_events_lexicon  # noqa: F401  (the caption extractor; re-exported)
from ..matcher import match_offline


class WeakLabelError(StrivedError):
    """A caption or label file cannot be read."""


@dataclass
class WeakLabels:
    """Per-event positives (and ignored videos) over a universe of ``videos``."""

    videos: list[str]
    positives: dict[str, set[str]] = field(default_factory=dict)
    ignore: dict[str, set[str]] = field(default_factory=dict)
    negatives_explicit: dict[str, set[str]] = field(default_factory=dict)
    sources: list[str] = field(default_factory=list)

    def events(self) -> list[str]:
        """Events with at least one positive, in inventory order."""
        return [k for k in EVENT_KEYS if self.positives.get(k)]

    def counts(self, event: str) -> tuple[int, int]:
        """(n positives, n negatives) for ``event`` over the universe, ignoring ``ignore``."""
        pos = self.positives.get(event, set()) & set(self.videos)
        ign = self.ignore.get(event, set()) - pos
        return len(pos), len(self.videos) - len(pos) - len(ign)

    def restrict(self, videos) -> "WeakLabels":
        """The same labels over a subset of videos (a calibration fold)."""
        keep = set(videos)
        vids = [v for v in self.videos if v in keep]
        return WeakLabels(vids, {e: s & keep for e, s in self.positives.items()},
                          {e: s & keep for e, s in self.ignore.items()},
                          {e: s & keep for e, s in self.negatives_explicit.items()},
                          list(self.sources))

    def merge(self, other: "WeakLabels") -> "WeakLabels":
        """Union of positives; an explicit negative (a user's mark) overrides a weak positive."""
        vids = list(dict.fromkeys(self.videos + other.videos))
        pos, ign, neg = {}, {}, {}
        for src in (self, other):
            for e, s in src.positives.items():
                pos.setdefault(e, set()).update(s)
            for e, s in src.ignore.items():
                ign.setdefault(e, set()).update(s)
            for e, s in src.negatives_explicit.items():
                neg.setdefault(e, set()).update(s)
        for e, s in neg.items():
            if e in pos:
                pos[e] -= s
        return WeakLabels(vids, pos, ign, neg, self.sources + other.sources)


def labels_from_captions(captions: dict[str, str], extractor=extract_events_lexicon,
                         source: str = "captions:lexicon") -> WeakLabels:
    """Weak labels from ``{video_id: caption}``: positive where the extractor names the event."""
    pos: dict[str, set[str]] = {}
    for vid, text in captions.items():
        for e in extractor(text or ""):
            pos.setdefault(e, set()).add(vid)
    return WeakLabels(sorted(captions), pos, {}, {}, [source])


def load_captions(path: str | Path) -> dict[str, str]:
    """Captions from JSON (``{id: text}`` or ``[{"video_id"|"id", "caption"|"text"}]``) or CSV."""
    p = Path(path)
    if not p.exists():
        raise WeakLabelError(f"captions file {p} does not exist")
    if p.suffix.lower() == ".json":
        data = json.loads(p.read_text(encoding="utf-8"))
        if isinstance(data, dict):
            return {str(k): str(v) for k, v in data.items()}
        out = {}
        for i, row in enumerate(data):
            vid = row.get("video_id", row.get("id"))
            txt = row.get("caption", row.get("text"))
            if vid is None or txt is None:
                raise WeakLabelError(f"{p}: entry {i} needs 'video_id' and 'caption'")
            out[str(vid)] = str(txt)
        return out
    with p.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    if not rows or not {"video_id", "caption"} <= set(rows[0]):
        raise WeakLabelError(f"{p}: CSV needs columns video_id,caption")
    return {r["video_id"]: r["caption"] for r in rows}


# ---- label files ------------------------------------------------------------------------------

def load_label_file(path: str | Path, videos: list[str] | None = None) -> WeakLabels:
    """Per-video event labels. CSV ``video_id,event[,label]`` (label 1 / 0 / ambiguous) or JSON
    ``{video_id: [event, ...]}``. Unknown events raise, naming the valid keys."""
    p = Path(path)
    if not p.exists():
        raise WeakLabelError(f"labels file {p} does not exist")
    pos, ign, neg, seen = {}, {}, {}, set()

    def add(vid, ev, lab):
        if ev not in EVENT_KEYS:
            raise WeakLabelError(f"{p}: unknown event {ev!r}; valid: {', '.join(EVENT_KEYS)}")
        seen.add(vid)
        target = {"1": pos, "true": pos, "yes": pos, "0": neg, "false": neg, "no": neg,
                  "ambiguous": ign}.get(str(lab).strip().lower())
        if target is None:
            raise WeakLabelError(f"{p}: label {lab!r} for {vid}/{ev}: use 1, 0 or ambiguous")
        target.setdefault(ev, set()).add(vid)

    if p.suffix.lower() == ".json":
        data = json.loads(p.read_text(encoding="utf-8"))
        for vid, evs in data.items():
            seen.add(str(vid))
            for ev in evs:
                add(str(vid), ev, 1)
    else:
        with p.open(newline="", encoding="utf-8") as f:
            for r in csv.DictReader(f):
                if "video_id" not in r or "event" not in r:
                    raise WeakLabelError(f"{p}: CSV needs columns video_id,event[,label]")
                add(r["video_id"], r["event"].strip(), r.get("label") or 1)
    universe = sorted(set(videos) if videos is not None else seen)
    return WeakLabels(universe, pos, ign, neg, [f"labels:{p.name}"])


def marks_from_library(library, videos: list[str], matcher=None) -> WeakLabels:
    """The app's relevance marks as labels. A mark without an event is mapped with the matcher.

    ``library``: a `strived.store.Library` (its ``marks``: query, video, relevant, event).
    A relevant mark is a positive; a not-relevant mark an explicit negative (it overrides weaker
    sources in `WeakLabels.merge`).
    """
    pos, neg = {}, {}
    for _query, vid, relevant, ev in mark_rows(library, matcher):
        (pos if relevant else neg).setdefault(ev, set()).add(vid)
    return WeakLabels(list(videos), pos, {}, neg, ["marks"])


def mark_rows(library, matcher=None) -> list[tuple[str, str, bool, str]]:
    """(query, video id, relevant, library event) of every stored mark whose query concerns a
    library event: the event recorded with the mark, else the offline matcher's for the query."""
    if matcher is None:
        matcher = match_offline
    out, seen = [], {}
    for query, vid, relevant, event in library.marks_in_order():
        if event not in EVENT_KEYS:
            if query not in seen:
                seen[query] = matcher(query).event
            event = seen[query]
        if event in EVENT_KEYS:
            out.append((str(query), str(vid), bool(int(relevant)), event))
    return out


# ---- a benchmark folder's own labels ----------------------------------------------------------

# library event -> (query ids, events.csv (event, side|None) rows) on the dev benchmark. A query
# maps when its meaning is the library event; events.csv rows serve events without a query.
BENCH_EVENT_MAP: dict[str, tuple[tuple[str, ...], tuple[tuple[str, str | None], ...]]] = {
    "cut_in": ((), (("cut_in", None),)),
    "cut_in_left": ((), (("cut_in", "left"),)),
    "cut_in_right": (("q01",), ()),
    "cut_out": (("q03",), ()),
    "lane_change": ((), (("ego_lane_change", None), ("cut_in", None), ("cut_out", None))),
    "ego_lane_change": (("q06",), ()),
    "ego_turn_left": (("q04",), ()),
    "ego_turn_right": (("q05",), ()),
    "sharp_turn": ((), (("ego_turn", None),)),
    "lead_brake": (("q07",), ()),
    "ego_brake": (("q08",), ()),
    "hard_brake": ((), (("ego_brake", None),)),
    "pedestrian_crossing": (("q09",), ()),
    "cyclist_crossing": (("q10",), ()),
    "crossing_vehicle": (("q11",), ()),
    "collision": (("q13",), ()),
    "ego_collision": (("q14",), ()),
    "rear_end": (("q15",), ()),
    "overtaken_left": (("q16",), ()),
    "overtaken_right": (("q17",), ()),
    "close_pass": ((), (("close_pass", None),)),
    "ego_stationary": (("q21",), ()),
    "steady_driving": (("q20",), ()),
}


def labels_from_benchmark(bench_dir: str | Path, videos: list[str] | None = None) -> WeakLabels:
    """Labels of a benchmark folder (docs/formats.md section 2) mapped to library events.

    Used to calibrate on the dev benchmark: its human labels stand in for caption-extracted
    weak labels. ``videos`` restricts the universe (e.g. to items that have records).
    """
    b = Path(bench_dir)
    queries = {q["id"]: q for q in json.loads((b / "queries.json").read_text(encoding="utf-8"))}
    rows = []
    if (b / "events.csv").exists():
        with (b / "events.csv").open(newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
    if videos is None:
        manifest = json.loads((b / "manifest.json").read_text(encoding="utf-8"))
        videos = [v["id"] for v in manifest["videos"]]
    pos, ign = {}, {}
    for ev, (qids, csv_keys) in BENCH_EVENT_MAP.items():
        get_event(ev)
        p, a = set(), set()
        for qid in qids:
            if qid in queries:
                p |= set(queries[qid].get("relevant", []))
                a |= set(queries[qid].get("ambiguous", []))
        for name, side in csv_keys:
            for r in rows:
                if r["event"] != name or (side and r.get("side") != side):
                    continue
                if r["status"] == "confirmed":
                    p.add(r["item"])
                elif r["status"] == "ambiguous":
                    a.add(r["item"])
        pos[ev], ign[ev] = p, a - p
    # any other benchmark (e.g. benchmarks/composition): a query whose "event" is a library event
    # key labels that event directly
    for q in queries.values():
        ev = q.get("event")
        if ev in EVENT_KEYS and ev not in BENCH_EVENT_MAP:
            p = set(q.get("relevant", []))
            pos.setdefault(ev, set()).update(p)
            ign.setdefault(ev, set()).update(set(q.get("ambiguous", [])) - p)
    return WeakLabels(list(videos), pos, ign, {}, [f"benchmark:{b.name}"])

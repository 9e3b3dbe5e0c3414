"""Field statistics over a corpus: what a "large" change is on this data.

Per field and window (2, 4, 8 s): percentiles of each track's max |Δ| within the window, and the
fraction of tracks whose 4 s max |Δ| exceeds representative thresholds. They condition the LLM
proposer and adapter ("aim a rare event at P90-P95"), set offline defaults, and are shown to users.
"""

from __future__ import annotations

import numpy as np

from ..availability import DERIVED_FROM, field_available
from .columns import TrackColumns
from .model import ALL_FIELDS, EGO_FIELDS, FIELD_UNITS
from .scorer import RuleScorer

STAT_FIELDS = ("distance", "loc_x", "abs_loc_x", "loc_z", "lane_rel", "bbox_area", "speed", "yaw_rate",
               "accel", "heading", "jolt")
WINDOWS_S = (2.0, 4.0, 8.0)
PERCENTILES = (10, 25, 50, 75, 80, 85, 90, 95, 99)
THRESHOLDS = {"distance": (2, 5, 10, 20, 30), "loc_x": (0.5, 1, 2, 3.5, 5), "abs_loc_x": (0.5, 1, 2, 3.5, 5),
              "loc_z": (2, 5, 10, 20, 30), "lane_rel": (1, 2), "bbox_area": (1e3, 5e3, 2e4, 5e4),
              "speed": (1, 2, 4, 6, 8), "yaw_rate": (0.05, 0.1, 0.2, 0.3), "accel": (1, 2, 3, 4),
              "heading": (0.3, 0.6, 1.0, 1.5), "jolt": (0.05, 0.1, 0.2, 0.4)}


def field_stats(source, fields=STAT_FIELDS, windows_s=WINDOWS_S) -> dict:
    """Statistics per field: {"n_tracks", "windows": {"4s": {"P50": ...}}, "pct_exceeding_4s": {thr: frac}}.

    ``source`` is a RuleScorer, a TrackColumns or a Library.
    """
    cols = _columns(source)
    out: dict = {"n_videos": cols.n_videos, "n_tracks": cols.tracks.n, "fields": {}}
    for f in fields:
        series, vals = cols.series_for(f)
        has = np.bincount(series.sample_track()[~np.isnan(vals)], minlength=series.n) >= 2 \
            if series.n else np.zeros(0, bool)
        if not has.any():
            continue
        entry: dict = {"n_units": int(has.sum()), "role": "ego" if series is cols.ego else "object",
                       "windows": {}}
        finite = vals[~np.isnan(vals)]
        entry["value"] = {"mean": float(finite.mean()), "std": float(finite.std()),
                          **{f"P{p}": float(np.percentile(finite, p)) for p in (5, 50, 95)}}
        for w in windows_s:
            ch = cols.window_change(f, w, None)[has]
            entry["windows"][f"{w:g}s"] = {f"P{p}": float(np.percentile(ch, p)) for p in PERCENTILES}
        ch4 = cols.window_change(f, 4.0, None)[has]
        entry["pct_exceeding_4s"] = {f"{t:g}": float((ch4 > t).mean()) for t in THRESHOLDS.get(f, ())}
        out["fields"][f] = entry
    return out


def format_stats(stats: dict) -> str:
    """A compact text table (for the terminal and for LLM prompts)."""
    lines = [f"{stats['n_videos']} videos, {stats['n_tracks']} tracks"]
    for f, e in stats["fields"].items():
        lines.append(f"{f} ({e['role']}, n={e['n_units']}): value P5/P50/P95 = "
                     f"{e['value']['P5']:.3g}/{e['value']['P50']:.3g}/{e['value']['P95']:.3g}")
        for w, p in e["windows"].items():
            lines.append(f"  max|Δ| in {w}: " + " ".join(f"{k}={v:.3g}" for k, v in p.items()))
        if e["pct_exceeding_4s"]:
            lines.append("  fraction exceeding in 4s: " +
                         " ".join(f">{k}: {v:.0%}" for k, v in e["pct_exceeding_4s"].items()))
    return "\n".join(lines)


def _columns(source) -> TrackColumns:
    if isinstance(source, TrackColumns):
        return source
    if hasattr(source, "columns"):
        return source.columns
    return RuleScorer(source).columns


def field_hints(source, avails: dict[str, dict] | None = None, fields=STAT_FIELDS,
                windows_s=WINDOWS_S) -> dict:
    """What a rule editor shows beside each value: per rule field its value distribution and the
    distribution of each track's largest change within a window (`field_stats`), and in how many
    videos it is unknown (``avails``: ``Library.availability()``); the classes of the tracks with
    how many tracks and videos each. ``source`` as for `field_stats`.

    ``{"n_videos", "n_tracks", "classes": [{"name", "tracks", "videos"}, ...] (most tracks first),
    "fields": {f: {"unit", "role", "n_units", "value": {...}, "windows": {...},
    "unknown_videos", "recorded_videos"}}}``. A field without two finite samples on one unit has
    no ``value``/``windows``; ``unknown_videos``/``recorded_videos`` count the videos whose
    availability record says the field has no values / says anything about it (videos indexed
    before availability existed say nothing)."""
    cols = _columns(source)
    fields = tuple(fields) + tuple(f for f in ("score",) if f not in fields)
    st = field_stats(cols, fields, windows_s) if cols.n_videos else \
        {"n_videos": 0, "n_tracks": 0, "fields": {}}
    out: dict = {"n_videos": int(cols.n_videos), "n_tracks": int(cols.tracks.n), "classes": [],
                 "fields": {}}
    codes = np.asarray(cols.track_cls, dtype=np.int64)
    owner = np.asarray(cols.tracks.owner, dtype=np.int64)
    for k, name in enumerate(cols.cls_names):
        sel = codes == k
        if sel.any():
            out["classes"].append({"name": name, "tracks": int(sel.sum()),
                                   "videos": int(np.unique(owner[sel]).size)})
    out["classes"].sort(key=lambda c: (-c["tracks"], c["name"]))
    avails = avails or {}
    for f in ALL_FIELDS:
        e = dict(st["fields"].get(f, {}))
        e.setdefault("role", "ego" if f in EGO_FIELDS else "object")
        e.setdefault("n_units", 0)
        e["unit"] = FIELD_UNITS.get(f, "")
        known = [field_available(av, f) for av in avails.values()]
        e["unknown_videos"] = sum(k is False for k in known)
        e["recorded_videos"] = sum(k is not None for k in known)
        e["derived_from"] = DERIVED_FROM.get(f)
        out["fields"][f] = e
    return out


def _num_text(x: float, unit: str = "") -> str:
    """A hint's number: 3 significant digits, no exponent below a million, with its unit."""
    if not np.isfinite(x):
        return "n/a"
    a = abs(x)
    s = f"{x:,.0f}" if a >= 1000 else f"{x:.3g}" if a >= 5e-4 else "0"
    return f"{s} {unit}".rstrip() if unit else s


def hint_text(hints: dict | None, field: str, *, window_s: float | None = None) -> str:
    """One line about ``field`` in the library, for the value (``window_s`` None) or for the
    change within ``window_s`` seconds (the nearest window the statistics have), e.g.
    "in this library: median 12.3 m, 5–95 % 3.1–48 m; unknown in 4 of 27 videos"."""
    if not hints:
        return ""
    e = (hints.get("fields") or {}).get(field)
    n_v = int(hints.get("n_videos") or 0)
    if e is None or n_v == 0:
        return "in this library: no videos yet" if n_v == 0 else ""
    unit = e.get("unit", "")
    bits = []
    if window_s is None and e.get("value"):
        v = e["value"]
        bits.append(f"median {_num_text(v['P50'], unit)}, 5–95 %: "
                    f"{_num_text(v['P5'])} to {_num_text(v['P95'], unit)}")
    elif window_s is not None and e.get("windows"):
        ws = {float(k.rstrip("s")): k for k in e["windows"]}
        near = min(ws, key=lambda w: (abs(w - float(window_s)), -w))
        p = e["windows"][ws[near]]
        bits.append(f"a track's largest change within {near:g} s: median {_num_text(p['P50'], unit)}, "
                    f"90 % {_num_text(p['P90'], unit)}, 95 % {_num_text(p['P95'], unit)}")
    else:
        bits.append("no values of this field")
    if e.get("recorded_videos"):
        bits.append(f"unknown in {e['unknown_videos']} of {n_v} videos")
    return "in this library: " + "; ".join(bits)

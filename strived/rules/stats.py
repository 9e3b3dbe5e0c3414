"""Field statistics over a corpus: what a "large" change is on this data.

Per field and window (2, 4, 8 s): percentiles of each track's max |Δ| within the window, and the
fraction of tracks whose 4 s max |Δ| exceeds representative thresholds. They condition the LLM
proposer and adapter ("aim a rare event at P90-P95"), set offline defaults, and are shown to users.
"""

from __future__ import annotations

import numpy as np

from .columns import TrackColumns

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
    from .scorer import RuleScorer
    return RuleScorer(source).columns

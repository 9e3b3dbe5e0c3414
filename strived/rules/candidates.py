"""The candidate units of a rule's entity over a library's columns: every video (the ego), or
the tracks that pass the class filter, one per video with ``selection: closest``. Shared by the
scorer and the sequence scorer (below both)."""

from __future__ import annotations

import numpy as np

from .columns import TrackColumns


def candidate_units(cols: TrackColumns, entity) -> tuple[np.ndarray, np.ndarray, bool]:
    """(unit mask, unit owner video index, is_ego) for ``entity`` (a rule's `Entity`)."""
    if entity.role == "ego":
        return np.ones(cols.n_videos, bool), cols.ego.owner, True
    T = cols.tracks
    if entity.class_filter is None:
        mask = np.ones(T.n, bool)
    else:
        codes = [i for i, c in enumerate(cols.cls_names) if c in entity.class_filter]
        mask = np.isin(cols.track_cls, np.asarray(codes, np.int16)) if codes else np.zeros(T.n, bool)
    if entity.selection == "closest" and mask.any():
        md = cols.mean("distance")
        key = np.where(mask & ~np.isnan(md), md, np.inf)
        # per video: candidate with smallest mean distance (ties: lowest track id); videos
        # whose candidates have no distance at all keep their lowest-id candidate
        key = np.where(mask & np.isnan(md), 1e300, key)
        order = np.lexsort((cols.track_ids, key, T.owner))
        owners = T.owner[order]
        first = np.r_[True, owners[1:] != owners[:-1]]
        chosen = order[first]
        chosen = chosen[mask[chosen]]
        mask = np.zeros(T.n, bool)
        mask[chosen] = True
    return mask, T.owner, False

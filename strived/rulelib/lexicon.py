"""The event side of the query vocabulary: the ego/other-vehicle event pairs and the
most-specific ordering of candidate events. The negation-aware lexicon extractor that names the
events a sentence asserts lives with the query parse (`strived.query`: the matcher, composition
and router read one `ParsedQuery`); it is re-exported here for the caption labeller of
calibration (`fit/weak_labels.py`)."""

from __future__ import annotations

from ..query import extract_events_lexicon
from ..events import EVENTS, get_event

__all__ = ["EGO_OTHER", "OTHER_EGO", "extract_events_lexicon", "most_specific"]

# (ego event, other-vehicle analogue): used for the ego/other disambiguation
EGO_OTHER = {"hard_brake": "lead_brake", "ego_brake": "lead_brake", "swerving": "lateral_movement",
             "ego_lane_change": "lane_change", "ego_collision": "collision",
             "sudden_stop": "lead_brake"}
OTHER_EGO = {"lateral_movement": "swerving", "lane_change": "ego_lane_change",
             "lead_brake": "ego_brake", "object_departure": "ego_pull_away"}

_ORDER = {e.key: i for i, e in enumerate(EVENTS)}


def most_specific(hits: set[str]) -> list[str]:
    """Drop parents whose child also matched; order: children first, then inventory order."""
    keep = [k for k in hits if not any(get_event(c).parent == k for c in hits)]
    return sorted(keep, key=lambda k: (get_event(k).parent is None, _ORDER[k]))

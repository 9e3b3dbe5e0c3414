"""Per-field availability of a video's records: which signals were estimated, how well, and why not.

Search must tell "not estimated" from "did not happen": a rule that reads ego ``speed`` cannot judge
a video whose speed nobody measured, and a 0 there would silently rank it last. Every video in a
library carries ``attrs["availability"]``::

    {"speed": {"status": "estimated", "coverage": 0.93, "source": "video", "reason": None,
               "quality": 0.71},
     "accel": {"status": "unavailable", "coverage": 0.0, "source": "video",
               "reason": "night: too dark for road texture"}, ...}

- ``status``: ``estimated`` (a value on at least half of the frames that could have one),
  ``partial`` (some frames), ``unavailable`` (none), or ``no_objects`` for object fields of a video
  in which nothing was tracked (the field is not missing: there was nothing to measure).
- ``coverage``: share of frames (ego fields) or of object-frames (object fields) with a value.
- ``source``: ``video`` (our perception), ``telemetry:...`` (the camera's own GPS), ``records``
  (imported from another pipeline or ground truth).
- ``reason``: why a field is (partly) missing, when the producer knew; ``quality``: optional mean
  confidence (0..1) of the published values.

Producers (perception, telemetry) set the entries they know; `complete_availability` fills the
rest from the data itself, so imported records get availability too.
"""

from __future__ import annotations

import numpy as np

from .records import EGO_FIELDS

EGO_AVAIL_FIELDS = ("speed", "accel", "yaw_rate", "jolt")
OBJECT_AVAIL_FIELDS = ("distance", "loc_x", "lane_rel")
AVAIL_FIELDS = EGO_AVAIL_FIELDS + OBJECT_AVAIL_FIELDS
STATUSES = ("estimated", "partial", "unavailable", "no_objects")

# derived rule fields read the availability of what they are computed from
# (loc_x_road: loc_x with the ego's rotation taken out where the yaw rate is known; it has a value
# wherever loc_x has one except the samples before a turn of more than 20 deg (rules.road:
# ROAD_MAX_TURN_RAD), which are part of a track, not a video's availability: it reads loc_x's)
DERIVED_FROM = {"heading": "yaw_rate", "abs_loc_x": "loc_x", "loc_z": "distance", "loc_x_road": "loc_x",
                "abs_loc_x_road": "loc_x"}


def _status(coverage: float) -> str:
    if coverage >= 0.5:
        return "estimated"
    return "partial" if coverage > 0 else "unavailable"


def measure_availability(rec) -> dict:
    """Availability measured from the data alone (coverage and status; no reasons)."""
    out: dict[str, dict] = {}
    n = len(rec.t)
    for f in EGO_AVAIL_FIELDS:
        v = np.asarray(rec.ego.get(f, np.full(n, np.nan)), float)
        cov = float(np.isfinite(v).mean()) if n else 0.0
        out[f] = {"status": _status(cov), "coverage": round(cov, 4)}
    n_obj = sum(len(tr) for tr in rec.tracks)
    for f in OBJECT_AVAIL_FIELDS:
        if n_obj == 0:
            out[f] = {"status": "no_objects", "coverage": None}
            continue
        fin = sum(int(np.isfinite(np.asarray(tr.fields[f], float)).sum()) for tr in rec.tracks)
        cov = fin / n_obj
        out[f] = {"status": _status(cov), "coverage": round(cov, 4)}
    return out


def complete_availability(rec, default_source: str | None = None) -> dict:
    """``rec.info.attrs["availability"]`` with every field present: coverage and status measured
    from the data (they always describe what is stored), source/reason/quality kept from the
    producer. ``default_source``: ``video`` for perceived videos, ``records`` otherwise."""
    attrs = rec.info.attrs
    if default_source is None:
        default_source = "video" if "perception" in attrs else "records"
    given = attrs.get("availability") if isinstance(attrs.get("availability"), dict) else {}
    out = {}
    for f, m in measure_availability(rec).items():
        prev = given.get(f) if isinstance(given.get(f), dict) else {}
        e = {"status": m["status"], "coverage": m["coverage"],
             "source": str(prev.get("source") or default_source),
             "reason": prev.get("reason") if isinstance(prev.get("reason"), str) else None}
        if isinstance(prev.get("quality"), (int, float)) and np.isfinite(prev["quality"]):
            e["quality"] = round(float(prev["quality"]), 3)
        if e["status"] in ("unavailable", "partial") and not e["reason"]:
            e["reason"] = ("not in the imported records" if e["source"] == "records"
                           else "not estimated")
        out[f] = e
    return out


def _coverage(avail: dict, field: str) -> float:
    """Share of the clip's frames with a value of ``field`` (1.0 when not recorded)."""
    e = avail.get(DERIVED_FROM.get(field, field))
    c = e.get("coverage") if isinstance(e, dict) else None
    return float(c) if isinstance(c, (int, float)) else 1.0


def field_available(avail: dict | None, field: str) -> bool | None:
    """Whether ``field`` (a rule field, derived ones included) has values in a video with this
    availability: True / False, or None when the video carries no availability record."""
    if not avail:
        return None
    e = avail.get(DERIVED_FROM.get(field, field))
    if not isinstance(e, dict):
        return None
    return e.get("status") in ("estimated", "partial", "no_objects")


FIELD_WORDS = {"speed": "ego speed", "accel": "ego acceleration", "yaw_rate": "ego yaw rate",
               "heading": "ego heading", "jolt": "camera jolt", "distance": "distance",
               "loc_x": "lateral offset", "abs_loc_x": "lateral offset", "loc_z": "depth",
               "loc_x_road": "lateral offset", "abs_loc_x_road": "lateral offset",
               "lane_rel": "lane"}


class AvailGroups:
    """The videos of an ordered list grouped by their availability record (the same object:
    the library interns them, so a large library has a few): `unjudgeable` then tests each
    record once and picks the videos with numpy, instead of a Python step per video."""

    def __init__(self, avails: dict[str, dict], videos):
        ids = list(videos)
        self.ids = np.asarray(ids, dtype=object) if ids else np.zeros(0, dtype=object)
        self.records: list[dict] = []
        self.group = np.full(len(ids), -1, np.int64)      # -1: no availability record (judged)
        seen: dict[int, int] = {}
        for i, v in enumerate(ids):
            av = avails.get(v)
            if not av:
                continue
            g = seen.get(id(av))
            if g is None:
                g = seen[id(av)] = len(self.records)
                self.records.append(av)
            self.group[i] = g


def unjudgeable(avails: dict[str, dict], rule, videos=None, groups: AvailGroups | None = None
                ) -> dict[str, list[str]]:
    """{video_id: [fields it has no values for]} among ``videos`` (default: all): the videos
    ``rule`` cannot evaluate, because a hard gate reads a field the video does not have, or every
    soft score does. (A soft score on a missing field among others that are present is unknown,
    not 0: in each unit's weighted mean it takes its expected value, the mean of the term over
    the units of the same scoring where it is known (docs/rules.md, "Scoring"), so such a video
    is judged on the terms it has; only when no term is known does a unit score 0, and those
    videos are the ones listed here.)
    Videos without an availability record are judged.
    ``groups``: `AvailGroups` of ``avails`` over the videos asked about (replaces ``videos``)."""
    # a sequence rule cannot be judged when one of its steps cannot (every step must be realised)
    parts = list(rule.sequence) if getattr(rule, "sequence", None) is not None else [rule]
    # the share of the clip with a value an ego gate needs to be judged: x for "for >= x of the
    # clip" when x is above MIN_GATE_COVERAGE, else MIN_GATE_COVERAGE (a gate met "at some
    # moment" or "held for s seconds" on a field mostly unknown would read the unknown frames as
    # "did not happen": issue 37, braking on a clip with acceleration on 10 % of its frames)
    fractions = [(g.field, max(g.min_time_fraction or 0.0, MIN_GATE_COVERAGE)
                  if g.min_seconds is None else MIN_GATE_COVERAGE)
                 for p in parts for g in p.hard_gates if g.field in EGO_FIELDS]
    parts = [(list(dict.fromkeys(g.field for g in p.hard_gates)),
              list(dict.fromkeys(s.field for s in p.soft_scores))) for p in parts]
    if groups is None:
        groups = AvailGroups(avails, avails if videos is None else videos)
    miss_of = [_missing(av, parts, fractions) for av in groups.records]
    bad = np.array([bool(m) for m in miss_of] + [False], bool)   # the last entry: group -1
    at = np.flatnonzero(bad[groups.group])
    return dict(zip(groups.ids[at].tolist(), [list(miss_of[g]) for g in groups.group[at].tolist()]))


#: An ego hard gate on a field known on less than this share of the clip's frames ("mostly
#: unknown", status ``partial``) cannot be judged, whatever its form: the unknown frames could
#: decide either way (a gate held for a duration is worse still: every unknown frame breaks a
#: run). Such a video is unknown, not a non-match, in every rule, explanation and export. The
#: value is the line between ``estimated`` and ``partial``, not fitted.
MIN_GATE_COVERAGE = 0.5
MIN_SECONDS_COVERAGE = MIN_GATE_COVERAGE   # the name earlier code and docs use


def _missing(av: dict, parts: list, fractions: list) -> list[str]:
    """The fields a video with availability ``av`` lacks for a rule (`unjudgeable`)."""
    miss: list[str] = []
    for gates, softs in parts:
        miss += [f for f in gates if field_available(av, f) is False and f not in miss]
        # "for >= x of the clip" on a field estimated on less than x of it, or "held for >= s
        # seconds" on a field mostly unknown: the frames without a value could decide either way
        miss += [f for f, frac in fractions if frac is not None and f not in miss
                 and field_available(av, f) and _coverage(av, f) < frac - 1e-9]
        miss_soft = [f for f in softs if field_available(av, f) is False]
        if softs and len(miss_soft) == len(softs):
            miss += [f for f in miss_soft if f not in miss]
    return miss


def _why(av: dict | None, f: str) -> str:
    """Why a video with availability ``av`` cannot be judged on ``f``, in words."""
    e = (av or {}).get(DERIVED_FROM.get(f, f)) or {}
    if field_available(av, f):   # judged on a share of the clip too small
        return f"{FIELD_WORDS.get(f, f)} known on too little of the clip"   # grouped: no number
    key = f"{FIELD_WORDS.get(f, f)} not " + ("in the imported records" if e.get("source") == "records"
                                            else "estimated from video")
    reason = e.get("reason")
    if reason and e.get("source") != "records":
        key += f" ({reason})"
    return key


def unjudged_notice(unjudged: dict[str, list[str]], avails: dict[str, dict], n_videos: int) -> str | None:
    """One line for the user: how many videos the rule source could not judge, and why."""
    if not unjudged:
        return None
    why: dict[str, int] = {}
    keys: dict[tuple[int, str], str] = {}    # the wording depends on the record and field only
    for vid, fields in unjudged.items():
        av = avails.get(vid)
        for f in fields:
            key = keys.get((id(av), f))
            if key is None:
                key = keys[(id(av), f)] = _why(av, f)
            why[key] = why.get(key, 0) + 1
    parts = "; ".join(f"{k}: {n}" for k, n in sorted(why.items(), key=lambda kv: -kv[1])[:4])
    return (f"rule source could not judge {len(unjudged)} of {n_videos} videos (they are not ranked by "
            f"the rule, neither as matches nor as non-matches): {parts}")


def summarize(avails: dict[str, dict]) -> dict[str, dict[str, int]]:
    """Per field, how many videos have each status: {"speed": {"estimated": 12, "unavailable": 3}}."""
    out: dict[str, dict[str, int]] = {}
    for av in avails.values():
        for f, e in (av or {}).items():
            if isinstance(e, dict) and e.get("status"):
                d = out.setdefault(f, {})
                d[e["status"]] = d.get(e["status"], 0) + 1
    return out


#: A speed sample counts in rules only when its confidence (``speed_conf``, 0..1) is at least
#: this, or unknown (imported records carry none: their speeds count). 0.2 = an expected error of
#: twice the tolerance max(0.5 m/s, 15 %) (egomotion.SPEED_CONF_TOL_*), or a night clip's road flow
#: (its confidence is scaled down to 0.2 at most); telemetry (1.0) and a burnt-in speed (0.9) always
#: count. Below it the sample is unknown (NaN), as if not measured: a gate or score on speed is
#: judged on the confident samples only.
MIN_SPEED_CONF = 0.2


def confident_ego(ego: dict, field_name: str) -> np.ndarray:
    """The ego series ``field_name`` as rules read it: ``speed`` without its unconfident samples."""
    v = np.asarray(ego[field_name])
    if field_name != "speed":
        return v
    conf = ego.get("speed_conf")
    if conf is None:
        return v
    conf = np.asarray(conf)
    if conf.shape != v.shape:
        return v
    with np.errstate(invalid="ignore"):
        return np.where(conf < MIN_SPEED_CONF, np.nan, v).astype(v.dtype)


def judged_share(avail: dict | None, rule) -> dict[str, float]:
    """{ego field: share of the clip's frames with a value} for the ego fields ``rule`` reads (its
    gates and soft scores, every step of a sequence) that a video with availability ``avail``
    knows on only part of the clip: what a judged video was judged on, said with its score
    (issue 37: "says how much of the clip it judged"). {} when every field it reads is whole, or
    the video carries no availability record."""
    if not avail:
        return {}
    parts = list(rule.sequence) if getattr(rule, "sequence", None) is not None else [rule]
    fields = dict.fromkeys(f for p in parts for f in [*(g.field for g in p.hard_gates),
                                                      *(c.field for c in p.soft_scores)]
                           if DERIVED_FROM.get(f, f) in EGO_AVAIL_FIELDS)
    out = {}
    for f in fields:
        if field_available(avail, f):
            c = _coverage(avail, f)
            if c < 1.0:
                out[DERIVED_FROM.get(f, f)] = round(c, 3)
    return out

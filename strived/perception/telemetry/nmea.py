"""NMEA sidecars: plain sentences or with a ``[unix-ms]`` prefix, parsed with ``pynmea2``.

RMC (time+date, status, position, speed in knots, course), GGA (position, fix quality), VTG (speed km/h,
course; attached to the preceding fix). Bad checksums are skipped and counted; status V / quality 0 fixes
are dropped.
"""

from __future__ import annotations

import calendar
import math
import re

import numpy as np

from .base import KMH_MPS, KNOT_MPS, TelemetryError, as_float

_PREFIX_RE = re.compile(r"\[(\d{10,14})\]")


def _tod(ts) -> float:
    return ts.hour * 3600 + ts.minute * 60 + ts.second + ts.microsecond * 1e-6


def parse_nmea(data: bytes | str, name: str = "nmea") -> tuple[dict, list[str]]:
    """Fixes from NMEA text: dict(t_abs, lat, lon, speed m/s, course rad, absolute: bool) + warnings."""
    text = data.decode("ascii", errors="replace") if isinstance(data, bytes) else data
    warnings: list[str] = []
    recs, n_sent, n_bad_cs, n_bad = _read_records(text)
    if n_bad_cs:
        warnings.append(f"{name}: {n_bad_cs} sentence(s) with a bad checksum skipped")
    if n_bad:
        warnings.append(f"{name}: {n_bad} malformed sentence(s) skipped")
    if not n_sent:
        raise TelemetryError(f"{name}: no valid NMEA sentence")
    if not recs:
        raise TelemetryError(f"{name}: no RMC/GGA fix sentence")
    t_abs, absolute = _absolute_times(recs)
    fixes = _merge_fixes(recs, t_abs, name, warnings)
    return dict(**fixes, absolute=absolute), warnings


def _read_records(text: str) -> tuple[list[list], int, int, int]:
    """(fix records, sentences parsed, bad checksums, malformed sentences) from the lines of ``text``.

    A record is [tod, date|None, prefix_s|None, kind, lat, lon, speed, course, valid]."""
    import pynmea2

    n_sent = n_bad_cs = n_bad = 0
    recs: list[list] = []
    last_timed = None
    for raw in text.splitlines():
        line = raw.replace("\x00", "").strip()
        j = line.find("$")
        if j < 0:
            continue
        pm = _PREFIX_RE.search(line[:j])
        prefix = int(pm.group(1)) / (1000.0 if len(pm.group(1)) >= 13 else 1.0) if pm else None
        try:
            msg = pynmea2.parse(line[j:], check=False)
        except pynmea2.ChecksumError:
            n_bad_cs += 1
            continue
        except (pynmea2.ParseError, ValueError, TypeError, AttributeError):
            n_bad += 1
            continue
        n_sent += 1
        st = getattr(msg, "sentence_type", "")
        try:
            rec = _record(msg, st, prefix, last_timed)
        except (ValueError, TypeError, AttributeError):
            n_bad += 1
            continue
        if rec is None:
            continue
        recs.append(rec)
        last_timed = rec
    return recs, n_sent, n_bad_cs, n_bad


def _record(msg, st: str, prefix: float | None, last_timed: list | None) -> list | None:
    """The fix record of an RMC or GGA sentence; None for any other (a VTG fills the preceding fix's
    missing speed and course in place)."""
    if st == "RMC":
        ts = msg.timestamp
        if ts is None:
            return None
        valid = msg.status == "A" and getattr(msg, "mode_indicator", None) != "N"
        spd = as_float(msg.spd_over_grnd) * KNOT_MPS
        crs = math.radians(as_float(msg.true_course))
        lat, lon = _latlon(msg)
        try:
            date = msg.datestamp
        except (ValueError, TypeError):
            date = None   # empty/garbled date field: resolved like a GGA time (_absolute_times)
        return [_tod(ts), date, prefix, "RMC", lat, lon, spd, crs, valid]
    if st == "GGA":
        ts = msg.timestamp
        if ts is None:
            return None
        lat, lon = _latlon(msg)
        q = as_float(msg.gps_qual)
        return [_tod(ts), None, prefix, "GGA", lat, lon, math.nan, math.nan, bool(q > 0)]
    if st == "VTG" and last_timed is not None:
        spd = as_float(msg.spd_over_grnd_kmph) * KMH_MPS
        if not math.isfinite(spd):
            spd = as_float(msg.spd_over_grnd_kts) * KNOT_MPS
        crs = math.radians(as_float(msg.true_track))
        last_timed[6] = spd if not math.isfinite(last_timed[6]) else last_timed[6]
        last_timed[7] = crs if not math.isfinite(last_timed[7]) else last_timed[7]
    return None


def _absolute_times(recs: list[list]) -> tuple[np.ndarray, bool]:
    """Each record's time (unix s when absolute): date from RMC, else from the unix prefix, else the nearest
    dated RMC, else relative (time of day, midnight unwrapped in file order)."""
    dated = [(i, calendar.timegm(r[1].timetuple()) + r[0]) for i, r in enumerate(recs) if r[1] is not None]
    absolute = bool(dated) or any(r[2] is not None for r in recs)
    t_abs = np.empty(len(recs))
    k = 0
    day_wrap = 0.0
    for i, r in enumerate(recs):
        if r[1] is not None:
            t_abs[i] = calendar.timegm(r[1].timetuple()) + r[0]
            continue
        if r[2] is not None:
            ref = r[2]
        elif dated:
            while k + 1 < len(dated) and dated[k + 1][0] <= i:
                k += 1
            ref = dated[k][1]
        else:  # time of day only: unwrap midnight in file order
            if i and r[0] + day_wrap < t_abs[i - 1] - 43200:
                day_wrap += 86400.0
            t_abs[i] = r[0] + day_wrap
            continue
        day = math.floor(ref / 86400.0) * 86400.0
        cands = day + r[0] + np.array([-86400.0, 0.0, 86400.0])
        t_abs[i] = cands[np.argmin(np.abs(cands - ref))]
    return t_abs, absolute


def _merge_fixes(recs: list[list], t_abs: np.ndarray, name: str, warnings: list[str]) -> dict:
    """Merge the sentences of the same fix (RMC and GGA share the time; RMC wins for position/speed) and
    drop fixes any sentence says are invalid: dict(t_abs, lat, lon, speed, course)."""
    arr = np.array([[r[4], r[5], r[6], r[7], float(r[8]), 1.0 if r[3] == "RMC" else 0.0] for r in recs])
    key = np.round(t_abs * 1000).astype(np.int64)
    order = np.lexsort((-arr[:, 5], key))   # by time, RMC first
    key, arr, t_abs = key[order], arr[order], t_abs[order]
    uk, first = np.unique(key, return_index=True)
    grp = np.searchsorted(uk, key)
    valid = np.ones(len(uk), bool)
    np.logical_and.at(valid, grp, arr[:, 4] > 0)  # any sentence says "no fix" -> dropped
    merged = np.full((len(uk), 4), np.nan)
    for c in range(4):  # first finite value per fix in RMC-first order
        colv = arr[:, c]
        fin = np.isfinite(colv)
        g, j = grp[fin], np.nonzero(fin)[0]
        if len(g):
            ug, fi = np.unique(g, return_index=True)
            merged[ug, c] = colv[j[fi]]
    n_nofix = int((~valid).sum())
    if n_nofix:
        warnings.append(f"{name}: {n_nofix} fix(es) without a valid position (status V / quality 0) dropped")
    if not valid.any():
        raise TelemetryError(f"{name}: no valid fix")
    tt = t_abs[first][valid]
    m = merged[valid]
    return dict(t_abs=tt, lat=m[:, 0], lon=m[:, 1], speed=m[:, 2], course=m[:, 3])


def _latlon(msg) -> tuple[float, float]:
    try:
        if not msg.lat or not msg.lon:
            return math.nan, math.nan
        return float(msg.latitude), float(msg.longitude)
    except (ValueError, TypeError, AttributeError):
        return math.nan, math.nan


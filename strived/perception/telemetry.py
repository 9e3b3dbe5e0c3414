"""Ego speed, heading, yaw rate and acceleration from the camera's own GPS telemetry.

Sources, in order of preference (the first that yields fixes wins):

1. GoPro GPMF embedded in the MP4: a ``meta`` track whose sample description is ``gpmd``.
   Read with a minimal ISO-BMFF box reader (moov/trak/mdia/hdlr + minf/stbl: stsd, stts, stsc, stsz,
   stco/co64, edts/elst) and a GPMF KLV parser (DEVC/STRM, sticky SCAL/GPSF/GPSU/TYPE, GPS5 or GPS9).
   Sample times are the track's own timeline (the same clock as the video), each payload's samples spread
   evenly over the payload's duration. Payloads without a 2D/3D fix (GPSF < 2) are dropped.
2. NMEA sidecars ``NAME.nmea`` / ``NAME.gps`` next to ``NAME.mp4`` (extensions case-insensitive; BlackVue
   ``..._NF.mp4`` / ``..._NR.mp4`` also find ``..._N.gps``), plain sentences or with a ``[unix-ms]`` prefix.
   Parsed with ``pynmea2``: RMC (time+date, status, position, speed in knots, course), GGA (position, fix
   quality), VTG (speed km/h, course; attached to the preceding fix). Bad checksums are skipped and counted;
   status V / quality 0 fixes are dropped.
3. GPX tracks ``NAME.gpx`` (``gpxpy``): trkpt time and position; speed/course from GPX 1.0 elements or
   extensions (``speed``, ``course``, ``heading``; ``unit="km/h"``, ``..._kmh``, mph and knots understood).

Time alignment of sidecars (their times are UTC): ``camera.json`` key ``telemetry_offset_s`` puts the first
sidecar sample at that video time (seconds, may be negative). Otherwise the MP4/MOV ``mvhd`` creation time
(UTC, seconds since 1904) is the video's first frame when the telemetry overlaps the recording
[creation, creation + duration] by at least half of the shorter span; otherwise (no, zero or disagreeing
creation time, e.g. a container stamped in local time) the first fix is the first frame (BlackVue-style
sidecars start with the recording). For GPMF the offset, when given, is added to the track times.

Conventions: ``speed`` m/s; ``heading`` rad clockwise from true north (course over ground, or the bearing of
consecutive positions where no course is reported); ``yaw_rate`` rad/s, + = turning left (= -d heading/dt);
``accel`` m/s^2. Everything is NaN outside the telemetry's span or across gaps longer than ``max_gap_s``;
yaw rate and heading are NaN below ``min_speed`` (GPS course is noise at a standstill).
"""

from __future__ import annotations

import calendar
import datetime as _dt
import logging
import math
import re
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)

KNOT_MPS = 1852.0 / 3600.0
KMH_MPS = 1.0 / 3.6
MPH_MPS = 0.44704
EARTH_RADIUS_M = 6371008.8
MP4_EPOCH_TO_UNIX = 2082844800          # 1904-01-01 -> 1970-01-01, seconds
GPMF_EPOCH_2000 = 946684800             # 2000-01-01 in unix seconds
MAX_GAP_S = 2.0                         # no interpolation / differentiation across longer gaps
MIN_COURSE_SPEED_MPS = 1.5              # below this, course over ground is meaningless
DERIV_WINDOW_S = 1.5                    # local linear fit window for accel / yaw rate (>= 3 samples)
MAX_SIDECAR_BYTES = 256 << 20
MAX_MOOV_BYTES = 256 << 20
SIDECAR_EXTS = {".nmea": "nmea", ".gps": "nmea", ".gpx": "gpx"}
_MP4_TOP = {b"ftyp", b"moov", b"mdat", b"free", b"skip", b"wide", b"pnot", b"uuid", b"meta", b"moof"}


class TelemetryError(ValueError):
    """A telemetry source exists but cannot be used (the message says why)."""


# ----------------------------------------------------------------------------------------------------------
# The telemetry series and its resampling onto video frame times
# ----------------------------------------------------------------------------------------------------------

@dataclass
class Telemetry:
    t: np.ndarray             # s from the video's first frame, strictly increasing
    speed: np.ndarray         # m/s, NaN where unknown
    heading: np.ndarray       # rad, clockwise from true north, NaN where unknown
    source: str               # "nmea:NAME.gps", "gpx:NAME.gpx", "gpmf"
    lat: np.ndarray | None = None
    lon: np.ndarray | None = None
    alignment: str = ""       # how sample times were tied to the video
    t0_utc: float | None = None   # unix time of the video's t = 0 when known
    speed_from: str = "reported"  # "reported", "positions" or "reported+positions"
    heading_from: str = "reported"

    def __len__(self) -> int:
        return len(self.t)

    def resample(self, t_video, *, max_gap_s: float = MAX_GAP_S, min_speed: float = MIN_COURSE_SPEED_MPS,
                 window_s: float = DERIV_WINDOW_S) -> dict:
        """Values at the video times ``t_video`` (s): speed, yaw_rate, accel, heading, coverage, source."""
        tq = np.asarray(t_video, np.float64).reshape(-1)
        t = self.t
        dt_med = float(np.median(np.diff(t))) if len(t) > 1 else 1.0
        edge = min(0.5, 0.5 * dt_med)  # hold the end values this far beyond the first/last sample
        win = max(window_s, 2.2 * dt_med)

        speed = _interp(t, self.speed, tq, max_gap_s, edge)
        accel = _interp(t, _local_slope(t, self.speed, win, max_gap_s), tq, max_gap_s, edge)

        head = np.where(self.speed >= min_speed, self.heading, np.nan)  # NaN speed -> NaN too
        ok = np.isfinite(head)
        unwrapped = np.full_like(head, np.nan)
        if ok.any():
            unwrapped[ok] = np.unwrap(head[ok])
        yaw = -_interp(t, _local_slope(t, unwrapped, win, max_gap_s), tq, max_gap_s, edge)
        heading = np.mod(_interp(t, unwrapped, tq, max_gap_s, edge), 2 * math.pi)
        slow = ~(speed >= min_speed)
        yaw[slow] = np.nan
        heading[slow] = np.nan

        out = {"speed": speed, "yaw_rate": yaw, "accel": accel, "heading": heading}
        n = len(tq)
        out["coverage"] = {k: (float(np.isfinite(v).mean()) if n else float("nan")) for k, v in out.items()}
        out["source"] = self.source
        return out


def _interp(t: np.ndarray, v: np.ndarray, tq: np.ndarray, max_gap_s: float, edge_s: float) -> np.ndarray:
    """Linear interpolation that is NaN across gaps > max_gap_s, next to NaN samples and outside the span
    (except within ``edge_s`` of the first/last sample, where that sample's value is held)."""
    out = np.full(tq.shape, np.nan)
    n = len(t)
    if n == 0 or len(tq) == 0:
        return out
    i = np.searchsorted(t, tq, side="right") - 1
    inner = (i >= 0) & (i < n - 1)
    ii = i[inner]
    t0, t1 = t[ii], t[ii + 1]
    w = (tq[inner] - t0) / (t1 - t0)
    val = v[ii] * (1 - w) + v[ii + 1] * w
    # close to a sample, accept its value even when the other neighbour is NaN
    val = np.where(np.isnan(val) & (w < 1e-9), v[ii], val)
    val[(t1 - t0) > max_gap_s] = np.nan
    out[inner] = val
    at_end = (i == n - 1) & (tq - t[-1] <= edge_s)
    out[at_end] = v[-1]
    before = (i < 0) & (t[0] - tq <= edge_s)
    out[before] = v[0]
    return out


def _local_slope(t: np.ndarray, y: np.ndarray, window_s: float, max_gap_s: float) -> np.ndarray:
    """d y / d t by least squares over a centred window, within runs of finite samples without long gaps.

    Vectorised with cumulative sums (O(n)); NaN where the run holds a single sample."""
    n = len(t)
    out = np.full(n, np.nan)
    ok = np.isfinite(y)
    if ok.sum() < 2:
        return out
    new_run = np.ones(n, bool)
    new_run[1:] = (~ok[:-1]) | (np.diff(t) > max_gap_s)
    run = np.cumsum(new_run)[ok]
    tv, yv = t[ok], y[ok]
    m = len(tv)
    run_lo = np.searchsorted(run, run, side="left")
    run_hi = np.searchsorted(run, run, side="right")
    lo = np.maximum(np.searchsorted(tv, tv - window_s / 2, side="left"), run_lo)
    hi = np.minimum(np.searchsorted(tv, tv + window_s / 2, side="right"), run_hi)
    tc = tv - tv[run_lo]                      # per-run origin keeps the sums well conditioned
    yc = yv - yv[run_lo]
    # origin differs per run, but a window never leaves its run, so sums over [lo, hi) share one origin
    cs = lambda a: np.concatenate(([0.0], np.cumsum(a)))  # noqa: E731
    s1, st, sy, stt, sty = cs(np.ones(m)), cs(tc), cs(yc), cs(tc * tc), cs(tc * yc)
    cnt = s1[hi] - s1[lo]
    sum_t, sum_y = st[hi] - st[lo], sy[hi] - sy[lo]
    sum_tt, sum_ty = stt[hi] - stt[lo], sty[hi] - sty[lo]
    den = cnt * sum_tt - sum_t * sum_t
    with np.errstate(invalid="ignore", divide="ignore"):
        slope = (cnt * sum_ty - sum_t * sum_y) / den
    slope[(cnt < 2) | ~(den > 1e-12 * np.maximum(cnt * sum_tt, 1e-300))] = np.nan
    out[ok] = slope
    return out


# ----------------------------------------------------------------------------------------------------------
# Building a Telemetry from fixes (shared by all sources)
# ----------------------------------------------------------------------------------------------------------

def _enu(lat: np.ndarray, lon: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Local east/north metres (equirectangular about the median latitude; fine over a drive)."""
    lat0 = np.nanmedian(lat)
    x = np.radians(lon - np.nanmedian(lon)) * EARTH_RADIUS_M * math.cos(math.radians(lat0))
    y = np.radians(lat - lat0) * EARTH_RADIUS_M
    return x, y


def _position_velocity(t, lat, lon, max_gap_s: float, half_window_s: float = 0.5, min_move_m: float = 1.0):
    """Speed (m/s) and bearing (rad, cw from north) from the chord between the positions about
    ``half_window_s`` (at least one sample) either side, within runs without gaps > max_gap_s."""
    n = len(t)
    speed = np.full(n, np.nan)
    bearing = np.full(n, np.nan)
    if n < 2 or lat is None:
        return speed, bearing
    x, y = _enu(lat, lon)
    good = np.isfinite(x) & np.isfinite(y)
    if good.sum() < 2:
        return speed, bearing
    new_run = np.ones(n, bool)
    new_run[1:] = (~good[:-1]) | (np.diff(t) > max_gap_s)
    run = np.cumsum(new_run)[good]
    tv, xv, yv = t[good], x[good], y[good]
    h = max(half_window_s, float(np.median(np.diff(tv))))
    run_lo = np.searchsorted(run, run, side="left")
    run_hi = np.searchsorted(run, run, side="right") - 1
    a = np.maximum(np.searchsorted(tv, tv - h * 1.001, side="left"), run_lo)
    b = np.minimum(np.searchsorted(tv, tv + h * 1.001, side="right") - 1, run_hi)
    ok = b > a
    a, b = a[ok], b[ok]
    dx, dy, dt = xv[b] - xv[a], yv[b] - yv[a], tv[b] - tv[a]
    dist = np.hypot(dx, dy)
    sp = np.full(len(tv), np.nan)
    br = np.full(len(tv), np.nan)
    sp[ok] = dist / dt
    br[ok] = np.where(dist >= min_move_m, np.mod(np.arctan2(dx, dy), 2 * math.pi), np.nan)
    speed[good], bearing[good] = sp, br
    return speed, bearing


def _build(t_abs, lat, lon, speed, course, source: str, *, max_gap_s: float = MAX_GAP_S) -> dict:
    """Sort and de-duplicate fixes, fill speed/heading from positions where not reported."""
    t_abs = np.asarray(t_abs, np.float64)
    order = np.argsort(t_abs, kind="stable")
    t_abs = t_abs[order]
    keep = np.ones(len(t_abs), bool)
    keep[1:] = np.diff(t_abs) > 1e-6
    sel = order[keep]
    t_abs = t_abs[keep]

    def col(a):
        return np.full(len(t_abs), np.nan) if a is None else np.asarray(a, np.float64)[sel]

    lat, lon, speed, course = col(lat), col(lon), col(speed), col(course)
    if len(t_abs) < 2:
        raise TelemetryError(f"{source}: fewer than 2 valid fixes")
    has_pos = bool(np.isfinite(lat).any())
    pspeed, pbear = _position_velocity(t_abs, lat if has_pos else None, lon, max_gap_s)
    rep_s, rep_c = np.isfinite(speed), np.isfinite(course)
    speed_from = "reported" if rep_s.all() else ("positions" if not rep_s.any() else "reported+positions")
    heading_from = "reported" if rep_c.all() else ("positions" if not rep_c.any() else "reported+positions")
    speed = np.where(rep_s, speed, pspeed)
    heading = np.where(rep_c, course, pbear)
    if not np.isfinite(speed).any():
        raise TelemetryError(f"{source}: neither speed nor usable positions")
    return dict(t_abs=t_abs, lat=lat if has_pos else None, lon=lon if has_pos else None, speed=speed,
                heading=heading, speed_from=speed_from, heading_from=heading_from, pspeed=pspeed)


# ----------------------------------------------------------------------------------------------------------
# NMEA
# ----------------------------------------------------------------------------------------------------------

_PREFIX_RE = re.compile(r"\[(\d{10,14})\]")


def _f(x) -> float:
    try:
        v = float(x)
        return v if math.isfinite(v) else math.nan
    except (TypeError, ValueError):
        return math.nan


def _tod(ts) -> float:
    return ts.hour * 3600 + ts.minute * 60 + ts.second + ts.microsecond * 1e-6


def parse_nmea(data: bytes | str, name: str = "nmea") -> tuple[dict, list[str]]:
    """Fixes from NMEA text: dict(t_abs, lat, lon, speed m/s, course rad, absolute: bool) + warnings."""
    import pynmea2

    text = data.decode("ascii", errors="replace") if isinstance(data, bytes) else data
    warnings: list[str] = []
    n_sent = n_bad_cs = n_bad = 0
    recs: list[list] = []     # [tod, date|None, prefix_s|None, kind, lat, lon, speed, course, valid]
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
            if st == "RMC":
                ts = msg.timestamp
                if ts is None:
                    continue
                valid = msg.status == "A" and getattr(msg, "mode_indicator", None) != "N"
                spd = _f(msg.spd_over_grnd) * KNOT_MPS
                crs = math.radians(_f(msg.true_course))
                lat, lon = _latlon(msg)
                try:
                    date = msg.datestamp
                except (ValueError, TypeError):
                    date = None   # empty/garbled date field: resolved like a GGA time below
                rec = [_tod(ts), date, prefix, "RMC", lat, lon, spd, crs, valid]
            elif st == "GGA":
                ts = msg.timestamp
                if ts is None:
                    continue
                lat, lon = _latlon(msg)
                q = _f(msg.gps_qual)
                rec = [_tod(ts), None, prefix, "GGA", lat, lon, math.nan, math.nan, bool(q > 0)]
            elif st == "VTG":
                if last_timed is not None:
                    spd = _f(msg.spd_over_grnd_kmph) * KMH_MPS
                    if not math.isfinite(spd):
                        spd = _f(msg.spd_over_grnd_kts) * KNOT_MPS
                    crs = math.radians(_f(msg.true_track))
                    last_timed[6] = spd if not math.isfinite(last_timed[6]) else last_timed[6]
                    last_timed[7] = crs if not math.isfinite(last_timed[7]) else last_timed[7]
                continue
            else:
                continue
        except (ValueError, TypeError, AttributeError):
            n_bad += 1
            continue
        recs.append(rec)
        last_timed = rec
    if n_bad_cs:
        warnings.append(f"{name}: {n_bad_cs} sentence(s) with a bad checksum skipped")
    if n_bad:
        warnings.append(f"{name}: {n_bad} malformed sentence(s) skipped")
    if not n_sent:
        raise TelemetryError(f"{name}: no valid NMEA sentence")
    if not recs:
        raise TelemetryError(f"{name}: no RMC/GGA fix sentence")

    # absolute times: date from RMC, else from the unix prefix, else the nearest dated RMC, else relative
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

    # merge sentences of the same fix (RMC and GGA share the time); RMC wins for position/speed
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
    return dict(t_abs=tt, lat=m[:, 0], lon=m[:, 1], speed=m[:, 2], course=m[:, 3], absolute=absolute), warnings


def _latlon(msg) -> tuple[float, float]:
    try:
        if not msg.lat or not msg.lon:
            return math.nan, math.nan
        return float(msg.latitude), float(msg.longitude)
    except (ValueError, TypeError, AttributeError):
        return math.nan, math.nan


# ----------------------------------------------------------------------------------------------------------
# GPX
# ----------------------------------------------------------------------------------------------------------

def _speed_unit(tag: str, attrib: dict) -> tuple[float, bool]:
    """(factor to m/s, explicit?) from an extension element's tag and unit attribute."""
    unit = " ".join(str(v) for k, v in attrib.items() if k.split("}")[-1].lower() in ("unit", "units")).lower()
    s = unit or tag.lower()
    if "km" in s or "kph" in s:
        return KMH_MPS, True
    if "mph" in s:
        return MPH_MPS, True
    if "kn" in s or "kt" in s:
        return KNOT_MPS, True
    return 1.0, bool(unit)


def _ext_values(elems) -> tuple[float, float, bool]:
    """(speed m/s, course deg, unit explicit) found anywhere in a point's extension elements."""
    speed, course, explicit = math.nan, math.nan, False
    stack = list(elems)
    while stack:
        e = stack.pop(0)
        tag = e.tag.split("}")[-1] if isinstance(e.tag, str) else ""
        low = tag.lower()
        if low in ("speed", "spd", "speed_kmh", "speedkmh", "kmh", "speed_kph", "speed_mph", "velocity") \
                and not math.isfinite(speed):
            fac, explicit = _speed_unit(low, e.attrib)
            speed = _f((e.text or "").strip()) * fac
        elif low in ("course", "heading", "bearing", "cog") and not math.isfinite(course):
            course = _f((e.text or "").strip())
        stack.extend(list(e))
    return speed, course, explicit


def parse_gpx(data: bytes | str, name: str = "gpx") -> tuple[dict, list[str]]:
    """Fixes from a GPX file (tracks, else routes): dict(t_abs, lat, lon, speed m/s, course rad)."""
    import gpxpy
    import gpxpy.gpx

    warnings: list[str] = []
    try:
        text = data.decode("utf-8", errors="strict") if isinstance(data, bytes) else data
        g = gpxpy.parse(text)
    except (UnicodeDecodeError, gpxpy.gpx.GPXException, ValueError) as e:  # GPXXMLSyntaxException is one
        raise TelemetryError(f"{name}: not a readable GPX file ({type(e).__name__}: {str(e)[:120]})") from None
    pts = [p for trk in g.tracks for seg in trk.segments for p in seg.points]
    if not pts:
        pts = [p for r in g.routes for p in r.points]
    if not pts:
        raise TelemetryError(f"{name}: no track points")
    rows, n_untimed, explicit_any = [], 0, False
    for p in pts:
        if p.time is None:
            n_untimed += 1
            continue
        tm = p.time if p.time.tzinfo else p.time.replace(tzinfo=_dt.timezone.utc)
        spd, crs, explicit = _ext_values(p.extensions or [])
        explicit_any |= explicit
        if p.speed is not None and not math.isfinite(spd):
            spd, explicit_any = _f(p.speed), True   # GPX 1.0 <speed> is m/s by schema
        if getattr(p, "course", None) is not None and not math.isfinite(crs):
            crs = _f(p.course)
        rows.append((tm.timestamp(), _f(p.latitude), _f(p.longitude), spd, math.radians(crs)))
    if n_untimed:
        warnings.append(f"{name}: {n_untimed} point(s) without a time skipped")
    if len(rows) < 2:
        raise TelemetryError(f"{name}: fewer than 2 timed track points")
    a = np.array(rows)
    out = dict(t_abs=a[:, 0], lat=a[:, 1], lon=a[:, 2], speed=a[:, 3], course=a[:, 4], absolute=True,
               speed_unit_explicit=explicit_any)
    return out, warnings


def _check_speed_units(b: dict, name: str, warnings: list[str]) -> None:
    """Extension speeds without a unit are taken as m/s; if they are ~3.6x (km/h) or ~1.94x (knots) the
    speed implied by the positions, rescale and say so."""
    rep, pos = b["speed"], b["pspeed"]
    ok = np.isfinite(rep) & np.isfinite(pos) & (pos > 3.0)
    if ok.sum() < 5:
        return
    ratio = float(np.median(rep[ok] / pos[ok]))
    for lo, hi, fac, unit in ((3.2, 4.0, KMH_MPS, "km/h"), (1.75, 2.15, KNOT_MPS, "knots"),
                              (2.15, 2.4, MPH_MPS, "mph")):
        if lo < ratio < hi:
            b["speed"] = rep * fac
            warnings.append(f"{name}: speeds without a unit are {ratio:.2f}x the positions' speed: read as {unit}")
            return


# ----------------------------------------------------------------------------------------------------------
# ISO-BMFF (MP4/MOV) box reader
# ----------------------------------------------------------------------------------------------------------

@dataclass
class TrackInfo:
    handler: str
    fmt: str                  # first sample description's format, e.g. "gpmd", "avc1"
    timescale: int
    times_s: np.ndarray       # sample start on the movie timeline (s)
    durations_s: np.ndarray
    offsets: np.ndarray       # file offsets
    sizes: np.ndarray


@dataclass
class Mp4Info:
    creation_unix: float | None
    duration_s: float
    tracks: list[TrackInfo]


def _boxes(buf, start: int, end: int):
    """Yield (type, payload_start, payload_end) for the boxes in buf[start:end]."""
    o = start
    while o + 8 <= end:
        size, typ = struct.unpack_from(">I4s", buf, o)
        hdr = 8
        if size == 1:
            if o + 16 > end:
                return
            size = struct.unpack_from(">Q", buf, o + 8)[0]
            hdr = 16
        elif size == 0:
            size = end - o
        if size < hdr or o + size > end:
            return
        yield typ, o + hdr, o + size
        o += size


def _child(buf, start, end, typ: bytes):
    for t, s, e in _boxes(buf, start, end):
        if t == typ:
            return s, e
    return None


def _path(buf, start, end, *types: bytes):
    rng = (start, end)
    for t in types:
        rng = _child(buf, rng[0], rng[1], t)
        if rng is None:
            return None
    return rng


def read_mp4_info(path: str | Path, *, want_tables: tuple[str, ...] = ("gpmd",)) -> Mp4Info | None:
    """Movie creation time, duration and the tracks (sample tables for formats in ``want_tables``).

    None when the file is not ISO-BMFF (no known top-level box first) or has no ``moov``."""
    path = Path(path)
    with open(path, "rb") as f:
        size = path.stat().st_size
        head = f.read(16)
        if len(head) < 8 or head[4:8] not in _MP4_TOP:
            return None
        o, moov = 0, None
        while o + 8 <= size:
            f.seek(o)
            h = f.read(16)
            if len(h) < 8:
                break
            bsize, typ = struct.unpack_from(">I4s", h, 0)
            hdr = 8
            if bsize == 1 and len(h) >= 16:
                bsize, hdr = struct.unpack_from(">Q", h, 8)[0], 16
            elif bsize == 0:
                bsize = size - o
            if bsize < hdr:
                break
            if typ == b"moov":
                if bsize > MAX_MOOV_BYTES:
                    raise TelemetryError(f"moov box too large ({bsize} bytes)")
                f.seek(o)
                moov = f.read(bsize)
                break
            o += bsize
    if moov is None or len(moov) < 8:
        return None
    hdr = 16 if struct.unpack_from(">I", moov, 0)[0] == 1 else 8
    buf, end = moov, len(moov)
    creation, duration_s, movie_ts = None, 0.0, 0
    mvhd = _child(buf, hdr, end, b"mvhd")
    if mvhd:
        s = mvhd[0]
        ver = buf[s]
        if ver == 1:
            ct, _, movie_ts, dur = struct.unpack_from(">QQIQ", buf, s + 4)
        else:
            ct, _, movie_ts, dur = struct.unpack_from(">IIII", buf, s + 4)
        unix = ct - MP4_EPOCH_TO_UNIX
        creation = float(unix) if 946684800 < unix < 4102444800 else None  # 2000..2100, else unset
        duration_s = dur / movie_ts if movie_ts else 0.0
    tracks = []
    for t, s, e in _boxes(buf, hdr, end):
        if t != b"trak":
            continue
        tr = _read_trak(buf, s, e, movie_ts, want_tables)
        if tr is not None:
            tracks.append(tr)
    return Mp4Info(creation, duration_s, tracks)


def _read_trak(buf, s, e, movie_ts: int, want: tuple[str, ...]) -> TrackInfo | None:
    mdia = _child(buf, s, e, b"mdia")
    if mdia is None:
        return None
    mdhd = _child(buf, *mdia, b"mdhd")
    hdlr = _child(buf, *mdia, b"hdlr")
    stbl = _path(buf, mdia[0], mdia[1], b"minf", b"stbl")
    if mdhd is None or hdlr is None or stbl is None:
        return None
    ver = buf[mdhd[0]]
    timescale = struct.unpack_from(">I", buf, mdhd[0] + (20 if ver == 1 else 12))[0]
    handler = bytes(buf[hdlr[0] + 8:hdlr[0] + 12]).decode("latin-1")
    stsd = _child(buf, *stbl, b"stsd")
    fmt = ""
    if stsd and stsd[1] - stsd[0] >= 16:
        fmt = bytes(buf[stsd[0] + 12:stsd[0] + 16]).decode("latin-1")
    empty = np.zeros(0)
    if fmt not in want or not timescale:
        return TrackInfo(handler, fmt, timescale, empty, empty, empty.astype(np.int64), empty.astype(np.int64))

    def full(typ):  # payload after version/flags
        r = _child(buf, *stbl, typ)
        return (r[0] + 4, r[1]) if r else None

    stts, stsz, stsc = full(b"stts"), full(b"stsz"), full(b"stsc")
    stco, co64 = full(b"stco"), full(b"co64")
    if stts is None or stsz is None or stsc is None or (stco is None and co64 is None):
        raise TelemetryError(f"track '{fmt}': incomplete sample table")
    n = struct.unpack_from(">I", buf, stts[0])[0]
    a = np.frombuffer(buf, ">u4", 2 * n, stts[0] + 4).reshape(n, 2).astype(np.int64)
    deltas = np.repeat(a[:, 1], a[:, 0])
    fixed, count = struct.unpack_from(">II", buf, stsz[0])
    sizes = np.full(count, fixed, np.int64) if fixed else np.frombuffer(buf, ">u4", count, stsz[0] + 8).astype(np.int64)
    if co64 is not None:
        nc = struct.unpack_from(">I", buf, co64[0])[0]
        chunk_off = np.frombuffer(buf, ">u8", nc, co64[0] + 4).astype(np.int64)
    else:
        nc = struct.unpack_from(">I", buf, stco[0])[0]
        chunk_off = np.frombuffer(buf, ">u4", nc, stco[0] + 4).astype(np.int64)
    ns = struct.unpack_from(">I", buf, stsc[0])[0]
    sc = np.frombuffer(buf, ">u4", 3 * ns, stsc[0] + 4).reshape(ns, 3).astype(np.int64)
    first = np.append(sc[:, 0], nc + 1)
    per_chunk = np.repeat(sc[:, 1], np.clip(np.diff(first), 0, None))[:nc]
    if per_chunk.sum() < count or len(deltas) < count:
        raise TelemetryError(f"track '{fmt}': sample table inconsistent")
    chunk_of = np.repeat(np.arange(nc), per_chunk)[:count]
    csize = np.concatenate(([0], np.cumsum(sizes)))
    chunk_first = np.concatenate(([0], np.cumsum(per_chunk)))[:nc]
    offsets = chunk_off[chunk_of] + csize[:count] - csize[chunk_first[chunk_of]]
    deltas = deltas[:count]
    t_media = np.concatenate(([0], np.cumsum(deltas)[:-1])) / timescale
    # edit list: leading empty edits delay the track; a media_time > 0 skips that much media
    delay, skip = 0.0, 0.0
    elst = _path(buf, s, e, b"edts", b"elst")
    if elst and movie_ts:
        ev = buf[elst[0]]
        ne = struct.unpack_from(">I", buf, elst[0] + 4)[0]
        o = elst[0] + 8
        for _ in range(ne):
            if ev == 1:
                seg, mt = struct.unpack_from(">Qq", buf, o)
                o += 20
            else:
                seg, mt = struct.unpack_from(">Ii", buf, o)
                o += 12
            if mt == -1:
                delay += seg / movie_ts
            else:
                skip = mt / timescale
                break
    return TrackInfo(handler, fmt, timescale, t_media - skip + delay, deltas / timescale, offsets, sizes)


# ----------------------------------------------------------------------------------------------------------
# GPMF (GoPro metadata) KLV
# ----------------------------------------------------------------------------------------------------------

_GPMF_TYPES = {"b": ">i1", "B": ">u1", "s": ">i2", "S": ">u2", "l": ">i4", "L": ">u4", "j": ">i8", "J": ">u8",
               "f": ">f4", "d": ">f8", "q": ">i4", "Q": ">i8"}
_GPMF_FIXED = {"q": 1 / 65536.0, "Q": 1 / 4294967296.0}


def gpmf_klv(buf: bytes, start: int = 0, end: int | None = None):
    """Yield (key, type, struct_size, repeat, payload bytes | list of children) for a GPMF KLV buffer."""
    end = len(buf) if end is None else end
    o = start
    out = []
    while o + 8 <= end:
        key = bytes(buf[o:o + 4])
        typ = chr(buf[o + 4])
        ssize = buf[o + 5]
        rep = struct.unpack_from(">H", buf, o + 6)[0]
        n = ssize * rep
        if key == b"\x00\x00\x00\x00":
            break
        if o + 8 + n > end:
            raise TelemetryError(f"GPMF: {key!r} overruns its payload")
        body_s, body_e = o + 8, o + 8 + n
        if typ == "\x00":
            out.append((key.decode("latin-1"), typ, ssize, rep, gpmf_klv(buf, body_s, body_e)))
        else:
            out.append((key.decode("latin-1"), typ, ssize, rep, bytes(buf[body_s:body_e])))
        o = body_e + ((-n) % 4)
    return out


def gpmf_value(typ: str, ssize: int, rep: int, data: bytes, complex_type: str | None = None):
    """Decode a GPMF item to a (rep, elements) float array, or str for c/U/F."""
    if typ in ("c", "U", "F"):
        return data.decode("latin-1").rstrip("\x00 ")
    if typ == "?":
        if not complex_type:
            raise TelemetryError("GPMF: complex item without TYPE")
        fields = [(f"f{i}", _GPMF_TYPES[c]) for i, c in enumerate(complex_type)]
        arr = np.frombuffer(data, np.dtype(fields), rep)
        cols = [arr[f].astype(np.float64) * _GPMF_FIXED.get(c, 1.0) for (f, _), c in zip(fields, complex_type)]
        return np.stack(cols, axis=1)
    if typ not in _GPMF_TYPES:
        raise TelemetryError(f"GPMF: unsupported type {typ!r}")
    dt = np.dtype(_GPMF_TYPES[typ])
    k = ssize // dt.itemsize
    arr = np.frombuffer(data, dt, k * rep).astype(np.float64) * _GPMF_FIXED.get(typ, 1.0)
    return arr.reshape(rep, k)


def _gpsu_unix(s: str) -> float:
    """GPSU 'yymmddhhmmss.sss' -> unix seconds."""
    d = _dt.datetime.strptime(s[:12], "%y%m%d%H%M%S").replace(tzinfo=_dt.timezone.utc)
    frac = float("0" + s[12:]) if len(s) > 12 else 0.0
    return d.timestamp() + frac


def gps_from_gpmf_payload(payload: bytes) -> list[dict]:
    """GPS streams in one GPMF payload: [{"key": "GPS5"|"GPS9", "data": (n, k) scaled, "fix", "gpsu"}]."""
    found = []
    for key, _, _, _, devc in gpmf_klv(payload):
        if key != "DEVC" or not isinstance(devc, list):
            continue
        for skey, _, _, _, strm in devc:
            if skey != "STRM" or not isinstance(strm, list):
                continue
            scal, fix, gpsu, ctype = None, None, None, None
            for k, t, ss, rep, body in strm:   # sticky metadata precedes the data it describes
                if k == "SCAL":
                    scal = gpmf_value(t, ss, rep, body).reshape(-1)
                elif k == "GPSF":
                    fix = float(gpmf_value(t, ss, rep, body).reshape(-1)[0])
                elif k == "GPSU":
                    gpsu = gpmf_value(t, ss, rep, body)
                elif k == "TYPE":
                    ctype = gpmf_value(t, ss, rep, body)
                elif k in ("GPS5", "GPS9"):
                    v = gpmf_value(t, ss, rep, body, ctype)
                    if scal is not None and len(scal):
                        div = scal if len(scal) == v.shape[1] else np.full(v.shape[1], scal[0])
                        v = v / np.where(div == 0, 1.0, div)
                    found.append({"key": k, "data": v, "fix": fix, "gpsu": gpsu})
    return found


def read_gpmf_gps(path: str | Path, track: TrackInfo) -> dict:
    """All GPS fixes of a gpmd track: dict(t, lat, lon, speed2d, t_utc_at0 or None)."""
    per_key: dict[str, list] = {"GPS5": [], "GPS9": []}
    utc0 = []
    n_nofix = n_bad = n_empty = 0
    with open(path, "rb") as f:
        for t0, d, off, sz in zip(track.times_s, track.durations_s, track.offsets, track.sizes):
            f.seek(int(off))
            payload = f.read(int(sz))
            try:
                if len(payload) < sz:
                    raise TelemetryError("gpmd sample beyond the end of the file (truncated?)")
                gps = gps_from_gpmf_payload(payload)
            except (TelemetryError, ValueError, KeyError, struct.error):
                n_bad += 1
                continue
            n_empty += not gps
            for g in gps:
                v = g["data"]
                n = len(v)
                if not n:
                    continue
                ts = t0 + d * np.arange(n) / n
                if g["key"] == "GPS9" and v.shape[1] >= 9:
                    good = v[:, 8] >= 2
                    if good.any():
                        u = GPMF_EPOCH_2000 + v[good, 5] * 86400.0 + v[good, 6]
                        utc0.append(float(np.median(u - ts[good])))
                elif g["fix"] is not None and g["fix"] < 2:
                    good = np.zeros(n, bool)
                else:
                    good = np.ones(n, bool)
                    if isinstance(g["gpsu"], str) and len(g["gpsu"]) >= 12:
                        try:
                            utc0.append(_gpsu_unix(g["gpsu"]) - t0)
                        except ValueError:
                            pass
                n_nofix += int((~good).sum())
                if good.any():
                    per_key[g["key"]].append(np.column_stack([ts[good], v[good, :5]]))
    key = "GPS9" if per_key["GPS9"] else "GPS5"
    n = len(track.sizes)
    if not per_key[key]:
        why = "no GPS sample with a fix" if n_nofix else "no GPS5/GPS9 stream"
        raise TelemetryError(f"{why} ({n_bad} of {n} payload(s) unreadable)" if n_bad else why)
    a = np.concatenate(per_key[key])
    notes = [f"{n_bad} of {n} gpmd payload(s) unreadable"] if n_bad else []
    return dict(t=a[:, 0], lat=a[:, 1], lon=a[:, 2], speed=a[:, 4], key=key, n_nofix=n_nofix,
                t0_utc=float(np.median(utc0)) if utc0 else None, notes=notes)


# ----------------------------------------------------------------------------------------------------------
# Discovery and alignment
# ----------------------------------------------------------------------------------------------------------

def sidecar_candidates(video_path: str | Path) -> list[Path]:
    """Sidecars with the video's stem (or BlackVue's stem without the F/R channel letter), .nmea/.gps before .gpx."""
    p = Path(video_path)
    stems = {p.stem.lower()}
    m = re.match(r"^(.*_[A-Za-z])[FRfr]$", p.stem)
    if m:
        stems.add(m.group(1).lower())
    try:
        entries = list(p.parent.iterdir())
    except OSError:
        return []
    found = [q for q in entries if q.suffix.lower() in SIDECAR_EXTS and q.stem.lower() in stems and q.is_file()]
    rank = {".nmea": 0, ".gps": 1, ".gpx": 2}
    return sorted(found, key=lambda q: (rank[q.suffix.lower()], q.stem.lower() != p.stem.lower(), q.name))


def _align(t_abs: np.ndarray, absolute: bool, info: Mp4Info | None, offset_s: float | None,
           name: str, warnings: list[str]) -> tuple[np.ndarray, str, float | None]:
    a, b = float(t_abs[0]), float(t_abs[-1])
    if offset_s is not None:
        return t_abs - a + offset_s, f"telemetry_offset_s={offset_s:g} (first sample at that video time)", \
            (a - offset_s if absolute else None)
    if absolute and info is not None and info.creation_unix is not None:
        u, dur = info.creation_unix, info.duration_s
        span = b - a
        ov = min(b, u + dur) - max(a, u)
        need = 0.5 * min(dur, span) if dur > 0 and span > 0 else None
        if (need is not None and ov >= need) or (need is None and abs(a - u) <= 2.0):
            return t_abs - u, "container creation_time", u
        warnings.append(f"{name}: container creation time is {a - u:+.1f} s from the first fix and does not "
                        f"overlap the telemetry; assuming the first fix is the first frame")
    return t_abs - a, "first sample = first frame", (a if absolute else None)


def find_telemetry_report(video_path: str | Path, *, camera_config: dict | None = None,
                          offset_s: float | None = None) -> tuple[Telemetry | None, list[str]]:
    """(Telemetry or None, warnings). Never raises for a broken or missing source."""
    video_path = Path(video_path)
    warnings: list[str] = []
    if offset_s is None and camera_config and "telemetry_offset_s" in camera_config:
        v = _f(camera_config.get("telemetry_offset_s"))
        if math.isfinite(v):
            offset_s = v
        else:
            warnings.append("camera.json: telemetry_offset_s is not a number; ignored")
    info = None
    try:
        if video_path.is_file():
            info = read_mp4_info(video_path)
    except (OSError, TelemetryError, struct.error, ValueError) as e:
        warnings.append(f"{video_path.name}: container not readable for telemetry ({e})")

    for tr in (info.tracks if info else []):
        if tr.fmt != "gpmd":
            continue
        try:
            g = read_gpmf_gps(video_path, tr)
            b = _build(g["t"], g["lat"], g["lon"], g["speed"], None, "gpmf")
            if g["n_nofix"]:
                warnings.append(f"gpmf: {g['n_nofix']} GPS sample(s) without a fix dropped")
            warnings.extend(f"gpmf: {w}" for w in g["notes"])
            t = b["t_abs"] + (offset_s or 0.0)
            t0 = g["t0_utc"] - (offset_s or 0.0) if g["t0_utc"] is not None else None
            return Telemetry(t, b["speed"], b["heading"], "gpmf", b["lat"], b["lon"],
                             alignment="gpmf track time" + (f" + {offset_s:g} s" if offset_s else ""),
                             t0_utc=t0, speed_from="reported", heading_from=b["heading_from"]), warnings
        except (OSError, TelemetryError, struct.error, ValueError, KeyError, IndexError) as e:
            warnings.append(f"gpmf: unusable ({e})")

    for sc in sidecar_candidates(video_path):
        kind = SIDECAR_EXTS[sc.suffix.lower()]
        name = sc.name
        try:
            size = sc.stat().st_size
            if size == 0:
                warnings.append(f"{name}: empty sidecar")
                continue
            if size > MAX_SIDECAR_BYTES:
                warnings.append(f"{name}: sidecar larger than {MAX_SIDECAR_BYTES >> 20} MiB; ignored")
                continue
            data = sc.read_bytes()
            parsed, w = (parse_nmea if kind == "nmea" else parse_gpx)(data, name)
            warnings.extend(w)
            b = _build(parsed["t_abs"], parsed["lat"], parsed["lon"], parsed["speed"], parsed["course"],
                       f"{kind}:{name}")
            if kind == "gpx" and not parsed.get("speed_unit_explicit", True):
                _check_speed_units(b, name, warnings)
            t, how, t0 = _align(b["t_abs"], parsed["absolute"], info, offset_s, name, warnings)
            return Telemetry(t, b["speed"], b["heading"], f"{kind}:{name}", b["lat"], b["lon"], alignment=how,
                             t0_utc=t0, speed_from=b["speed_from"], heading_from=b["heading_from"]), warnings
        except (OSError, TelemetryError, ValueError, TypeError, IndexError) as e:
            warnings.append(str(e) if isinstance(e, TelemetryError) else f"{name}: unreadable ({e})")
    return None, warnings


def find_telemetry(video_path: str | Path, *, camera_config: dict | None = None,
                   offset_s: float | None = None) -> Telemetry | None:
    """The video's own GPS telemetry (embedded GPMF, NMEA or GPX sidecar), or None; warnings are logged."""
    tel, warnings = find_telemetry_report(video_path, camera_config=camera_config, offset_s=offset_s)
    for w in warnings:
        log.warning("telemetry: %s", w)
    return tel

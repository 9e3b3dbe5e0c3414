"""GPX tracks (``gpxpy``): trkpt time and position; speed/course from GPX 1.0 elements or extensions
(``speed``, ``course``, ``heading``; ``unit="km/h"``, ``..._kmh``, mph and knots understood)."""

from __future__ import annotations

import datetime as _dt
import math

import numpy as np

from .base import KMH_MPS, KNOT_MPS, MPH_MPS, TelemetryError, as_float


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
            speed = as_float((e.text or "").strip()) * fac
        elif low in ("course", "heading", "bearing", "cog") and not math.isfinite(course):
            course = as_float((e.text or "").strip())
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
            spd, explicit_any = as_float(p.speed), True   # GPX 1.0 <speed> is m/s by schema
        if getattr(p, "course", None) is not None and not math.isfinite(crs):
            crs = as_float(p.course)
        rows.append((tm.timestamp(), as_float(p.latitude), as_float(p.longitude), spd, math.radians(crs)))
    if n_untimed:
        warnings.append(f"{name}: {n_untimed} point(s) without a time skipped")
    if len(rows) < 2:
        raise TelemetryError(f"{name}: fewer than 2 timed track points")
    a = np.array(rows)
    out = dict(t_abs=a[:, 0], lat=a[:, 1], lon=a[:, 2], speed=a[:, 3], course=a[:, 4], absolute=True,
               speed_unit_explicit=explicit_any)
    return out, warnings


def check_speed_units(b: dict, name: str, warnings: list[str]) -> None:
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

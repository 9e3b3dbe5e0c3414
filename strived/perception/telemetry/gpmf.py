"""GoPro GPMF embedded in the MP4: a ``meta`` track whose sample description is ``gpmd``.

A GPMF KLV parser (DEVC/STRM, sticky SCAL/GPSF/GPSU/TYPE, GPS5 or GPS9). Sample times are the track's
own timeline (the same clock as the video), each payload's samples spread evenly over the payload's
duration. Payloads without a 2D/3D fix (GPSF < 2) are dropped.
"""

from __future__ import annotations

import datetime as _dt
import struct
from pathlib import Path

import numpy as np

from .base import TelemetryError
from .mp4 import TrackInfo

GPMF_EPOCH_2000 = 946684800             # 2000-01-01 in unix seconds

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

"""Finding a video's telemetry: embedded GPMF first, then NMEA / GPX sidecars next to the video."""

from __future__ import annotations

import logging
import math
import re
import struct
from pathlib import Path

from .align import align_times
from .base import Telemetry, TelemetryError, as_float
from .fixes import build_fixes
from .gpmf import read_gpmf_gps
from .gpx import check_speed_units, parse_gpx
from .mp4 import read_mp4_info
from .nmea import parse_nmea

log = logging.getLogger(__name__)

MAX_SIDECAR_BYTES = 256 << 20
SIDECAR_EXTS = {".nmea": "nmea", ".gps": "nmea", ".gpx": "gpx"}


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


def find_telemetry_report(video_path: str | Path, *, camera_config: dict | None = None,
                          offset_s: float | None = None) -> tuple[Telemetry | None, list[str]]:
    """(Telemetry or None, warnings). Never raises for a broken or missing source."""
    video_path = Path(video_path)
    warnings: list[str] = []
    if offset_s is None and camera_config and "telemetry_offset_s" in camera_config:
        v = as_float(camera_config.get("telemetry_offset_s"))
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
            b = build_fixes(g["t"], g["lat"], g["lon"], g["speed"], None, "gpmf")
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
            b = build_fixes(parsed["t_abs"], parsed["lat"], parsed["lon"], parsed["speed"], parsed["course"],
                             f"{kind}:{name}")
            if kind == "gpx" and not parsed.get("speed_unit_explicit", True):
                check_speed_units(b, name, warnings)
            t, how, t0 = align_times(b["t_abs"], parsed["absolute"], info, offset_s, name, warnings)
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

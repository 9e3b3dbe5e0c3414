"""Ego speed, heading, yaw rate and acceleration from the camera's own GPS telemetry.

Sources, in order of preference (the first that yields fixes wins; ``discover``):

1. GoPro GPMF embedded in the MP4 (``gpmf``, with the ISO-BMFF box reader ``mp4``).
2. NMEA sidecars ``NAME.nmea`` / ``NAME.gps`` next to ``NAME.mp4`` (``nmea``; extensions case-insensitive;
   BlackVue ``..._NF.mp4`` / ``..._NR.mp4`` also find ``..._N.gps``).
3. GPX tracks ``NAME.gpx`` (``gpx``).

Every source's fixes become one series (``fixes``); sidecar times are tied to the video's (``align``); for
GPMF the ``telemetry_offset_s`` of ``camera.json``, when given, is added to the track times. The series
(``base.Telemetry``) is resampled onto the video's frame times.
"""

from .base import Telemetry, TelemetryError
from .discover import find_telemetry, find_telemetry_report

__all__ = ["Telemetry", "TelemetryError", "find_telemetry", "find_telemetry_report"]

"""STRIVE-D engine: offline driving-video retrieval (symbolic rules, dense, BM25, fusion).

The engine never imports Qt; the desktop app lives in ``app/``. Importing it sets the
dependencies' telemetry and hub opt-outs before any of them loads (`strived.offline`).
"""

from .offline import apply_opt_outs as _apply_opt_outs

__version__ = "0.1.0"

_apply_opt_outs()

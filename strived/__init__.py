"""STRIVE-D engine: offline driving-video retrieval (symbolic rules, dense, BM25, fusion).

The engine never imports Qt; the desktop app lives in ``app/``.
"""

__version__ = "0.1.0"

"""The About box's text: the version and how well search holds on footage the product never saw.

The quality figure is read from ``resources/quality.json`` (written by
``benchmarks/generalization_table.py --quality`` from the committed source-held-out evaluation,
issue 31), never from a figure measured on the clips the product was designed on.
"""

from __future__ import annotations

import json
from pathlib import Path

QUALITY = Path(__file__).resolve().parents[1] / "resources" / "quality.json"


def quality_sentence(path: Path = QUALITY) -> str | None:
    """One sentence on search quality on unseen footage, or None when the file is missing or
    malformed (then the box says nothing about quality rather than a number it cannot back)."""
    try:
        q = json.loads(Path(path).read_text(encoding="utf-8"))
        n, nq = int(q["n_items"]), int(q["n_queries"])
        m, a1, a5 = float(q["full_map"]), float(q["full_acc1"]), float(q["full_acc5"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return (f"On {n} real dashcam clips from sources never used to design or fit it ({nq} queries), "
            f"the right clip comes first for {a1:.0%} of queries and within the first five for "
            f"{a5:.0%} (mean average precision {m:.0%}). Measured with the shipped files: "
            f"{q.get('source', '')}.")


def about_html(version: str, path: Path = QUALITY) -> str:
    text = f"<b>STRIVE-D</b> {version}<br>Search dashcam footage in plain language, offline."
    s = quality_sentence(path)
    return text + (f"<br><br>{s}" if s else "")

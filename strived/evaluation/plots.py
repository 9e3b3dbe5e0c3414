"""The report's PNG charts, drawn with numpy + OpenCV (both already dependencies of the engine).

Why not matplotlib (issue 16 asked for it unless measured reasons say otherwise): it is not a
dependency today and would add about 95 MB to every install (matplotlib 35 MB, fontTools 30 MB,
pillow 22 MB, kiwisolver 5 MB, contourpy) plus 0.2-0.85 s to import ``pyplot``, measured on the
2-CPU development machine, for four charts that OpenCV draws and encodes in about 0.4 s (see
docs/evaluation.md for the figures). The PNG bytes depend only on the numbers plotted (no font
files, no timestamps or version metadata), which tests/evaluation/test_report.py asserts
byte for byte.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import StrivedError
from ..retrieval.metrics import ACC_KS
from .ratios import PAPER, fmt_num, fmt_ratio

_FONT = 0  # cv2.FONT_HERSHEY_SIMPLEX
# BGR, colour-blind-friendly (Okabe-Ito)
PALETTE = [(178, 114, 0), (0, 159, 230), (115, 158, 0), (66, 228, 240), (167, 121, 204), (0, 94, 213),
           (233, 180, 86), (100, 100, 100)]


def _ascii(s: str) -> str:
    return (s.replace("\u00d7", "x").replace("\u2264", "<=").replace("\u2265", ">=").replace("\u2013", "-")
            .encode("ascii", "replace").decode())


class Canvas:
    def __init__(self, w: int, h: int):
        import numpy as np

        self.img = np.full((h, w, 3), 255, np.uint8)

    def text(self, x, y, s, scale=0.45, color=(30, 30, 30), anchor="l", thick=1):
        import cv2

        s = _ascii(str(s))
        (tw, th), _ = cv2.getTextSize(s, _FONT, scale, thick)
        x0 = int(x - (tw if anchor == "r" else tw / 2 if anchor == "c" else 0))
        cv2.putText(self.img, s, (x0, int(y + th / 2)), _FONT, scale, color, thick, cv2.LINE_AA)
        return tw

    def vtext(self, x, y, s, scale=0.45, color=(30, 30, 30)):
        """Text rotated 90 degrees counter-clockwise, its end (right side before rotation) at (x, y)."""
        import cv2
        import numpy as np

        s = _ascii(str(s))
        (tw, th), base = cv2.getTextSize(s, _FONT, scale, 1)
        patch = np.full((th + base + 4, tw + 4, 3), 255, np.uint8)
        cv2.putText(patch, s, (2, th + 2), _FONT, scale, color, 1, cv2.LINE_AA)
        patch = cv2.rotate(patch, cv2.ROTATE_90_COUNTERCLOCKWISE)
        ph, pw = patch.shape[:2]
        x0, y0 = int(x - pw / 2), int(y - ph)
        H, W = self.img.shape[:2]
        xa, ya, xb, yb = max(0, x0), max(0, y0), min(W, x0 + pw), min(H, y0 + ph)
        if xb > xa and yb > ya:
            self.img[ya:yb, xa:xb] = np.minimum(self.img[ya:yb, xa:xb], patch[ya - y0:yb - y0, xa - x0:xb - x0])

    def rect(self, x0, y0, x1, y1, color, fill=True):
        import cv2

        cv2.rectangle(self.img, (int(x0), int(y0)), (int(x1), int(y1)), color, -1 if fill else 1)

    def line(self, x0, y0, x1, y1, color=(150, 150, 150), thick=1):
        import cv2

        cv2.line(self.img, (int(x0), int(y0)), (int(x1), int(y1)), color, thick, cv2.LINE_AA)

    def save(self, path: Path) -> Path:
        import cv2

        ok, buf = cv2.imencode(".png", self.img, [cv2.IMWRITE_PNG_COMPRESSION, 9])
        if not ok:
            raise StrivedError(f"could not encode {path}")
        Path(path).write_bytes(buf.tobytes())
        return Path(path)


def plot_metrics(res: dict, path: Path) -> Path:
    """Grouped bars: MRR, mAP, Acc@1/3/5/10 (%) per method."""
    cols = ["MRR", "mAP"] + [f"Acc@{k}" for k in ACC_KS]
    methods = list(res["methods"])
    gw, bw = 14 * len(cols) + 22, 14
    left, top, ph = 60, 60, 330
    W = max(700, left + gw * len(methods) + 30)
    H = top + ph + 150
    c = Canvas(W, H)
    c.text(left, 18, f"{res['benchmark']}: retrieval metrics per method ({res['n_queries']} queries, "
                     f"{res['n_items_searchable']}/{res['n_items']} items searchable; {res.get('calibration', '')})",
           0.5, thick=1)
    for i, col in enumerate(cols):  # legend
        x = left + i * 95
        c.rect(x, 36, x + 12, 48, PALETTE[i])
        c.text(x + 16, 42, col, 0.42)
    y0 = top + ph
    for v in range(0, 101, 20):
        y = y0 - ph * v / 100
        c.line(left, y, W - 20, y, (225, 225, 225))
        c.text(left - 6, y, f"{v}%", 0.4, anchor="r")
    for mi, m in enumerate(methods):
        gx = left + mi * gw + 12
        for ci, col in enumerate(cols):
            v = res["methods"][m][col]
            x = gx + ci * bw
            c.rect(x, y0 - ph * v, x + bw - 2, y0, PALETTE[ci])
        c.vtext(gx + gw / 2 - 8, y0 + 8 + _text_w(m, 0.45), m, 0.45)
    c.line(left, y0, W - 20, y0, (60, 60, 60))
    return c.save(path)


def _text_w(s: str, scale: float) -> int:
    import cv2

    return cv2.getTextSize(_ascii(s), _FONT, scale, 1)[0][0]


RANK_BINS = [(1, 1, (60, 140, 20), "1"), (2, 3, (100, 200, 90), "2-3"), (4, 5, (130, 225, 200), "4-5"),
             (6, 10, (90, 190, 250), "6-10"), (11, 10**9, (110, 120, 235), ">10")]


def _rank_color(r):
    if r is None:
        return (215, 215, 215)
    for a, b, col, _ in RANK_BINS:
        if a <= r <= b:
            return col
    return RANK_BINS[-1][2]


def plot_ranks(res: dict, path: Path) -> Path:
    """Heat map: rank of the first relevant item, queries x methods."""
    methods = list(res["methods"])
    qs = res["queries"]
    cw, ch, left = 62, 24, 260
    label_h = max([_text_w(m, 0.45) for m in methods] + [40]) + 16
    top = 34 + label_h
    W = max(620, left + cw * len(methods) + 20)
    H = top + ch * len(qs) + 60
    c = Canvas(W, H)
    c.text(10, 16, f"{res['benchmark']}: rank of the first relevant item (grey: none retrieved / excluded)", 0.5)
    for mi, m in enumerate(methods):
        c.vtext(left + mi * cw + cw / 2, top - 8, m, 0.45)
    for qi, q in enumerate(qs):
        y = top + qi * ch
        c.text(8, y + ch / 2, f"{q['id']} {(q.get('event') or '')[:22]} (n={q['n_relevant']})", 0.42)
        for mi, m in enumerate(methods):
            r = q["methods"].get(m, {}).get("rank_of_first_relevant")
            x = left + mi * cw
            c.rect(x + 1, y + 1, x + cw - 1, y + ch - 1, _rank_color(r))
            c.text(x + cw / 2, y + ch / 2, "-" if r is None else str(r), 0.42, anchor="c")
    y = top + ch * len(qs) + 24
    x = left
    for a, b, col, lab in RANK_BINS + [(0, 0, (215, 215, 215), "none")]:
        c.rect(x, y - 8, x + 16, y + 8, col)
        x += 22 + c.text(x + 22, y, lab, 0.42) + 18
    return c.save(path)


def plot_latency(rows: list[dict], path: Path) -> Path | None:
    """Horizontal bars on a log axis: each of our latencies next to the paper's (or the reference)."""
    import math

    sel = [r for r in rows if r["group"] in ("latency vs the paper", "fast path vs reference")
           and r["value"] is not None and r["reference"] is not None and r["unit"] == "ms"]
    if not sel:
        return None
    left, bar_h, gap = 470, 13, 10
    top = 64
    W = 1180
    H = top + len(sel) * (2 * bar_h + gap) + 60
    c = Canvas(W, H)
    c.text(10, 16, "Latency: ours (blue) vs the paper or the reference implementation (grey), log scale, ms", 0.5)
    c.text(10, 38, f"paper: DrivingDojo, {PAPER['corpus_videos']} videos, mean per query; ours: median, this machine",
           0.42, color=(90, 90, 90))
    vals = [v for r in sel for v in (r["value"], r["reference"]) if v > 0]
    lo = 10 ** math.floor(math.log10(min(vals)))
    hi = 10 ** math.ceil(math.log10(max(vals)))
    span = max(1e-9, math.log10(hi) - math.log10(lo))
    pw = W - left - 150

    def X(v):
        return left + pw * (math.log10(max(v, lo)) - math.log10(lo)) / span

    y_end = top + len(sel) * (2 * bar_h + gap)
    e = math.log10(lo)
    while e <= math.log10(hi) + 1e-9:
        x = X(10 ** e)
        c.line(x, top - 6, x, y_end, (225, 225, 225))
        c.text(x, y_end + 12, fmt_num(10 ** e), 0.4, anchor="c")
        e += 1
    for i, r in enumerate(sel):
        y = top + i * (2 * bar_h + gap)
        name = r["name"] if len(r["name"]) <= 62 else r["name"][:60] + ".."
        c.text(left - 8, y + bar_h, name, 0.4, anchor="r")
        c.rect(left, y, X(r["value"]), y + bar_h - 1, PALETTE[0])
        c.text(X(r["value"]) + 4, y + bar_h / 2, fmt_num(r["value"]), 0.38)
        c.rect(left, y + bar_h, X(r["reference"]), y + 2 * bar_h - 1, (170, 170, 170))
        c.text(X(r["reference"]) + 4, y + 1.5 * bar_h, f"{fmt_num(r['reference'])} ({fmt_ratio(r)})", 0.38,
               color=(80, 80, 80))
    return c.save(path)


def plot_stage_fps(rows: list[dict], path: Path) -> Path | None:
    """Bars of perception throughput per stage (log axis: decode and detect differ by orders)."""
    import math

    sel = [r for r in rows if r["group"] == "indexing throughput" and r["value"]]
    if not sel:
        return None
    left, bh, top, W = 230, 18, 44, 900
    H = top + len(sel) * (bh + 8) + 40
    c = Canvas(W, H)
    c.text(10, 16, "Indexing: sampled frames per second of stage time (log scale; higher is faster)", 0.5)
    hi = 10 ** math.ceil(math.log10(max(r["value"] for r in sel)))
    lo = min(1.0, 10 ** math.floor(math.log10(min(r["value"] for r in sel))))
    pw = W - left - 90

    def X(v):
        return left + pw * (math.log10(max(v, lo)) - math.log10(lo)) / max(1e-9, math.log10(hi) - math.log10(lo))

    y_end = top + len(sel) * (bh + 8)
    e = math.log10(lo)
    while e <= math.log10(hi) + 1e-9:
        c.line(X(10 ** e), top - 4, X(10 ** e), y_end, (225, 225, 225))
        c.text(X(10 ** e), y_end + 12, fmt_num(10 ** e), 0.4, anchor="c")
        e += 1
    for i, r in enumerate(sel):
        y = top + i * (bh + 8)
        c.text(left - 8, y + bh / 2, r["name"].replace("perception ", "").replace("stage ", ""), 0.45, anchor="r")
        c.rect(left, y, X(r["value"]), y + bh, PALETTE[2] if "end to end" not in r["name"] else PALETTE[5])
        c.text(X(r["value"]) + 5, y + bh / 2, fmt_num(r["value"]), 0.42)
    return c.save(path)


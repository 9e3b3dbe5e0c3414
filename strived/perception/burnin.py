"""Ego speed printed on the frame by the dashcam itself (a burnt-in overlay such as ``074km/h``),
read with tesseract OCR and used as a metric speed source like telemetry (source ``burnin:ocr``).

1. Find the overlay: the top and bottom strips of the first sampled frames (one a second) are read
   with tesseract (one block of text); a word ``<1-3 digits><km/h|kmh|kph|mph>`` (or digits followed by such
   a word) is a speed overlay. It must be found at the same place (centres within a few characters)
   on `CONFIRM_FRAMES` of the first `DETECT_FRAMES` tries, else the video has none (the search
   stops as soon as that can no longer happen).
2. Read it every `READ_EVERY_S`: the overlay's box (padded) alone, one text line, characters limited
   to digits and the unit letters.
3. Plausibility: no car changes speed by more than `MAX_ACCEL_MPS2` (10 m/s^2, about 1 g: emergency
   braking on dry asphalt stays below it) between two reads, up to the overlay's resolution of one
   unit; a read that contradicts most of its neighbours (up to 3 reads either side, within 5 s) is
   rejected, as is any value above `MAX_SPEED_KMH`.
4. Accepted reads become a speed series on the video's frames by linear interpolation only between
   reads at most `MAX_GAP_S` apart (gaps stay unknown), acceleration by a local fit over
   `ACCEL_WINDOW_S` (`telemetry.Telemetry.resample`).

OCR is optional at run time: without the ``tesseract`` program or the ``pytesseract`` package the
result is ``unavailable`` with that reason, never an error. Both load on first use. Tesseract runs
with one OpenMP thread (`ocr.py`: same text, a third of the CPU time).
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass, field

import numpy as np

from . import ocr
from .telemetry import Telemetry
from .video import iter_frames

READ_EVERY_S = 1.0
DETECT_FRAMES = 3            # first sampled frames searched for an overlay (one a second)
CONFIRM_FRAMES = 2           # ... on how many of them it must be found at the same place
STRIPS = (("bottom", 0.80, 1.0), ("top", 0.0, 0.16))   # (name, from, to) as fractions of the height
MAX_ACCEL_MPS2 = 10.0
MAX_SPEED_KMH = 300.0
NEIGHBOURS = 3
NEIGHBOUR_SPAN_S = 5.0
MAX_GAP_S = 2.5              # interpolate only between reads this close (one failed read bridged)
ACCEL_WINDOW_S = 3.0
BURNIN_CONF = 0.9            # speed_conf of frames whose speed comes from the overlay
SOURCE = "burnin:ocr"
UNIT_MPS = {"km/h": 1.0 / 3.6, "mph": 0.44704}
AGREE_REL = 0.2              # "agrees" with the video estimate: within 20 % (or 1 m/s)

_UNIT = r"(km\s*/?\s*h|kmh|kph|mph)"
_SPEED_RE = re.compile(r"(?<![0-9.])([0-9OoDQ]{1,3})\s*" + _UNIT, re.IGNORECASE)
_NUMBER_RE = re.compile(r"[0-9OoDQ]{1,3}")
_UNIT_RE = re.compile(_UNIT, re.IGNORECASE)
# a read of the overlay's box alone: the digits right before the unit (a neighbour's digits may
# touch them in the crop: the last three are the speed)
_READ_RE = re.compile(r"([0-9]+)\s*" + _UNIT, re.IGNORECASE)
_READ_CONFIG = "--psm 7 -c tessedit_char_whitelist=0123456789kmhpKMHP/"
_FIND_CONFIG = "--psm 6"    # a uniform block: sparse-text mode (11) misses text over a busy scene


def ocr_unavailable() -> str | None:
    """Why OCR cannot run here (None when it can): tesseract or pytesseract missing."""
    if shutil.which("tesseract") is None:
        return "tesseract not installed"
    try:
        import pytesseract  # noqa: F401
    except ImportError:
        return "pytesseract not installed"
    return None


def _unit(text: str) -> str:
    return "mph" if text.lower().startswith("m") else "km/h"


def parse_speed(text: str) -> tuple[float, str] | None:
    """(value, unit) of the first speed in OCR text such as ``O74km/h`` or ``55 MPH``, else None."""
    m = _SPEED_RE.search(text or "")
    if not m:
        return None
    digits = re.sub(r"[OoDQ]", "0", m.group(1))
    return float(int(digits)), _unit(m.group(2))


@dataclass
class SpeedRead:
    t: float
    text: str
    value: float | None = None     # in ``unit``; None: nothing readable
    unit: str | None = None
    accepted: bool = False
    reason: str | None = None      # why rejected


@dataclass
class Overlay:
    strip: str
    box: tuple[int, int, int, int]  # x0, y0, x1, y1 in frame pixels
    unit: str


@dataclass
class BurnIn:
    status: str                      # "read", "none" (no overlay found), "unavailable"
    reason: str | None = None
    overlay: Overlay | None = None
    reads: list[SpeedRead] = field(default_factory=list)

    def accepted(self) -> list[SpeedRead]:
        return [r for r in self.reads if r.accepted]

    def speed_mps(self) -> tuple[np.ndarray, np.ndarray]:
        """(times, speeds m/s) of the accepted reads."""
        ok = self.accepted()
        return (np.array([r.t for r in ok], np.float64),
                np.array([r.value * UNIT_MPS[r.unit] for r in ok], np.float64))

    def summary(self) -> dict:
        """Provenance for ``attrs["burnin"]``."""
        out: dict = {"status": self.status, "source": SOURCE}
        if self.reason:
            out["reason"] = self.reason
        if self.overlay is not None:
            out["unit"] = self.overlay.unit
            out["region"] = {"strip": self.overlay.strip, "box": list(self.overlay.box)}
        parsed = [r for r in self.reads if r.value is not None]
        out["reads"] = len(self.reads)
        out["unreadable"] = len(self.reads) - len(parsed)
        out["rejected"] = sum(1 for r in parsed if not r.accepted)
        out["accepted"] = sum(1 for r in parsed if r.accepted)
        out["max_accel_mps2"] = MAX_ACCEL_MPS2
        return out


def _gray_up(img: np.ndarray, scale: float = 2.0) -> np.ndarray:
    import cv2

    g = cv2.cvtColor(img, cv2.COLOR_BGR2GRAY) if img.ndim == 3 else img
    return cv2.resize(g, None, fx=scale, fy=scale, interpolation=cv2.INTER_CUBIC)


def find_overlay(image: np.ndarray) -> tuple[Overlay, float, str] | None:
    """The speed overlay on one frame: (overlay, value, text) or None."""
    h, w = image.shape[:2]
    for name, a, b in STRIPS:
        y0, y1 = int(a * h), int(b * h)
        if y1 - y0 < 8:
            continue
        d = ocr.image_to_data(_gray_up(image[y0:y1]), _FIND_CONFIG)
        words = [i for i, s in enumerate(d["text"]) if s.strip()]
        pairs = [[i] for i in words] + [
            [i, j] for i, j in zip(words, words[1:])   # "74" "km/h": a number, then a unit alone
            if _NUMBER_RE.fullmatch(d["text"][i].strip()) and _UNIT_RE.fullmatch(d["text"][j].strip())]
        for ids in pairs:
            text = " ".join(d["text"][m].strip() for m in ids)
            got = parse_speed(text)
            if got is None:
                continue
            x0 = min(d["left"][m] for m in ids) / 2
            x1 = max(d["left"][m] + d["width"][m] for m in ids) / 2
            ty0 = min(d["top"][m] for m in ids) / 2
            ty1 = max(d["top"][m] + d["height"][m] for m in ids) / 2
            box = (int(x0), int(y0 + ty0), int(np.ceil(x1)), int(np.ceil(y0 + ty1)))
            return Overlay(name, box, got[1]), got[0], text
    return None


def read_overlay(image: np.ndarray, overlay: Overlay) -> tuple[float | None, str]:
    """(value in the overlay's unit or None, raw text) of the overlay's box on one frame."""
    h, w = image.shape[:2]
    x0, y0, x1, y1 = overlay.box
    pad = max(2, int(0.3 * (y1 - y0)))
    crop = image[max(0, y0 - pad):min(h, y1 + pad), max(0, x0 - pad):min(w, x1 + pad)]
    if crop.size == 0:
        return None, ""
    text = ocr.image_to_string(_gray_up(crop, 3.0), _READ_CONFIG).strip()
    m = _READ_RE.search(text)
    if m is None or _unit(m.group(2)) != overlay.unit:
        return None, text
    return float(int(m.group(1)[-3:])), text


def check_reads(reads: list[SpeedRead]) -> None:
    """Mark each parsed read accepted or rejected (with the reason), in place."""
    parsed = [r for r in reads if r.value is not None]
    for r in parsed:
        r.accepted, r.reason = True, None
        if r.value > (MAX_SPEED_KMH if r.unit == "km/h" else MAX_SPEED_KMH / 1.609344):
            r.accepted, r.reason = False, f"above {MAX_SPEED_KMH:g} km/h"
    ok = [r for r in parsed if r.accepted]
    verdict = []
    for k, r in enumerate(ok):
        near = [o for o in ok[max(0, k - NEIGHBOURS):k] + ok[k + 1:k + 1 + NEIGHBOURS]
                if abs(o.t - r.t) <= NEIGHBOUR_SPAN_S]
        step = UNIT_MPS[r.unit]   # the overlay's resolution: one unit
        bad = [o for o in near
               if abs(o.value - r.value) * step > MAX_ACCEL_MPS2 * abs(o.t - r.t) + step]
        verdict.append(bool(near) and 2 * len(bad) > len(near))
    for r, rejected in zip(ok, verdict):
        if rejected:
            r.accepted = False
            r.reason = f"jump beyond {MAX_ACCEL_MPS2:g} m/s^2 from its neighbours"


class BurnInReader:
    """Fed the sampled frames of a video in order; reads the overlay about once a second."""

    def __init__(self, every_s: float = READ_EVERY_S):
        self.every_s = every_s
        why = ocr_unavailable()
        self.result = BurnIn("unavailable", why) if why else BurnIn("none", "no speed overlay found")
        self._next_t = -np.inf
        self._tries: list[tuple[float, Overlay | None, float | None, str]] = []
        self._closed = why is not None

    def feed(self, image: np.ndarray, t_s: float) -> None:
        if self._closed or t_s < self._next_t:
            return
        self._next_t = t_s + self.every_s
        try:
            self._feed(image, t_s)
        except Exception as e:  # an OCR failure must never lose the video's perception  # noqa: BLE001
            self.result = BurnIn("unavailable", f"OCR failed: {type(e).__name__}: {str(e)[:200]}")
            self._closed = True

    def _feed(self, image: np.ndarray, t_s: float) -> None:
        if self.result.overlay is not None:
            value, text = read_overlay(image, self.result.overlay)
            self.result.reads.append(SpeedRead(t_s, text, value, self.result.overlay.unit if value is not None
                                               else None))
            return
        found = find_overlay(image)
        self._tries.append((t_s, *(found if found else (None, None, ""))))
        ov = self._confirmed()
        if ov is not None:
            self.result = BurnIn("read", None, ov)
            for t, o, v, text in self._tries:
                same = o is not None and self._same(o, ov)
                self.result.reads.append(SpeedRead(t, text, v if same else None, ov.unit if same else None))
        elif (len(self._tries) >= DETECT_FRAMES
              or sum(1 for x in self._tries if x[1] is None) > DETECT_FRAMES - CONFIRM_FRAMES):
            self._closed = True     # (a clip without an overlay costs two frames' OCR: ~1-3 s)

    @staticmethod
    def _same(a: Overlay, b: Overlay) -> bool:
        """The same overlay: same unit, centres within a few characters (the number's width
        changes with its digits) and on the same line."""
        hgt = max(1, a.box[3] - a.box[1], b.box[3] - b.box[1])
        ca, cb = 0.5 * (a.box[0] + a.box[2]), 0.5 * (b.box[0] + b.box[2])
        da, db = 0.5 * (a.box[1] + a.box[3]), 0.5 * (b.box[1] + b.box[3])
        return a.unit == b.unit and abs(ca - cb) <= 2.5 * hgt and abs(da - db) <= 0.8 * hgt

    def _confirmed(self) -> Overlay | None:
        found = [o for _, o, _, _ in self._tries if o is not None]
        for o in found:
            if sum(1 for p in found if self._same(o, p)) >= CONFIRM_FRAMES:
                # the union of the boxes: the number's width changes with its digits
                same = [p for p in found if self._same(o, p)]
                box = (min(p.box[0] for p in same), min(p.box[1] for p in same),
                       max(p.box[2] for p in same), max(p.box[3] for p in same))
                return Overlay(o.strip, box, o.unit)
        return None

    def finish(self) -> BurnIn:
        self._closed = True
        if self.result.status == "none" and self._tries:
            self.result.reason = f"no speed overlay found on {len(self._tries)} frame(s) searched"
        if self.result.status == "read":
            check_reads(self.result.reads)
            if not self.result.accepted():
                self.result.reason = "the overlay was found but no read was plausible"
        return self.result


def read_burnin(path, every_s: float = READ_EVERY_S) -> BurnIn:
    """Read a video's burnt-in speed (a pass of its own over the file; perception feeds its frames)."""
    reader = BurnInReader(every_s)
    if reader.result.status == "unavailable":
        return reader.result
    for f in iter_frames(path, 1.0 / every_s if every_s > 0 else 1.0):
        reader.feed(f.image, f.t_s)
        if reader._closed:
            break
    return reader.finish()


def speed_series(burn: BurnIn, t: np.ndarray) -> dict:
    """Speed (m/s) and accel (m/s^2) of the accepted reads on the times ``t`` (NaN in gaps)."""
    tr, sp = burn.speed_mps()
    n = len(t)
    if len(tr) == 0:
        return {"speed": np.full(n, np.nan), "accel": np.full(n, np.nan)}
    tel = Telemetry(t=tr, speed=sp, heading=np.full(len(tr), np.nan), source=SOURCE)
    got = tel.resample(np.asarray(t, np.float64), max_gap_s=MAX_GAP_S, window_s=ACCEL_WINDOW_S)
    return {"speed": got["speed"], "accel": got["accel"]}


def agreement(burnin_speed: np.ndarray, video_speed: np.ndarray) -> dict:
    """How the video's own estimate compares with the overlay on the frames where both exist."""
    b = np.asarray(burnin_speed, np.float64)
    v = np.asarray(video_speed, np.float64)
    both = np.isfinite(b) & np.isfinite(v)
    if not both.any():
        return {"frames": 0, "note": "no frame has both a video estimate and an overlay read"}
    diff = np.abs(v[both] - b[both])
    ok = diff <= np.maximum(1.0, AGREE_REL * np.abs(b[both]))
    rel = diff / np.maximum(np.abs(b[both]), 1.0)
    return {"frames": int(both.sum()), "median_rel_diff": round(float(np.median(rel)), 3),
            "within_20pct": round(float(ok.mean()), 3)}


def merge_burnin(rec, burn: BurnIn, avail: dict) -> None:
    """Fill ego speed/accel from the overlay where no telemetry gave them (telemetry > overlay >
    video), and record provenance in ``rec.info.attrs["burnin"]`` and ``avail``."""
    summary = burn.summary()
    if burn.status == "read" and burn.accepted():
        got = speed_series(burn, rec.t)
        summary["agreement_with_video"] = agreement(got["speed"], _video_only(rec, avail))
        n = len(rec.t)
        tel_src = str((avail.get("speed") or {}).get("source") or "")
        taken = np.isfinite(got["speed"])
        if tel_src.startswith("telemetry:"):
            conf = np.asarray(rec.ego.get("speed_conf", np.full(n, np.nan)), np.float64)
            taken &= ~(conf >= 1.0)     # telemetry frames keep the camera's GPS
        summary["frames"] = int(taken.sum())
        if taken.any():
            rec.ego["speed"] = np.where(taken, got["speed"], rec.ego["speed"])
            acc_ok = taken & np.isfinite(got["accel"])
            rec.ego["accel"] = np.where(acc_ok, got["accel"], rec.ego["accel"])
            conf = np.asarray(rec.ego.get("speed_conf", np.full(n, np.nan)), np.float64)
            rec.ego["speed_conf"] = np.where(taken, BURNIN_CONF, conf)
            for f in ("speed", "accel"):
                prev = avail.get(f) or {}
                base = str(prev.get("source") or "video")
                src = SOURCE if taken.all() else (
                    f"{base}+{SOURCE}" if base.startswith("telemetry:") else f"{SOURCE}+video")
                avail[f] = {**prev, "source": src,
                            "reason": None if taken.all() else "the overlay's speed covers part of "
                                                                "the video; other sources elsewhere"}
            sp = np.isfinite(rec.ego["speed"])
            if sp.any() and np.isfinite(rec.ego["speed_conf"][sp]).any():
                avail["speed"]["quality"] = float(np.nanmedian(rec.ego["speed_conf"][sp]))
    rec.info.attrs["burnin"] = summary


def _video_only(rec, avail: dict) -> np.ndarray:
    """The video's own speed estimate (NaN where telemetry replaced it)."""
    sp = np.asarray(rec.ego.get("speed"), np.float64)
    if str((avail.get("speed") or {}).get("source") or "").startswith("telemetry:"):
        conf = np.asarray(rec.ego.get("speed_conf", np.full(len(sp), np.nan)), np.float64)
        sp = np.where(conf >= 1.0, np.nan, sp)
    return sp

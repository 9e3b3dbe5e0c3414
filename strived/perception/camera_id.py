"""Which camera recorded a video: a signature from what the file says about its recorder.

Evidence, each kept with the signature so the user can see why videos were grouped:

- frame size and frame rate (rounded to 0.1 fps), codec four-cc (from the decoder, OpenCV);
- container tags read with PyAV (the FFmpeg build the project already ships, no network, no
  ``ffprobe`` needed): make / model (``make``, ``model``, ``com.apple.quicktime.make|model``),
  the encoder and handler names a dashcam's chip writes (``AVC Coding``, ``Ambarella``...), the major
  brand;
- the file-name pattern: a known dashcam naming (BlackVue, Viofo/Novatek, GoPro, Garmin, Nextbase,
  Thinkware) or else the name's shape (each digit as ``#``, letters kept: ``FILE####``);
- the burnt-in overlay layout, once perception has read one (``attrs["burnin"]``): its strip and unit.

The group key is the size, rate, codec, make/model, chip encoder and name pattern; the overlay
layout is evidence only (an overlay missed on one clip must not split a camera). Videos re-encoded by
FFmpeg (``Lavf``/``Lavc`` encoders) say nothing about the recorder through those tags, which are then
left out of the key.
"""

from __future__ import annotations

import re
from pathlib import Path

NAME_PATTERNS = (   # (family, regex on the file stem)
    ("blackvue", r"\d{8}_\d{6}_[NEPMIO][FRI]?(_\w+)?"),
    ("viofo/novatek", r"\d{4}_\d{4}_\d{6}_\d{3,4}[FRPI]?"),
    ("novatek", r"(NO|EV|PA)\d{8}-\d{6}-\d{6}[FR]?"),
    ("gopro", r"(GOPR\d{4}|GP\d{6}|G[HXL]\d{6}|G[HX][A-Z0-9]{2}\d{4})"),
    ("garmin", r"GRMN\d{4}"),
    ("nextbase", r"\d{6}_\d{6}_\d{3}_[FR]H"),
    ("thinkware", r"(REC|EVT|MAN|MOT|PARK)_\d{4}_\d{2}_\d{2}_\d{2}_\d{2}_\d{2}_[FR]"),
    ("generic-dvr", r"(FILE|MOVI|IMAG|DSCF|PICT|VID|REC)_?\d{3,}[A-Z]?"),
)
_REENCODED = re.compile(r"^(lav[fc]|libx26|x26[45]|handbrake|bandicut)", re.IGNORECASE)
MAKE_TAGS = ("make", "com.apple.quicktime.make", "com.android.manufacturer")
MODEL_TAGS = ("model", "com.apple.quicktime.model", "com.android.model")


def name_pattern(path: str | Path) -> str:
    """The dashcam naming family of a file name, else its shape (digits as ``#``)."""
    stem = Path(str(path)).stem
    for family, rx in NAME_PATTERNS:
        if re.fullmatch(rx, stem, re.IGNORECASE):
            return family
    return "name:" + re.sub(r"\d", "#", stem)


def container_tags(path: str | Path) -> dict:
    """Container and video-stream tags through PyAV ({} when the file cannot be opened or PyAV
    is missing): make, model, encoder, handler, brand."""
    try:
        import av
    except ImportError:
        return {}
    try:
        with av.open(str(path)) as c:
            meta = {str(k).lower(): str(v) for k, v in (c.metadata or {}).items()}
            vs = c.streams.video[0] if c.streams.video else None
            smeta = {str(k).lower(): str(v) for k, v in ((vs.metadata if vs is not None else None) or {}).items()}
    except Exception:  # noqa: BLE001 - a file PyAV cannot read simply has no tags
        return {}
    both = {**smeta, **meta}
    out = {}
    for key, names in (("make", MAKE_TAGS), ("model", MODEL_TAGS)):
        v = next((both[n] for n in names if both.get(n)), None)
        if v:
            out[key] = v.strip()[:80]
    enc = smeta.get("encoder") or meta.get("encoder")
    if enc:
        out["encoder"] = enc.strip()[:80]
    if smeta.get("handler_name"):
        out["handler"] = smeta["handler_name"].strip()[:80]
    if meta.get("major_brand"):
        out["brand"] = meta["major_brand"].strip()[:16]
    return out


def overlay_layout(attrs: dict | None) -> str | None:
    """``bottom km/h``: where a burnt-in speed sits and its unit (None when none was read)."""
    b = (attrs or {}).get("burnin") if isinstance(attrs, dict) else None
    if not isinstance(b, dict) or b.get("status") != "read":
        return None
    strip = (b.get("region") or {}).get("strip") if isinstance(b.get("region"), dict) else None
    return f"{strip or '?'} {b.get('unit') or '?'}"


def _is_file(path) -> bool:
    """Whether ``path`` is a file; False for a name the file system cannot hold (too long, a
    stored id that was never a path), which ``Path.is_file`` raises on."""
    try:
        return Path(str(path)).is_file()
    except (OSError, ValueError):
        return False


def signature(path: str | Path, width: int | None, height: int | None, fps: float | None,
              codec: str | None, attrs: dict | None = None, tags: dict | None = None) -> dict:
    """{"key": group key, "evidence": {...}} of one video. ``tags``: `container_tags` when already
    read (else read from ``path`` when the file is there)."""
    if tags is None:
        tags = container_tags(path) if path and _is_file(path) else {}
    ev: dict = {"size": f"{int(width or 0)}x{int(height or 0)}" if width and height else "unknown",
                "fps": round(float(fps), 1) if fps and fps > 0 else None,
                "codec": (codec or "").lower() or None,
                "name_pattern": name_pattern(path) if path else "unknown"}
    for k in ("make", "model", "encoder", "handler", "brand"):
        if tags.get(k):
            ev[k] = tags[k]
    ev["reencoded"] = bool(_REENCODED.match(tags.get("encoder") or ""))
    layout = overlay_layout(attrs)
    if layout:
        ev["overlay"] = layout
    parts = [ev["size"], f"{ev['fps']}fps" if ev["fps"] else "?fps", ev["codec"] or "?codec",
             ev["name_pattern"]]
    for k in ("make", "model"):
        if ev.get(k):
            parts.append(f"{k}={ev[k]}")
    if ev.get("encoder") and not ev["reencoded"]:
        parts.append(f"encoder={ev['encoder']}")
    return {"key": " | ".join(parts), "evidence": ev}


def video_signature(video: dict) -> dict:
    """The signature of a library video (a ``Library.list_videos`` row): what grouping uses."""
    a = video.get("attrs") or {}
    return signature(video.get("path") or video["id"], video.get("width"), video.get("height"), video.get("fps"),
                     a.get("codec"), a)


def file_signature(path: str | Path) -> dict:
    """The signature of a video file not indexed yet, from a probe: the frame size, rate and
    codec its records will have (`pipeline` stores the probe's), so it gets the key
    `video_signature` gives it once indexed. Raises ``VideoDecodeError`` when it cannot be opened."""
    from .video import probe_video  # lazy: loads numpy

    p = probe_video(path)
    return signature(str(path), p.width, p.height, p.fps, p.codec)

"""Export a curated result list: CSV/JSON clip lists, FiftyOne temporal detections, ASAM OpenLABEL,
and optionally the clips themselves (frame-accurate re-encode, or a fast keyframe copy).

Every file is written to a temporary name in the target folder and renamed when complete, so a
read-only folder, a full disk (ENOSPC) or a cancel never leaves a partial file. Long work takes
``progress``/``cancel`` like every engine job (``strived/jobs.py``).
"""

from __future__ import annotations

import csv
import errno
import io
import json
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from . import __version__
from .clipwriter import open_writer
from .clipwriter import clip_codec as _codec
from .drive_clips import n_frames as drive_frames
from .drive_clips import pad_parts, row_fields
from .errors import Cancelled, StrivedError, UnsafePathError
from .jobs import CancelFn, ProgressFn, check_cancel, report
from .safepaths import output_path, safe_filename, unique_filename

FORMATS = ("csv", "json", "fiftyone", "openlabel")
CLIP_MODES = ("reencode", "copy")
CSV_COLUMNS = ("rank", "video_id", "video_path", "start_s", "end_s", "start_frame", "end_frame",
               "event_start_s", "event_end_s", "event_start_frame", "event_end_frame", "relevance",
               "fps", "score", "rule_score", "dense_score", "bm25_score", "rule_rank", "dense_rank",
               "bm25_rank", "event", "confidence", "mode", "relevant", "query", "library_version",
               "index_version", "clip_path", "drive_id", "drive_start_s", "drive_end_s", "drive_parts")


class ExportError(StrivedError):
    """An export could not be written; ``path`` is what failed. Nothing partial was left behind."""

    def __init__(self, message: str, path: str | None = None):
        self.path = path
        super().__init__(message)


@dataclass
class ExportReport:
    """What an export wrote (final paths) and what it skipped, with reasons."""

    files: list[str] = field(default_factory=list)
    clips: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)


# ---------------------------------------------------------------------------------------- rows
def _get(obj, name, default=None):
    return obj.get(name, default) if isinstance(obj, dict) else getattr(obj, name, default)


def library_versions(library) -> dict:
    """The versions an export records: library schema and index (content) version."""
    if library is None:
        return {"library_version": None, "index_version": None}
    return {"library_version": library.meta_get("schema_version"),
            "index_version": library.meta_get("content_version")}


def clip_rows(response, library=None, *, video_ids: Iterable[str] | None = None,
              marks: dict[str, bool] | None = None) -> list[dict]:
    """One row per hit (in rank order; only ``video_ids`` when given) with everything an export
    needs. Video fps/n_frames come from the library; a hit without a span exports the whole clip.

    ``start_s``/``end_s``/``start_frame``/``end_frame``: the clip that is cut (the event's span
    here; ``pad_rows`` widens it by a lead-in/lead-out). ``event_*``: where the evidence is (None
    when the hit has no span). ``relevance``: the calibrated probability that the video matches
    the query (None when not estimated); ``score``: the fused reciprocal-rank value, which orders
    the list but is no probability."""
    keep = None if video_ids is None else list(video_ids)
    vers = library_versions(library)
    match = dict(_get(response, "match", None) or {})
    rows = []
    for h in _get(response, "hits", []) or []:
        vid = _get(h, "video_id")
        if keep is not None and vid not in keep:
            continue
        info = {}
        if library is not None:
            info = library.video_timing(vid) or {}
        fps = float(info.get("fps") or 0.0) or None
        n_frames = info.get("n_frames")
        span = _get(h, "span_s")
        if span:
            t0, t1 = float(span[0]), float(span[1])
        else:
            t0 = 0.0
            t1 = float(info.get("duration_s") or ((n_frames - 1) / fps if fps and n_frames else 0.0))
        f0 = int(round(t0 * fps)) if fps else None
        f1 = int(round(t1 * fps)) if fps else None
        if f1 is not None and n_frames:
            f0, f1 = max(0, min(f0, n_frames - 1)), max(0, min(f1, n_frames - 1))
        per = dict(_get(h, "per_source", None) or {})
        rel = _get(h, "relevance")
        row = {"rank": _get(h, "rank"), "video_id": vid,
               "video_path": _get(h, "path") or info.get("path"),
               "start_s": round(t0, 4), "end_s": round(t1, 4), "start_frame": f0, "end_frame": f1,
               "event_start_s": round(t0, 4) if span else None, "event_end_s": round(t1, 4) if span else None,
               "event_start_frame": f0 if span else None, "event_end_frame": f1 if span else None,
               "relevance": None if rel is None else round(float(rel), 4),
               "fps": fps, "score": float(_get(h, "score", 0.0) or 0.0),
               "per_source": {s: dict(v or {}) for s, v in per.items()},
               "event": match.get("event"), "confidence": match.get("confidence"),
               "mode": match.get("mode"), "peak_track": _get(h, "peak_track"),
               "relevant": None if marks is None else marks.get(vid),
               "query": _get(response, "query"), **vers, **row_fields(_get(h, "drive"))}
        rows.append(row)
    return rows


def pad_rows(rows: list[dict], lead_in_s: float, lead_out_s: float,
             extents: dict[str, tuple] | None = None) -> list[dict]:
    """Copies of ``rows`` (``clip_rows``) whose clip starts ``lead_in_s`` before the event and
    ends ``lead_out_s`` after it, kept inside the video (``extents``: video id -> (n_frames,
    duration_s), either may be None: then only t >= 0 is enforced). The event's own span stays in
    the ``event_*`` fields; clip frames follow the clip times at the row's fps."""
    lead_in_s, lead_out_s = max(0.0, float(lead_in_s)), max(0.0, float(lead_out_s))
    out = []
    for r in rows:
        r = dict(r)
        if "event_start_s" not in r:   # a row made before the event fields existed
            r["event_start_s"], r["event_end_s"] = r["start_s"], r["end_s"]
            r["event_start_frame"], r["event_end_frame"] = r.get("start_frame"), r.get("end_frame")
        r["lead_in_s"], r["lead_out_s"] = lead_in_s, lead_out_s
        n_frames, dur = (extents or {}).get(r["video_id"], (None, None))
        fps = r.get("fps")
        if dur is None and n_frames and fps:
            dur = (int(n_frames) - 1) / float(fps)
        t0 = max(0.0, float(r["start_s"]) - lead_in_s)
        t1 = float(r["end_s"]) + lead_out_s
        if dur is not None:
            t1 = min(t1, float(dur))
        r["start_s"], r["end_s"] = round(t0, 4), round(max(t0, t1), 4)
        if fps:
            f0, f1 = int(round(r["start_s"] * fps)), int(round(r["end_s"] * fps))
            if n_frames:
                f0, f1 = max(0, min(f0, n_frames - 1)), max(0, min(f1, n_frames - 1))
            r["start_frame"], r["end_frame"] = f0, f1
        if r.get("drive_parts"):
            r["drive_parts"] = pad_parts(r["drive_parts"], lead_in_s, lead_out_s)
        out.append(r)
    return out


# ----------------------------------------------------------------------------- safe writing
def _check_writable(folder: Path) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except PermissionError:
        raise ExportError(f"cannot create the export folder {folder}: permission denied; choose a "
                          "folder you can write to (nothing was written)", str(folder)) from None
    except OSError as e:
        if e.errno == errno.ENOSPC:
            raise _os_error(e, folder) from None
        raise ExportError(f"cannot create the export folder {folder} ({e.strerror or e}); choose a "
                          "folder you can write to (nothing was written)", str(folder)) from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ExportError(f"the export folder {folder} is read-only; choose a folder you can "
                          "write to (nothing was written)", str(folder))


def _os_error(e: OSError, path: Path) -> ExportError:
    if e.errno == errno.ENOSPC:
        return ExportError(f"the disk is full while writing {path}; free some space and export "
                           "again (no partial file was left)", str(path))
    if e.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return ExportError(f"cannot write {path}: the folder is read-only or not yours; choose "
                           "another folder (nothing was written)", str(path))
    return ExportError(f"cannot write {path}: {e.strerror or e}", str(path))


def fresh_tmp(path: Path, keep_suffix: bool = True) -> tuple[int, Path]:
    """(open descriptor, name) of a new, empty temporary file beside ``path``: a random name
    created with O_CREAT|O_EXCL (which never opens an existing entry, a planted symlink included),
    so an export in a shared or synced folder cannot be made to write through a link.
    ``keep_suffix``: end the name with the file's own suffix (a video writer picks its container
    from it), else with ``.partial``."""
    import tempfile

    suffix = f".partial{path.suffix}" if keep_suffix else ".partial"
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=suffix)
    return fd, Path(name)


def write_atomic(path: str | os.PathLike, data: str | bytes) -> str:
    """Write ``data`` to ``path`` via a fresh temporary file + rename. Raises ExportError."""
    path = Path(path)
    tmp = None
    try:
        fd, tmp = fresh_tmp(path, keep_suffix=False)
        os.close(fd)
        with open(tmp, "wb") as fh:       # our own fresh file (random name, created exclusively)
            fh.write(data.encode("utf-8") if isinstance(data, str) else data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as e:
        if tmp is not None:
            _unlink(tmp)
        raise _os_error(e, path) from None
    return str(path)


def _unlink(p: Path) -> None:
    try:
        p.unlink()
    except OSError:
        pass


# ------------------------------------------------------------------------------- formats
def to_csv(rows: list[dict]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CSV_COLUMNS, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for r in rows:
        flat = dict(r)
        for s in ("rule", "dense", "bm25"):
            ps = (r.get("per_source") or {}).get(s) or {}
            flat[f"{s}_score"] = ps.get("score")
            flat[f"{s}_rank"] = ps.get("rank")
        if r.get("drive_parts"):        # an event across files: its per-file parts as JSON text
            flat["drive_parts"] = json.dumps(r["drive_parts"], separators=(",", ":"))
        w.writerow({k: ("" if flat.get(k) is None else flat.get(k)) for k in CSV_COLUMNS})
    return buf.getvalue()


def to_json(rows: list[dict], context: dict) -> str:
    """The clip list with its provenance: query, rule, fusion weights, versions."""
    doc = {"format": "strived.cliplist/1", "strived_version": __version__,
           "query": context.get("query"), "rule": context.get("rule"),
           "weights": context.get("weights"), "match": context.get("match"),
           "library": context.get("library"), "library_version": context.get("library_version"),
           "index_version": context.get("index_version"), "clips": rows}
    return json.dumps(doc, indent=1, default=_json_default)


def _json_default(o):
    try:
        import numpy as np

        if isinstance(o, np.generic):
            return o.item()
        if isinstance(o, np.ndarray):
            return o.tolist()
    except ImportError:
        pass
    return str(o)


def _event_frames(r: dict) -> tuple[int | None, int | None]:
    """The event's [first, last] frame of a row (rows made before the event fields: the clip's)."""
    if "event_start_frame" in r:
        return r.get("event_start_frame"), r.get("event_end_frame")
    return r.get("start_frame"), r.get("end_frame")


def to_fiftyone(rows: list[dict], label: str) -> tuple[str, str]:
    """FiftyOne ``FiftyOneTemporalDetectionDataset`` (export_media="manifest"): ``labels.json``
    (``support`` = 1-based [first, last] frame numbers of the event, as FiftyOne counts frames;
    ``clip_support`` those of the exported clip when it is padded) and ``data.json`` mapping each
    uuid to its video path. ``confidence`` is the calibrated relevance, absent when it was not
    estimated (the fused rank score is no confidence). Returns (labels, data) texts."""
    labels: dict[str, list] = {}
    data: dict[str, str] = {}
    for r in rows:
        uuid = r["video_id"]
        det: dict[str, Any] = {"label": label}
        if r.get("relevance") is not None:
            det["confidence"] = r["relevance"]
        e0, e1 = _event_frames(r)
        if e0 is not None:
            det["support"] = [e0 + 1, e1 + 1]
            if (r.get("start_frame"), r.get("end_frame")) != (e0, e1) and r.get("start_frame") is not None:
                det["clip_support"] = [r["start_frame"] + 1, r["end_frame"] + 1]
        else:
            det["timestamps"] = [r.get("event_start_s", r["start_s"]), r.get("event_end_s", r["end_s"])]
        labels.setdefault(uuid, []).append(det)
        if r.get("video_path"):
            data[uuid] = r["video_path"]
    return (json.dumps({"classes": [label], "labels": labels}, indent=1),
            json.dumps(data, indent=1))


def to_openlabel(row: dict, label: str, context: dict) -> str:
    """ASAM OpenLABEL 1.0 JSON for one video: one action over the event's frames; the document's
    frame intervals are the exported clip's. The action's numbers: ``relevance`` (calibrated
    probability, when estimated) and ``rank``."""
    f0, f1 = row.get("start_frame"), row.get("end_frame")
    e0, e1 = _event_frames(row)
    num = [{"name": "rank", "val": row.get("rank")}]
    if row.get("relevance") is not None:
        num.insert(0, {"name": "relevance", "val": row["relevance"]})
    action: dict[str, Any] = {"name": label, "type": label,
                              "action_data": {"num": num,
                                              "text": [{"name": "query",
                                                        "val": str(context.get("query") or "")}]}}
    if e0 is not None:
        action["frame_intervals"] = [{"frame_start": e0, "frame_end": e1}]
    doc = {"openlabel": {
        "metadata": {"schema_version": "1.0.0", "annotator": "STRIVE-D",
                     "comment": f"search result rank {row.get('rank')}",
                     "file_version": str(context.get("index_version"))},
        "streams": {"camera": {"type": "camera", "uri": row.get("video_path") or "",
                               "description": "dashcam video"}},
        "actions": {"0": action},
        "frame_intervals": ([{"frame_start": f0, "frame_end": f1}] if f0 is not None else []),
    }}
    if row.get("fps"):
        doc["openlabel"]["coordinate_systems"] = {}
        doc["openlabel"]["metadata"]["fps"] = row["fps"]
    return json.dumps(doc, indent=1)


# ----------------------------------------------------------------------------------- clips
def fast_copy_available() -> str | None:
    """Path of an ffmpeg binary for the keyframe copy, or None (then only re-encode works)."""
    return shutil.which("ffmpeg")


def clip_codec() -> str:
    """What re-encoded clips are written with here (``libx264`` through PyAV, or an OpenCV FourCC)."""
    return _codec()


def cut_clip_reencode(src: str, dst: Path, f0: int, f1: int, cancel: CancelFn = None,
                      on_frame: Callable[[int], None] | None = None) -> str:
    """Frames f0..f1 (inclusive, 0-based) of ``src`` re-encoded to ``dst`` (H.264 through PyAV,
    else what OpenCV can write: `strived.clipwriter`): frame-accurate."""
    return cut_segments_reencode([(src, f0, f1)], dst, cancel, on_frame)


def cut_segments_reencode(segments, dst: Path, cancel: CancelFn = None,
                          on_frame: Callable[[int], None] | None = None) -> str:
    """The frames f0..f1 of each ``(src, f0, f1)`` of ``segments``, in order, re-encoded into one
    clip ``dst`` (as `cut_clip_reencode`): several make one clip over the files of a drive
    (`strived.drive_clips`), whose frames must have one size."""
    import cv2

    caps: list = []

    def release_all():
        for c in caps:
            c.release()

    for src, _a, _b in segments:
        caps.append(cv2.VideoCapture(str(src)))
        if not caps[-1].isOpened():
            release_all()
            raise ExportError(f"cannot open {src} (missing or not a video)", str(src))
    fps = caps[0].get(cv2.CAP_PROP_FPS) or 25.0
    sizes = [(int(c.get(cv2.CAP_PROP_FRAME_WIDTH)), int(c.get(cv2.CAP_PROP_FRAME_HEIGHT))) for c in caps]
    (w, h), odd = sizes[0], next((k for k, wh in enumerate(sizes) if wh != sizes[0]), None)
    if odd is not None:
        release_all()
        raise ExportError(f"cannot cut one clip across {segments[odd][0]}: its frames are {sizes[odd][0]}x"
                          f"{sizes[odd][1]}, those of {segments[0][0]} {w}x{h}", str(segments[odd][0]))
    try:
        fd, tmp = fresh_tmp(dst)      # a random name of our own: never an entry planted there
        os.close(fd)
    except OSError as e:
        release_all()
        raise _os_error(e, dst) from None
    try:
        writer = open_writer(tmp, fps, w, h)
    except OSError as e:
        release_all()
        _unlink(tmp)
        raise _os_error(e, dst) from None
    try:
        if not writer.isOpened():
            raise ExportError(f"cannot write {dst} (is the folder writable?)", str(dst))
        written = 0
        for cap, (src, f0, f1) in zip(caps, segments):
            cap.set(cv2.CAP_PROP_POS_FRAMES, f0)
            for k in range(f0, f1 + 1):
                if cancel is not None and written % 10 == 0 and cancel():
                    raise Cancelled()
                ok, frame = cap.read()
                if not ok:
                    if k == f0:
                        raise ExportError(f"{src}: cannot decode frame {f0}", str(src))
                    break
                writer.write(frame)
                written += 1
                if on_frame:
                    on_frame(written)
        writer.release()
        if not tmp.exists() or tmp.stat().st_size == 0:
            raise ExportError(f"the encoder wrote nothing for {dst} (disk full?)", str(dst))
        if _frames_in(tmp) < written:     # the encoder's writes fail silently (a full disk)
            raise ExportError(f"{dst} could not be written completely (the disk may be full); nothing "
                              "was left in its place", str(dst))
        os.replace(tmp, dst)
    except OSError as e:
        _release_quietly(writer)
        _unlink(tmp)
        raise _os_error(e, dst) from None
    except BaseException:
        _release_quietly(writer)
        _unlink(tmp)
        raise
    finally:
        release_all()
    return str(dst)


def _release_quietly(writer) -> None:
    """Close a writer on an error path: its own error (a full disk again, as it flushes) must not
    replace the one being reported."""
    try:
        writer.release()
    except Exception:  # noqa: BLE001 - the first error is the one that is reported
        pass


def _frames_in(path: Path) -> int:
    """How many frames a written clip decodes to (0 when it cannot be opened: a clip cut short
    has no index and does not open)."""
    import cv2

    cap = cv2.VideoCapture(str(path))
    try:
        if not cap.isOpened():
            return 0
        n = 0
        while cap.grab():
            n += 1
        return n
    finally:
        cap.release()


def cut_clip_copy(src: str, dst: Path, t0: float, t1: float) -> str:
    """Keyframe copy with ffmpeg (no re-encode; starts at the keyframe at or before ``t0``)."""
    ffmpeg = fast_copy_available()
    if ffmpeg is None:
        raise ExportError("fast keyframe copy is unavailable: it needs ffmpeg on the PATH; use the "
                          "frame-accurate re-encode instead")
    try:
        fd, tmp = fresh_tmp(dst)
        os.close(fd)
    except OSError as e:
        raise _os_error(e, dst) from None
    cmd = [ffmpeg, "-v", "error", "-y", "-ss", f"{t0:.3f}", "-i", str(src), "-t",
           f"{max(0.04, t1 - t0):.3f}", "-c", "copy", "-avoid_negative_ts", "make_zero", str(tmp)]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0 or not tmp.exists():
        _unlink(tmp)
        raise ExportError(f"ffmpeg could not copy {src}: {res.stderr.strip()[:300]}", str(dst))
    os.replace(tmp, dst)
    return str(dst)


# ------------------------------------------------------------------------------- the job
def export_results(rows: list[dict], out_dir: str | os.PathLike, *,
                   formats: Iterable[str] = ("csv", "json"), clips: str | None = None,
                   context: dict | None = None, progress: ProgressFn = None,
                   cancel: CancelFn = None) -> ExportReport:
    """Write the chosen ``formats`` (of FORMATS) and, with ``clips`` in CLIP_MODES, cut each
    clip into ``out_dir/clips/``. ``context`` carries query, rule, weights, match, library and
    versions. Raises ExportError (read-only folder, full disk...) or Cancelled; either way no
    partial file remains, and list files are written only after all clips are done."""
    context = dict(context or {})
    formats = list(formats)
    _check_choices(formats, clips)
    out = Path(out_dir).expanduser()
    _check_writable(out)
    rep = ExportReport()
    rows = [dict(r) for r in rows]
    label = str(context.get("match", {}).get("event") or context.get("event") or "match")
    if clips:
        _cut_clips(rows, out, clips, rep, progress, cancel)
    check_cancel(cancel)
    rep.files = _write_all(_documents(rows, out, formats, label, context), progress, cancel)
    return rep


def _check_choices(formats: list[str], clips: str | None) -> None:
    bad = [f for f in formats if f not in FORMATS]
    if bad:
        raise ExportError(f"unknown export format(s) {', '.join(bad)}; valid: {', '.join(FORMATS)}")
    if clips is not None and clips not in CLIP_MODES:
        raise ExportError(f"unknown clip mode {clips!r}; valid: {', '.join(CLIP_MODES)}")
    if clips == "copy" and fast_copy_available() is None:
        raise ExportError("fast keyframe copy is unavailable: it needs ffmpeg on the PATH; "
                          "choose the frame-accurate re-encode")


def _target(out: Path, *parts: str) -> Path:
    """Every output file is named here, inside ``out``."""
    try:
        return output_path(out, *parts)
    except UnsafePathError as e:
        raise ExportError(f"{e} (nothing was written)", e.path) from None


def _cut_clips(rows: list[dict], out: Path, clips: str, rep: ExportReport, progress: ProgressFn,
               cancel: CancelFn) -> None:
    """Cut each row's clip into ``out/clips/`` (its path goes to the row's ``clip_path``); a row
    whose video file is missing, or that cannot be cut by frame, is skipped with the reason."""
    clip_dir = _target(out, "clips")
    _check_writable(clip_dir)
    clip_names: set[str] = set()

    total = sum(drive_frames(r["drive_parts"]) if r.get("drive_parts") else
                max(1, (r["end_frame"] or 0) - (r["start_frame"] or 0) + 1) for r in rows)
    done = 0
    for r in rows:
        check_cancel(cancel)
        src = r.get("video_path")
        across = r.get("drive_parts")       # an event across files of a drive: each file is needed
        if not all(s and os.path.exists(s) for s in ([p.get("video_path") for p in across] if across else [src])):
            rep.skipped.append((r["video_id"], "no video file (records only, or moved)"))
            continue
        if across and any(p.get("start_frame") is None for p in across):
            rep.skipped.append((r["video_id"], "unknown fps: cannot cut by frame"))
            continue
        if across:       # an event across files of a drive: named by its drive span
            name = f"{r['rank']:03d}_{safe_filename(across[0]['video_id'], 'video', 80)}_drive_" \
                   f"{r['drive_start_s']:.1f}-{r['drive_end_s']:.1f}s.mp4"
        else:
            name = f"{r['rank']:03d}_{safe_filename(r['video_id'], 'video', 80)}_" \
                   f"{r['start_s']:.1f}-{r['end_s']:.1f}s.mp4"
        dst = _target(out, "clips", unique_filename(name, clip_names))
        base = done

        def on_frame(k, base=base, vid=r["video_id"]):
            report(progress, "clips", base + k, total, item=vid)

        if across:       # one clip over the boundary, re-encoded (`strived.drive_clips`)
            path = cut_segments_reencode([(p["video_path"], p["start_frame"], p["end_frame"]) for p in across],
                                         dst, cancel, on_frame)
        elif clips == "reencode":
            if r.get("start_frame") is None:
                rep.skipped.append((r["video_id"], "unknown fps: cannot cut by frame"))
                continue
            path = cut_clip_reencode(src, dst, r["start_frame"], r["end_frame"], cancel, on_frame)
        else:
            path = cut_clip_copy(src, dst, r["start_s"], r["end_s"])
        done += drive_frames(across) if across else max(1, (r["end_frame"] or 0) - (r["start_frame"] or 0) + 1)
        report(progress, "clips", done, total, item=r["video_id"])
        r["clip_path"] = path
        rep.clips.append(path)


def _documents(rows: list[dict], out: Path, formats: list[str], label: str,
               context: dict) -> list[tuple[Path, str]]:
    """(path, text) of every list file of ``formats``, nothing written yet."""
    docs: list[tuple[Path, str]] = []
    if "csv" in formats:
        docs.append((_target(out, "clips.csv"), to_csv(rows)))
    if "json" in formats:
        docs.append((_target(out, "clips.json"), to_json(rows, context)))
    if "fiftyone" in formats:
        lab, data = to_fiftyone(rows, label)
        _check_writable(_target(out, "fiftyone"))
        docs += [(_target(out, "fiftyone", "labels.json"), lab), (_target(out, "fiftyone", "data.json"), data)]
    if "openlabel" in formats:
        _check_writable(_target(out, "openlabel"))
        ol_names: set[str] = set()
        # a video id is never used as a path as is: an id from an older library may hold '../'
        docs += [(_target(out, "openlabel", unique_filename(safe_filename(r["video_id"], "video") + ".json",
                                                            ol_names)),
                  to_openlabel(r, label, context)) for r in rows]
    return docs


def _write_all(docs: list[tuple[Path, str]], progress: ProgressFn, cancel: CancelFn) -> list[str]:
    """Write every document atomically: all of them, or (on an error or a cancel) none."""
    written: list[str] = []
    try:
        for k, (p, text) in enumerate(docs):
            check_cancel(cancel)
            written.append(write_atomic(p, text))
            report(progress, "files", k + 1, len(docs), item=p.name)
    except BaseException:
        for p in written:          # all lists or none: a half-written export would mislead
            _unlink(Path(p))
        raise
    return written

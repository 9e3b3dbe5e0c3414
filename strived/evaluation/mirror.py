"""Mirrored benchmark items: each clip flipped left-right, with its left/right labels swapped.

``mirror_benchmark(SRC, OUT)`` (CLI: ``strived bench-mirror SRC OUT``) reads a benchmark folder
(docs/formats.md section 2) and writes a new one holding the mirror image of its items, as extra
evaluation evidence. It never writes into SRC and refuses an OUT inside SRC (or SRC inside OUT).

Items (``items``: ``video`` = the items with a video file, the default; ``records`` = the items
with track records only; ``all``; the same split as ``strived eval --items``):

* id = original id + ``_mirror``; manifest ``group`` = the original item's group (its source), so
  source-wise folds and per-source figures keep a mirror with its original; ``mirror_of`` (an
  extension key) = the original id; ``source`` says it is a mirror of the original; ``license``
  copied.
* video: every decoded frame flipped with ``cv2.flip(frame, 1)``, written at the same frame rate
  and size as an ``.mp4`` (H.264 ``avc1`` when OpenCV can encode it here, else MPEG-4 ``mp4v``:
  `strived.clipwriter.cv_codec`), under the same sub-folder as the original, to a temporary name
  renamed on success. Audio, container metadata and embedded telemetry (GoPro GPMF) are not
  carried over; telemetry side files (NMEA/GPX) are not copied either (a mirrored drive no longer
  matches its GPS track). The frames are re-encoded, so the mirror is a little more compressed
  than its original. A video that cannot be opened or decoded is reported and skipped (its item
  is left out).
* ``camera.json`` (the nearest one above a source video, within SRC) is copied to the same place
  in OUT: focal length, horizon and camera height do not change under a mirror; a principal point
  ``cx`` becomes ``width - cx`` (``width`` = the file's own ``width`` key, else the videos' width).
* records (a ``strived.records/1`` file of the item, when the item is selected): lateral offset
  ``loc_x`` and lane ``lane_rel`` change sign, ``yaw_rate`` changes sign (a left turn becomes a
  right turn), boxes become ``[W - x2, y1, W - x1, y2]`` (W = the video width; boxes are dropped
  when no width is known); distances, speeds, times and classes are unchanged.

Queries (queries.json), in source order; relevant / ambiguous / spans are mapped to the mirrored
ids (span times are unchanged) and a query left with no relevant mirrored item is dropped:

* A query *has a side* when its ``event`` key has a ``left`` or ``right`` word (``cut_in_left``,
  ``overtaken_right``, ``ego_turn_left``: every such key of `strived.events.EVENT_KEYS`
  and of the source's queries) or when its text says ``left`` / ``right``.
* A query without a side keeps its id, text and event.
* A sided query's event swaps ``left`` <-> ``right`` (``cut_in_left`` -> ``cut_in_right``). If a
  source query has that swapped event, the mirrored query takes that query's id *and text* (the
  first such query whose id is still free), so that `bench.merge_benchmarks` joins the mirrored
  "cut in from the left" items to the original "cut in from the left" query (a merge requires the
  same text and event under one id). Otherwise its id is the original id + ``m`` (made unique)
  and its text the original's with the words ``left`` <-> ``right`` swapped (case kept; also
  ``leftmost``/``rightward``...; not in the non-directional phrases ``right away``, ``right
  now``, ``all right``, ``right in front``, ``right ahead``, ``right behind``, ``right next to``,
  ``has/had/have/just left``, ``left behind``). A swapped event that is not a library event is
  listed in the report's notes. ``mirror_of`` (an extension key) = the original query id.

Manifest: ``name`` = source name + ``-mirror``; ``description`` says how it was made;
``license_note`` copied; the extension key ``mirror`` records the source, the codec, the items
skipped and the notes. Readers ignore keys they do not know.

Caveats for whoever counts this evidence: a mirror is not independent of its original (same
drive, same moment), so it must never be calibrated on while its original is scored or the
reverse; a mirror of right-hand traffic looks like left-hand traffic, and burnt-in text reads
backwards. The source clips' licences apply unchanged to their mirrors: write OUT outside the code
repository.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from dataclasses import replace
from pathlib import Path

from ..clipwriter import cv_codec
from ..errors import BenchmarkError, RecordsError, VideoDecodeError
from ..events import EVENT_KEYS
from ..jobs import CancelFn, ProgressFn, check_cancel, report
from ..perception.geometry import CAMERA_CONFIG_NAME
from ..perception.video import probe_video
from ..records import VideoRecords
from .bench import ITEM_KINDS, BenchItem, load_benchmark

MIRROR_SUFFIX = "_mirror"
QUERY_SUFFIX = "m"
_SIDES = {"left": "right", "right": "left"}
_WORD = re.compile(r"\b(left|right)(most|wards?)?\b", re.IGNORECASE)
# phrases where left/right is not a side: kept as they are
_NOT_A_SIDE = re.compile(
    r"\b(?:right\s+(?:away|now|in\s+front|ahead|behind|next\s+to)\b|all\s+right\b"
    r"|(?:has|had|have|just)\s+left\b|left\s+behind\b)", re.IGNORECASE)


# ------------------------------------------------------------------------------------ labels
def mirror_id(item_id: str) -> str:
    return item_id + MIRROR_SUFFIX


def swap_event(key: str | None) -> str | None:
    """The event key with ``left``/``right`` swapped (``cut_in_left`` -> ``cut_in_right``), or
    None when the key has no side."""
    if not key:
        return None
    parts = key.split("_")
    swapped = [_SIDES.get(p, p) for p in parts]
    return "_".join(swapped) if swapped != parts else None


def swap_text(text: str) -> str:
    """``text`` with the words left/right swapped (case kept), except in non-directional phrases."""
    keep = [m.span() for m in _NOT_A_SIDE.finditer(text)]

    def sub(m: re.Match) -> str:
        if any(a <= m.start() < b for a, b in keep):
            return m.group(0)
        word = m.group(1)
        new = _SIDES[word.lower()]
        if word.isupper():
            new = new.upper()
        elif word[0].isupper():
            new = new.capitalize()
        return new + (m.group(2) or "")

    return _WORD.sub(sub, text)


def _unique_id(base: str, taken: set[str]) -> str:
    qid, n = base, 2
    while qid in taken:
        qid, n = f"{base}{n}", n + 1
    return qid


def mirror_queries(queries: list[dict], id_map: dict[str, str]) -> tuple[list[dict], list[str]]:
    """The mirrored queries (module docstring) of raw queries.json entries, and notes (dropped
    queries, swapped events the library does not know). ``id_map``: original -> mirrored item id."""
    known = set(EVENT_KEYS) | {q.get("event") for q in queries if q.get("event")}
    source_ids = {q["id"] for q in queries}
    out: list[dict] = []
    notes: list[str] = []
    pending: list[tuple[dict, bool]] = []  # sided queries (and whether their event swapped)
    for q in queries:
        rel = [id_map[r] for r in q.get("relevant") or [] if r in id_map]
        if not rel:
            notes.append(f"query {q['id']} dropped: none of its relevant items was mirrored")
            continue
        m = {"id": q["id"], "text": q["text"], "event": q.get("event"), "relevant": rel,
             "ambiguous": [id_map[a] for a in q.get("ambiguous") or [] if a in id_map],
             "spans": {id_map[k]: v for k, v in (q.get("spans") or {}).items() if k in id_map},
             "mirror_of": q["id"]}
        if m["event"] is None:
            del m["event"]
        ev_m = swap_event(q.get("event"))
        text_m = swap_text(q["text"])
        out.append(m)
        if ev_m is None and text_m == q["text"]:
            continue
        if ev_m is not None:
            m["event"] = ev_m
            if ev_m not in known:
                notes.append(f"query {q['id']}: mirrored event {ev_m!r} is not a library event")
        m["text"] = text_m
        pending.append((m, ev_m is not None))
    sided = {id(m) for m, _ in pending}
    taken = {m["id"] for m in out if id(m) not in sided}  # sideless queries keep their ids
    for m, swapped in pending:
        target = None
        if swapped:
            target = next((q for q in queries if q.get("event") == m["event"] and q["id"] not in taken), None)
        if target is not None:
            m["id"], m["text"] = target["id"], target["text"]
        else:
            m["id"] = _unique_id(m["mirror_of"] + QUERY_SUFFIX, taken | source_ids)
        taken.add(m["id"])
    return out, notes


# ------------------------------------------------------------------------------------ files
def _inside(p: Path, folder: Path) -> bool:
    return p == folder or folder in p.parents


def _out_dir(src: Path, path: Path, default: str) -> Path:
    """Where, relative to the benchmark folder, a file mirrored from ``path`` goes."""
    try:
        return path.resolve().parent.relative_to(src)
    except ValueError:
        return Path(default)


def _camera_json(src: Path, video: Path) -> Path | None:
    """The nearest camera.json from the video's folder up to ``src`` (inclusive)."""
    p = video.resolve().parent
    while True:
        if (p / CAMERA_CONFIG_NAME).is_file():
            return p / CAMERA_CONFIG_NAME
        if p == src or src not in p.parents:
            return None
        p = p.parent


def mirror_video(src: Path, dst: Path, codec: str, cancel: CancelFn = None) -> dict:
    """Write ``src`` flipped left-right to ``dst`` (via a temporary name). Returns frames, fps,
    width, height and the container's frame count; raises VideoDecodeError when ``src`` cannot
    be read and BenchmarkError when the mirror cannot be written."""
    import cv2

    probe = probe_video(src)  # VideoDecodeError with the reason when it cannot be opened
    cap = cv2.VideoCapture(str(src))
    fps = float(cap.get(cv2.CAP_PROP_FPS) or 0.0)
    if not cap.isOpened() or not (0 < fps <= 1000):
        cap.release()
        raise VideoDecodeError(str(src), "no usable frame rate" if cap.isOpened() else "cannot be opened")
    tmp = dst.with_name(f".{dst.stem}.partial{dst.suffix}")
    writer = None
    n = 0
    size = None
    try:
        while True:
            if cancel is not None and n % 50 == 0:
                check_cancel(cancel)
            ok, frame = cap.read()
            if not ok or frame is None:
                break
            if size is None:
                size = (frame.shape[1], frame.shape[0])
                writer = cv2.VideoWriter(str(tmp), cv2.VideoWriter_fourcc(*codec), fps, size)
                if not writer.isOpened():
                    raise BenchmarkError(f"cannot write {dst} with codec {codec} (is the folder writable?)")
            elif (frame.shape[1], frame.shape[0]) != size:
                raise VideoDecodeError(str(src), f"frame {n} is {frame.shape[1]}x{frame.shape[0]}, "
                                                 f"not {size[0]}x{size[1]} like the first")
            writer.write(cv2.flip(frame, 1))
            n += 1
        if n == 0:
            raise VideoDecodeError(str(src), "no frame could be decoded")
        writer.release()
        writer = None
        check = cv2.VideoCapture(str(tmp))
        n_out = int(check.get(cv2.CAP_PROP_FRAME_COUNT) or 0)
        fps_out = float(check.get(cv2.CAP_PROP_FPS) or 0.0)
        check.release()
        if n_out != n or abs(fps_out - fps) > 1e-3 * fps:
            raise BenchmarkError(f"{dst.name}: the written mirror reads back as {n_out} frames at "
                                 f"{fps_out:g} fps, not {n} at {fps:g}")
        os.replace(tmp, dst)
    except BaseException:
        if writer is not None:
            writer.release()
        tmp.unlink(missing_ok=True)
        raise
    finally:
        cap.release()
    return {"frames": n, "fps": fps, "width": size[0], "height": size[1],
            "container_frames": probe.n_frames}


def mirror_records(path: Path, new_id: str, video_rel: str | None, width: int | None, source: str):
    """The records file at ``path`` mirrored (module docstring) as a VideoRecords, and whether its
    boxes had to be dropped for want of a frame width."""
    import numpy as np

    rec = VideoRecords.load(path)
    w = rec.info.width or width
    info = replace(rec.info, id=new_id, path=video_rel, width=w, source=source)
    ego = {k: v.copy() for k, v in rec.ego.items()}
    ego["yaw_rate"] = -ego["yaw_rate"] + 0.0
    dropped = False
    tracks = []
    for tr in rec.tracks:
        fields = {k: v.copy() for k, v in tr.fields.items()}
        for k in ("loc_x", "lane_rel"):
            fields[k] = -fields[k] + np.float32(0.0)
        bbox = None
        if tr.bbox is not None:
            if w:
                bbox = tr.bbox.copy()
                bbox[:, 0], bbox[:, 2] = w - tr.bbox[:, 2], w - tr.bbox[:, 0]
            else:
                dropped = True
        tracks.append(replace(tr, fields=fields, bbox=bbox, attrs=dict(tr.attrs)))
    return VideoRecords(info=info, frame_idx=rec.frame_idx.copy(), t=rec.t.copy(), ego=ego,
                        tracks=tracks), dropped


def _mirror_camera(cfg_path: Path, dst: Path, widths: set[int], notes: list[str]) -> None:
    raw = cfg_path.read_bytes()
    try:
        cfg = json.loads(raw.decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError):
        cfg = None
    if isinstance(cfg, dict) and cfg.get("cx") is not None:
        ref = cfg.get("width") or (next(iter(widths)) if len(widths) == 1 else None)
        if ref:
            cfg["cx"] = float(ref) - float(cfg["cx"])
            dst.write_text(json.dumps(cfg, indent=1) + "\n", encoding="utf-8")
            return
        notes.append(f"{dst}: cx kept as it is (no width to mirror it about: videos of "
                     f"{sorted(widths)} px)")
    dst.write_bytes(raw)


# ------------------------------------------------------------------------------------ main
def _check_out(src: Path, out: Path, overwrite: bool) -> None:
    if _inside(out, src):
        raise BenchmarkError(f"{out} is inside the source benchmark {src}: write the mirror elsewhere")
    if _inside(src, out):
        raise BenchmarkError(f"the source benchmark {src} is inside {out}: write the mirror elsewhere")
    if out.exists() or out.is_symlink():
        if not out.is_dir():
            raise BenchmarkError(f"{out} exists and is not a folder")
        if any(out.iterdir()):
            try:
                prev = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
            except (OSError, ValueError):
                prev = None
            if not (isinstance(prev, dict) and isinstance(prev.get("mirror"), dict)):
                raise BenchmarkError(f"{out} exists and is not empty (nor an earlier mirror): choose "
                                     "a new folder")
            if not overwrite:
                raise BenchmarkError(f"{out} already holds a mirrored benchmark (use --force to replace it)")


def _chosen_items(bench, items: str, src: Path) -> list[BenchItem]:
    """The items of kind ``items`` to mirror; BenchmarkError when none, or when a mirrored id would
    repeat a source id."""
    chosen: list[BenchItem] = [it for it in bench.items if items == "all"
                               or (it.video is not None) == (items == "video")]
    if not chosen:
        raise BenchmarkError(f"{src} has no {items} items to mirror")
    taken = {it.id for it in bench.items}
    clash = [mirror_id(it.id) for it in chosen if mirror_id(it.id) in taken]
    if clash:
        raise BenchmarkError(f"mirrored ids would repeat source ids: {clash[:5]}")
    return chosen


def _mirror_item_files(src: Path, it: BenchItem, entry: dict, work: Path, codec, cancel: CancelFn,
                       cameras: dict, notes: list[str]) -> None:
    """Write one item's mirrored video and records under ``work``, filling ``entry``'s paths as each
    is written (so a failure can remove them) and collecting its camera.json in ``cameras``.
    Raises VideoDecodeError / RecordsError for an item that cannot be mirrored."""
    new_id = entry["id"]
    width = None
    if it.video is not None:
        rel_dir = _out_dir(src, it.video, "videos")
        (work / rel_dir).mkdir(parents=True, exist_ok=True)
        info = mirror_video(it.video, work / rel_dir / f"{new_id}.mp4", codec, cancel)
        entry["video"] = (rel_dir / f"{new_id}.mp4").as_posix()
        width = info["width"]
        if info["container_frames"] and info["container_frames"] != info["frames"]:
            notes.append(f"{it.id}: {info['frames']} frames decoded, the container says "
                         f"{info['container_frames']} (the mirror has the decoded ones)")
        cfg = _camera_json(src, it.video)
        if cfg is not None:
            cameras.setdefault(cfg, (work / _out_dir(src, cfg, str(rel_dir)), set()))[1].add(width)
    if it.records is not None:
        rel_dir = _out_dir(src, it.records, "records")
        (work / rel_dir).mkdir(parents=True, exist_ok=True)
        dst = work / rel_dir / f"{new_id}.json"
        video_rel = (os.path.relpath(work / entry["video"], dst.parent).replace(os.sep, "/")
                     if entry["video"] else None)
        rec, dropped = mirror_records(it.records, new_id, video_rel, width, entry["source"])
        if dropped:
            notes.append(f"{it.id}: boxes dropped from the mirrored records (no frame width)")
        rec.save(dst)
        entry["records"] = (rel_dir / f"{new_id}.json").as_posix()


def _manifest(of: str, items: str, codec, man: dict, entries: list[dict], queries: list, skipped: list[dict],
              notes: list[str]) -> dict:
    """The mirror's manifest.json: its description, licence note, what was mirrored and skipped."""
    name = f"{of}-mirror"
    return {
        "name": name,
        "description": (f"Left-right mirror images of the {items} items of {of} "
                        f"(`strived bench-mirror`, strived.evaluation.mirror): every frame flipped with "
                        f"cv2.flip(frame, 1) and re-encoded ({codec or 'no video'}) at the same size "
                        "and frame rate; track records mirrored (loc_x, lane_rel, yaw_rate and boxes); "
                        "left/right query events and words swapped. Each item keeps its original's "
                        "group: never fit on an original while scoring its mirror, or the reverse."),
        "license_note": (man.get("license_note") or "") + " Mirrored copies carry their originals' terms.",
        "mirror": {"of": of, "items": items, "codec": codec, "n_items": len(entries),
                   "n_queries": len(queries), "skipped": skipped, "notes": notes},
        "videos": entries,
    }


def mirror_benchmark(src_folder, out_folder, *, items: str = "video", progress: ProgressFn = None,
                     cancel: CancelFn = None, overwrite: bool = False) -> Path:
    """Write the mirrored benchmark of ``src_folder`` into ``out_folder`` (module docstring) and
    return ``out_folder``. The folder appears whole or not at all (it is built beside it and
    renamed); an earlier mirror there is replaced only with ``overwrite``. What was skipped and
    why is in the manifest's ``mirror`` key and in ``progress`` messages."""
    t0 = time.perf_counter()
    if items not in ITEM_KINDS:
        raise BenchmarkError(f"unknown item kind {items!r}; valid: {', '.join(ITEM_KINDS)}")
    src = Path(src_folder).expanduser().resolve()
    out = Path(out_folder).expanduser().resolve()
    _check_out(src, out, overwrite)
    bench = load_benchmark(src)
    man = json.loads((src / "manifest.json").read_text(encoding="utf-8"))
    raw_queries = json.loads((src / "queries.json").read_text(encoding="utf-8"))
    chosen = _chosen_items(bench, items, src)

    codec = cv_codec() if any(it.video is not None for it in chosen) else None
    out.parent.mkdir(parents=True, exist_ok=True)
    work = out.parent / f".{out.name}.partial-{os.getpid()}"
    if work.exists():
        shutil.rmtree(work)
    work.mkdir()
    entries, skipped, notes, id_map = [], [], [], {}
    cameras: dict[Path, tuple[Path, set[int]]] = {}
    try:
        for k, it in enumerate(chosen):
            check_cancel(cancel)
            new_id = mirror_id(it.id)
            report(progress, "mirror", k, len(chosen), item=it.id)
            origin = f"left-right mirror of {it.id} ({bench.name})" + (f": {it.source}" if it.source else "")
            entry = {"id": new_id, "video": None, "records": None, "source": origin,
                     "license": it.license, "group": it.group, "mirror_of": it.id}
            try:
                _mirror_item_files(src, it, entry, work, codec, cancel, cameras, notes)
            except (VideoDecodeError, RecordsError) as e:
                for key in ("video", "records"):
                    if entry[key]:
                        (work / entry[key]).unlink(missing_ok=True)
                why = str(e)
                skipped.append({"id": it.id, "reason": why})
                report(progress, "mirror", k + 1, len(chosen), item=it.id, message=f"skipped: {why}")
                continue
            entries.append(entry)
            id_map[it.id] = new_id
            report(progress, "mirror", k + 1, len(chosen), item=it.id)
        if not entries:
            raise BenchmarkError("no item could be mirrored: "
                                 + "; ".join(f"{s['id']}: {s['reason']}" for s in skipped))
        for cfg, (dst_dir, widths) in cameras.items():
            dst_dir.mkdir(parents=True, exist_ok=True)
            _mirror_camera(cfg, dst_dir / cfg.name, widths, notes)
        queries, qnotes = mirror_queries(raw_queries, id_map)
        notes += qnotes
        manifest = _manifest(bench.name, items, codec, man, entries, queries, skipped, notes)
        (work / "manifest.json").write_text(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n",
                                            encoding="utf-8")
        (work / "queries.json").write_text(json.dumps(queries, indent=1, ensure_ascii=False) + "\n",
                                           encoding="utf-8")
        load_benchmark(work)  # what was written reads back
        manifest["mirror"]["seconds"] = round(time.perf_counter() - t0, 1)
        (work / "manifest.json").write_text(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n",
                                            encoding="utf-8")
        _put_in_place(work, out)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return out


def _put_in_place(work: Path, out: Path) -> None:
    """Rename the finished folder to ``out``, replacing an empty folder or an earlier mirror
    (already checked by `_check_out`)."""
    old = None
    if out.exists():
        if any(out.iterdir()):
            old = out.parent / f".{out.name}.old-{os.getpid()}"
            os.replace(out, old)
        else:
            out.rmdir()
    os.replace(work, out)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


__all__ = ["mirror_benchmark", "mirror_queries", "mirror_records", "mirror_video", "swap_event",
           "swap_text", "mirror_id"]

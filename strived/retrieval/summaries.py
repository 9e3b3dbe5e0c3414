"""Per-video summary text (BM25) and per-segment descriptions (text-of-perception dense path).

Summary of a video, in order of preference:
1. the user's caption: a sidecar file next to the video (``clip.txt`` or ``clip.caption.txt`` for
   ``clip.mp4``) or a row imported from a captions CSV (``video_id,caption``) with
   `import_captions_csv`; the file/folder name words and date are appended (useful for places
   and dates a caption leaves out);
2. otherwise text generated from the perception records and metadata (`describe.video_summary`).

Segments (``segment_s`` = 4 s windows) always get generated descriptions (`describe.segment_text`).

`build_texts` is incremental: a video is rebuilt when it has no summary, when its records were
re-written after its summary was built (``videos.rev`` differs from ``summaries.rev``), when its
caption changed, or when the generator version changed.
"""

from __future__ import annotations

import csv
import datetime as _dt
import os
from dataclasses import dataclass
from pathlib import Path

from ..errors import StrivedError
from ..jobs import CancelFn, ProgressFn, check_cancel, report
from ..records import TRACKS_ENV, max_tracks
from . import describe

GENERATOR_VERSION = 1
META_KEY = "text_index"
SEGMENT_S = 4.0
CAPTION_MAX_CHARS = 4000
_BATCH = 64


@dataclass
class BuildTextsResult:
    """What `build_texts` did: counts of videos rebuilt / already fresh, captions found."""

    n_built: int
    n_fresh: int
    n_captioned: int
    #: videos left without texts because their records are over the size limits: {id: reason}
    skipped: dict | None = None

    @property
    def n_total(self) -> int:
        return self.n_built + self.n_fresh


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="microseconds")


def sidecar_caption(video_path: str | None, base_dir: Path | None = None) -> str | None:
    """The text of ``VIDEO.caption.txt`` or ``VIDEO.txt`` next to the video file, if any."""
    if not video_path:
        return None
    p = Path(video_path)
    if not p.is_absolute() and base_dir is not None:
        p = base_dir / p
    for cand in (p.with_suffix(".caption.txt"), p.with_suffix(".txt")):
        try:
            if cand.is_file():
                text = cand.read_text(encoding="utf-8", errors="replace").strip()
                return text[:CAPTION_MAX_CHARS] or None
        except OSError:
            continue
    return None


def import_captions_csv(library, csv_path: str | os.PathLike) -> int:
    """Import ``video_id,caption`` rows (a header row is optional) into the ``captions`` table.
    Rows for unknown videos are skipped. Returns the number of captions stored."""
    path = Path(csv_path)
    known = set(library.video_ids())
    rows = []
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            for i, row in enumerate(csv.reader(fh)):
                if len(row) < 2:
                    continue
                vid, text = row[0].strip(), ",".join(row[1:]).strip()
                if i == 0 and vid.lower() in ("video_id", "id", "video"):
                    continue
                if vid in known and text:
                    rows.append((vid, text[:CAPTION_MAX_CHARS], f"csv:{path.name}"))
    except (OSError, UnicodeDecodeError) as e:
        raise StrivedError(f"cannot read captions CSV {path}: {e}") from None
    library.put_captions(rows)
    return len(rows)


def _caption_summary(caption: str, rec) -> str:
    info = rec.info
    fname = folder = None
    if info.path:
        parts = Path(info.path).parts
        fname = parts[-1]
        folder = parts[-2] if len(parts) > 1 else None
    names = describe.name_words(info.id, fname, folder)
    return f"{caption}. {names}" if names else caption


def summary_and_segments(rec, caption: str | None = None, segment_s: float = SEGMENT_S):
    """(summary text, source, [(seg, t0_s, t1_s, text)]) for one video's records."""
    if caption:
        text, source = _caption_summary(caption, rec), "caption"
    else:
        text, source = describe.video_summary(rec), "generated"
    stack = describe.track_stack(rec)
    segs = [(k, t0, t1, describe.segment_text(rec, t0, t1, stack))
            for k, (t0, t1) in enumerate(describe.segment_bounds(rec, segment_s))]
    return text, source, segs


def _stale_ids(library, captions: dict[str, str], force: bool) -> list[str]:
    added = library.video_revs()
    have = library.summary_states()
    state = library.meta_get(META_KEY, {}) or {}
    if state.get("generator_version") != GENERATOR_VERSION:
        force = True
    out = []
    for vid in sorted(added):
        h = have.get(vid)
        if force or h is None:
            out.append(vid)
            continue
        text, source, built_from = h
        if built_from is None or built_from != added[vid]:  # the video was (re)written since
            out.append(vid)
            continue
        cap = captions.get(vid)
        if (cap is None) != (source != "caption") or (cap is not None and not text.startswith(cap)):
            out.append(vid)
    return out


def build_texts(library, progress: ProgressFn = None, cancel: CancelFn = None, *,
                force: bool = False, segment_s: float = SEGMENT_S) -> BuildTextsResult:
    """Fill ``summaries`` and ``segments`` for every video that needs it (see module doc).

    Sidecar captions found next to video files are stored in ``captions`` first. Progress stage
    ``"texts"`` counts videos; cancel is checked every batch (already written batches stay).
    """
    videos = {v["id"]: v for v in library.list_videos()}
    captions = library.captions()
    sidecars = []
    for vid, v in videos.items():
        cap = sidecar_caption(v.get("path"), library.folder)
        if cap and captions.get(vid) != cap:
            sidecars.append((vid, cap, "sidecar"))
            captions[vid] = cap
    if sidecars:
        library.put_captions(sidecars)
    todo = _stale_ids(library, captions, force)
    skipped = _oversized(library)
    todo = [v for v in todo if v not in skipped]
    total = len(todo)
    report(progress, "texts", 0, total)
    for start in range(0, total, _BATCH):
        check_cancel(cancel)
        batch = todo[start:start + _BATCH]
        rows_sum, rows_seg = [], []
        now = _now()
        revs = library.video_revs(batch)
        for vid in batch:
            check_cancel(cancel)
            rec = library.get_video(vid)
            text, source, segs = summary_and_segments(rec, captions.get(vid), segment_s)
            rows_sum.append((vid, text, source, now, revs.get(vid)))
            rows_seg.extend((vid, k, t0, t1, st) for k, t0, t1, st in segs)
        library.write_texts(batch, rows_sum, rows_seg)
        report(progress, "texts", min(total, start + len(batch)), total, item=batch[-1])
    # Summaries of removed videos go with them (VIDEO_CHILD_TABLES); nothing else to clean.
    library.meta_set(META_KEY, {"generator_version": GENERATOR_VERSION, "segment_s": segment_s,
                                "content_version": library.content_version, "updated_at": _now()})
    return BuildTextsResult(n_built=total, n_fresh=len(videos) - total - len(skipped),
                            n_captioned=sum(1 for v in videos if v in captions), skipped=skipped)


def _oversized(library) -> dict[str, str]:
    """{video_id: reason} of the videos with more tracks than one video's records may hold (stored
    before the limit existed): describing one took minutes, so they get no texts."""
    cap = max_tracks()
    return {vid: (f"video {vid!r} has {n} tracks, over the limit of {cap} (set {TRACKS_ENV} to raise it): "
                  f"it gets no search texts; remove it with `strived remove {vid}`")
            for vid, n in library.track_counts_over(cap)}


def load_summaries(library) -> tuple[list[str], list[str]]:
    """(video_ids, texts) of all summaries, ordered by video id."""
    rows = library.summary_texts()
    return [r[0] for r in rows], [r[1] for r in rows]


def texts_fingerprint(library) -> tuple:
    """Changes whenever any summary changes (used to key in-memory BM25 indexes)."""
    row = library.summaries_state()
    return (str(library.folder), int(row[0]), row[1])

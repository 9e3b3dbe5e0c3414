"""One event across a file boundary is one hit: search hits of consecutive files of a drive
(`strived.drives`) whose spans meet at the boundary are merged.

Hit A (file k of a drive) and hit B (file k + 1) merge when A's span ends within the drive's
tolerance of A's end, B's span starts within it of B's start, and the drive-time gap between the
two spans is at most the tolerance; chains (an event over three files) merge the same way. The
merged hit keeps the better-ranked hit's place, video, score and evidence, and carries ``drive``:
its id, the span in drive time (seconds from the drive's first file's start) and the per-file parts
(video, path, the part's own span ``t0``-``t1`` in that file, the file's offset in the drive, its
length, fps and frame count, and the rank and score the part had on its own). The rule scores each
file alone: an event cut in two is found as two halves that merge here, but a rule that needs both
halves together to fire at all (a ``min_seconds`` longer than either half, a sequence whose steps
fall in different files) finds nothing (docs/ARCHITECTURE.md, "Drives across files").
"""

from __future__ import annotations

import dataclasses

from .store import drives as store


def _touches(a, fa: dict, b, fb: dict) -> bool:
    tol = float(fa.get("tolerance_s") or 0.0)
    a1, b0 = a.span_s[1], b.span_s[0]
    end_a = float(fa["length_s"] or 0.0)
    gap = (float(fb["offset_s"]) + float(b0)) - (float(fa["offset_s"]) + float(a1))
    return float(a1) >= end_a - tol and float(b0) <= tol and gap <= tol


def _part(h, f: dict) -> dict:
    return {"video_id": h.video_id, "path": h.path or f.get("path"), "t0": float(h.span_s[0]),
            "t1": float(h.span_s[1]), "offset_s": float(f["offset_s"]), "length_s": f["length_s"],
            "fps": f.get("fps"), "n_frames": f.get("n_frames"), "rank": h.rank, "score": h.score}


def merge_hits(library, hits: list) -> list:
    """``hits`` (ranked `SearchHit` s) with each cross-boundary event merged into one hit, ranks
    renumbered; unchanged when the library has no drives or no two hits meet."""
    spanned = [h for h in hits if h.span_s is not None]
    if len(spanned) < 2:
        return hits

    try:
        files = store.files_of(library, [h.video_id for h in spanned])
    except Exception:  # noqa: BLE001 - drives are an addition: a search never fails on them
        return hits
    if len(files) < 2:
        return hits
    at = {(files[h.video_id]["drive_id"], files[h.video_id]["seq"]): h for h in spanned if h.video_id in files}
    gone: set[int] = set()
    merged: dict[int, object] = {}
    for (drive, seq), h in sorted(at.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        if id(h) in gone or (drive, seq - 1) in at and _joins(at, files, drive, seq - 1):
            continue                      # not the first of its chain
        chain = [h]
        while (drive, seq + len(chain)) in at and _joins(at, files, drive, seq + len(chain) - 1):
            chain.append(at[(drive, seq + len(chain))])
        if len(chain) < 2:
            continue
        best = min(chain, key=lambda x: x.rank)
        parts = [_part(x, files[x.video_id]) for x in chain]
        span = (parts[0]["offset_s"] + parts[0]["t0"], parts[-1]["offset_s"] + parts[-1]["t1"])
        merged[id(best)] = dataclasses.replace(best, drive={
            "id": drive, "span_s": [round(span[0], 4), round(span[1], 4)], "parts": parts})
        gone.update(id(x) for x in chain if x is not best)
    if not merged:
        return hits
    out = []
    for h in hits:
        if id(h) in gone:
            continue
        out.append(dataclasses.replace(merged.get(id(h), h), rank=len(out) + 1))
    return out


def _joins(at: dict, files: dict, drive: str, seq: int) -> bool:
    """Whether the hit of file ``seq`` and that of ``seq + 1`` of ``drive`` are one event."""
    a, b = at.get((drive, seq)), at.get((drive, seq + 1))
    if a is None or b is None:
        return False
    return _touches(a, files[a.video_id], b, files[b.video_id])

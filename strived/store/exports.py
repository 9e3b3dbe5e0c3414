"""Exported clips (``exports``: the app's "already exported" mark: which spans of a video were
written); a mixin of `Library`, and `spans_overlap`."""

from __future__ import annotations

import json

from .codec import _now
from .schema import TABLES


class ExportsMixin:
    _EXPORT_KEYS = ("start_s", "end_s", "at", "folder", "clip", "query")

    def record_exports(self, entries) -> int:
        """Remember exported clips, in one transaction. Each entry: ``video_id``, ``start_s`` and
        ``end_s`` (the span written, in seconds; None = the whole video), and optionally ``at``
        (when), ``folder``, ``clip`` (the clip file, None when only listed) and ``query``.
        Returns how many were stored."""
        rows = []
        for e in entries:
            a, b = e.get("start_s"), e.get("end_s")
            if (a is None) != (b is None) or (a is not None and float(b) < float(a)):
                raise ValueError(f"an exported span needs start_s <= end_s (or neither): {e!r}")
            rows.append((str(e["video_id"]), None if a is None else float(a),
                         None if b is None else float(b), e.get("at") or _now(), e.get("folder"),
                         None if e.get("clip") is None else str(e["clip"]), e.get("query")))
        with self.transaction():
            if not self._has_table("exports"):
                # a library written before this table: made now, with the records it replaces
                # (not at open: the first write of a large library checks it, ~8 s at 10k videos)
                cols, opts = TABLES["exports"]
                self.db["exports"].create(cols, pk=opts["pk"])
                self.db["exports"].create_index(["video_id"], if_not_exists=True)
            self._import_legacy_exports()
            self.conn.executemany("INSERT INTO exports(video_id, start_s, end_s, at, folder, clip, "
                                  "query) VALUES (?,?,?,?,?,?,?)", rows)
        return len(rows)

    def _has_table(self, name: str) -> bool:
        return self.conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?",
                                 (name,)).fetchone() is not None

    def exported_spans(self, video_ids=None) -> dict[str, list[dict]]:
        """video id -> its exported clips, oldest first, each {"start_s", "end_s", "at", "folder",
        "clip", "query"} (``start_s``/``end_s`` None: the whole video). Only ``video_ids`` when
        given. The per-video records an older STRIVE-D app kept in the metadata are read too, first
        (the first `record_exports` moves them into the table; a read-only library keeps them)."""
        keep = None if video_ids is None else set(map(str, video_ids))
        out: dict[str, list[dict]] = {}
        for vid, e in self._legacy_exports():
            if keep is None or vid in keep:
                out.setdefault(vid, []).append(e)
        if self._has_table("exports"):
            cols = ", ".join(self._EXPORT_KEYS)
            if keep is None:
                cur = self.conn.execute(f"SELECT video_id, {cols} FROM exports ORDER BY id")
            else:
                ids = sorted(keep)
                cur = (r for k in range(0, len(ids), 500) for r in self.conn.execute(
                    f"SELECT video_id, {cols}, id FROM exports WHERE video_id IN "
                    f"({','.join('?' * len(ids[k:k + 500]))}) ORDER BY id", ids[k:k + 500]))
            for r in cur:
                out.setdefault(r[0], []).append(dict(zip(self._EXPORT_KEYS, r[1:7])))
        return out

    LEGACY_EXPORTS_KEY = "app_exports"   # meta: {video id: [records]} of the app before this table

    def _legacy_exports(self) -> list[tuple[str, dict]]:
        row = self.conn.execute("SELECT value FROM meta WHERE key=?", (self.LEGACY_EXPORTS_KEY,)).fetchone()
        try:
            d = json.loads(row[0]) if row else {}
        except ValueError:
            d = {}
        out = []
        for vid, recs in (d.items() if isinstance(d, dict) else ()):
            for e in recs if isinstance(recs, list) else ():
                if not isinstance(e, dict):
                    continue
                a, b = e.get("start_s"), e.get("end_s")
                ok = isinstance(a, (int, float)) and isinstance(b, (int, float)) and b >= a
                out.append((str(vid), {"start_s": float(a) if ok else None,
                                       "end_s": float(b) if ok else None,
                                       **{k: e.get(k) for k in ("at", "folder", "clip", "query")}}))
        return out

    def _import_legacy_exports(self) -> None:
        """Move the per-video export records the app kept in the metadata (if any) into
        ``exports`` (a record without a valid span marks the whole video). Runs inside a write
        transaction, so they move entirely or not at all."""
        if not self.conn.execute("SELECT 1 FROM meta WHERE key=?", (self.LEGACY_EXPORTS_KEY,)).fetchone():
            return
        legacy = self._legacy_exports()
        if legacy:
            self.conn.executemany(
                "INSERT INTO exports(video_id, start_s, end_s, at, folder, clip, query) "
                "VALUES (?,?,?,?,?,?,?)",
                [(vid, e["start_s"], e["end_s"], e.get("at"), e.get("folder"), e.get("clip"),
                  e.get("query")) for vid, e in legacy])
        self.conn.execute("DELETE FROM meta WHERE key=?", (self.LEGACY_EXPORTS_KEY,))


def spans_overlap(a, b) -> bool:
    """Whether two spans (start_s, end_s) of one video share a moment; None is the whole video.
    A span of zero length (one instant) overlaps a span that contains it."""
    if a is None or b is None:
        return True
    lo, hi = max(float(a[0]), float(b[0])), min(float(a[1]), float(b[1]))
    return hi > lo or (hi == lo and (float(a[0]) == float(a[1]) or float(b[0]) == float(b[1])))

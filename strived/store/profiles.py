"""Per-video answers read from the ``videos`` rows' attrs (calibration profiles, availability),
what a user browses before any search, and the library's counts; a mixin of `Library`.

The profiles and availability of a large library are kept in small files of the cache folder
(never in the database: a search must not need write access), keyed by the library's creation,
content version and video count.
"""

from __future__ import annotations

import json
import os

from .schema import DB_NAME, SCHEMA_VERSION


class ProfilesMixin:
    def overview(self, limit: int = 5000) -> list[dict]:
        """What a user browses before any search, per video (by id, at most ``limit``): path,
        duration, tracks per class, whether ego speed is known (and its source or why not), day or
        night, and whether a thumbnail is stored."""
        vids = self.conn.execute(
            "SELECT id, path, duration_s, n_tracks, json_extract(attrs, '$.daynight'), "
            "json_extract(attrs, '$.speed_source'), json_extract(attrs, '$.availability') "
            "FROM videos ORDER BY id LIMIT ?", (int(limit),)).fetchall()
        if not vids:
            return []
        counts: dict[str, dict[str, int]] = {}
        last = vids[-1][0]
        for vid, cls, n in self.conn.execute("SELECT video_id, cls, COUNT(*) FROM tracks WHERE video_id <= ? "
                                             "GROUP BY video_id, cls", (last,)):
            counts.setdefault(vid, {})[cls] = int(n)
        thumbs = self.thumbnail_ids()
        out = []
        for vid, path, dur, n_tracks, dn, speed_src, av in vids:
            try:
                speed = (json.loads(av) or {}).get("speed") if av else None
            except ValueError:
                speed = None
            speed = speed if isinstance(speed, dict) else {}
            out.append({"id": vid, "path": path, "duration_s": dur, "n_tracks": n_tracks,
                        "classes": dict(sorted(counts.get(vid, {}).items(), key=lambda kv: -kv[1])),
                        "daynight": dn,
                        # availability (strived.availability): None when the video predates it
                        "speed_status": speed.get("status"), "speed_coverage": speed.get("coverage"),
                        "speed_source": speed.get("source") or speed_src, "speed_reason": speed.get("reason"),
                        "thumbnail": vid in thumbs})
        return out

    def video_profiles(self) -> dict[str, str]:
        """{video_id: calibration profile}: ``video`` for videos our perception produced (their
        attrs carry the perception config), ``tracks`` for imported records. Cached until the
        library's content changes."""
        ver = self.content_version
        cached = getattr(self, "_profiles_cache", None)
        if cached is not None and cached[0] == ver:
            return cached[1]
        # Reading attrs walks past each row's blobs (~0.1 ms a video): a new process reads the
        # answer of the last one from a small file of the cache folder instead, keyed by the
        # library's creation and content version (never written to the database: a search must
        # not need write access).
        key, n = self._side_cache_key()
        out = None
        d = self._read_side_cache("video_profiles.json", key)
        try:
            if d is not None:
                video = set(d["video"])
                out = {vid: ("video" if vid in video else "tracks") for vid in d["ids"]}
        except (KeyError, TypeError):
            out = None
        if out is None:
            out = {vid: ("video" if has else "tracks") for vid, has in self.conn.execute(
                "SELECT id, json_extract(attrs, '$.perception') IS NOT NULL FROM videos ORDER BY id")}
            self._write_side_cache("video_profiles.json", {
                "key": key, "ids": list(out), "video": [v for v, p in out.items() if p == "video"]})
        self._profiles_cache = (ver, out)
        return out

    def availability(self) -> dict[str, dict]:
        """{video_id: per-field availability} for every video (see strived.availability). A video
        stored before availability existed (schema < 3) has none ({}): nothing is known to be
        missing, so every rule judges it as before (re-import or re-index to record it); measuring
        it here would read every track of every such video on the first search."""
        ver = self.content_version
        cached = getattr(self, "_avail_cache", None)
        if cached is not None and cached[0] == ver:
            return cached[1]
        # Videos share a few distinct records: each distinct one is held once (interned), so a
        # large library does not hold a dict per video (~3 KB each). A new process reads them
        # from a small file of the cache folder (like `video_profiles`) instead of every row's
        # attrs. Callers must not modify the returned dicts.
        key, n = self._side_cache_key()
        out = None
        d = self._read_side_cache("video_availability.json", key)
        try:
            if d is not None and len(d["ids"]) == len(d["which"]) == n:
                kinds = [k if isinstance(k, dict) else {} for k in d["kinds"]]
                out = {vid: kinds[i] for vid, i in zip(d["ids"], d["which"])}
        except (KeyError, TypeError, IndexError):
            out = None
        if out is None:
            out, kinds, index, which = {}, [], {}, []
            for vid, av in self.conn.execute("SELECT id, json_extract(attrs, '$.availability') FROM videos "
                                             "ORDER BY id"):
                k = index.get(av)
                if k is None:
                    try:
                        d = json.loads(av) if av else {}
                    except ValueError:
                        d = {}
                    k = index[av] = len(kinds)
                    kinds.append(d if isinstance(d, dict) else {})
                out[vid] = kinds[k]
                which.append(k)
            self._write_side_cache("video_availability.json",
                                   {"key": key, "kinds": kinds, "ids": list(out), "which": which})
        self._avail_cache = (ver, out)
        return out

    # -- small per-library answers kept in a file of the cache folder (never in the database: a
    #    search must not need write access), keyed by creation, content version and video count
    def _side_cache_key(self) -> tuple[str, int]:
        n = self.conn.execute("SELECT COUNT(*) FROM videos").fetchone()[0]
        return f"{self.meta_get('created_at')}|{self.content_version}|{n}", n

    def side_cache_read(self, name: str, key: str) -> dict | None:
        """The payload of the cache folder's small file ``name`` when it was written for ``key``
        (a string naming the library state it answers for), else None."""
        return self._read_side_cache(name, key)

    def side_cache_write(self, name: str, key: str, payload: dict) -> None:
        """Keep ``payload`` (JSON) in the cache folder's small file ``name`` for ``key``; a file
        that cannot be written is skipped (only slower)."""
        self._write_side_cache(name, dict(payload, key=key))

    def _read_side_cache(self, name: str, key: str) -> dict | None:
        try:
            d = json.loads((self.cache_dir / name).read_text())
        except (OSError, ValueError):
            return None
        return d if isinstance(d, dict) and d.get("key") == key else None

    def _write_side_cache(self, name: str, payload: dict) -> None:
        path = self.cache_dir / name
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f"{path.stem}.{os.getpid()}.tmp")
            tmp.write_text(json.dumps(payload))
            tmp.replace(path)
        except OSError:
            pass                      # a cache that cannot be written is only slower

    def stats(self) -> dict:
        n_v = len(self)
        n_t, n_of = self.conn.execute("SELECT COUNT(*), COALESCE(SUM(n), 0) FROM tracks").fetchone()
        size = sum(p.stat().st_size for p in self.folder.glob(DB_NAME + "*") if p.is_file())
        return {"videos": n_v, "tracks": n_t, "object_frames": int(n_of), "db_bytes": size,
                "schema_version": SCHEMA_VERSION, "content_version": self.content_version}

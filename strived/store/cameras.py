"""A library's cameras: videos grouped by the camera that recorded them, with the evidence, the
user's confirmations, splits and merges, and the values the user knows (camera.json keys).

Two tables, made on first write (an older library has none and reads as having no groups):

- ``cameras``: ``id``, ``name``, ``keys`` (JSON list of the signature keys whose new videos join
  this group; empty for a group split off by hand), ``known`` (JSON: ``focal_px``, ``hfov_deg``,
  ``camera_height_m``, ``horizon_frac``), ``confirmed`` (0/1), ``updated_at``;
- ``camera_videos``: ``video_id`` -> ``camera_id``, ``by`` (``auto`` or ``user``: a user's choice is
  never regrouped) and the video's ``evidence`` (its `camera_id.signature`, JSON).

A video removed from the library leaves its row behind until the next `refresh`, which drops it
(and any automatic group left without videos).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from datetime import datetime, timezone

from ..errors import StrivedError

KNOWN_KEYS = {"focal_px": (50.0, 20000.0), "hfov_deg": (20.0, 200.0),
              "camera_height_m": (0.3, 5.0), "horizon_frac": (0.05, 0.95)}

_DDL = (
    "CREATE TABLE IF NOT EXISTS cameras (id INTEGER PRIMARY KEY, name TEXT, keys TEXT, known TEXT, "
    "confirmed INTEGER DEFAULT 0, updated_at TEXT)",
    "CREATE TABLE IF NOT EXISTS camera_videos (video_id TEXT PRIMARY KEY, camera_id INTEGER, by TEXT, "
    "evidence TEXT)",
    "CREATE INDEX IF NOT EXISTS idx_camera_videos_camera ON camera_videos(camera_id)",
)


class CameraError(StrivedError):
    """A camera command cannot be done (no such group, a bad value); nothing was changed."""


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def has_tables(lib) -> bool:
    return lib.conn.execute("SELECT COUNT(*) FROM sqlite_master WHERE type='table' AND name IN "
                            "('cameras', 'camera_videos')").fetchone()[0] == 2


def _ensure(lib) -> None:
    for sql in _DDL:
        lib.conn.execute(sql)


def assigned(lib) -> dict[str, tuple[int, str]]:
    """{video_id: (camera_id, by)} as stored."""
    if not has_tables(lib):
        return {}
    return {v: (int(c), b) for v, c, b in lib.conn.execute("SELECT video_id, camera_id, by FROM camera_videos")}


def refresh(lib, signatures: dict[str, dict]) -> dict:
    """Group the videos of ``signatures`` ({video_id: signature}, the videos not yet grouped) by
    key, drop rows of videos no longer in the library; one transaction. Returns counts."""
    with lib.transaction():
        _ensure(lib)
        gone = lib.conn.execute("DELETE FROM camera_videos WHERE video_id NOT IN (SELECT id FROM videos)").rowcount
        by_key: dict[str, int] = {}
        for cid, keys in lib.conn.execute("SELECT id, keys FROM cameras ORDER BY id"):
            for k in _loads(keys, list) or []:
                if isinstance(k, str):
                    by_key.setdefault(k, int(cid))
        added = created = 0
        for vid, sig in sorted(signatures.items()):
            cid = by_key.get(sig["key"])
            if cid is None:
                cur = lib.conn.execute("INSERT INTO cameras(name, keys, known, confirmed, updated_at) "
                                       "VALUES (?, ?, '{}', 0, ?)", (None, json.dumps([sig["key"]]), _now()))
                cid = by_key[sig["key"]] = int(cur.lastrowid)
                created += 1
            lib.conn.execute("INSERT OR REPLACE INTO camera_videos(video_id, camera_id, by, evidence) "
                             "VALUES (?, ?, 'auto', ?)", (vid, cid, json.dumps(sig["evidence"])))
            added += 1
        emptied = lib.conn.execute(
            "DELETE FROM cameras WHERE confirmed = 0 AND (known IS NULL OR known = '{}') AND id NOT IN "
            "(SELECT camera_id FROM camera_videos)").rowcount
    return {"grouped": added, "new_groups": created, "removed_videos": gone, "removed_groups": emptied}


def _loads(text, kind: type):
    """A stored JSON column read as untrusted: the value when it parses to ``kind``, else None."""
    try:
        v = json.loads(text) if text else kind()
    except (TypeError, ValueError):
        return None
    return v if isinstance(v, kind) else None


def cameras(lib) -> list[dict]:
    """Every group: id, name, keys, known, confirmed, videos [(video_id, by, evidence)]. A column
    that does not parse reads as empty (``known_values`` says so at indexing)."""
    if not has_tables(lib):
        return []
    members: dict[int, list] = {}
    for vid, cid, by, ev in lib.conn.execute("SELECT video_id, camera_id, by, evidence FROM camera_videos "
                                             "WHERE video_id IN (SELECT id FROM videos) ORDER BY video_id"):
        members.setdefault(int(cid), []).append({"video_id": vid, "by": by, "evidence": _loads(ev, dict) or {}})
    out = []
    for cid, name, keys, known, conf, at in lib.conn.execute(
            "SELECT id, name, keys, known, confirmed, updated_at FROM cameras ORDER BY id"):
        out.append({"id": int(cid), "name": name or f"camera {cid}", "keys": _loads(keys, list) or [],
                    "known": _loads(known, dict) or {}, "confirmed": bool(conf), "updated_at": at,
                    "videos": members.get(int(cid), [])})
    return out


def known_values(lib) -> tuple[dict[int, dict], list[str]]:
    """The groups with values the user gave, read as untrusted: ({group id: {"known": checked
    values, "keys": signature keys, "width": the frame width most of its videos have (None when
    none says)}}, warnings). A group whose stored values do not parse or are out of range is left
    out, with a warning naming it."""
    if not has_tables(lib):
        return {}, []
    out, warnings = {}, []
    for c in _raw_known(lib):
        if not c["known"]:
            continue
        known = _loads(c["known"], dict)
        try:
            if known is None:
                raise CameraError("they are not a JSON object")
            known = check_known(known)
        except CameraError as e:
            warnings.append(f"camera group {c['id']}: its stored camera values are ignored ({e}); "
                            f"set them again with `strived camera set {c['id']}`")
            continue
        if not known:
            continue
        widths = Counter()
        for ev in c["evidence"]:
            size = (_loads(ev, dict) or {}).get("size")
            w = str(size).split("x")[0] if size else ""
            if w.isdigit() and int(w) > 0:
                widths[int(w)] += 1
        out[c["id"]] = {"known": known, "keys": [k for k in _loads(c["keys"], list) or [] if isinstance(k, str)],
                        "width": widths.most_common(1)[0][0] if widths else None}
    return out, warnings


def _raw_known(lib) -> list[dict]:
    """Each group's stored columns, unparsed, with its videos' evidence (text)."""
    evidence: dict[int, list] = {}
    for cid, ev in lib.conn.execute("SELECT camera_id, evidence FROM camera_videos "
                                    "WHERE video_id IN (SELECT id FROM videos)"):
        evidence.setdefault(cid, []).append(ev)
    return [{"id": int(cid), "keys": keys, "known": known if known not in (None, "", "{}") else None,
             "evidence": evidence.get(cid, [])}
            for cid, keys, known in lib.conn.execute("SELECT id, keys, known FROM cameras ORDER BY id")]


def camera(lib, cid: int) -> dict:
    for c in cameras(lib):
        if c["id"] == cid:
            return c
    raise CameraError(f"no camera group {cid} in this library (see `strived camera list`)")


def check_known(values: dict) -> dict:
    """The known camera values, checked (finite, in range, known keys); CameraError otherwise."""
    out = {}
    for k, v in values.items():
        if k not in KNOWN_KEYS:
            raise CameraError(f"unknown camera value {k!r} (known: {', '.join(KNOWN_KEYS)})")
        lo, hi = KNOWN_KEYS[k]
        try:
            f = float(v)
        except (TypeError, ValueError):
            raise CameraError(f"{k} must be a number, found {v!r}") from None
        if not math.isfinite(f) or not lo <= f <= hi:
            raise CameraError(f"{k} must be between {lo:g} and {hi:g}, found {v}")
        out[k] = f
    return out


def _still_valid(known: dict) -> dict:
    """The stored values that pass `check_known` (a corrupt one is dropped when the group is set)."""
    out = {}
    for k, v in known.items():
        try:
            out.update(check_known({k: v}))
        except CameraError:
            pass
    return out


def update(lib, cid: int, *, name: str | None = None, confirmed: bool | None = None,
           known: dict | None = None, clear: list[str] | None = None) -> dict:
    """Rename, confirm / unconfirm, set or clear known values of a group (one transaction)."""
    cur = camera(lib, cid)
    new_known = {**_still_valid(cur["known"]), **check_known(known or {})}
    for k in clear or []:
        if k not in KNOWN_KEYS:
            raise CameraError(f"unknown camera value {k!r} (known: {', '.join(KNOWN_KEYS)})")
        new_known.pop(k, None)
    with lib.transaction():
        lib.conn.execute("UPDATE cameras SET name = COALESCE(?, name), confirmed = COALESCE(?, confirmed), "
                         "known = ?, updated_at = ? WHERE id = ?",
                         (name, None if confirmed is None else int(confirmed), json.dumps(new_known), _now(), cid))
    return camera(lib, cid)


def split(lib, cid: int, video_ids: list[str], name: str | None = None) -> int:
    """Move ``video_ids`` of group ``cid`` into a new group (held there: ``by`` = user)."""
    cur = camera(lib, cid)
    have = {v["video_id"] for v in cur["videos"]}
    missing = [v for v in video_ids if v not in have]
    if missing:
        raise CameraError(f"not in camera group {cid}: {', '.join(missing)}")
    if not video_ids:
        raise CameraError("name the videos to split off")
    with lib.transaction():
        new = int(lib.conn.execute("INSERT INTO cameras(name, keys, known, confirmed, updated_at) "
                                   "VALUES (?, '[]', '{}', 1, ?)", (name, _now())).lastrowid)
        lib.conn.executemany("UPDATE camera_videos SET camera_id = ?, by = 'user' WHERE video_id = ?",
                             [(new, v) for v in video_ids])
    return new


def merge(lib, into: int, others: list[int]) -> dict:
    """Move every video (and signature key) of the groups ``others`` into ``into``; those go."""
    target = camera(lib, into)
    srcs = [camera(lib, o) for o in others if o != into]
    if not srcs:
        raise CameraError("name at least one other group to merge")
    keys = list(target["keys"])
    known = dict(target["known"])
    for s in srcs:
        keys += [k for k in s["keys"] if k not in keys]
        for k, v in s["known"].items():
            known.setdefault(k, v)
    with lib.transaction():
        for s in srcs:
            lib.conn.execute("UPDATE camera_videos SET camera_id = ? WHERE camera_id = ?", (into, s["id"]))
            lib.conn.execute("DELETE FROM cameras WHERE id = ?", (s["id"],))
        lib.conn.execute("UPDATE cameras SET keys = ?, known = ?, updated_at = ? WHERE id = ?",
                         (json.dumps(keys), json.dumps(known), _now(), into))
    return camera(lib, into)


def camera_of(lib, video_id: str) -> dict | None:
    """The group of one video (None when not grouped yet)."""
    a = assigned(lib).get(video_id)
    return camera(lib, a[0]) if a else None

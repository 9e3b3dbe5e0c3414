"""Library database schema. One row per video and per track; per-frame fields are float32 BLOBs.

Measured (STACK.md): a row per track with BLOB columns is ~40x faster to write and a third of the
size of a row per object-frame. Bump SCHEMA_VERSION with every change and add a migration step.
"""

from __future__ import annotations

DB_NAME = "library.sqlite"    # the database file in a library folder
SCHEMA_VERSION = 3

# In-place upgrades: MIGRATIONS[v] lists the (table, column, type) additions that take a version-v
# library to v + 1 (a column already present is left alone). Each step runs in one transaction with
# the version bump, so an interrupted upgrade changes nothing.
MIGRATIONS: dict[int, list[tuple[str, str, str]]] = {
    1: [("videos", "rev", "INTEGER"), ("summaries", "rev", "INTEGER")],
    # v3: ego jolt (impact signal) and the per-frame confidence of the speed estimate
    2: [("videos", "ego_jolt", "BLOB"), ("videos", "ego_speed_conf", "BLOB")],
}

TABLES: dict[str, tuple[dict, dict]] = {
    # name: (columns, options)
    "meta": ({"key": str, "value": str}, {"pk": "key"}),
    "videos": ({
        "id": str, "path": str, "fps": float, "n_frames": int, "width": int, "height": int,
        "source": str, "duration_s": float, "n_samples": int, "n_tracks": int,
        "frame_idx": bytes, "t": bytes, "ego_speed": bytes, "ego_yaw_rate": bytes,
        "ego_accel": bytes, "ego_jolt": bytes, "ego_speed_conf": bytes, "attrs": str, "added_at": str, "rev": int,
    }, {"pk": "id"}),
    "tracks": ({
        "video_id": str, "track": int, "cls": str, "n": int, "pos": bytes,
        "distance": bytes, "loc_x": bytes, "loc_z": bytes, "lane_rel": bytes,
        "bbox_area": bytes, "score": bytes, "bbox": bytes, "attrs": str,
    }, {"pk": ("video_id", "track")}),
    "files": ({
        "path": str, "video_id": str, "size": int, "mtime": float, "hash": str, "status": str,
        "error": str, "config": str, "updated_at": str,
    }, {"pk": "path"}),
    "summaries": ({"video_id": str, "text": str, "source": str, "updated_at": str, "rev": int},
                  {"pk": "video_id"}),
    "captions": ({"video_id": str, "text": str, "source": str}, {"pk": "video_id"}),
    "segments": ({"video_id": str, "seg": int, "t0": float, "t1": float, "text": str},
                 {"pk": ("video_id", "seg")}),
    "thumbnails": ({"video_id": str, "jpeg": bytes, "width": int, "height": int}, {"pk": "video_id"}),
    "marks": ({"query": str, "video_id": str, "relevant": int, "event": str, "created_at": str},
              {"pk": ("query", "video_id")}),
    "saved_searches": ({"name": str, "query": str, "spec": str, "created_at": str}, {"pk": "name"}),
    # exported clips (the app's "already exported" mark): the span of a video written as a clip or
    # listed in an export; start_s/end_s NULL = the whole video. Kept when the video is removed
    # (the files are still on disk), like the relevance marks.
    "exports": ({"id": int, "video_id": str, "start_s": float, "end_s": float, "at": str,
                 "folder": str, "clip": str, "query": str}, {"pk": "id"}),
}

INDEXES = [("files", ["video_id"]), ("segments", ["video_id"]), ("exports", ["video_id"])]

# Tables added after a schema version without changing any existing table (no version bump: an
# older STRIVE-D ignores them). A library written before has none until its first write there
# creates it (`Library.record_exports`); until then, and read-only, it reads as empty.
OPTIONAL_TABLES = frozenset({"exports"})

# Tables whose rows belong to a video and go when the video goes.
VIDEO_CHILD_TABLES = ("tracks", "summaries", "segments", "thumbnails")

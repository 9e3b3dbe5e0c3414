"""Which camera values a video is perceived with: a ``camera.json`` beside it (nearest one up to
the indexed folder) wins; else the values the user gave its camera group (`strived camera set`),
else none (perception estimates the camera).

The group of a video already in the library is its stored assignment (`store.cameras`); a new file
joins the group whose signature key its probe gives (`camera_id.file_signature`, the key grouping
will give it once indexed). The group values used go into the file's ``config`` (the files row):
changing or clearing them re-perceives exactly the videos that used them or now would.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from ..perception.camera_id import file_signature
from ..perception.geometry import load_camera_config
from ..store import cameras as camera_store
from ..store import files as file_store
from . import state

CONFIG_FIELD = "camera_group_values"   # in a files row's config: the group values perception used


@dataclass
class KnownCameras:
    """The groups' known values as read once per indexing run, and how files map to groups."""

    groups: dict[int, dict] = field(default_factory=dict)     # group id -> camera config
    by_key: dict[str, int] = field(default_factory=dict)      # signature key -> group id
    assigned: dict[str, int] = field(default_factory=dict)    # video id -> group id
    warnings: list[str] = field(default_factory=list)

    @classmethod
    def read(cls, lib) -> "KnownCameras":
        groups, warnings = camera_store.known_values(lib)
        out = cls(warnings=list(warnings))
        if not groups:
            return out
        for cid, g in groups.items():
            out.groups[cid] = group_config(g)
            for k in g["keys"]:
                out.by_key.setdefault(k, cid)
        out.assigned = {v: c for v, (c, _by) in camera_store.assigned(lib).items()}
        return out

    def group_of(self, path: Path, video_id: str | None) -> int | None:
        """The group of a video: its stored assignment, else its file's signature key's group."""
        if video_id is not None and video_id in self.assigned:
            return self.assigned[video_id]
        if not self.by_key:
            return None
        try:
            return self.by_key.get(file_signature(path)["key"])
        except Exception:  # noqa: BLE001 - a file that cannot be probed has no group; perception says why
            return None

    def resolve(self, path: Path, folder: Path, video_id: str | None, cfg_key: str) -> tuple[dict | None, str]:
        """(camera config to perceive ``path`` with, its files row config key)."""
        own = load_camera_config(path, folder)
        if own is not None or not self.groups:
            return own, cfg_key
        cam = self.groups.get(self.group_of(path, video_id))
        if cam is None:
            return None, cfg_key
        return cam, with_group_values(cfg_key, cam)


def group_config(group: dict) -> dict:
    """A group's known values as camera.json keys, with the frame width ``focal_px`` refers to."""
    cfg = dict(group["known"])
    if group.get("width") and "focal_px" in cfg:
        cfg["width"] = int(group["width"])
    return cfg


def with_group_values(cfg_key: str, cam: dict) -> str:
    """The files row config of a video perceived with its group's values ``cam``."""
    return state.config_key({**json.loads(cfg_key), CONFIG_FIELD: cam})


def used_group_values(config: str | None) -> dict | None:
    """The group values a files row's config says perception used (None: none)."""
    try:
        v = json.loads(config or "").get(CONFIG_FIELD)
    except (ValueError, AttributeError):
        return None
    return v if isinstance(v, dict) else None


def _from_camera_json(camera_attrs) -> bool:
    """Whether a record's camera (``attrs["camera"]``) took values from a camera config."""
    return isinstance(camera_attrs, dict) and any(
        camera_attrs.get(k) == "config" for k in ("focal_source", "horizon_source", "height_source"))


def stored_source(lib, path: str | None, camera_attrs, group_id: int | None) -> tuple[str, dict | None]:
    """(where the stored records' camera values came from, the group values used or None):
    "camera group N (values you set)", "camera.json" or "estimated"."""
    row = file_store.get_row(lib, path) if path else None
    used = used_group_values(row["config"]) if row else None
    if used is not None:
        return (f"camera group {group_id} (values you set)" if group_id is not None
                else "a camera group's values you set (the video is not in that group now)"), used
    return ("camera.json" if _from_camera_json(camera_attrs) else "estimated"), None


def pending(lib, group_id: int) -> int:
    """How many videos of group ``group_id`` the next `strived index` perceives again for its
    values: those whose files row used other group values than its current ones (or none, while
    the records' camera was estimated). A video whose camera came from a camera.json keeps it."""
    groups, _ = camera_store.known_values(lib)
    cam = group_config(groups[group_id]) if group_id in groups else None
    members = {v["video_id"] for v in camera_store.camera(lib, group_id)["videos"]}
    n = 0
    for v in lib.list_videos():
        if v["id"] not in members or not v.get("path"):
            continue
        row = file_store.get_row(lib, v["path"])
        if row is None or row["status"] != "done":
            continue
        used = used_group_values(row["config"])
        if used is None and _from_camera_json((v.get("attrs") or {}).get("camera")):
            continue
        n += used != cam
    return n

"""What the desktop app (``app/``) may call of the engine: one facade, grouped by area.

The app imports ``strived.api`` and nothing else of ``strived`` (an import-linter contract in
``pyproject.toml`` enforces it). Each name is a re-export of the engine's own, or a thin typed
function over it. A re-export is resolved when first asked for (``from strived.api import X``
or ``api.X``), from the module that owns it: importing this module loads no engine module, so
the app starts as fast as when it imported each engine module where it used it, and no heavy
library (OpenCV, torch, the embedder, the LLM transport) loads before the engine needs it. Each
lookup reads the owning module's current attribute, so a test that replaces it there is obeyed.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import __version__

if TYPE_CHECKING:           # the names below, for type checkers and readers
    from .engine import SearchHit, SearchResponse
    from .errors import Cancelled, RuleError, StrivedError, VideoDecodeError
    from .export import (clip_rows, export_results, fast_copy_available, library_versions,
                         pad_rows)
    from .indexing.job import index_folder
    from .indexing.text_process import build_text_index_in_process
    from .learning import LearnRefused, active_versions, mark_counts
    from .learning import keep as keep_learned
    from .learning import learn as learn_from_marks
    from .learning import undo as undo_learned
    from .llm.client import LLMClient
    from .llm.config import KEYRING_SERVICE, KEYRING_USER, load_llm_config
    from .llm.errors import LLMError
    from .maintenance.footage import find_moved, missing_videos, relink, remove_videos
    from .perception.detect import detector_spec_for_path
    from .perception.detect_nanodet import DetectorError
    from .perception.video import survey_videos
    from .retrieval.relevance import describe
    from .retrieval.sources import ensure_text_index
    from .events import EVENT_KEYS, EVENTS
    from .rulelib.library import RuleLibrary, RuleLibraryError
    from .rules.explain import gate_witnesses
    from .rules.model import (EGO_FIELDS, FIELD_UNITS, KNOWN_CLASSES, OBJECT_FIELDS, OPS,
                              parse_rule, rule_schema)
    from .rules.stats import field_hints, hint_text
    from .sample import (CAMERA_JSON, SAMPLE_QUERIES, build_sample_library, render_clip,
                         sample_scenarios)
    from .similar import more_like_this
    from .store.cameras import KNOWN_KEYS as CAMERA_VALUE_RANGES
    from .store.cameras import CameraError
    from .store.cameras import check_known as check_camera_values
    from .store.exports import spans_overlap
    from .store.library import DB_NAME, Library

#: Errors: every failure the engine reports in words (``StrivedError``) and the kinds the app
#: tells apart.
ERRORS = {"StrivedError": "errors", "Cancelled": "errors", "RuleError": "errors",
          "VideoDecodeError": "errors"}

#: Library: a STRIVE-D library folder (SQLite + vector index) and the spans exported from it.
LIBRARY = {"Library": "store.library", "DB_NAME": "store.library",
           "spans_overlap": "store.exports"}

#: Cameras: the groups of a library's videos by the camera that recorded them (Library →
#: Cameras…): the values a user may give with their ranges, checked, and the error of a change
#: refused (the functions below list, show and change the groups).
CAMERAS = {"CameraError": "store.cameras", "CAMERA_VALUE_RANGES": "store.cameras:KNOWN_KEYS",
           "check_camera_values": "store.cameras:check_known"}

#: Indexing: a video folder surveyed before asking, indexed (perception, records) with the
#: detector chosen, then the text index (BM25, dense, rule features), in a process of its own
#: for the app.
INDEXING = {"survey_videos": "perception.video", "index_folder": "indexing.job",
            "detector_spec_for_path": "perception.detect",
            "DetectorError": "perception.detect_nanodet",
            "build_text_index_in_process": "indexing.text_process",
            "ensure_text_index": "retrieval.sources"}

#: Search and explain (the functions below): a hit's relevance in words, a rule's hard-gate
#: witnesses, More like this, and the types a search answers with.
SEARCH = {"SearchHit": "engine", "SearchResponse": "engine", "describe": "retrieval.relevance",
          "gate_witnesses": "rules.explain", "more_like_this": "similar"}

#: Rules as the rule editor builds them: parse and check, the JSON schema, the fields with their
#: units, the operators, the object classes, the library's field hints; the event inventory and
#: the rule libraries a search may use (Settings → Rule library).
RULES = {"parse_rule": "rules.model", "rule_schema": "rules.model", "EGO_FIELDS": "rules.model",
         "OBJECT_FIELDS": "rules.model", "FIELD_UNITS": "rules.model", "OPS": "rules.model",
         "KNOWN_CLASSES": "rules.model", "field_hints": "rules.stats", "hint_text": "rules.stats",
         "EVENTS": "events", "EVENT_KEYS": "events",
         "RuleLibrary": "rulelib.library", "RuleLibraryError": "rulelib.library"}

#: Marks and learning: the marks counted per event, a rule's numbers refitted from them, the
#: refit kept or undone.
LEARNING = {"mark_counts": "learning", "active_versions": "learning",
            "learn_from_marks": "learning:learn", "keep_learned": "learning:keep",
            "undo_learned": "learning:undo", "LearnRefused": "learning"}

#: Export: results as clips, CSV, JSON, FiftyOne and OpenLABEL, with the library's versions.
EXPORT = {"clip_rows": "export", "pad_rows": "export", "export_results": "export",
          "fast_copy_available": "export", "library_versions": "export"}

#: Footage maintenance: videos whose file is gone, a moved folder found and relinked, videos
#: removed from the library.
FOOTAGE = {"missing_videos": "maintenance.footage", "find_moved": "maintenance.footage",
           "relink": "maintenance.footage", "remove_videos": "maintenance.footage"}

#: The LLM (optional, off by default): its settings, the client a search may use, its errors,
#: where its key is kept.
LLM = {"load_llm_config": "llm.config", "KEYRING_SERVICE": "llm.config",
       "KEYRING_USER": "llm.config", "LLMClient": "llm.client", "LLMError": "llm.errors"}

#: The sample: the built-in sample library (rendered clips) and its queries; the self-test's clips.
SAMPLE = {"build_sample_library": "sample", "SAMPLE_QUERIES": "sample", "CAMERA_JSON": "sample",
          "render_clip": "sample", "sample_scenarios": "sample"}

_REEXPORTS: dict[str, str] = {k: v for group in (ERRORS, LIBRARY, CAMERAS, INDEXING, SEARCH, RULES,
                                                 LEARNING, EXPORT, FOOTAGE, LLM, SAMPLE)
                              for k, v in group.items()}


def __getattr__(name: str) -> Any:
    """A re-export, read from its owning module (imported on first use)."""
    where = _REEXPORTS.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, _, attr = where.partition(":")
    return getattr(importlib.import_module(f"strived.{module}"), attr or name)


# -- library --------------------------------------------------------------------------------------
def open_library(folder: str | os.PathLike, create: bool = False) -> Library:
    """``Library.open``: the library in ``folder`` (``create``: a new one if none is there)."""
    from .store.library import Library  # lazy: loads numpy

    return Library.open(folder, create=create)


# -- cameras --------------------------------------------------------------------------------------
def camera_groups(library: Library) -> list[dict]:
    """The library's camera groups (videos not grouped yet are grouped first; a read-only library:
    as stored): id, name, confirmed, known, keys, videos, evidence (value: how many videos)."""
    from .indexing import camera_groups as cg  # lazy: loads numpy

    return cg.groups(library)


def camera_group(library: Library, group_id: int) -> dict:
    """One group as `strived camera show --json` gives it: evidence, known values, the values
    estimated from its clips (with the clips and how), its videos."""
    from .indexing import camera_groups as cg  # lazy: loads numpy

    return cg.group_details(library, group_id)


def set_camera_group(library: Library, group_id: int, *, name: str | None = None,
                     confirmed: bool | None = None, known: dict[str, float] | None = None,
                     clear: list[str] | None = None) -> tuple[dict, int | None]:
    """Rename, confirm, set or clear known values of a group (``CameraError``: nothing changed).
    Returns (the group, how many of its videos the next index perceives again; None when its
    known values did not change)."""
    from .indexing import camera_groups as cg  # lazy: loads numpy

    return cg.set_group(library, group_id, name=name, confirmed=confirmed, known=known, clear=clear)


def reperceive_note(n: int, index: str = "`strived index`") -> str:
    """The sentence for ``n`` videos the next index (``index``: how the user runs it) perceives
    again after a group's known values changed."""
    from .indexing import camera_groups as cg  # lazy: loads numpy

    return cg.reperceive_note(n, index)


def split_camera_group(library: Library, group_id: int, video_ids: list[str],
                       name: str | None = None) -> int:
    """Move these videos of a group into a new group (held there); the new group's id."""
    from .indexing import camera_groups as cg  # lazy: loads numpy

    return cg.split(library, group_id, video_ids, name)


def merge_camera_groups(library: Library, into: int, others: list[int]) -> dict:
    """Move every video of the groups ``others`` into ``into`` (those go); the merged group."""
    from .indexing import camera_groups as cg  # lazy: loads numpy

    return cg.merge(library, into, others)


# -- indexing -------------------------------------------------------------------------------------
def find_model_file(name: str) -> Path:
    """Where the model file ``name`` is (the detector's weights); ``DetectorError`` if nowhere."""
    from .perception import detect_nanodet  # lazy: loads numpy

    return detect_nanodet.find_model_file(name)


# -- search and explain ---------------------------------------------------------------------------
def search(library: Library, query: str, **kwargs: Any) -> SearchResponse:
    """``engine.search``: the library ranked for ``query`` (rules, dense and BM25 retrieval fused
    by RRF); ``kwargs`` as there (``rule``, ``top_k``, ``llm``, ``progress``, ``cancel``...)."""
    from . import engine  # lazy: loads numpy

    return engine.search(library, query, **kwargs)


def explain(library: Library, video_id: str, rule: Any):
    """``engine.explain``: one video's traces, span and peak track under ``rule`` (a ``Rule`` or
    its dict)."""
    from . import engine  # lazy: loads numpy

    return engine.explain(library, video_id, rule)


def scorer_for(library: Library):
    """``engine.scorer_for``: the rule scorer with the library's calibration."""
    from . import engine  # lazy: loads numpy

    return engine.scorer_for(library)


__all__ = [
    "CAMERA_JSON", "CAMERA_VALUE_RANGES", "CameraError", "Cancelled", "DB_NAME",
    "DetectorError", "EGO_FIELDS", "EVENTS", "EVENT_KEYS", "FIELD_UNITS", "KEYRING_SERVICE",
    "KEYRING_USER", "KNOWN_CLASSES", "LLMClient", "LLMError", "LearnRefused", "Library",
    "OBJECT_FIELDS", "OPS", "RuleError", "RuleLibrary", "RuleLibraryError", "SAMPLE_QUERIES",
    "SearchHit", "SearchResponse", "StrivedError", "VideoDecodeError", "__version__",
    "active_versions", "build_sample_library", "build_text_index_in_process", "camera_group",
    "camera_groups", "check_camera_values", "clip_rows", "describe", "detector_spec_for_path",
    "ensure_text_index", "explain", "export_results", "fast_copy_available", "field_hints",
    "find_model_file", "find_moved", "gate_witnesses", "hint_text", "index_folder",
    "keep_learned", "learn_from_marks", "library_versions", "load_llm_config", "mark_counts",
    "merge_camera_groups", "missing_videos", "more_like_this", "open_library", "pad_rows",
    "parse_rule", "relink", "remove_videos", "render_clip", "reperceive_note", "rule_schema",
    "sample_scenarios", "scorer_for", "search", "set_camera_group", "spans_overlap",
    "split_camera_group", "survey_videos", "undo_learned",
]


def __dir__() -> list[str]:
    return list(__all__)

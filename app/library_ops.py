"""Small library operations the app needs beyond ``strived.engine``: relevance marks, saved
searches (with the ranking to reopen), user rules, thumbnails, status-bar stats.

No Qt. Marks and saved searches are written by the store (``Library.set_mark``,
``Library.save_search``...); this module only turns a SearchResponse into a saved spec and back.
"""

from __future__ import annotations

from strived import api
from strived.api import EVENTS

SAVED_FORMAT = "strived.saved_search/1"


# -- marks (feed calibration: query, video, relevant, event)
def set_mark(library, query: str, video_id: str, relevant: bool | None, event: str | None) -> None:
    library.set_mark(query, video_id, relevant, event)


def marks_for(library, query: str) -> dict[str, bool]:
    return library.marks_for(query)


# -- saved searches
def save_search(library, name: str, response, weights: dict | None = None) -> dict:
    """Store query, rule, fusion weights, library/index versions and the ranking."""
    spec = {"format": SAVED_FORMAT, "query": response.query, "rule": response.rule,
            "weights": dict(weights or response.weights or {}), "match": dict(response.match or {}),
            "sources": list(getattr(response, "sources_used", []) or []),
            "library_version": library.meta_get("schema_version"),
            "index_version": library.meta_get("content_version"),
            "hits": [h.to_dict() if hasattr(h, "to_dict") else dict(h) for h in response.hits]}
    library.save_search(name, response.query, spec)
    return spec


def saved_search_info(library, name: str) -> tuple[str, str] | None:
    """(query, created_at) of the saved search ``name``, or None when there is none."""
    row = library.saved_search(name)
    return (row["query"], row["created_at"]) if row else None


def list_saved(library) -> list[tuple[str, str, str]]:
    return library.saved_searches()


def load_saved(library, name: str):
    """(SearchResponse rebuilt from the stored ranking, spec, stale-notice or None)."""
    row = library.saved_search(name)
    if row is None:
        raise KeyError(name)
    spec = row["spec"]
    hits = [api.SearchHit(rank=h["rank"], video_id=h["video_id"], path=h.get("path"), score=h["score"],
                      span_s=tuple(h["span_s"]) if h.get("span_s") else None,
                      per_source=h.get("per_source") or {}, peak_track=h.get("peak_track"),
                      relevance=h.get("relevance"), steps=h.get("steps"), absent=h.get("absent"))
            for h in spec.get("hits", [])]
    notice = None
    now = library.meta_get("content_version")
    if spec.get("index_version") != now:
        notice = (f"saved at index version {spec.get('index_version')}, the library is now at "
                  f"{now}: the stored ranking is shown; press Enter to search again")
    resp = api.SearchResponse(query=spec["query"], hits=hits, rule=spec.get("rule"),
                          match=spec.get("match") or {}, weights=spec.get("weights") or {},
                          notices=[notice] if notice else [], sources_used=spec.get("sources") or [])
    return resp, spec, notice


# -- user rules (saved from the rule editor)
def save_user_rule(library, name: str, rule: dict) -> None:
    rules = dict(library.meta_get("user_rules", {}) or {})
    rules[name] = rule
    library.meta_set("user_rules", rules)


def user_rules(library) -> dict:
    return dict(library.meta_get("user_rules", {}) or {})


# -- exports (the results table's "already exported" mark): stored per span by the store
def video_extents(library, video_ids) -> dict[str, tuple]:
    """video id -> (n_frames, duration_s) (a lead-out must stay inside the video)."""
    return library.video_extents(video_ids)


def record_exports(library, entries: list[dict]) -> dict[str, list[dict]]:
    """Remember exported clips (``Library.record_exports``): each entry has ``video_id``, the
    span written (``start_s``, ``end_s``) and ``at``, ``folder``, ``clip``, ``query``. Returns
    every video's exports, oldest first."""
    library.record_exports(entries)
    return exports(library)


def exports(library) -> dict[str, list[dict]]:
    """video id -> its exported clips, oldest first (``Library.exported_spans``)."""
    return library.exported_spans()


# -- thumbnails and stats
def thumbnail(library, video_id: str) -> bytes | None:
    return library.thumbnail(video_id)


def video_path(library, video_id: str) -> str | None:
    """The video file of a library video (None: records only)."""
    return library.video_path(video_id)


def make_thumbnail(library, video_id: str, path: str, t_s: float = 0.0, width: int = 192) -> bool:
    """Decode one frame, store a small JPEG (worker thread). False when the video is unreadable."""
    import cv2

    cap = cv2.VideoCapture(str(path))
    try:
        if not cap.isOpened():
            return False
        cap.set(cv2.CAP_PROP_POS_MSEC, max(0.0, t_s) * 1000.0)
        ok, img = cap.read()
        if not ok:
            return False
        h, w = img.shape[:2]
        small = cv2.resize(img, (width, max(1, int(h * width / w))), interpolation=cv2.INTER_AREA)
        ok, buf = cv2.imencode(".jpg", small, [cv2.IMWRITE_JPEG_QUALITY, 80])
        if not ok:
            return False
        library.put_thumbnail(video_id, buf.tobytes(), small.shape[1], small.shape[0])
        return True
    finally:
        cap.release()


def quick_stats(library) -> dict:
    """Cheap counts for the status bar (no full-table scans of BLOBs)."""
    n_v = len(library)
    n_t = library.count_tracks()
    n_err = library.count_files("failed")
    n_marks = library.count_marks()
    return {"videos": n_v, "tracks": n_t, "failed": n_err, "marks": n_marks,
            "index_version": library.meta_get("content_version")}


def event_names() -> list[str]:
    """Names and phrases of the calibrated library's events (query completion)."""
    out: list[str] = []
    for e in EVENTS:
        for s in (e.name, *e.examples[:2]):
            if s and s not in out:
                out.append(s)
    return out

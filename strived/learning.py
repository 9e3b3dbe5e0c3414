"""Learning an event's numbers from a library's own relevance marks, for callers other than the
CLI (the desktop app): the marks an event has, the refit, keeping and undoing a version.

A thin front over `strived.rulelib.fit.learn` (the refit) and `strived.rulelib.learned` (the
versions), the same calls `strived learn` makes. Fit time: query-time modules never import it.
"""

from __future__ import annotations

from pathlib import Path

from .errors import StrivedError
from .jobs import CancelFn, ProgressFn
from .rulelib.fit.learn import LearnRefused  # noqa: F401  (raised by `learn`; callers catch it here)
from .rulelib.fit.learn import MIN_NOT_RELEVANT, MIN_RELEVANT, event_marks, learn_event
from .rulelib.learned import add_version, history
from .rulelib.learned import undo as undo_version

PROFILES = ("tracks", "video")


def mark_counts(library, event: str) -> dict:
    """What a refit of ``event`` would start from: {"profile", "relevant", "not_relevant" (marked
    videos of that profile), "both" (videos marked both ways), "min_relevant", "min_not_relevant",
    "unused" (notes on marks left out)}."""
    marks, unused, profile = event_marks(library, event)
    by_vid: dict[str, set[bool]] = {}
    for m in marks:
        by_vid.setdefault(m["video_id"], set()).add(bool(m["relevant"]))
    return {"profile": profile, "relevant": sum(1 for s in by_vid.values() if True in s),
            "not_relevant": sum(1 for s in by_vid.values() if False in s),
            "both": sum(1 for s in by_vid.values() if len(s) > 1),
            "min_relevant": MIN_RELEVANT, "min_not_relevant": MIN_NOT_RELEVANT, "unused": unused}


def learn(library, event: str, *, profile: str | None = None, progress: ProgressFn = None,
          cancel: CancelFn = None):
    """Refit ``event`` from the marks (`strived.rulelib.fit.learn.learn_event`): a LearnResult,
    kept by nothing. Raises LearnRefused (too few or contradictory marks) and Cancelled."""
    return learn_event(library, event, profile=profile, progress=progress, cancel=cancel)


def keep(library, result) -> tuple[int, Path]:
    """Keep an accepted LearnResult as the event's version in use (what `strived learn --yes`
    does). Returns (version, file written)."""
    if not result.accepted:
        raise StrivedError(f"the refitted numbers for {result.event} were not accepted ({result.reason}); "
                           "nothing kept")
    return add_version(library, result.event, result.profile, result.record())


def active_versions(library, event: str) -> dict[str, int]:
    """{profile: learned version in use} of ``event`` (profiles using the shipped numbers left
    out). Raises LearnedRulesError when the learned file is damaged."""
    out = {}
    for p in PROFILES:
        h = history(library, event, p)
        if h and h.get("active"):
            out[p] = int(h["active"])
    return out


def undo(library, event: str, profile: str | None = None) -> tuple[str, int, int, Path]:
    """Go back to the version used before the one in use (`strived learn --undo`): of
    ``profile``, else of the first profile with a learned version in use. Returns (profile,
    version undone, version now in use (0: shipped), file written)."""
    prof = profile or next(iter(active_versions(library, event)), "tracks")
    was, now, path = undo_version(library, event, prof)
    return prof, was, now, path

"""Numbers learned from a library's own relevance marks (`strived learn`): every version kept.

One file per library, ``LIBRARY/learned_rules.json`` (``strived.learned_rules/1``):

    {"format": "strived.learned_rules/1",
     "events": {"tracks/ego_brake": {"event": "ego_brake", "profile": "tracks", "active": 2,
                                     "versions": [{"version": 1, "created", "base": 0, "rule",
                                                   "previous_rule", "changes", "marks", "heldout",
                                                   "ranks", "undone"}, ...]}}}

``active`` is the version search uses for that event and calibration profile (0: the shipped
numbers); ``base`` the version that was active when a version was made, which `undo` restores.
Versions are never deleted: each keeps the marks it was fitted on and its held-out check. The
file is written whole through a fresh temporary file and a rename. Query time reads it
(`overlay`); the fit itself lives in `strived.rulelib.fit.learn`.
"""

from __future__ import annotations

import copy
import datetime
import json
import os
import tempfile
from pathlib import Path

from ..errors import RuleError, StrivedError
from ..rules.model import parse_rule
from .library import LibraryEntry, RuleLibrary, load_default_library

FORMAT = "strived.learned_rules/1"
FILE_NAME = "learned_rules.json"


class LearnedRulesError(StrivedError):
    """The library's learned-numbers file cannot be read or written."""


def learned_path(library) -> Path:
    return Path(library.folder) / FILE_NAME


def _key(event: str, profile: str) -> str:
    return f"{profile}/{event}"


def load(library) -> dict:
    """The learned-numbers document of ``library`` (empty when none was written); every rule is
    validated. Raises LearnedRulesError when the file is damaged."""
    p = learned_path(library)
    try:
        d = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {"format": FORMAT, "events": {}}
    except (OSError, ValueError) as e:
        raise LearnedRulesError(f"{p} cannot be read ({e}); move it away to search with the shipped "
                                "numbers (the marks themselves are in the library)") from None
    if not isinstance(d, dict) or d.get("format") != FORMAT or not isinstance(d.get("events"), dict):
        raise LearnedRulesError(f"{p} is not a {FORMAT} file; move it away to search with the shipped numbers")
    for key, h in d["events"].items():
        try:
            vs = h["versions"]
            active = int(h["active"])
            if not 0 <= active <= len(vs):
                raise ValueError(f"active version {active} of {len(vs)}")
            for v in vs:
                parse_rule(v["rule"])
        except (KeyError, TypeError, ValueError, RuleError) as e:
            raise LearnedRulesError(f"{p}: entry {key} is damaged ({type(e).__name__}: {e}); move the "
                                    "file away to search with the shipped numbers") from None
    return d


def _save(library, doc: dict) -> Path:
    """Write ``doc`` whole: a fresh temporary file beside it, flushed, then renamed into place."""
    p = learned_path(library)
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=".partial")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, p)
    except OSError as e:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        raise LearnedRulesError(f"cannot write {p}: {e.strerror or e} (nothing was changed)") from None
    for k in [k for k in _MEMO if k[0] == str(p)]:
        _MEMO.pop(k, None)
    return p


def history(library, event: str, profile: str = "tracks") -> dict | None:
    """{"event", "profile", "active", "versions"} of ``event``, or None when nothing was learned."""
    return load(library)["events"].get(_key(event, profile))


def active_version(library, event: str, profile: str = "tracks") -> dict | None:
    """The learned version search uses for ``event`` (None: the shipped numbers)."""
    h = history(library, event, profile)
    return h["versions"][h["active"] - 1] if h and h["active"] else None


def add_version(library, event: str, profile: str, record: dict) -> tuple[int, Path]:
    """Keep ``record`` (rule, previous_rule, changes, marks, heldout, ranks) as the event's new
    active version. Returns (version number, file written)."""
    doc = load(library)
    h = doc["events"].setdefault(_key(event, profile), {"event": event, "profile": profile,
                                                        "active": 0, "versions": []})
    n = len(h["versions"]) + 1
    now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    h["versions"].append({"version": n, "created": now, "base": h["active"], "undone": None,
                          **copy.deepcopy(record)})
    h["active"] = n
    return n, _save(library, doc)


def undo(library, event: str, profile: str = "tracks") -> tuple[int, int, Path]:
    """Search goes back to the version that was active before the active one (kept, marked
    undone). Returns (version undone, version now active (0: shipped), file written)."""
    doc = load(library)
    h = doc["events"].get(_key(event, profile))
    if not h or not h["active"]:
        raise LearnedRulesError(f"nothing to undo: {event} ({profile} profile) uses the shipped numbers "
                                "in this library")
    v = h["versions"][h["active"] - 1]
    v["undone"] = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    was, h["active"] = h["active"], int(v.get("base") or 0)
    return was, h["active"], _save(library, doc)


_MEMO: dict[tuple, tuple] = {}   # (file, profile) -> (signature, library)


def overlay(base: RuleLibrary, library, profile: str) -> RuleLibrary:
    """``base`` (a shipped library) with the learned active versions of ``library`` for
    ``profile``; ``base`` itself when nothing was learned. Read once per change of the file."""
    folder = getattr(library, "folder", None)
    if folder is None:
        return base
    p = Path(folder) / FILE_NAME
    try:
        st = p.stat()
    except OSError:
        return base
    sig = (st.st_mtime_ns, st.st_size, id(base), profile)
    memo = _MEMO.get((str(p), profile))
    if memo is not None and memo[0] == sig:
        return memo[1]
    doc = load(library)
    entries = dict(base.entries)
    learned = {}
    for h in doc["events"].values():
        if h.get("profile") != profile or not h["active"] or h.get("event") not in entries:
            continue
        v = h["versions"][h["active"] - 1]
        e = entries[h["event"]]
        n_pos = sum(1 for m in v.get("marks") or [] if m.get("relevant"))
        entries[h["event"]] = LibraryEntry(
            e.event, copy.deepcopy(v["rule"]), e.start_rule, True, None, None, 0, n_pos,
            len(v.get("marks") or []) - n_pos, note=provenance_note(v))
        learned[h["event"]] = v["version"]
    out = base if not learned else RuleLibrary(
        entries, {**base.provenance, "learned": {"file": str(p), "events": learned}}, base.created, base.path)
    _MEMO[(str(p), profile)] = (sig, out)
    return out


def provenance_note(v: dict) -> str:
    """One line saying where a learned version's numbers come from."""
    marks = v.get("marks") or []
    n_pos = sum(1 for m in marks if m.get("relevant"))
    h = v.get("heldout") or {}
    fig = (f"; held out (leave one video out): AP {h['heldout_ap']:.3f} vs {h['current_ap']:.3f} before"
           if h.get("heldout_ap") is not None and h.get("current_ap") is not None else "")
    return (f"numbers learned in this library from your marks (version {v['version']}, {v.get('created')}, "
            f"{n_pos} relevant / {len(marks) - n_pos} not relevant){fig}")


def search_rules(library, profile: str) -> tuple[RuleLibrary, str | None]:
    """(rule library, notice) for searching ``library`` with ``profile``: the shipped library with
    the numbers learned from this library's marks where any; a damaged learned file is left out
    with a notice (the shipped numbers are used)."""
    base = load_default_library(profile=profile)
    try:
        return overlay(base, library, profile), None
    except LearnedRulesError as e:
        return base, f"learned numbers not used: {e}"


def learned_notice(rule_library: RuleLibrary, match: dict, profile: str) -> str | None:
    """The search notice naming learned numbers when the matched event's rule was reused from them."""
    ev = match.get("event")
    if match.get("mode") != "reused" or ev not in (rule_library.provenance.get("learned") or {}).get("events", {}):
        return None
    return f"{ev} ({profile} profile): {rule_library.entries[ev].note}"

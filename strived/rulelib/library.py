"""The calibrated rule library: versioned JSON with provenance (``strived.rule_library/1``).

    {"format": "strived.rule_library/1", "version": "1.0+3f2a9c1d", "created": "2025-...",
     "provenance": {"corpus": ..., "label_source": ..., "proposer": ..., "seed": ..., ...},
     "events": {"cut_in": {"name", "description", "rule", "start_rule", "calibrated", "ap",
                           "start_ap", "iterations", "n_pos", "n_neg", "weakness", "paper",
                           "parent", "note"}, ...}}

``rule`` is the calibrated rule (canonical form, validated by `parse_rule` on load); ``start_rule``
the human-written form with its uncalibrated starting numbers (the "without calibration"
ablation). The version's suffix is a hash of the rules, so an LLM answer cached for one library
is never reused for another.
"""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from ..errors import RuleError, StrivedError
from ..events import EVENTS, get_event
from ..rules.model import parse_rule
from .video_forms import video_form

FORMAT = "strived.rule_library/1"
BASE_VERSION = "1.0"


class RuleLibraryError(StrivedError):
    """A rule library file is missing, malformed or of an unknown format."""


@dataclass
class LibraryEntry:
    """One event of the library: its calibrated rule and how it was fitted."""

    event: str
    rule: dict
    start_rule: dict
    calibrated: bool = False
    ap: float | None = None
    start_ap: float | None = None
    iterations: int = 0
    n_pos: int = 0
    n_neg: int = 0
    note: str | None = None

    @property
    def definition(self):
        return get_event(self.event)

    def to_dict(self) -> dict:
        ev = self.definition
        return {"name": ev.name, "description": ev.description, "rule": self.rule,
                "start_rule": self.start_rule, "calibrated": self.calibrated,
                "ap": _r(self.ap), "start_ap": _r(self.start_ap), "iterations": self.iterations,
                "n_pos": self.n_pos, "n_neg": self.n_neg, "weakness": ev.weakness,
                "paper": ev.paper, "parent": ev.parent, "note": self.note}


def _r(x):
    return None if x is None else round(float(x), 4)


def _canonical(rule: dict) -> dict:
    return parse_rule(rule).to_dict()


@dataclass
class RuleLibrary:
    """Event key -> `LibraryEntry`, with provenance. ``version`` identifies the exact rules."""

    entries: dict[str, LibraryEntry]
    provenance: dict = field(default_factory=dict)
    created: str | None = None
    path: str | None = None

    @classmethod
    def uncalibrated(cls, profile: str = "tracks") -> "RuleLibrary":
        """Every inventory event with its starting numbers (nothing fitted); the ``video``
        profile's object events use their video forms (`events.video_form`: gates on the
        moving track)."""
        entries = {}
        for ev in EVENTS:
            r = _canonical(video_form(ev.key) if profile == "video" else ev.form)
            entries[ev.key] = LibraryEntry(ev.key, r, copy.deepcopy(r))
        return cls(entries, {"corpus": None, "label_source": None,
                             "note": "uncalibrated starting numbers"})

    @property
    def version(self) -> str:
        blob = json.dumps({k: e.rule for k, e in sorted(self.entries.items())}, sort_keys=True)
        return f"{BASE_VERSION}+{hashlib.sha256(blob.encode()).hexdigest()[:8]}"

    def keys(self) -> list[str]:
        return list(self.entries)

    def rule(self, event: str):
        """The event's rule as a validated `Rule`."""
        return parse_rule(self.entries[event].rule)

    def start_version(self) -> "RuleLibrary":
        """The same library with every rule reset to its uncalibrated starting numbers."""
        entries = {k: LibraryEntry(k, copy.deepcopy(e.start_rule), copy.deepcopy(e.start_rule))
                   for k, e in self.entries.items()}
        return RuleLibrary(entries, {**self.provenance, "note": "starting numbers (ablation)"},
                           self.created)

    def to_dict(self) -> dict:
        return {"format": FORMAT, "version": self.version, "created": self.created,
                "provenance": self.provenance,
                "events": {k: e.to_dict() for k, e in self.entries.items()}}

    def save(self, path: str | Path) -> None:
        """Write the library JSON (atomically: a temporary file renamed into place)."""
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_suffix(p.suffix + ".tmp")
        tmp.write_text(json.dumps(self.to_dict(), indent=1, ensure_ascii=False) + "\n",
                       encoding="utf-8")
        tmp.replace(p)

    @classmethod
    def from_dict(cls, d: dict, path: str | None = None) -> "RuleLibrary":
        if not isinstance(d, dict) or d.get("format") != FORMAT:
            raise RuleLibraryError(f"{path or 'library'}: not a {FORMAT} file "
                                   f"(format={d.get('format') if isinstance(d, dict) else None!r})")
        where = path or "library"
        events, prov = d.get("events", {}), d.get("provenance") or {}
        if not isinstance(events, dict) or not isinstance(prov, dict):
            raise RuleLibraryError(f"{where}: 'events' and 'provenance' must be JSON objects")
        entries = {key: _entry(key, e, where) for key, e in events.items()}
        if not isinstance(d.get("created"), (str, type(None))) or \
                not isinstance(d.get("version"), (str, type(None))):
            raise RuleLibraryError(f"{where}: 'created' and 'version' must be strings")
        lib = cls(entries, prov, d.get("created"), path)
        if d.get("version") and d["version"] != lib.version:
            lib.provenance = {**lib.provenance, "version_mismatch":
                              f"file says {d['version']}, rules hash to {lib.version} (edited by hand?)"}
        return lib

    @classmethod
    def load(cls, path: str | Path) -> "RuleLibrary":
        p = Path(path)
        try:
            d = json.loads(p.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise RuleLibraryError(f"rule library {p} does not exist") from None
        except ValueError as e:
            raise RuleLibraryError(f"rule library {p} is not valid JSON: {e}") from None
        return cls.from_dict(d, str(p))


def _count(e: dict, name: str, where: str) -> int:
    v = e.get(name) or 0
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < 2**31:
        raise RuleLibraryError(f"{where}: '{name}' must be a count (a whole number >= 0), not {v!r:.40}")
    return v


def _ap(e: dict, name: str, where: str) -> float | None:
    v = e.get(name)
    if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 1):
        raise RuleLibraryError(f"{where}: '{name}' must be an AP between 0 and 1, not {v!r:.40}")
    return v


def _entry(key: str, e, where: str) -> "LibraryEntry":
    """One event of a library file, every field checked (a hand-edited or foreign file gets a
    message naming the event and the field, never a traceback)."""
    try:
        get_event(key)
    except KeyError as err:
        raise RuleLibraryError(f"{where}: {err.args[0]}") from None
    where = f"{where}: event {key}"
    if not isinstance(e, dict) or "rule" not in e:
        raise RuleLibraryError(f"{where}: each event must be a JSON object with a 'rule'")
    note = e.get("note")
    if note is not None and not isinstance(note, str):
        raise RuleLibraryError(f"{where}: 'note' must be text")
    try:
        rule, start = _canonical(e["rule"]), _canonical(e.get("start_rule") or e["rule"])
    except RuleError as err:
        raise RuleLibraryError(f"{where}: {err}") from None
    return LibraryEntry(key, rule, start, bool(e.get("calibrated")), _ap(e, "ap", where),
                        _ap(e, "start_ap", where), _count(e, "iterations", where),
                        _count(e, "n_pos", where), _count(e, "n_neg", where), note)


#: Calibration profiles. The paper calibrates rules against the signal distribution of the
#: perception that produced the records: ``tracks`` for imported track records (ground truth,
#: another pipeline's 3D tracks, CAN speed), ``video`` for videos perceived by our own offline
#: pipeline (jittery monocular ranging, speed from optical flow). Same events and rule forms,
#: numbers fitted separately; the engine scores each video with the profile of its records.
PROFILES = ("tracks", "video")
PROFILE_FILES = {"tracks": "rule_library.json", "video": "rule_library_video.json"}


def profile_of(attrs: dict | None) -> str:
    """The calibration profile of a video from its stored attributes: ``video`` when our
    perception produced its records (``attrs["perception"]``), else ``tracks``."""
    return "video" if isinstance(attrs, dict) and attrs.get("perception") else "tracks"


def default_library_path(profile: str = "tracks") -> Path | None:
    """The shipped library of a profile: ``resources/rule_library*.json`` of the source tree or
    the package."""
    name = PROFILE_FILES[profile]
    here = Path(__file__).resolve().parents[2] / "resources" / name
    if here.exists():
        return here
    try:
        p = resources.files("strived").joinpath(f"resources/{name}")
        if p.is_file():
            return Path(str(p))
    except (ModuleNotFoundError, FileNotFoundError):
        pass
    return None


_DEFAULT: dict[str, RuleLibrary] = {}


def load_default_library(calibrated: bool = True, profile: str = "tracks") -> RuleLibrary:
    """The shipped calibrated library of a profile (cached); ``calibrated=False`` gives the same
    rule forms with their starting numbers. A profile with no shipped file uses the ``tracks``
    library (and says so in its provenance); with no file at all, the uncalibrated inventory."""
    if profile not in PROFILES:
        raise RuleLibraryError(f"unknown calibration profile {profile!r}; valid: {', '.join(PROFILES)}")
    if profile not in _DEFAULT:
        p = default_library_path(profile)
        if p is None and profile != "tracks":
            base = load_default_library(True, "tracks")
            lib = RuleLibrary(dict(base.entries), {**base.provenance, "profile": profile, "note":
                              f"no {PROFILE_FILES[profile]} shipped: the tracks profile is used"},
                              base.created, base.path)
        elif p is None:
            lib = RuleLibrary.uncalibrated()
            lib.provenance["note"] = "no resources/rule_library.json found: uncalibrated inventory"
        else:
            lib = RuleLibrary.load(p)
        # events added to the inventory after the file was written keep their starting numbers
        for ev in EVENTS:
            if ev.key not in lib.entries:
                r = _canonical(ev.form)
                lib.entries[ev.key] = LibraryEntry(ev.key, r, copy.deepcopy(r),
                                                   note="not in the library file: starting numbers")
        _DEFAULT[profile] = lib
    lib = _DEFAULT[profile]
    return lib if calibrated else lib.start_version()


def load_profile_libraries(calibrated: bool = True) -> dict[str, RuleLibrary]:
    """{profile: shipped library} for every profile."""
    return {p: load_default_library(calibrated, p) for p in PROFILES}

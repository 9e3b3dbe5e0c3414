"""`strived events`: the calibrated library's driving events, per calibration profile."""

from __future__ import annotations

import sys

from ..events import EVENTS, get_event


def register(sub) -> None:
    p = sub.add_parser("events", help="list the rule library's driving events (keys, names, calibration)")
    p.add_argument("key", nargs="?", default=None, help="show one event's rule (a typo gets suggestions)")
    p.add_argument("--profile", choices=["tracks", "video"], default="tracks",
                   help="calibration profile: imported track records (default) or perceived videos")
    p.add_argument("--library", "-L", default=None,
                   help="a library folder: show the numbers learned from its marks (`strived learn`) where any")
    p.set_defaults(func=cmd_events)


def cmd_events(args) -> int:
    import json

    from ..rulelib.library import load_default_library  # lazy: loads numpy

    lib = load_default_library(profile=args.profile)
    if args.library:
        from ..rulelib.learned import overlay  # lazy: loads numpy
        from ..store import Library  # lazy: loads numpy

        with Library.open(args.library) as store:
            lib = overlay(lib, store, args.profile)
    learned = (lib.provenance.get("learned") or {}).get("events", {})
    if args.key:
        try:
            ev = get_event(args.key)
        except KeyError as e:
            print(f"strived: error: {e.args[0]}", file=sys.stderr)
            return 2
        e = lib.entries[ev.key]
        print(f"{ev.key}: {ev.name} ({args.profile} profile) - {ev.description}")
        print(f"calibrated: {'yes' if e.calibrated else 'no'}"
              + (f", AP {e.ap:.2f} (start {e.start_ap:.2f}), {e.n_pos} positives" if e.calibrated
                 and e.ap is not None and e.start_ap is not None else "")
              + (f"; {e.note}" if e.note else ""))
        if ev.weakness:
            print(f"known weakness: {ev.weakness}")
        print(json.dumps(e.rule, indent=1))
        return 0
    print(f"{'event':24s} {'who':6s} {'cal':4s} name  ({args.profile} profile, library {lib.version})")
    for ev in EVENTS:
        e = lib.entries.get(ev.key)
        cal = "yes" if e is not None and e.calibrated else "no"
        mark = f"  [learned here, v{learned[ev.key]}]" if ev.key in learned else ""
        print(f"{ev.key:24s} {ev.subject:6s} {cal:4s} {ev.name}{mark}")
    return 0

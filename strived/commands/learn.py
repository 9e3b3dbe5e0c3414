"""`strived learn EVENT`: refit an event's numbers for this library from its relevance marks."""

from __future__ import annotations

import sys

from ..errors import StrivedError
from ..events import get_event
from ._common import TerminalProgress, add_library_arg, print_json


def register(sub) -> None:
    p = sub.add_parser(
        "learn", help="refit an event's numbers for this library from your relevance marks",
        description="Refit EVENT's rule numbers from the relevant / not-relevant marks given to results "
                    "of searches for it in this library (the calibration objective, started from the "
                    "shipped numbers), checked leaving one marked video out: the new numbers are used "
                    "only if that check beats the numbers in use. Every version is kept with its marks; "
                    "--undo goes back. Offline, no LLM.")
    p.add_argument("event", help="event key (see `strived events`)")
    add_library_arg(p)
    p.add_argument("--profile", choices=("tracks", "video"), default=None,
                   help="calibration profile to learn (default: the one most marked videos have)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--dry-run", action="store_true", help="show what would change; keep nothing")
    g.add_argument("--undo", action="store_true", help="go back to the version used before the current one")
    g.add_argument("--history", action="store_true", help="list the versions learned for EVENT")
    p.add_argument("--yes", "-y", action="store_true", help="keep the new numbers without asking")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_learn)


def _event(key: str) -> str:
    try:
        return get_event(key).key
    except KeyError as e:
        raise StrivedError(e.args[0]) from None


def cmd_learn(args) -> int:
    from ..store import Library  # lazy: loads numpy

    event = _event(args.event)
    with Library.open(args.library) as lib:
        if args.history:
            return _history(lib, event, args)
        if args.undo:
            return _undo(lib, event, args)
        return _learn(lib, event, args)


def _history(lib, event: str, args) -> int:
    from ..rulelib.learned import history, learned_path  # lazy: loads numpy

    out = {p: history(lib, event, p) for p in ("tracks", "video")}
    out = {p: h for p, h in out.items() if h}
    if args.json:
        print_json({"event": event, "file": str(learned_path(lib)), "profiles": out})
        return 0
    if not out:
        print(f"{event}: nothing learned in this library (the shipped numbers are used)")
        return 0
    for p, h in out.items():
        print(f"{event} ({p} profile): {('version ' + str(h['active'])) if h['active'] else 'the shipped numbers'} in use; "
              f"versions kept in {learned_path(lib)}")
        for v in h["versions"]:
            n_pos = sum(1 for m in v["marks"] if m["relevant"])
            state = "in use" if v["version"] == h["active"] else ("undone " + v["undone"] if v["undone"]
                                                                   else "replaced")
            ho = v.get("heldout") or {}
            print(f"  v{v['version']}  {v['created']}  {n_pos} relevant / {len(v['marks']) - n_pos} not relevant"
                  f"  held-out AP {_f(ho.get('heldout_ap'))} vs {_f(ho.get('current_ap'))}  [{state}]")
            for c in v["changes"]:
                print(f"      {c}")
    return 0


def _undo(lib, event: str, args) -> int:
    from ..rulelib.learned import history, undo  # lazy: loads numpy

    prof = args.profile or next((p for p in ("tracks", "video") if (history(lib, event, p) or {}).get("active")),
                                "tracks")
    was, now, path = undo(lib, event, prof)
    msg = f"{event} ({prof} profile): version {was} undone; search now uses " + (
        f"version {now}" if now else "the shipped numbers") + f" (every version is kept in {path})"
    print_json({"event": event, "profile": prof, "undone": was, "active": now, "file": str(path)}) \
        if args.json else print(msg)
    return 0


def _learn(lib, event: str, args) -> int:
    from ..rulelib.fit.learn import learn_event  # lazy: loads numpy
    from ..rulelib.learned import add_version  # lazy: loads numpy

    res = learn_event(lib, event, profile=args.profile, progress=TerminalProgress())
    kept = None
    if res.accepted and not args.dry_run:
        if args.yes or _confirm():
            kept = add_version(lib, event, res.profile, res.record())
    if args.json:
        print_json({**res.to_dict(), "kept": bool(kept), "version": kept[0] if kept else None,
                    "file": str(kept[1]) if kept else None, "dry_run": args.dry_run})
        return 0
    _print_result(res)
    if kept:
        print(f"kept as version {kept[0]} in {kept[1]}; search uses it for {event} in this library "
              f"(`strived learn --undo {event}` goes back)")
    elif res.accepted:
        print("nothing kept" + (" (--dry-run)" if args.dry_run else ": run again with --yes to use these numbers"))
    return 0


def _confirm() -> bool:
    if not sys.stdin.isatty():
        return False
    try:
        return input("use these numbers for this library? [y/N] ").strip().lower() in ("y", "yes")
    except EOFError:
        return False


def _f(x) -> str:
    return "unknown" if x is None else f"{x:.3f}"


def _print_result(res) -> None:
    used = "the shipped numbers" if not res.current_version else f"learned version {res.current_version}"
    print(f"{res.event} ({res.profile} profile): {res.n_relevant} relevant and "
          f"{len({m['video_id'] for m in res.marks}) - res.n_relevant} not relevant marked videos "
          f"({len(res.marks)} marks); numbers in use: {used}")
    for note in res.unused:
        print(f"  not used: {note}")
    print("numbers (in use -> refitted):" if res.changes else "numbers: no change")
    for c in res.changes:
        print(f"  {c}")
    h = res.heldout
    print(f"AP on your marks: {_f(h['current_ap'])} in use, {_f(h['fit_ap'])} refitted; "
          f"held out (leave one video out): {_f(h.get('heldout_ap'))}")
    print(f"{'video':32s} {'mark':13s} {'rank before':>11s} {'rank after':>10s}")
    for r in res.ranks:
        print(f"{r['video_id'][:32]:32s} {'relevant' if r['relevant'] else 'not relevant':13s} "
              f"{_rank(r['before']):>11s} {_rank(r['after']):>10s}")
    print(("accepted: " if res.accepted else "not changed: ") + res.reason)


def _rank(x) -> str:
    return "-" if x is None else str(x)

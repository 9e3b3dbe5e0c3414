"""`strived check`: is a library whole (database pages, orphan rows, BM25 texts, dense index,
missing files), with `--repair` for what can be fixed in place and `--salvage NEW` for a damaged
database."""

from __future__ import annotations

import sys

from ._common import add_library_arg, print_json


def register(sub) -> None:
    p = sub.add_parser("check", help="check a library: database integrity, orphan rows, search "
                                     "index consistency, missing files (--repair, --salvage NEW)")
    add_library_arg(p)
    p.add_argument("--repair", action="store_true",
                   help="fix an intact library in place: delete orphan rows, bring the BM25 texts "
                        "and the dense index up to date (a damaged dense index, or one built by "
                        "another embedder, is rebuilt)")
    p.add_argument("--salvage", metavar="NEW_FOLDER",
                   help="for a damaged database: copy every video that can be read whole into a new "
                        "library (the others are listed with the reason)")
    p.add_argument("--json", action="store_true", help="machine-readable report")
    p.set_defaults(func=cmd_check)


def cmd_check(args) -> int:
    from ..maintenance.check import check_library  # lazy: loads numpy

    rep = check_library(args.library, repair=args.repair, salvage_to=args.salvage)
    if args.json:
        print_json(rep.to_dict())
    else:
        for line in rep.lines():
            print(line)
    if rep.damaged:
        return 2 if not (rep.salvage and rep.salvage["videos"]) else 1
    if not rep.ok:
        if not args.json and not args.repair:
            print("the library needs attention (see above)", file=sys.stderr)
        return 1
    return 0

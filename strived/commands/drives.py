"""`strived drives`: a library's drives (consecutive files of one camera) with their files,
offsets and the evidence of each file's start."""

from __future__ import annotations

import sys

from ._common import add_library_arg, print_json


def register(sub) -> None:
    p = sub.add_parser("drives", help="drives: consecutive files of one camera joined into one timeline",
                       description="List the drives of a library: files of one camera group whose "
                                   "recordings follow each other within the gap tolerance, with each "
                                   "file's offset in the drive and where its start time comes from. "
                                   "The drives are recomputed first (new or re-indexed files only are "
                                   "read) unless the library is read-only.")
    add_library_arg(p)
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_drives)


def cmd_drives(args) -> int:
    from ..drives import clock_text, refresh  # lazy: loads numpy
    from ..store import Library  # lazy: loads numpy
    from ..store import drives as store  # lazy: loads numpy

    with Library.open(args.library) as lib:
        done = None if lib.readonly else refresh(lib)
        found = store.drives(lib)
    if args.json:
        print_json({"drives": found, "refreshed": done})
        return 0
    if done is None:
        print("(read-only library: drives as last stored)", file=sys.stderr)
    elif done["unknown"]:
        print(f"note: the start of {done['unknown']} video(s) is unknown (records only, file gone or no "
              "time stamp): they join no drive", file=sys.stderr)
    if not found:
        print("no drives: no two files of one camera follow each other")
        return 0
    for d in found:
        print(f"{d['id']}  {d['camera']}  starts {clock_text(d['start_s'], d['source'])}  "
              f"{d['length_s']:.1f} s  {d['n_files']} files  (gap tolerance {d['tolerance_s']:g} s)")
        for f in d["files"]:
            gap = "" if f["gap_s"] is None else f"  gap {f['gap_s']:+.2f} s"
            print(f"  {f['seq'] + 1:3d}. +{f['offset_s']:8.2f} s  {f['video_id']:<32} {f['length_s']:.2f} s"
                  f"{gap}  start from {f['source']}: {f['detail']}")
    return 0

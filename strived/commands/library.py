"""`strived import`, `strived export`, `strived stats`, `strived info`: records in and out of a library."""

from __future__ import annotations

import sys
from pathlib import Path

from ._common import TerminalProgress, add_library_arg, print_json


def register(sub) -> None:
    p = sub.add_parser("import", help="import strived.records/1 files (or folders of them) into a library")
    p.add_argument("paths", nargs="+", help="records files or folders")
    add_library_arg(p)
    p.add_argument("--skip-invalid", action="store_true",
                   help="report malformed files and import the rest (default: stop at the first)")
    p.add_argument("--no-text-index", action="store_true",
                   help="skip building the dense/BM25 text indexes (build them later with a search)")
    p.set_defaults(func=cmd_import)

    p = sub.add_parser("export", help="write a library's videos as strived.records/1 files")
    p.add_argument("out_dir")
    add_library_arg(p)
    p.add_argument("--video", action="append", help="only this video id (repeatable)")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("stats", help="field statistics of a library (max |Δ| percentiles per window)")
    add_library_arg(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_stats)

    p = sub.add_parser("info", help="what a library holds")
    add_library_arg(p)
    p.set_defaults(func=cmd_info)


def cmd_import(args) -> int:
    from ..errors import RecordsError
    from ..records import VideoRecords, iter_records_files
    from ..store import Library

    files = [f for p in args.paths for f in iter_records_files(p)]
    missing = [p for p in args.paths if not Path(p).exists()]
    if missing:
        print(f"strived: error: not found: {', '.join(missing)}", file=sys.stderr)
        return 1
    recs, bad = [], []
    for f in files:
        try:
            recs.append(VideoRecords.load(f))
        except RecordsError as e:
            if not args.skip_invalid:
                print(f"strived: error: {e}\n(nothing was imported; use --skip-invalid to import "
                      "the valid files)", file=sys.stderr)
                return 1
            bad.append(str(e))
    lib = Library.open(args.library, create=True)
    with lib:
        n = lib.add_videos(recs)
        print(f"imported {n} videos into {lib.folder} ({len(lib)} in the library)")
        if not args.no_text_index:
            from ..engine import build_text_index

            note = build_text_index(lib, progress=TerminalProgress())
            if note:
                print(f"note: {note}", file=sys.stderr)
    for b in bad:
        print(f"skipped: {b}", file=sys.stderr)
    return 1 if bad and not recs else 0


def cmd_export(args) -> int:
    from ..store import Library

    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with Library.open(args.library) as lib:
        ids = args.video or lib.video_ids()
        for vid in ids:
            try:
                rec = lib.get_video(vid)
            except KeyError:
                print(f"strived: error: no video {vid!r} in {lib.folder}", file=sys.stderr)
                return 1
            safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in vid)
            rec.save(out / f"{safe}.json")
        print(f"wrote {len(ids)} records files to {out}")
    return 0


def cmd_stats(args) -> int:
    from ..rules.stats import field_stats, format_stats
    from ..store import Library

    with Library.open(args.library) as lib:
        if len(lib) == 0:
            print(f"library {lib.folder} is empty: nothing to summarise")
            return 0
        st = field_stats(lib)
    if args.json:
        print_json(st)
    else:
        print(format_stats(st))
    return 0


def cmd_info(args) -> int:
    from ..store import Library

    with Library.open(args.library) as lib:
        from ..availability import summarize

        print_json({"folder": str(lib.folder), **lib.stats(),
                    "field_availability": summarize(lib.availability())})
    return 0

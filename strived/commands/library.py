"""`strived import`, `strived export`, `strived stats`, `strived info`: records in and out of a library."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from ..errors import RecordsError
from ..export import _check_writable, write_atomic
from ..safepaths import output_path, safe_filename, unique_filename
from ._common import TerminalProgress, add_library_arg, print_json
from .camera import video_info


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

    p = sub.add_parser("remove", help="remove videos from a library (by id, or every video whose "
                                      "file is gone with --missing)")
    p.add_argument("video_ids", nargs="*", help="video ids to remove")
    add_library_arg(p)
    p.add_argument("--missing", action="store_true", help="remove every video whose file no longer exists")
    p.add_argument("--dry-run", action="store_true", help="list what would be removed, change nothing")
    p.add_argument("--yes", action="store_true",
                   help="with --missing: also remove videos whose whole folder is gone (by default "
                        "refused: an unplugged drive or a moved folder looks the same)")
    p.set_defaults(func=cmd_remove)

    p = sub.add_parser("relink", help="point a library at footage that was moved or renamed",
                       description="strived relink OLD NEW: the videos the library knows at OLD (a file "
                                   "or a folder) are now at NEW (same relative paths; the content is "
                                   "checked). strived relink --search FOLDER: find the library's missing "
                                   "files anywhere under FOLDER by their content.")
    p.add_argument("old", nargs="?", help="old file or folder path, as the library knows it")
    p.add_argument("new", nargs="?", help="its new location")
    add_library_arg(p)
    p.add_argument("--search", metavar="FOLDER", help="find missing files under FOLDER by content")
    p.add_argument("--no-verify", action="store_true", help="do not compare the content hash (OLD NEW form)")
    p.set_defaults(func=cmd_relink)

    p = sub.add_parser("stats", help="field statistics of a library (max |Δ| percentiles per window)")
    add_library_arg(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_stats)

    p = sub.add_parser("info", help="what a library holds (with VIDEO: where that video's speed "
                                    "comes from, and its camera)")
    p.add_argument("video", nargs="?", help="a video id")
    add_library_arg(p)
    p.set_defaults(func=cmd_info)


def cmd_import(args) -> int:
    from ..records import VideoRecords, iter_records_files  # lazy: loads numpy
    from ..store import Library  # lazy: loads numpy

    files = [f for p in args.paths for f in iter_records_files(p)]
    missing = [p for p in args.paths if not Path(p).exists()]
    if missing:
        print(f"strived: error: not found: {', '.join(missing)}", file=sys.stderr)
        return 1
    # pass 1 checks every file and keeps none (memory stays that of one file, whatever the folder
    # holds); pass 2 parses them again into one transaction, so an invalid file imports nothing
    ok, bad = [], []
    for f in files:
        try:
            VideoRecords.load(f)
            ok.append(f)
        except RecordsError as e:
            if not args.skip_invalid:
                print(f"strived: error: {e}\n(nothing was imported; use --skip-invalid to import "
                      "the valid files)", file=sys.stderr)
                return 1
            bad.append(str(e))
    lib = Library.open(args.library, create=True)
    with lib:
        lib.ensure_writable()  # read-only or damaged: a clear error, nothing written
        try:
            n = lib.add_videos(VideoRecords.load(f) for f in ok)
        except RecordsError as e:    # changed on disk since pass 1: the transaction rolled back
            print(f"strived: error: {e}\n(nothing was imported: the file changed while importing)",
                  file=sys.stderr)
            return 1
        print(f"imported {n} videos into {lib.folder} ({len(lib)} in the library)")
        from ..drives import refresh as refresh_drives  # lazy: loads numpy

        refresh_drives(lib)        # consecutive files of one camera -> drives (`strived drives`)
        if not args.no_text_index:
            from ..engine import build_text_index  # lazy: loads numpy

            note = build_text_index(lib, progress=TerminalProgress())
            if note:
                print(f"note: {note}", file=sys.stderr)
    for b in bad:
        print(f"skipped: {b}", file=sys.stderr)
    return 1 if bad and not ok else 0


def cmd_export(args) -> int:
    import json

    from ..store import Library  # lazy: loads numpy

    out = Path(args.out_dir).expanduser()
    with Library.open(args.library) as lib:
        lib.ensure_intact()     # a large one too: a damaged index would export other videos' tracks
        ids = args.video or lib.video_ids()
        missing = [v for v in ids if not lib.has_video(v)]
        if missing:
            print(f"strived: error: no video {missing[0]!r} in {lib.folder} (nothing was written)",
                  file=sys.stderr)
            return 1
        _check_writable(out)     # ExportError (a StrivedError): read-only folder, full disk...
        taken: set[str] = set()
        for vid in ids:
            rec = lib.get_video(vid)
            name = unique_filename(safe_filename(vid, "video") + ".json", taken)
            write_atomic(output_path(out, name),
                         json.dumps(rec.to_json_dict(), separators=(",", ":")))
        print(f"wrote {len(ids)} records files to {out}")
    return 0


def _update_text_index(lib) -> None:
    """Drop removed videos from the dense index now (a search must not return them)."""
    from ..retrieval.sources import ensure_text_index  # lazy: loads numpy

    ensure_text_index(lib)


def cmd_remove(args) -> int:
    from ..store import Library  # lazy: loads numpy
    from ..maintenance.footage import missing_videos, remove_videos  # lazy: loads numpy

    if not args.video_ids and not args.missing:
        print("strived: error: name the video ids to remove, or --missing", file=sys.stderr)
        return 2
    with Library.open(args.library) as lib:
        ids = list(args.video_ids)
        unknown = [v for v in ids if not lib.has_video(v)]
        if unknown:
            print(f"strived: error: no video {unknown[0]!r} in {lib.folder} (nothing was removed)",
                  file=sys.stderr)
            return 1
        if args.missing:
            gone = missing_videos(lib)
            folders = sorted({os.path.dirname(m.path) for m in gone if not os.path.isdir(os.path.dirname(m.path))})
            if folders and not args.yes and not args.dry_run:
                n = sum(os.path.dirname(m.path) in set(folders) for m in gone)
                print(f"strived: error: {n} of the {len(gone)} missing videos are in folders that no longer "
                      f"exist ({', '.join(folders[:3])}{', ...' if len(folders) > 3 else ''}): the footage drive "
                      "may be unplugged or the folder moved. Plug it in, or point the library at the new "
                      "place with `strived relink OLD NEW`; to remove them anyway add --yes "
                      "(nothing was removed)", file=sys.stderr)
                return 1
            ids += [m.video_id for m in gone]
        if args.dry_run:
            for v in dict.fromkeys(ids):
                print(f"would remove {v}")
            return 0
        done = remove_videos(lib, ids)
        if done:
            _update_text_index(lib)
        for v in done:
            print(f"removed {v}")
        print(f"{len(done)} removed, {len(lib)} videos left in {lib.folder}")
    return 0


def cmd_relink(args) -> int:
    from ..store import Library  # lazy: loads numpy
    from ..maintenance.footage import find_moved, relink  # lazy: loads numpy

    if bool(args.search) == bool(args.old and args.new):
        print("strived: error: give OLD NEW, or --search FOLDER", file=sys.stderr)
        return 2
    with Library.open(args.library) as lib:
        if args.search:
            if not Path(args.search).is_dir():
                print(f"strived: error: not a folder: {args.search}", file=sys.stderr)
                return 2
            rep = find_moved(lib, args.search)
        else:
            rep = relink(lib, args.old, args.new, verify=not args.no_verify)
    for vid, old, new in rep.relinked:
        print(f"relinked {vid}: {old} -> {new}")
    for vid, old, why in rep.not_relinked:
        print(f"not relinked {vid or old}: {why}", file=sys.stderr)
    print(rep.summary())
    return 0 if rep.relinked or not rep.not_relinked else 1


def cmd_stats(args) -> int:
    from ..rules.stats import field_stats, format_stats  # lazy: loads numpy
    from ..store import Library  # lazy: loads numpy

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
    from ..store import Library  # lazy: loads numpy

    with Library.open(args.library) as lib:
        if getattr(args, "video", None):
            print_json(video_info(lib, args.video))
            return 0
        from ..availability import summarize  # lazy: loads numpy

        print_json({"folder": str(lib.folder), **lib.stats(),
                    "field_availability": summarize(lib.availability())})
    return 0

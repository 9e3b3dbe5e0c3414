"""`strived eval BENCH_DIR`: the paper's metrics table per method and per query."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..evaluation.bench import load_benchmark, merge_benchmarks, split_benchmark, subset_benchmark
from ._common import TerminalProgress
from .search import load_rule_library


def register(sub) -> None:
    p = sub.add_parser("eval", help="evaluate retrieval methods on a benchmark folder (docs/formats.md §2)")
    p.add_argument("bench", nargs="+",
                   help="benchmark folder(s) with manifest.json and queries.json; several are merged "
                        "(queries with the same id are one query)")
    p.add_argument("--methods", default=None,
                   help="comma-separated methods (default: all); see --list-methods")
    p.add_argument("--list-methods", action="store_true")
    p.add_argument("--library", default=None,
                   help="library holding the benchmark items (default: a cache folder per benchmark)")
    p.add_argument("--index-videos", action="store_true",
                   help="run perception on video items not yet in the library")
    p.add_argument("--json", dest="json_out", default=None, help="write the docs/formats.md §3 JSON here")
    p.add_argument("--markdown", default=None, help="write a markdown report here")
    p.add_argument("--cv", type=cv_arg, default=5, metavar="K|source",
                   help="cross-fit the calibrated library in K folds split by source and sequence, so "
                        "numbers on the benchmark it was fitted on stay out-of-sample (default 5); "
                        "'source' = leave one source out, with the rule numbers, the router and the "
                        "relevance model fitted inside each fold (what predicts unseen footage); "
                        "0 = the shipped library, router and relevance as they are")
    p.add_argument("--split", choices=("all", "design", "holdout"), default="all",
                   help="'holdout': only the design holdout (resources/design_holdout.json: bench-dev's "
                        "held-out sources plus every item of the other folders given, e.g. bench-unseen); "
                        "'design': bench-dev without its held-out sources (what fits may read)")
    p.add_argument("--items", choices=("all", "video", "records"), default="all",
                   help="evaluate on every item (default), only the video items (searched through "
                        "perception) or only the track-record items; queries keep the relevant items of "
                        "that subset and are dropped when none is left")
    p.add_argument("--fit-router", default=None, metavar="PATH",
                   help="also fit the fusion router on every query of this benchmark and write it to "
                        "PATH (strived.router/1 JSON; the shipped one is resources/router.json)")
    p.add_argument("--fit-relevance", default=None, metavar="PATH",
                   help="also fit the relevance estimate (probability a result matches) on this "
                        "benchmark's queries and write it to PATH (strived.relevance/1 JSON; the shipped one "
                        "is resources/relevance.json); held-out calibration is printed")
    p.add_argument("--rule-library", default=None, metavar="PATH",
                   help="score the rule methods with this rule library JSON (e.g. written by `strived "
                        "calibrate`) as it is, instead of the shipped one (no cross-fitting)")
    p.add_argument("--quiet", action="store_true", help="print only the metrics table")
    p.set_defaults(func=cmd_eval)


def cv_arg(text: str) -> "int | str":
    if text == "source":
        return "source"
    try:
        k = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of folds or 'source', got {text!r}") from None
    if k < 0:
        raise argparse.ArgumentTypeError("the number of folds must be >= 0")
    return k


def load_benchmarks(folders, items: str = "all", split: str = "all"):
    """The benchmark(s) named on the command line, merged, split and restricted to ``items``."""
    bench = merge_benchmarks([load_benchmark(f) for f in folders])
    return subset_benchmark(split_benchmark(bench, split), items)


def cmd_eval(args) -> int:
    from ..evaluation.runner import (DEFAULT_METHODS, METHODS, format_markdown, format_queries,
                                     format_per_source, format_table, prepare_library, run_eval)  # lazy: loads numpy

    if args.list_methods:
        for name, (_, desc) in METHODS.items():
            print(f"{name:<16} {desc}")
        return 0
    bench = load_benchmarks(args.bench, args.items, args.split)
    methods = tuple(m.strip() for m in args.methods.split(",")) if args.methods else DEFAULT_METHODS
    rule_library = None
    if args.rule_library:
        rule_library = load_rule_library(args.rule_library)
    # a line per 10 % of each stage when stderr is not a terminal (CI logs, pipes)
    prog = TerminalProgress(always=not args.quiet)
    lib = prepare_library(bench, Path(args.library) if args.library else None,
                          index_videos=args.index_videos, progress=prog)
    with lib:
        note = None
        if any(m not in ("rule-hand",) for m in methods):
            from ..engine import build_text_index  # lazy: loads numpy

            note = build_text_index(lib, progress=prog)
        res = run_eval(bench, lib, methods, progress=prog, cv_folds=args.cv, rule_library=rule_library)
        if note:
            res.setdefault("notices", []).append(note)
        if args.fit_router:
            from ..evaluation.methods import fit_router_on_benchmark  # lazy: loads numpy
            from ..evaluation.runner import EvalContext  # lazy: loads numpy

            fr = fit_router_on_benchmark(EvalContext(bench, lib, None, args.cv),
                                         {"items": args.items, "calibration_cv": args.cv},
                                         heldout=res["methods"] if args.cv else None)
            fr.save(args.fit_router)
            print(f"wrote {args.fit_router} (router fitted on {fr.provenance['queries']} queries, "
                  f"{len(fr.cells)} query kinds)", file=sys.stderr)
        if args.fit_relevance:
            from ..evaluation.methods import fit_relevance_on_benchmark  # lazy: loads numpy
            from ..evaluation.runner import EvalContext  # lazy: loads numpy

            rm = fit_relevance_on_benchmark(EvalContext(bench, lib, None, args.cv),
                                            {"items": args.items, "calibration_cv": args.cv})
            rm.save(args.fit_relevance)
            by = "source" if args.cv == "source" else "query"
            h = rm.provenance[f"heldout_leave_one_{by}_out"]
            print(f"wrote {args.fit_relevance} (relevance fitted on {h['examples']} hits in {h['queries']} "
                  f"groups; held out by {by}: calibration error {h['heldout_ece']:.3f}, Brier {h['heldout_brier']:.3f} "
                  f"vs {h['baseline_brier']:.3f} for the base rate, AUC {h['heldout_auc']:.3f})", file=sys.stderr)
    print(format_table(res))
    if not args.quiet:
        print()
        print(format_queries(res))
        ps = format_per_source(res)
        if ps:
            print()
            print(ps)
        if res["not_searchable"]:
            print(f"\n{len(res['not_searchable'])} items have no records in the library and are not "
                  "ranked by any method (run with --index-videos to perceive the video items)")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(res, indent=2))
        print(f"wrote {args.json_out}", file=sys.stderr)
    if args.markdown:
        Path(args.markdown).write_text(format_markdown(res) + "\n")
        print(f"wrote {args.markdown}", file=sys.stderr)
    return 0

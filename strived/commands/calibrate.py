"""`strived calibrate AUX`: fit the rule library's numbers on an auxiliary corpus (weak labels)."""

from __future__ import annotations

import json
import sys

from ..errors import StrivedError
from ..evaluation.bench import load_benchmark, split_benchmark, subset_benchmark
from ..events import EVENTS as _ALL
from ._common import TerminalProgress


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "calibrate", help="calibrate the rule library on an auxiliary corpus",
        description="Calibrate every library event's numbers by AP on weak labels (paper, "
                    "L2R calibration). AUX is a library folder, a folder of strived.records/1 "
                    "files, or a benchmark folder (docs/formats.md section 2).")
    p.add_argument("aux", help="library folder, records folder, or benchmark folder")
    p.add_argument("--captions", help="captions file (JSON {video_id: caption} or CSV "
                                      "video_id,caption): events extracted as weak labels")
    p.add_argument("--labels", help="per-video event labels (CSV video_id,event[,label] or JSON)")
    p.add_argument("--marks", action="store_true",
                   help="use the relevance marks stored in the AUX library as labels")
    p.add_argument("--benchmark-labels", action="store_true",
                   help="AUX is a benchmark folder: use its queries.json/events.csv labels")
    p.add_argument("--benchmark", default=None, metavar="BENCH",
                   help="use the labels of benchmark folder BENCH (its queries.json/events.csv) for the "
                        "videos of AUX (e.g. a library where BENCH's videos were indexed)")
    p.add_argument("--extractor", choices=["lexicon", "llm"], default="lexicon",
                   help="caption event extractor (llm falls back to the lexicon per caption)")
    p.add_argument("--proposer", choices=["optimizer", "llm"], default="optimizer")
    p.add_argument("--events", nargs="*", help="events to calibrate (default: all)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--target-ap", type=float, default=0.9)
    p.add_argument("--max-iterations", type=int, default=20)
    p.add_argument("--out", "-o", default="rule_library.json", help="library JSON to write")
    p.add_argument("--update", metavar="LIBRARY", default=None,
                   help="start from this library file: only --events are recalibrated (from their "
                        "starting numbers), every other event keeps its calibrated rule")
    p.add_argument("--report", help="write the per-event report (AP per iteration) as JSON")
    p.add_argument("--profile", choices=["tracks", "video"], default=None,
                   help="calibration profile to fit: 'video' fits on videos perceived by this "
                        "product's pipeline (a library's perceived videos, or a benchmark's video "
                        "items, indexed first), 'tracks' on imported track records (default: every "
                        "video of AUX). The engine scores each video with its own profile's rules")
    p.add_argument("--split", choices=("all", "design"), default="all",
                   help="'design': calibrate only on the design split of the benchmark (without the "
                        "sources of resources/design_holdout.json), so the holdout stays unseen")
    p.add_argument("--sources", choices=("auto", "none"), default="auto",
                   help="'auto' (default): with benchmark labels, numbers move only on evidence from "
                        "two or more sources and an event keeps its calibrated numbers only where they "
                        "beat the hand-written form on sources left out of the fit; 'none': plain AP")
    p.add_argument("--cv", type=int, default=0, metavar="K",
                   help="also run K-fold out-of-sample evaluation (folds by source/sequence)")
    p.set_defaults(func=run)


def _load_corpus(aux: str, profile: str | None = None):
    """(RuleScorer, video ids, library or None, benchmark dir or None) for AUX; with ``profile``
    only the videos of that calibration profile."""
    from pathlib import Path

    from ..records import VideoRecords, iter_records_files  # lazy: loads numpy
    from ..rules.scorer import RuleScorer  # lazy: loads numpy

    root = Path(aux)
    if (root / "library.sqlite").exists():
        from ..store.library import Library  # lazy: loads numpy
        lib = Library.open(root)
        prof = lib.video_profiles()
        return RuleScorer(lib), [v for v in lib.video_ids() if profile in (None, prof[v])], lib, None
    bench = root if (root / "queries.json").exists() else None
    if bench is not None and profile == "video":
        from ..evaluation.runner import prepare_library  # lazy: loads numpy

        b = subset_benchmark(load_benchmark(bench), "video")
        lib = prepare_library(b, index_videos=True, progress=TerminalProgress())
        prof = lib.video_profiles()
        vids = [it.id for it in b.items if prof.get(it.id) == "video"]
        return RuleScorer(lib), vids, lib, bench
    if bench is not None and not (root / "records").is_dir():
        # a benchmark folder that references its records (e.g. benchmarks/composition)
        recs = [VideoRecords.load(it.records) for it in load_benchmark(bench).items if it.records]
    else:
        folder = root / "records" if bench is not None and (root / "records").is_dir() else root
        recs = [VideoRecords.load(p) for p in iter_records_files(folder)]
    if not recs:
        raise StrivedError(f"{aux}: no library.sqlite and no records files found")
    return RuleScorer.from_records(recs), [r.info.id for r in recs], None, bench


def run(args) -> int:
    from ..rulelib.fit.calibrate import calibrate_library  # lazy: loads numpy

    scorer, vids, lib, bench = _load_corpus(args.aux, args.profile)
    llm = None
    if args.extractor == "llm" or args.proposer == "llm":
        from ..llm import LLMClient, load_llm_config  # lazy: loads numpy
        llm = LLMClient(load_llm_config())
    labels = _weak_labels(args, vids, lib, bench, llm)
    vids, groups = _benchmark_split(args, vids, bench)
    labels.videos = list(vids)
    if not any(labels.positives.values()):
        raise StrivedError("no weak labels: give --captions, --labels, --marks, "
                           "--benchmark-labels or --benchmark")
    kw = dict(proposer=args.proposer, llm=llm, seed=args.seed, target_ap=args.target_ap,
              max_iterations=args.max_iterations)
    base, prov = _base_and_provenance(args, vids, labels, lib)
    if groups is not None:
        prov["sources"] = ("numbers move only on AP gains that hold with any one source left out; "
                           "calibrated numbers ship only where they beat the hand form on held-out sources")
    if args.split == "design":
        prov["split"] = "design (the design holdout's sources were not read)"
    library, reports = calibrate_library(scorer, labels, args.events, progress=TerminalProgress(),
                                         provenance=prov, base=base, groups=groups, **kw)
    library.save(args.out)
    _print_reports(reports)
    out = {"library": str(args.out), "version": library.version,
           "events": [r.to_dict() for r in reports]}
    if args.cv:
        from ..rulelib.fit.crossval import cross_validate, format_cv_table  # lazy: loads numpy
        folds, rows = cross_validate(scorer, labels, n_folds=args.cv, events=args.events, **kw)
        print(format_cv_table(folds, rows))
        out["crossval"] = {"folds": folds, "events": [r.to_dict() for r in rows]}
    if args.report:
        with open(args.report, "w", encoding="utf-8") as f:
            json.dump(out, f, indent=1)
    print(f"wrote {args.out} (library {library.version})")
    return 0


def _weak_labels(args, vids: list[str], lib, bench, llm):
    """The weak labels of the options, merged: captions, label file, library marks, benchmark
    labels (StrivedError when an option does not fit AUX)."""
    from ..rulelib.fit.weak_labels import (WeakLabels, labels_from_benchmark, labels_from_captions,
                                       load_captions, load_label_file, marks_from_library)  # lazy: loads numpy

    labels = WeakLabels(list(vids))
    if args.captions:
        caps = load_captions(args.captions)
        if args.extractor == "llm":
            from ..rulelib.fit.llm_fit import llm_extractor  # lazy: loads numpy
            ex = llm_extractor(llm)
            labels = labels.merge(labels_from_captions(caps, ex, "captions:llm"))
            if ex.n_fallbacks:
                print(f"notice: LLM extractor fell back to the lexicon on {ex.n_fallbacks} "
                      "captions", file=sys.stderr)
        else:
            labels = labels.merge(labels_from_captions(caps))
    if args.labels:
        labels = labels.merge(load_label_file(args.labels, vids))
    if args.marks:
        if lib is None:
            raise StrivedError("--marks needs AUX to be a library folder")
        labels = labels.merge(marks_from_library(lib, vids))
    if args.benchmark_labels:
        if bench is None:
            raise StrivedError("--benchmark-labels needs AUX to be a benchmark folder")
        labels = labels.merge(labels_from_benchmark(bench, vids))
    if args.benchmark:
        labels = labels.merge(labels_from_benchmark(args.benchmark, vids))
    return labels


def _benchmark_split(args, vids: list[str], bench) -> tuple[list[str], dict | None]:
    """(videos to fit on, source group of each benchmark item or None): ``--split design`` keeps
    the design split's videos; ``--sources auto`` groups by source (both need benchmark labels)."""
    groups = None
    bench_dir = args.benchmark or (bench if args.benchmark_labels else None)
    if bench_dir is not None:
        b = load_benchmark(bench_dir)
        if args.split == "design":
            keep = {it.id for it in split_benchmark(b, "design").items}
            vids = [v for v in vids if v in keep]
        if args.sources == "auto":
            groups = {it.id: it.group for it in b.items}
    elif args.split == "design":
        raise StrivedError("--split design needs benchmark labels (--benchmark or --benchmark-labels)")
    return vids, groups


def _base_and_provenance(args, vids: list[str], labels, lib) -> tuple:
    """(library to start from or None, provenance): the video profile's uncalibrated forms, or
    ``--update``'s file with events added to the inventory since; the corpus, labels and profile."""
    prov = {"corpus": f"{args.aux} ({len(vids)} videos with records)",
            "label_source": ", ".join(labels.sources)}
    if args.profile:
        prov["profile"] = args.profile
        if args.profile == "video" and lib is not None:
            perc = {json.dumps((lib.get_video(v).info.attrs.get("perception") or {}).get("perception_version"))
                    for v in vids[:50]}
            prov["perception_version"] = ", ".join(sorted(perc))
    base = None
    if args.profile == "video" and not args.update:
        from ..rulelib.library import RuleLibrary  # lazy: loads numpy
        base = RuleLibrary.uncalibrated(profile="video")   # video forms: gates on the moving track
    if args.update:
        from ..rulelib.library import RuleLibrary  # lazy: loads numpy
        base = RuleLibrary.load(args.update)
        from ..rulelib.library import LibraryEntry, _canonical  # lazy: loads numpy
        for ev in _ALL:           # events added to the inventory since the file was written
            if ev.key not in base.entries:
                r = _canonical(ev.form)
                base.entries[ev.key] = LibraryEntry(ev.key, r, dict(r))
        if not args.events:
            raise StrivedError("--update needs --events (the events to recalibrate)")
        prov = {**base.provenance, f"update:{','.join(args.events)}": prov}
    return base, prov


def _print_reports(reports) -> None:
    """Per event: positives, negatives, starting and best AP, iterations; then the events skipped."""
    print(f"{'event':22s} {'pos':>4s} {'neg':>4s} {'start':>6s} {'best':>6s} iters")
    for r in reports:
        if r.n_pos:
            print(f"{r.event:22s} {r.n_pos:4d} {r.n_neg:4d} {r.start_ap:6.3f} {r.best_ap:6.3f} "
                  f"{len(r.iterations):5d}  {r.stopped}")
    skipped = [r.event for r in reports if not r.n_pos]
    if skipped:
        print(f"no positives (starting numbers kept): {', '.join(skipped)}")

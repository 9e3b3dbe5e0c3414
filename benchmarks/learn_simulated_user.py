"""Simulated user for `strived learn` (issue 36): does refitting from one source's marks help on
the other sources?

    .venv/bin/python benchmarks/learn_simulated_user.py [--bench /work/shared/data/bench-dev]
        [--json docs/report/learn/learn_bench_dev_tracks.json]

For each query of the benchmark and each source (the items' ``group``) of its imported-track items
(tracks profile; a fresh library of them): search the query (rule source), mark the first 10 of
that source's results with the benchmark's labels (an ambiguous item is left unmarked), run the
learn step (`learn_event`, kept when its leave-one-video-out check passes, exactly as `strived
learn --yes`), search again, and compute the AP of the rule source's ranking over the OTHER
sources' items, before (shipped numbers) and after. Marks and learned numbers are removed before
the next run. A query's gain is the mean over the sources where the other sources hold a positive
(AP is undefined otherwise: reported as null, not 0). No number of the learn step was chosen on
these figures (its minimums, margins and loop settings are fixed in strived/rulelib/fit/learn.py).
"""

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

N_MARKED = 10


def run(bench_dir: str, echo=print, items: str = "records", library: str | None = None) -> dict:
    from strived import engine
    from strived.errors import StrivedError
    from strived.evaluation.bench import load_benchmark
    from strived.evaluation.runner import prepare_library
    from strived.retrieval.metrics import average_precision
    from strived.rulelib.fit.learn import LearnRefused, learn_event
    from strived.rulelib.learned import FILE_NAME, add_version

    t0 = time.perf_counter()
    b = load_benchmark(bench_dir)
    tmp = tempfile.mkdtemp(prefix="learn-sim-")
    if items == "video":
        # the video items of an already indexed library (perceived by this product: video profile),
        # copied so that the marks and learned numbers of the runs never touch it
        import shutil

        from strived.store import Library

        shutil.copytree(library, Path(tmp) / "lib")
        lib = Library.open(Path(tmp) / "lib")
        have = set(lib.video_ids())
        group = {it.id: it.group for it in b.items if it.video is not None and it.id in have}
    else:
        lib = prepare_library(b, Path(tmp) / "lib")
        group = {it.id: it.group for it in b.items if it.records is not None}
    sources = sorted(set(group.values()))

    def ranking(text):
        r = engine.search(lib, text, sources=("rule",), top_k=len(lib))
        return [h.video_id for h in r.hits if h.video_id in group], r.match.get("event")

    def reset():
        lib.conn.execute("DELETE FROM marks")
        lib.conn.commit()
        (Path(lib.folder) / FILE_NAME).unlink(missing_ok=True)

    rows = []
    for q in b.queries:
        amb = set(q.ambiguous)
        reset()
        before, event = ranking(q.text)          # the shipped numbers
        runs = []
        for src in sources:
            reset()
            shown = [v for v in before if group[v] == src][:N_MARKED]
            marks = {v: v in q.relevant for v in shown if v not in amb}
            for v, y in marks.items():
                lib.set_mark(q.text, v, y, event)
            run_ = {"marked_source": src, "event": event, "n_relevant": sum(marks.values()),
                    "n_not_relevant": len(marks) - sum(marks.values())}
            try:
                res = learn_event(lib, event)
                run_.update(outcome="kept" if res.accepted else "not kept", changes=res.changes,
                            heldout_ap=res.heldout.get("heldout_ap"), current_ap=res.heldout["current_ap"],
                            reason=res.reason)
                if res.accepted:
                    add_version(lib, event, res.profile, res.record())
            except LearnRefused as e:
                run_.update(outcome="refused", reason=str(e))
            except (StrivedError, KeyError) as e:
                run_.update(outcome="error", reason=f"{type(e).__name__}: {e}")
            after, _ = ranking(q.text)
            held = {v for v, g in group.items() if g != src}
            rel = set(q.relevant) & held
            if rel:
                ap_b = average_precision([v for v in before if v in held], rel, amb)
                ap_a = average_precision([v for v in after if v in held], rel, amb)
                run_.update(ap_before=round(ap_b, 4), ap_after=round(ap_a, 4), gain=round(ap_a - ap_b, 4))
            else:
                run_.update(ap_before=None, ap_after=None, gain=None)
            runs.append(run_)
        gains = [r["gain"] for r in runs if r["gain"] is not None]
        row = {"query": q.id, "text": q.text, "event": event, "runs": runs,
               "gain": round(sum(gains) / len(gains), 4) if gains else None}
        rows.append(row)
        echo(f"{q.id} {event or '-':22s} gain {row['gain'] if row['gain'] is not None else 'n/a':>7} "
             + " ".join(f"{r['marked_source']}:{r['outcome']}" for r in runs))
    reset()
    lib.close()
    defined = [r for r in rows if r["gain"] is not None]
    worst = min(defined, key=lambda r: r["gain"]) if defined else None
    all_runs = [x for r in rows for x in r["runs"]]
    return {
        "benchmark": str(bench_dir),
        "profile": "video (perceived video items)" if items == "video" else "tracks (imported-track items)",
        "items": len(group), "sources": {s: sum(1 for g in group.values() if g == s) for s in sources},
        "protocol": __doc__.strip().split("\n\n")[2],
        "n_marked_per_run": N_MARKED,
        "queries": len(rows), "queries_with_a_defined_gain": len(defined),
        "mean_gain_ap": round(sum(r["gain"] for r in defined) / len(defined), 4) if defined else None,
        "worst_query": {"query": worst["query"], "gain": worst["gain"]} if worst else None,
        "runs": len(all_runs), "kept": sum(x["outcome"] == "kept" for x in all_runs),
        "not_kept": sum(x["outcome"] == "not kept" for x in all_runs),
        "refused": sum(x["outcome"] == "refused" for x in all_runs),
        "errors": sum(x["outcome"] == "error" for x in all_runs),
        "elapsed_s": round(time.perf_counter() - t0, 1), "per_query": rows}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", default="/work/shared/data/bench-dev")
    ap.add_argument("--json", default=None, help="also write the figures to this JSON file")
    ap.add_argument("--items", choices=("records", "video"), default="records",
                    help="'video': the perceived video items of --library (copied first)")
    ap.add_argument("--library", default=None, help="a library holding the benchmark's video items")
    args = ap.parse_args()
    if args.items == "video" and not args.library:
        ap.error("--items video needs --library")
    res = run(args.bench, echo=lambda s: print(s, file=sys.stderr, flush=True), items=args.items,
              library=args.library)
    summary = {k: v for k, v in res.items() if k != "per_query"}
    print(json.dumps(summary, indent=1))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(res, indent=1) + "\n")
        print(f"wrote {args.json}", file=sys.stderr)


if __name__ == "__main__":
    main()

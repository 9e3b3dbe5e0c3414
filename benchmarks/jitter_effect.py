"""Effect of jitter-robust track signals on real video: how many clips a rule about other road users
fires on, and where the labelled clips rank.

    .venv/bin/python benchmarks/jitter_effect.py LIB_A [LIB_B ...] [--bench ../shared/data/bench-dev]
        [--json PATH]

Each LIB is a library in which the benchmark's video items were indexed (e.g. one with
``PerceptionConfig(signal_filter="median")`` and one with the default ``"robust"``). For a fixed set
of queries about other road users, the *same* rule (the shipped ``tracks`` profile's, so the
calibration is not what differs) is scored on every library; printed per library and query: the
number of clips with a rule score >= 0.5 and >= 0.8, and the rank of the first labelled clip.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

# the benchmark's queries about other road users' motion (ids of bench-dev's queries.json)
QUERY_IDS = ("q16", "q17", "q01", "q03", "q18", "q07", "q11")


def run(libs: list[str], bench: str) -> dict:
    from strived.engine import rule_ranking
    from strived.evaluation.bench import load_benchmark, subset_benchmark
    from strived.rulelib.library import load_default_library
    from strived.rulelib.resolve import resolve_rule
    from strived.store import Library

    b = subset_benchmark(load_benchmark(bench), "video")
    rel = {q.text: set(q.relevant) for q in b.queries}
    texts = [q.text for q in b.queries if q.id in QUERY_IDS]
    rules = load_default_library(profile="tracks")
    out: dict = {}
    for path in libs:
        with Library.open(path) as lib:
            vids = [v for v in lib.video_ids() if v in set(b.item_ids)]
            cfgs = {json.dumps((lib.get_video(v).info.attrs.get("perception") or {}).get("signal_filter"))
                    for v in vids[:3]}
            res = {"videos": len(vids), "signal_filter": ", ".join(sorted(cfgs)), "queries": {}}
            for q in texts:
                r = resolve_rule(q, library=rules).rule
                hits = [(v, s) for v, s, _ in rule_ranking(lib, r) if v in set(vids)]
                ranks = [k + 1 for k, (v, _) in enumerate(hits) if v in rel.get(q, set())]
                res["queries"][q] = {"ge_0_5": sum(1 for _, s in hits if s >= 0.5),
                                     "ge_0_8": sum(1 for _, s in hits if s >= 0.8),
                                     "first_relevant_rank": ranks[0] if ranks else None,
                                     "n_relevant": len(rel.get(q, set()))}
            out[path] = res
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("libs", nargs="+")
    ap.add_argument("--bench", default=str(Path(__file__).resolve().parents[2] / "shared" / "data" / "bench-dev"))
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    if not Path(a.bench).is_dir():
        print(f"skip: {a.bench} not found")
        return 0
    res = run(a.libs, a.bench)
    for path, r in res.items():
        print(f"{path}  ({r['videos']} clips, signal_filter {r['signal_filter']})")
        for q, m in r["queries"].items():
            print(f"  {q[:62]:62s} score>=0.5: {m['ge_0_5']:2d}  >=0.8: {m['ge_0_8']:2d}  "
                  f"first labelled clip at rank {m['first_relevant_rank'] or '-'} ({m['n_relevant']} labelled)")
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

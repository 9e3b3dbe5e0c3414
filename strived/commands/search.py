"""`strived search "QUERY"`: ranked videos with the peak span and per-source scores."""

from __future__ import annotations

import json

from ..errors import StrivedError
from ._common import add_library_arg, load_json_file, parse_json_text, positive_int, print_json


def register(sub) -> None:
    p = sub.add_parser("search", help="search a library in plain language")
    p.add_argument("query")
    add_library_arg(p)
    p.add_argument("--top", type=positive_int, default=10, help="number of results (default 10)")
    p.add_argument("--sources", default="rule,dense,bm25", help="comma-separated subset of rule,dense,bm25")
    p.add_argument("--rule", default=None, help="a rule JSON file to use instead of the library's")
    p.add_argument("--event", default=None, help="use the hand-written rule of this event key")
    p.add_argument("--rule-library", default=None, metavar="PATH",
                   help="a rule library JSON (e.g. written by `strived calibrate`) used for every video "
                        "instead of the shipped calibrated ones")
    p.add_argument("--weights", default=None, help='fusion weights JSON, e.g. {"rule":1,"dense":0.5,"bm25":0}')
    p.add_argument("--explain", action="store_true", help="print the matched event, confidence, mode and rule")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_search)


def configured_llm():
    """The user's configured LLM client, or None (offline defaults everywhere)."""
    from ..llm.client import LLMClient  # lazy: loads numpy
    from ..llm.config import load_llm_config  # lazy: loads numpy

    cfg = load_llm_config()
    return LLMClient(cfg) if cfg.usable else None


def load_rule_library(path: str):
    """A rule library JSON file (`strived calibrate` writes one), validated like the shipped ones."""
    from ..rulelib.library import RuleLibrary  # lazy: loads numpy

    return RuleLibrary.load(path)


EXPLAIN_GATES_TOP = 5


def gate_evidence(lib, resp, top: int) -> dict[str, list[dict]]:
    """For the first ``top`` hits the rule judged: each gate of the rule that scored the video,
    with the track (or the ego) that met it and when (`rules.explain.gate_witnesses`)."""
    from ..engine import explain  # lazy: loads numpy
    from ..rules import parse_rule  # lazy: loads numpy
    from ..rules.explain import gate_witnesses  # lazy: loads numpy

    out = {}
    for h in resp.hits[:top]:
        rd = resp.rule_for(h.video_id)
        if rd is None or "rule" not in h.per_source or not h.per_source["rule"].get("rank"):
            continue
        r = parse_rule(rd)
        if not r.hard_gates:
            continue
        try:
            out[h.video_id] = gate_witnesses(explain(lib, h.video_id, r), r)
        except KeyError:
            continue
    return out


def _gate_line(g: dict) -> str:
    if not g["met"]:
        return f"{g['gate']}: not met by any track"
    who = "ego" if g["track"] < 0 else f"{g['cls']} #{g['track']}"
    when = f"{g['first_s']:.1f}-{g['last_s']:.1f} s" if g.get("first_s") is not None else "-"
    peak = " (the scoring track)" if g.get("is_peak_track") else (" (another track than the scoring one)"
                                                                   if g["track"] >= 0 else "")
    return f"{g['gate']}: met by {who}, {when}{peak}"


def match_probabilities(m: dict) -> str:
    """The matcher's calibrated probabilities in words: that the event is the one asked for, and
    that its calibrated rule fits the query as it is (the reuse-vs-adapt confidence, τ = 0.6)."""
    conf, pe = m.get("confidence"), m.get("p_event")
    if conf is None:
        return "(rule given by the user)" if m.get("mode") == "user" else ""
    if m.get("mode") == "hand":
        return "(hand-written rule of the event)"
    ev = f"P(event right) {pe:.2f}; " if pe is not None else ""
    return f"{ev}P(rule fits as is) {conf:.2f}" + ("" if pe is not None or m.get("source") == "llm"
                                                   else " (uncalibrated)")


def _judged(d: dict) -> str:
    """", judged on 62 % of the clip (accel)" when the rule read ego fields known on part of it."""
    share = d.get("judged_share")
    if not share:
        return ""
    return ", judged on " + ", ".join(f"{100 * v:.0f} % of the clip ({k})" for k, v in share.items())


def evidence_text(per_source: dict) -> str:
    """Each source's evidence for one hit, in terms a user can read: ``rule 3/240 (p99, 0.82)``,
    ``rule =1/240 (12 tied, p100, 1.00)`` (a tie: no order among them), ``dense 2/240 (cos 0.61)``,
    ``bm25 -`` (not ranked), ``rule n/a`` (cannot evaluate)."""
    parts = []
    for s, d in per_source.items():
        if d.get("status") == "cannot evaluate":
            parts.append(f"{s} n/a")
        elif not d.get("rank"):
            parts.append(f"{s} -")
        elif s == "rule" and d.get("tie"):
            # a tie has no order: show where it starts and how many share the score
            parts.append(f"rule ={d['tie']['first']}/{d.get('of', '?')} ({d['tie']['size']} tied, "
                         f"p{100 * d.get('percentile', 0):.0f}, {d['score']:.2f}{_judged(d)})")
        elif s == "rule":
            parts.append(f"rule {d['rank']}/{d.get('of', '?')} (p{100 * d.get('percentile', 0):.0f}, "
                         f"{d['score']:.2f}{_judged(d)})")
        elif s == "dense":
            parts.append(f"dense {d['rank']}/{d.get('of', '?')} (cos {d['score']:.2f})")
        else:
            parts.append(f"{s} {d['rank']}/{d.get('of', '?')}")
    return "  ".join(parts)


def parse_weights(text: str) -> dict[str, float]:
    """``--weights`` JSON: an object of source -> finite weight >= 0 (not all zero)."""
    import math

    from ..engine import SOURCES  # lazy: loads numpy

    w = parse_json_text(text, "--weights")
    if not isinstance(w, dict) or not w:
        raise StrivedError('--weights must be a JSON object such as {"rule": 1, "dense": 0.5, "bm25": 0}')
    bad = [k for k in w if k not in SOURCES]
    if bad:
        raise StrivedError(f"--weights: unknown source(s) {', '.join(map(repr, bad))}; valid: {', '.join(SOURCES)}")
    for k, v in w.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise StrivedError(f"--weights: the weight of {k!r} must be a finite number >= 0, found {v!r}")
    if not any(v > 0 for v in w.values()):
        raise StrivedError("--weights: at least one weight must be above 0")
    return {k: float(v) for k, v in w.items()}


def cmd_search(args) -> int:
    from ..engine import search  # lazy: loads numpy
    from ..store import Library  # lazy: loads numpy

    rule = load_json_file(args.rule, "rule file") if args.rule else None
    rule_library = load_rule_library(args.rule_library) if args.rule_library else None
    weights = parse_weights(args.weights) if args.weights else None
    llm = configured_llm()
    with Library.open(args.library) as lib:
        if len(lib) == 0:
            print(f"library {lib.folder} is empty: index a folder or import records first")
            return 0
        resp = search(lib, args.query, rule=rule, event=args.event, weights=weights,
                      sources=tuple(s.strip() for s in args.sources.split(",") if s.strip()),
                      top_k=args.top, llm=llm, rule_library=rule_library)
        gates = gate_evidence(lib, resp, EXPLAIN_GATES_TOP) if args.explain else {}
    if args.json:
        d = resp.to_dict()
        for h in d["hits"]:
            if h["video_id"] in gates:
                h["gates"] = gates[h["video_id"]]
        print_json(d)
        return 0
    m = resp.match
    if args.explain and resp.rule is not None:
        print(f"matched event: {m.get('event')}  {match_probabilities(m)}  mode: {m.get('mode')} "
              f"({m.get('source')})")
        if m.get("mode") == "adapted" and m.get("exemplar_event"):
            print(f"adapted from the calibrated rule of: {m['exemplar_event']}")
        if m.get("reason"):
            print(f"why: {m['reason']}")
        if resp.rules_by_profile:
            for prof, r in resp.rules_by_profile.items():
                print(f"rule ({prof} profile: {'videos perceived here' if prof == 'video' else 'imported track records'}): "
                      + json.dumps(r))
        else:
            print("rule: " + json.dumps(resp.rule))
    print("weights: " + ", ".join(f"{k}={v:g}" for k, v in resp.weights.items())
          + f"   ({resp.timings_ms.get('total', 0):.0f} ms)")
    for n in resp.notices:
        print(f"note: {n}")
    if not resp.hits:
        print("no video matched")
    if resp.hits:
        print("  #  relevance  span            video                            evidence (rank of ranked; "
              "rule percentile, dense cosine)")
    for h in resp.hits:
        span = f"{h.span_s[0]:6.1f}-{h.span_s[1]:5.1f}s" if h.span_s else " " * 13
        rel = f"{h.relevance:9.0%}" if h.relevance is not None else f"{'-':>9}"
        print(f"{h.rank:3d}. {rel}  {span}  {h.video_id:<32} {evidence_text(h.per_source)}")
        if h.drive:      # one event across files of a drive (strived.drive_hits)
            print(f"       across files of {h.drive['id']}: {h.drive['span_s'][0]:.1f}-{h.drive['span_s'][1]:.1f} s "
                  "drive time = " + " + ".join(f"{p['video_id']} {p['t0']:.1f}-{p['t1']:.1f}s" for p in h.drive["parts"]))
        for g in gates.get(h.video_id, []):
            print(f"       gate {_gate_line(g)}")
        if args.explain and h.steps:  # a sequence rule: which unit realised each step, and when
            for st in h.steps:
                who = "ego" if st["track"] < 0 else f"{st['cls']} #{st['track']}"
                print(f"       step {st['step'] + 1} {st['name']}: {who}  "
                      f"{st['span_s'][0]:.1f}-{st['span_s'][1]:.1f}s  (score {st['score']:.2f})")
            for a in h.absent or []:
                seen = "nothing in scope" if a["track"] is None else \
                    f"{a['cls']} #{a['track']} at {a['time_s']:.1f}s"
                print(f"       absent {a['name']}: factor {a['factor']:.2f} ({seen})")
    return 0

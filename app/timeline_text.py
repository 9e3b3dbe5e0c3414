"""The timeline's words: track labels, a sequence rule's steps and negations, the title line."""

from __future__ import annotations

import numpy as np

MAX_TRACKS = 8          # tracks drawn as their own curves (with the ego and the selected one)


def _track_key(track) -> int:
    try:
        return int(track)
    except (TypeError, ValueError):
        return -1                      # the ego series


def _trace_label(tr) -> str:
    tid = _track_key(tr.track)
    return "ego" if tid < 0 else f"{getattr(tr, 'cls', '') or 'track'} #{tid}"


def _best(combined) -> float:
    """A trace's best per-frame score (0 when it has none)."""
    a = np.asarray(combined, float)
    a = a[np.isfinite(a)]
    return float(a.max()) if a.size else 0.0


def _span_text(tr) -> str:
    t = np.asarray(tr.t, float)
    return f"{t[0]:.1f}–{t[-1]:.1f} s" if len(t) else "never"


def unit_text(track, cls) -> str:
    """The unit of a step or an offender in words: "the ego vehicle" or "car #3"."""
    tid = _track_key(track)
    return "ego" if tid < 0 else f"{cls or 'track'} #{tid}"


def step_text(st: dict, prev: dict | None = None) -> str:
    """One realised step of a sequence rule (``StepMatch.to_dict``), as measured:
    "step 1 lead brakes: car #3 2.1–3.4 s (1.3 s)"; a step seen on one sample only says so
    rather than "lasting 0 s", and one that begins before the previous step (``prev``) ends says
    that too (the steps' anchors are ordered, their spans may overlap)."""
    a, b = (float(v) for v in st["span_s"])
    when = f"at {a:.1f} s (one sample)" if b - a < 0.05 else f"{a:.1f}–{b:.1f} s ({b - a:.1f} s)"
    text = f"step {int(st['step']) + 1} {st.get('name') or ''}: {unit_text(st.get('track'), st.get('cls'))} {when}"
    if prev is not None and a < float(prev["span_s"][1]) - 0.05:
        text += f", begins before step {int(prev['step']) + 1} ends ({float(prev['span_s'][1]):.1f} s)"
    return text


def absent_text(ab: dict) -> str:
    """One negation at the best assignment (``AbsenceMatch.to_dict``): its window around its
    step's anchor, the strongest offender there (or none) and the factor it put on the score."""
    a, b = ab["window_s"]
    name = ab.get("name") or f"negation {int(ab.get('absent', 0)) + 1}"
    where = f"{float(a):.1f}–{float(b):.1f} s (around step {int(ab.get('step', 0)) + 1})"
    if ab.get("track") is None:
        who = "none there"
    else:
        at = f" at {float(ab['time_s']):.1f} s" if ab.get("time_s") is not None else ""
        who = f"{unit_text(ab['track'], ab.get('cls'))} there{at}"
    return f"not {name} in {where}: {who} · score ×{float(ab.get('factor', 1.0)):.2f}"


def sequence_parts(explanation) -> tuple[list[dict], list[dict]]:
    """(steps, negations) of a sequence rule's explanation as dicts; ([], []) otherwise."""
    fn = getattr(explanation, "steps_dicts", None)
    if fn is None:
        return [], []
    steps, absent = fn()
    return list(steps or []), list(absent or [])


def title_text(explanation, traces, order, title: str, unknown: str | None, cuts, steps, absent,
               lanes) -> str:
    """The line above the plots: the score (or why it is unknown), the event span, the peak
    track, the track count, the shot cuts, the steps, and how to read and use the plots."""
    score = getattr(explanation, "score", None)
    span = getattr(explanation, "span_s", None)
    peak = getattr(explanation, "peak_track", None)
    bits = [title] if title else []
    if unknown:
        bits.append(f"rule score unknown ({unknown})")
    elif score is not None:
        bits.append(f"rule score {float(score):.3f}")
    if span:
        bits.append(f"event {span[0]:.1f}–{span[1]:.1f} s")
    if peak is not None:
        bits.append(f"peak track #{peak}")
    n_obj = sum(1 for tid in order if tid >= 0)
    if n_obj > MAX_TRACKS:
        bits.append(f"{n_obj} tracks: the {MAX_TRACKS} best in colour")
    if not traces:
        bits.append("no candidate track for this rule")
    if cuts:
        bits.append("edited clip: shot cut at " + ", ".join(f"{c:.1f}" for c in cuts) + " s "
                    "(dotted; no track continues across a cut)")
    if steps:
        bits.append(f"sequence of {len(steps)} steps" +
                    (f", {len(absent)} negation(s)" if absent else ""))
    bits.append("time axis in s · gates: high = met" + (" · steps: click a band" if lanes else "")
                + " · Shift+drag: select a span (More like this)")
    return "   ·   ".join(bits)

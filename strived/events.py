"""The event inventory: the paper's 21 events plus the finer events the product needs.

Each event is a human-written rule *form* (entity, gates, soft scores: structure fixed) with
uncalibrated starting numbers, a description, a lexicon (phrases that name it in a caption or a
query) and, where offline perception cannot measure what the event needs, a stated weakness.
Calibration (`calibrate.py`) fits only the numbers of a form; the starting numbers are kept for the
"without calibrated library" ablation.

Sign conventions (docs/formats.md): ``loc_x`` + = right of ego, so a vehicle cutting in from the left
has ``loc_x`` rising towards 0 (direction "positive"), from the right falling towards 0
("negative"). Ego ``heading``/``yaw_rate`` + = left.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

VEHICLES = ["car", "truck", "bus", "motorcycle"]
FOUR_WHEEL = ["car", "truck", "bus"]
VRU = ["pedestrian", "bicycle", "motorcycle"]


@dataclass(frozen=True)
class EventDef:
    """One library event: its rule form (with starting numbers) and how people name it."""

    key: str
    name: str
    description: str
    form: dict
    lexicon: tuple[str, ...]
    examples: tuple[str, ...] = ()
    weakness: str | None = None
    paper: bool = False
    parent: str | None = None
    subject: str = "object"          # "ego" | "object": who performs the event
    tags: tuple[str, ...] = field(default_factory=tuple)
    parts: tuple[str, ...] = ()      # composite (sequence) events: the events they compose


def _ent(role="object", classes=None, selection="any", agg="any") -> dict:
    return {"role": role, "class_filter": list(classes) if classes else None,
            "selection": selection, "agg_mode": agg}


def _gate(fld, op, value, frac=None, secs=None) -> dict:
    """A hard gate; ``frac``: held on that share of the clip's frames; ``secs``: held over an
    unbroken run of that many seconds (a duration: prefer it wherever the event has one)."""
    g = {"field": fld, "op": op, "value": float(value), "min_time_fraction": frac}
    if secs is not None:
        g["min_seconds"] = float(secs)
    return g


def _tc(fld, window_s, magnitude, direction=None, weight=1.0, min_fraction=None) -> dict:
    return {"type": "temporal_change", "field": fld, "window_seconds": float(window_s),
            "magnitude": float(magnitude), "direction": direction, "weight": float(weight),
            "min_fraction": min_fraction}


def _mt(fld, direction, min_duration_s, weight=1.0, min_fraction=None) -> dict:
    return {"type": "monotonic_trend", "field": fld, "direction": direction,
            "min_duration_seconds": float(min_duration_s), "weight": float(weight),
            "min_fraction": min_fraction}


def _form(key, description, entity, gates, scores) -> dict:
    return {"event": key, "description": description, "entity": entity,
            "hard_gates": gates, "soft_scores": scores}


def _ev(key, name, description, entity, gates, scores, lexicon, examples=(), weakness=None,
        paper=False, parent=None, subject=None, tags=()) -> EventDef:
    subj = subject or ("ego" if entity["role"] == "ego" else "object")
    return EventDef(key, name, description, _form(key, description, entity, gates, scores),
                    tuple(lexicon), tuple(examples), weakness, paper, parent, subj, tuple(tags))


def make_step(name, entity, gates, scores, gap=None, same_track=False, weight=1.0) -> dict:
    d = {"name": name, "entity": entity, "hard_gates": gates, "soft_scores": scores,
         "weight": float(weight)}
    if gap is not None:
        d["gap"] = {"min_seconds": float(gap[0]), "max_seconds": float(gap[1])}
        d["same_track"] = bool(same_track)
    return d


def _absent(name, entity, gates, scores=(), step=0, before=0.0, after=0.0) -> dict:
    return {"name": name, "entity": entity, "hard_gates": gates, "soft_scores": list(scores),
            "step": int(step), "before_seconds": float(before), "after_seconds": float(after)}


def _seq_ev(key, name, description, steps, lexicon, examples=(), absent=(), weakness=None,
            parts=(), subject="ego", tags=()) -> EventDef:
    form = {"event": key, "description": description, "sequence": list(steps)}
    if absent:
        form["absent"] = list(absent)
    return EventDef(key, name, description, form, tuple(lexicon), tuple(examples), weakness,
                    False, None, subject, tuple(tags), tuple(parts))


def as_step(rule: dict, name: str | None = None, gap=None, same_track: bool = False) -> dict:
    """A single-pattern rule form as a sequence step: the same entity, gates and soft scores,
    without what a step cannot carry (consensus aggregation, ``min_fraction``; a gate's
    ``min_time_fraction`` or ``min_seconds`` becomes a per-frame condition at the step's anchor:
    a step is realised at one time)."""
    ent = dict(copy.deepcopy(rule.get("entity") or {}))
    ent["agg_mode"] = "any"
    gates = [{k: v for k, v in g.items() if k not in ("min_time_fraction", "min_seconds")}
             for g in rule.get("hard_gates", [])]
    softs = [{k: v for k, v in c.items() if k != "min_fraction"} for c in rule.get("soft_scores", [])]
    return make_step(name or rule.get("event") or "step", ent, copy.deepcopy(gates), copy.deepcopy(softs),
                 gap, same_track)


_NO_SIGNED_SPEED = ("ego speed from visual odometry is unsigned in most sources; reverse is only "
                    "visible where the records carry signed speed (CAN, some SLAM poses)")

EVENTS: tuple[EventDef, ...] = (
    # ---- the paper's 21 events -------------------------------------------------------------
    _ev("hard_brake", "hard brake", "The ego vehicle decelerates suddenly and strongly.",
        _ent("ego"), [_gate("accel", "lt", -2.5)], [_tc("speed", 3, 8.0, "negative")],
        [r"hard[- ]?brak\w*", r"brak\w* (hard|sharply|suddenly|abruptly|heavily)",
         r"slam\w* (on )?the brakes?", r"emergency brak\w*", r"sudden(ly)? brak\w*",
         r"brak\w*", r"decelerat\w*"],
        ["the ego car brakes hard", "sudden braking", "we slam on the brakes"],
        weakness="ego speed from monocular video is an optical-flow estimate (noisy scale)",
        paper=True, tags=("ego", "longitudinal")),
    _ev("swerving", "swerving", "The ego vehicle weaves or makes erratic lateral movements; "
        "the whole scene shifts together.",
        _ent("ego"), [_gate("speed", "gt", 3.0)],
        [_tc("yaw_rate", 2, 0.3), _tc("heading", 3, 0.25, weight=0.5)],
        [r"swerv\w*", r"weav\w*", r"zig[- ]?zag\w*", r"jerk\w* the (steering )?wheel"],
        ["the ego car swerves", "we weave across the lane"],
        paper=True, tags=("ego", "lateral")),
    _ev("pedestrian_crossing", "pedestrian crossing",
        "A pedestrian crosses the road in front of the ego vehicle.",
        _ent(classes=["pedestrian"]), [_gate("distance", "lt", 25.0), _gate("abs_loc_x", "lt", 2.0)],
        [_tc("loc_x", 4, 6.0)],
        [r"pedestrians? (is |are )?(crossing|cross\w*|walk\w* across|running across|jaywalk\w*)",
         r"(crossing|jaywalking) pedestrians?", r"jaywalk\w*", r"people (are )?crossing",
         r"(man|woman|person|child|kid) (is )?(crossing|walks across|runs across)",
         r"(someone|somebody|person|people|man|woman|child|kid|kids|children) on foot"],
        ["a pedestrian crosses in front of us", "someone walks across the street",
         "a person on foot steps out in front of us"],
        paper=True, tags=("crossing", "vru")),
    _ev("near_miss", "near miss", "A close call: an object comes very close without contact.",
        _ent(classes=VEHICLES + ["pedestrian", "bicycle"]), [_gate("distance", "lt", 5.0)],
        [_tc("distance", 3, 15.0, "negative")],
        [r"near[- ]?miss\w*", r"close call", r"narrowly (avoid|miss)\w*", r"almost (hit|collid|crash)\w*",
         r"nearly (hit|collid|crash)\w*", r"avoid\w* (a |the )?(collision|crash|accident)"],
        ["a near miss with another car", "we almost hit a cyclist"],
        weakness="no contact check: a near miss and a collision look alike in ranged tracks",
        paper=True, tags=("proximity",)),
    _ev("cut_in", "cut-in", "A surrounding vehicle moves into the ego lane just ahead.",
        _ent(classes=VEHICLES), [_gate("distance", "lt", 40.0), _gate("abs_loc_x", "lt", 1.5)],
        [_tc("abs_loc_x", 4, 6.0, "negative"), _tc("loc_x", 4, 14.0, weight=0.5)],
        [r"cut[s]?[- ]?in\w*", r"cutting in", r"cuts? (into|in front)", r"merg\w* (into|in front)",
         r"(moves|pulls|swerves|changes lanes?) (in|into) (our|the ego|my) lane",
         r"into (our|the ego|my) lane",
         r"cut\w* (us|me|ego|the ego|our (car|vehicle)) (up|off)\b", r"cut\w* off (us|me|the ego)\b",
         r"(squeez|push|barg|nip|nipp|dart|jump|slot|sneak|tuck|shov|forc|wedg|muscl|elbow|slip|div|"
         r"swing|swung|pull|mov|duck|lung|swerv|veer|lurch|weav)\w* (right |straight )?(in|into) "
         r"(right |just |directly )?(in )?(front|ahead|"
         r"(our|my|the ego'?s?|ego'?s?) (lane|path)|the (gap|space))",
         r"(squeez|push|barg|nip|nipp|dart|jump|slot|sneak|tuck|shov|forc|wedg|muscl|elbow|slip)\w* in"
         r"\b(?! (the|a|an|his|her|their|its) )",
         r"(forc|muscl|elbow|push|squeez|barg|nos|inch|wedg|bull)\w* (its|their|his|her|a) way "
         r"(in|into|ahead|in front)"],
        ["a car cuts in front of us", "a vehicle merges into our lane ahead",
         "someone cuts us off", "a van squeezes in just ahead of us"],
        weakness="an ego turn or lane change sweeps every track sideways; gates cannot say "
                 "'while the ego is straight'", paper=True, tags=("lateral",)),
    _ev("cut_out", "cut-out", "A surrounding vehicle ahead moves out of the ego lane.",
        _ent(classes=VEHICLES), [_gate("distance", "lt", 40.0), _gate("abs_loc_x", "lt", 1.5)],
        [_tc("abs_loc_x", 4, 6.0, "positive")],
        [r"cut[s]?[- ]?out\w*", r"(leaves|exits|moves out of|changes out of|pulls out of) (our|the ego|my) lane",
         r"(car|vehicle|truck) ahead (changes lanes?|moves (left|right|over))"],
        ["the car in front leaves our lane", "the lead vehicle changes out of our lane"],
        paper=True, tags=("lateral",)),
    _ev("traffic_disruption", "traffic disruption",
        "A vehicle blocks or disrupts the traffic flow in the ego lane, forcing the ego to slow.",
        _ent(classes=VEHICLES), [_gate("distance", "lt", 30.0), _gate("abs_loc_x", "lt", 2.0)],
        [_tc("speed", 4, 5.0, "negative"), _tc("distance", 4, 10.0, "negative", weight=0.5)],
        [r"block\w* (the )?(road|lane|traffic)", r"traffic (disruption|jam|congestion)",
         r"(stalled|stopped|broken[- ]down|double[- ]parked) (car|vehicle|truck)", r"obstruct\w*",
         r"disrupt\w*"],
        ["a stalled truck blocks our lane", "traffic is disrupted ahead"],
        weakness="'blocking' is a scene-level judgement; approximated by an in-lane object "
                 "while the ego slows", paper=True, tags=("scene",)),
    _ev("lane_change", "lane change", "A vehicle (the ego or another) moves smoothly into an "
        "adjacent lane.",
        _ent(classes=FOUR_WHEEL, agg="consensus"), [],
        [_tc("loc_x", 4, 3.5, min_fraction=0.3)],
        [r"lane[- ]chang\w*", r"chang\w* lanes?", r"switch\w* lanes?", r"moves? (over )?(one|a) lane",
         r"(mov|switch|shift|pull|swing|swung|slid|slide|steer|merg|go|goes|went|head|drift|hop|"
         r"nudg|ease|eas)\w* (over |across |out )?(in)?to (the|an?|another) (next |other |adjacent |"
         r"neighbou?ring |outside |inside |fast |slow |overtaking |passing |empty |clear |free |"
         r"left[- ]hand |right[- ]hand |left |right )+lane",
         r"from (the|a|an|one) (\w+ )?lane (in)?to (the|a|an|another) (\w+ )?lane"],
        ["a lane change", "the car switches lanes"],
        weakness="without an ego lane index the ego's lane change is read from every track "
                 "shifting together (consensus)", paper=True, tags=("lateral",)),
    _ev("object_approach", "object approach", "A surrounding object rapidly approaches the ego.",
        _ent(), [], [_tc("distance", 4, 20.0, "negative"), _mt("distance", "decreasing", 3.0, 0.5)],
        [r"approach\w*", r"clos\w* in", r"(getting|gets|coming) closer", r"clos\w* (the )?(gap|distance)"],
        ["an object approaches us fast", "a vehicle closes in on the ego car"],
        paper=True, tags=("longitudinal",)),
    _ev("collision", "collision", "Direct physical impact between road users or with an object.",
        _ent(classes=VEHICLES + ["pedestrian", "bicycle"]), [_gate("distance", "lt", 3.0)],
        [_tc("distance", 2, 10.0, "negative"), _tc("loc_x", 2, 4.0, weight=0.5)],
        [r"collid\w*", r"collision\w*", r"crash\w*", r"accident\w*", r"\bhits?\b", r"\bhitting\b",
         r"smash\w*", r"impact\w*", r"\bstruck\b", r"rear[- ]?end\w*", r"sideswip\w*", r"t[- ]?bon\w*",
         r"run (over|into)", r"ran (over|into)", r"knock\w* (down|over)",
         r"pile[- ]?ups?", r"wreck\w*", r"fender[- ]?bender\w*", r"prang\w*", r"strik(e|es|ing)\b",
         r"(rams?|rammed|ramming)\b", r"mow\w* down", r"(plough|plow|slam|bump|careen|barrel|smack|"
         r"whack|thump|bang)\w* into", r"(bump|bang|smack|clip|clipp)\w* (a|an|the|another|each)\b"],
        ["a traffic accident", "two cars crash"],
        weakness="contact is not observable in ranged tracks and ranging degrades at contact "
                 "range (occlusion, boxes cut by the image border)", paper=True, tags=("proximity",)),
    _ev("emergency_vehicle", "emergency vehicle", "An ambulance, fire truck or police car is "
        "present and moving.",
        _ent(classes=["truck", "car", "emergency_vehicle", "ambulance", "police", "fire_truck"]),
        [_gate("distance", "lt", 40.0)], [_tc("distance", 4, 20.0)],
        [r"ambulance\w*", r"fire ?(truck|engine)s?", r"police( car)?s?", r"emergency vehicles?", r"siren\w*"],
        ["an ambulance passes", "a police car with sirens"],
        weakness="no siren, light-bar or livery class in the offline detector (COCO): the rule "
                 "only sees a moving car or truck", paper=True, tags=("scene",)),
    _ev("evasive_maneuver", "evasive maneuver", "The ego driver steers or brakes sharply to avoid "
        "an obstacle.",
        _ent("ego"), [_gate("speed", "gt", 3.0)],
        [_tc("yaw_rate", 2, 0.3), _tc("speed", 2, 4.0, "negative", weight=0.7)],
        [r"evasive\w*", r"(steer\w*|swerv\w*|brak\w*) to avoid", r"dodg\w*", r"take(s)? evasive action"],
        ["the driver steers to avoid an obstacle", "an evasive manoeuvre"],
        paper=True, tags=("ego",)),
    _ev("sudden_speed_change", "sudden speed change", "The ego abruptly accelerates or decelerates.",
        _ent("ego"), [], [_tc("speed", 2, 6.0)],
        [r"sudden(ly)? (speed|accelerat|decelerat)\w*", r"speed\w* up (suddenly|rapidly)",
         r"rapid(ly)? accelerat\w*", r"abrupt\w* (accelerat|decelerat|speed)\w*", r"floor\w* it"],
        ["the ego suddenly speeds up", "an abrupt speed change"],
        paper=True, tags=("ego", "longitudinal")),
    _ev("lateral_movement", "lateral movement", "A surrounding vehicle (not the ego) moves "
        "noticeably sideways.",
        _ent(classes=VEHICLES), [_gate("distance", "lt", 30.0)], [_tc("loc_x", 2, 4.0)],
        [r"(moves|drifts|slides|veers) (sideways|laterally|left|right)", r"lateral\w* (movement|motion|drift)",
         r"drift\w* (into|across|toward)", r"veer\w*"],
        ["a car drifts sideways", "a vehicle veers to the side"],
        paper=True, tags=("lateral",)),
    _ev("sudden_stop", "sudden stop", "The ego stops abruptly from speed.",
        _ent("ego"), [_gate("speed", "lt", 0.5)], [_tc("speed", 3, 8.0, "negative")],
        [r"sudden(ly)? stop\w*", r"(abrupt|emergency|quick|full) stop\w*", r"stops? (suddenly|abruptly|dead)",
         r"(comes?|came) to a (sudden |abrupt |complete )?(halt|stop)"],
        ["the ego car stops suddenly", "an abrupt stop"],
        paper=True, tags=("ego", "longitudinal")),
    _ev("loss_of_control", "loss of control", "A vehicle loses control: spins out, skids, drifts.",
        _ent("ego"), [], [_tc("yaw_rate", 1, 0.6), _tc("heading", 2, 1.0, weight=0.5)],
        [r"(los\w*|lost) (of )?control", r"out of control", r"spin\w* out", r"spun( out)?", r"skid\w*",
         r"fishtail\w*", r"hydroplan\w*", r"aquaplan\w*"],
        ["a car loses control", "the vehicle spins out"],
        weakness="records carry no object orientation, so another vehicle's spin is invisible; "
                 "the form reads the ego's yaw only", paper=True, tags=("ego",)),
    _ev("rollover", "rollover", "A vehicle rolls over, tips onto its side or flips.",
        _ent(classes=VEHICLES), [_gate("distance", "lt", 30.0)], [_tc("bbox_area", 1, 20000.0)],
        [r"roll\w* over", r"rollover", r"flip\w*( over)?", r"overturn\w*", r"tip\w* (over|onto)",
         r"on (its|their) (side|roof)", r"capsiz\w*"],
        ["a car rolls over", "a truck tips onto its side"],
        weakness="no orientation field and no rollover training class: a sudden box-shape change "
                 "is the only proxy; expect low AP", paper=True, tags=("scene",)),
    _ev("dynamic_object_crossing", "dynamic object crossing", "An animal, debris or other "
        "non-vehicle object crosses the road.",
        _ent(classes=["other", "animal", "dog", "cat", "deer", "bird", "horse", "cow"]),
        [_gate("distance", "lt", 30.0)], [_tc("loc_x", 4, 6.0)],
        [r"animals?", r"\bdogs?\b", r"\bdeer\b", r"\bcats?\b", r"debris", r"(object|thing)s? (cross|fly|roll)\w*",
         r"\bcows?\b", r"\bhorses?\b", r"\bbirds?\b"],
        ["a dog runs across the road", "debris crosses the lane"],
        weakness="the offline COCO detector has animals but not debris; tracks of class 'other' "
                 "in imported records are the usual source", paper=True, tags=("crossing",)),
    _ev("object_departure", "object departure", "A surrounding object moves away from the ego.",
        _ent(), [], [_tc("distance", 4, 20.0, "positive"), _mt("distance", "increasing", 3.0, 0.5)],
        [r"(moves?|drives?|pulls?|speeds?) away", r"depart\w*", r"recede\w*", r"(leaves|leaving) the (scene|view|frame)",
         r"(gets|getting) farther"],
        ["a car drives away from us", "the vehicle departs"],
        paper=True, tags=("longitudinal",)),
    _ev("reverse", "reverse", "A vehicle is reversing or backing up.",
        _ent("ego"), [_gate("speed", "lt", -0.5)], [_tc("speed", 4, 2.0, "negative")],
        [r"revers\w*", r"back\w* up", r"backward\w*", r"back\w* out"],
        ["the ego car reverses", "a vehicle backs up"],
        weakness=_NO_SIGNED_SPEED, paper=True, tags=("ego",)),
    _ev("sharp_turn", "sharp turn", "A vehicle makes a sharp or aggressive turn.",
        _ent("ego"), [_gate("speed", "gt", 2.0)], [_tc("heading", 4, 1.2), _tc("yaw_rate", 2, 0.3, weight=0.5)],
        [r"sharp(ly)? turn\w*", r"turn\w* sharply", r"aggressive(ly)? turn\w*", r"hairpin", r"tight turn"],
        ["a sharp turn", "the ego turns aggressively"],
        paper=True, tags=("ego",)),
    # ---- finer events the product and the dev benchmark need ---------------------------------
    _ev("cut_in_left", "cut-in from the left", "A vehicle moves into the ego lane from the left.",
        _ent(classes=VEHICLES), [_gate("distance", "lt", 40.0), _gate("abs_loc_x", "lt", 1.5)],
        [_tc("abs_loc_x", 4, 6.0, "negative"), _tc("loc_x", 4, 4.0, "positive", weight=0.7)],
        [], ["a car cuts in from the left", "a vehicle merges into our lane from the left side"],
        parent="cut_in", tags=("lateral", "left")),
    _ev("cut_in_right", "cut-in from the right", "A vehicle moves into the ego lane from the right.",
        _ent(classes=VEHICLES), [_gate("distance", "lt", 40.0), _gate("abs_loc_x", "lt", 1.5)],
        [_tc("abs_loc_x", 4, 6.0, "negative"), _tc("loc_x", 4, 4.0, "negative", weight=0.7)],
        [], ["a car cuts in from the right", "a vehicle merges into our lane from the right side"],
        parent="cut_in", tags=("lateral", "right")),
    _ev("ego_turn_left", "ego left turn", "The ego vehicle turns left (e.g. at a junction).",
        _ent("ego"), [], [_tc("heading", 8, 1.2, "positive")],
        [], ["we turn left at the intersection", "the ego car makes a left turn"],
        parent="sharp_turn", tags=("ego", "left")),
    _ev("ego_turn_right", "ego right turn", "The ego vehicle turns right (e.g. at a junction).",
        _ent("ego"), [], [_tc("heading", 8, 1.2, "negative")],
        [], ["we turn right at the junction", "the ego car makes a right turn"],
        parent="sharp_turn", tags=("ego", "right")),
    _ev("ego_lane_change", "ego lane change", "The ego vehicle changes lanes; nearby tracks shift "
        "sideways together.",
        _ent(classes=FOUR_WHEEL, agg="consensus"), [], [_tc("loc_x", 4, 3.5, min_fraction=0.3),
                                                        _tc("heading", 4, 0.15, weight=0.3)],
        [], ["the ego car changes lanes", "we move over one lane"],
        weakness="no ego lane index; read from consensus shifts of other tracks, which an ego "
                 "turn also produces", parent="lane_change", subject="ego", tags=("ego", "lateral")),
    _ev("lead_brake", "lead vehicle brakes", "The vehicle ahead in the ego lane slows down sharply.",
        _ent(classes=FOUR_WHEEL), [_gate("distance", "lt", 40.0), _gate("abs_loc_x", "lt", 1.5)],
        [_tc("distance", 3, 8.0, "negative"), _tc("speed", 4, 4.0, "negative", weight=0.5)],
        [r"(car|vehicle|truck|bus|lead\w*) (ahead|in front)( of us)? (brakes|is braking|slows)",
         r"lead (car|vehicle) brak\w*", r"brake lights"],
        ["the car ahead brakes", "the lead vehicle slows down suddenly"],
        parent="hard_brake", tags=("longitudinal",)),
    _ev("ego_brake", "ego brakes", "The ego vehicle brakes and slows down markedly.",
        _ent("ego"), [_gate("accel", "lt", -1.0)], [_tc("speed", 4, 6.0, "negative")],
        [], ["the ego car slows down sharply", "we brake and slow down"],
        parent="hard_brake", tags=("ego", "longitudinal")),
    _ev("cyclist_crossing", "cyclist crossing", "A cyclist rides across the road ahead of the ego.",
        _ent(classes=["bicycle"]), [_gate("distance", "lt", 25.0), _gate("abs_loc_x", "lt", 2.0)],
        [_tc("loc_x", 4, 6.0)],
        [r"cyclists? (is |are )?(crossing|cross\w*|rid\w* across)", r"bik(e|er|es)\w* (crossing|cross\w*|across)",
         r"bicycl\w* (crossing|cross\w*|across)"],
        ["a cyclist rides across the street", "a bike crosses in front of us"],
        parent="dynamic_object_crossing", tags=("crossing", "vru")),
    _ev("crossing_vehicle", "crossing vehicle", "Another vehicle crosses the ego's path, e.g. at an "
        "intersection.",
        _ent(classes=VEHICLES), [_gate("distance", "lt", 40.0), _gate("abs_loc_x", "lt", 2.0)],
        [_tc("loc_x", 4, 12.0)],
        [r"cross\w* (our|the ego'?s?|my) path", r"cross traffic", r"(car|vehicle|truck)s? cross\w*",
         r"crossing (car|vehicle|truck)s?"],
        ["a car crosses our path at the junction", "cross traffic at the intersection"],
        parent="dynamic_object_crossing", tags=("crossing",)),
    _ev("overtaken_left", "overtaken on the left", "A vehicle passes the ego on its left side.",
        _ent(classes=VEHICLES), [_gate("distance", "lt", 8.0), _gate("loc_x", "lt", -1.5)],
        [_tc("distance", 4, 10.0, "positive"), _mt("distance", "increasing", 2.0, 0.5)],
        [r"overtak\w*", r"pass\w* (us|the ego|me)", r"(passes|passing|overtakes) on the (left|right)",
         r"undertak\w*", r"(get|gets|got|getting|are|is|was|were|being|been) (passed|overtaken)",
         r"(zoom|whizz|whiz|zip|zipp|fly|flies|flew|flying|speed|sped|shoot|shot|blast|rac|tear|"
         r"tore|sail|breez|blow|blew|barrel|bomb|scream|rocket|hurtl|roar|nip|nipp|slip|glid|"
         r"cruis|mov|driv|drove|go|goes|went|going|come|comes|came|coming|pull|pass)\w* (straight |"
         r"right )?(past|by|alongside|round)( us| me| ego| the ego| our (car|vehicle))?\b(?! (a|the) )"],
        ["someone overtakes us on the left", "a car passes us on our left",
         "a motorbike zooms past us on the left"],
        weakness="side is read from any track left of the ego, not from the passing track itself",
        parent="object_departure", tags=("left",)),
    _ev("overtaken_right", "overtaken on the right", "A vehicle passes the ego on its right side.",
        _ent(classes=VEHICLES), [_gate("distance", "lt", 8.0), _gate("loc_x", "gt", 1.5)],
        [_tc("distance", 4, 10.0, "positive"), _mt("distance", "increasing", 2.0, 0.5)],
        [], ["a vehicle overtakes us on the right", "a car passes the ego on its right side"],
        weakness="side is read from any track right of the ego, not from the passing track itself",
        parent="object_departure", tags=("right",)),
    _ev("close_pass", "close pass", "A vehicle passes extremely close beside the ego.",
        _ent(classes=VEHICLES), [_gate("distance", "lt", 6.0), _gate("abs_loc_x", "lt", 2.5)],
        [_tc("distance", 3, 15.0)],
        [r"clos\w* pass\w*", r"pass\w* (extremely |very |dangerously )?clos\w*", r"inches (away|from)",
         r"squeez\w* (past|by)",
         r"(brush|skim|shav|graz|scrap|thread)\w* (past|by|alongside)",
         r"(pass|zoom|whizz|whiz|zip|fly|flies|flew|go|goes|went|come|comes|came|driv|drove|overtak|"
         r"undertak|speed|sped|rac|shoot|shot|mov|cut|nip|slip)\w* (past |by |alongside )?[^.;]{0,30}\b"
         r"(too |really |very |dangerously |extremely |uncomfortably |way too )?(close|tight|near)\b",
         r"(close|tight|narrow|near) (overtak\w*|undertak\w*|squeeze)",
         r"(within|by) (a |an )?(whisker|hair'?s?( breadth)?|inch(es)?|cm|centimet\w*|millimet\w*)",
         r"(barely|hardly|not much|no) (any )?(room|space|gap|clearance) (to spare|between)?",
         r"(inch(es)?|centimet\w*|millimet\w*|cm|a whisker|a hair) to spare"],
        ["a truck passes very close to us", "a close pass by a bus",
         "a van brushes past us with barely any room"],
        parent="near_miss", tags=("proximity",)),
    _ev("ego_collision", "ego collision", "The ego vehicle itself collides with another road user.",
        _ent(classes=VEHICLES + ["pedestrian", "bicycle"]), [_gate("distance", "lt", 2.0)],
        [_tc("distance", 2, 10.0, "negative"), _tc("speed", 2, 4.0, "negative", weight=0.5)],
        [r"(we|ego[- ]?(car|vehicle)?|our car) (collides?|crash\w*|hits?)"],
        ["our car hits another vehicle", "the ego car crashes into someone"],
        weakness=("contact is not observable; ego involvement is inferred from a track reaching "
                  "contact range while the ego decelerates"), parent="collision", subject="ego",
        tags=("proximity",)),
    _ev("rear_end", "rear-end collision", "The ego vehicle runs into the vehicle ahead.",
        _ent(classes=FOUR_WHEEL), [_gate("distance", "lt", 2.0), _gate("abs_loc_x", "lt", 1.5)],
        [_tc("distance", 3, 10.0, "negative")],
        [r"rear[- ]?end\w*", r"shunt\w*",
         r"(into|hits?|hitting|bump\w*|smash\w*|rams?|rammed|ramming|clip\w*|tap\w*|nudg\w*|"
         r"strik\w*|struck|knock\w*) (the |a )?(back|rear|tail|boot|trunk)( end)? (of|bumper of) "
         r"(the|a|an|that|this|another)\b",
         r"((hit|bump|rams?\b|rammed|ramming|tap|nudg|clip|shunt|smack|knock)\w*( into)?|(crash|smash|"
         r"slam|plough|plow|run|runs|running|ran|driv\w*|drove|go|goes|went|careen|barrel|bang|slid|skid)"
         r"\w* (straight |right |hard )?into) (the|a|an|that) (\w+ )?(car|vehicle|truck|van|bus|lorry|"
         r"suv|taxi|one) (ahead|in front)"],
        ["we rear-end the car ahead", "ego runs into the back of a car",
         "our car bumps into the back of the truck in front"],
        weakness="contact is not observable; see collision", parent="collision", subject="ego",
        tags=("proximity",)),
    # Standing still is a duration, not a share of the clip: a clip that drives for 30 s and then
    # waits 8 s at a light is a true "we are standing still" (as a fraction of the clip it never
    # was). A vehicle standing still, waiting (a light, a queue, a give-way) is stopped for several
    # seconds; a rolling stop or a stop-line pause lasts ~1-2 s; 0.5 m/s is below walking pace
    # (~1.4 m/s) and at the video profile's speed floor (VIDEO_SPEED_FLOOR_MPS), so a stopped car's
    # speed estimate stays under it. Held for 3 s unbroken (min_seconds: a run of samples).
    _ev("ego_stationary", "ego stationary", "The ego vehicle stands still for several seconds "
        "(stopped and waiting, e.g. at a light or in a queue).",
        _ent("ego"), [_gate("speed", "lt", 0.5, secs=3.0)], [],
        [r"(standing|stand\w*|sits?|sitting|waiting|wait\w*) (still|at|in)", r"stationary", r"parked",
         r"(at|to) a (standstill|stop)", r"not moving", r"idl\w*",
         r"(stood|stays?|stayed|staying|remain\w*|kept|keeps?|held|holds?|sat|sits?|sitting|stuck|"
         r"waits?|waiting|stands?|standing|queu\w*) (completely |totally |perfectly |dead )?"
         r"(still|stopped|stationary|motionless|immobile|unmoving|put|at a standstill|halted)",
         r"(is|are|was|were|'re|'s|been|being) (completely |totally |perfectly |fully )?"
         r"(stopped|stationary|motionless|immobile|unmoving|at a standstill|halted|parked)",
         r"motionless", r"standstill", r"(does ?n[o']t|did ?n[o']t|do ?n[o']t|never|won't|not) "
         r"(move|moving|budg\w*)", r"(no|zero) (movement|motion)"],
        ["the ego car is standing still", "we wait at a red light",
         "the dashcam car sits motionless"],
        weakness="a state, not a change: a gates-only form (S_track = 1), so every clip that "
                 "stands still for 3 s ties", subject="ego", tags=("ego", "state")),
)

EVENTS = EVENTS + (
    # "for 90 % of the clip" is clip-relative by this event's definition: the whole clip is
    # uneventful cruising, so the share of the clip is the physical quantity here (not a duration)
    _ev("steady_driving", "steady driving", "The ego drives steadily for the whole clip (normal "
        "cruising, nothing happens).",
        _ent("ego"), [_gate("speed", "ge", 3.0, 0.9)], [],
        [r"uneventful", r"nothing (really )?happens", r"normal (driving|cruising)", r"cruis\w*",
         r"keep\w* (the|our|its) lane", r"steady (driving|speed)",
         r"nothing (much |really |at all |special |unusual )?(happen\w*|going on|goes on|of note|"
         r"interesting|unusual|eventful|notable|to see)", r"(no|without( any)?) (events?|incidents?|"
         r"drama|action|hazards?|problems?|issues?|surprises?|excitement)\b",
         r"(plain|ordinary|regular|routine|normal|everyday|boring|quiet|calm|smooth|uneventful|"
         r"peaceful|relaxed|steady|uneventful|dull|typical|standard|unremarkable|easy)( \w+)? "
         r"(driv\w*|cruis\w*|commut\w*|journey|trip|ride|motoring|run)",
         r"(constant|steady|same|even|consistent) (speed|pace)", r"(just|simply) (driving|cruising)"],
        ["normal cruising, nothing happens", "uneventful driving",
         "an ordinary journey with no incidents"],
        weakness="the DSL scores the presence of a pattern, not the absence of events: this "
                 "gates-only form finds clips where the ego keeps moving; 'nothing happens' must "
                 "come from the other retrieval sources", subject="ego", tags=("ego", "state")),
)

EVENT_KEYS: tuple[str, ...] = tuple(e.key for e in EVENTS)
PAPER_EVENT_KEYS: tuple[str, ...] = tuple(e.key for e in EVENTS if e.paper)
_BY_KEY = {e.key: e for e in EVENTS}


def get_event(key: str) -> EventDef:
    """The inventory entry for ``key``; raises KeyError naming the valid keys."""
    try:
        return _BY_KEY[key]
    except KeyError:
        import difflib

        close = difflib.get_close_matches(str(key), EVENT_KEYS, n=3, cutoff=0.6)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise KeyError(f"unknown event {key!r}{hint} (valid: {', '.join(EVENT_KEYS)})") from None


def starting_rule(key: str) -> dict:
    """A deep copy of the event's rule form with its uncalibrated starting numbers."""
    return copy.deepcopy(get_event(key).form)


# ---- composite events: temporal composition and scoped negation (sequence rules) -------------
# Each is an ordered sequence of steps (a fragment realised by one unit at one anchor time) with
# gaps between the anchors, and optionally negations that must not hold around a step
# (docs/rules.md, "Sequences"). Lexicons name the composed phrasing; the matcher also composes
# queries from their parts ("X then Y", "Y after X", "X without Y": see compose.py).

_BRAKES = make_step("ego brakes", _ent("ego"), [_gate("accel", "lt", -1.0)],
                [_tc("speed", 3, 4.0, "negative")])
_VEH_AHEAD = _ent(classes=FOUR_WHEEL + ["motorcycle"])

EVENTS = EVENTS + (
    _ev("ego_pull_away", "ego pulls away", "The ego vehicle starts moving from a standstill.",
        _ent("ego"), [_gate("speed", "lt", 0.5)], [_tc("speed", 4, 4.0, "positive")],
        [r"pull\w* away", r"(drive|drives|driving|drove) off", r"(start|starts|started|starting) "
         r"(moving|driving|to move|to drive|off)", r"set\w* off", r"mov\w* off",
         r"get\w* going", r"accelerat\w* (away )?from (a |the )?(stop|standstill)",
         r"(go|goes|going) again",
         r"(drive|drives|drove|driving|carr(y|ies|ied|ying)|mov(e|es|ed|ing)) on\b(?! (the|a|an|to|our|"
         r"its|their|his|her|at|in|into|through|top)\b)", r"(mov(e|es|ed|ing)|head\w*|edg\w*|creep\w*|"
         r"crept|roll\w*) (off|forward)\b", r"from (a |the )?(standstill|stop|rest|stationary)",
         r"pull\w* off\b(?! (the|a|an|to|into|onto)\b)", r"accelerat\w* (away|off)\b",
         r"(start\w*|mov\w*|driv\w*|drove|roll\w*|get\w*|got) (off |away |going |moving |rolling )?again"],
        ["we pull away from a standstill", "the ego car starts moving again"],
        weakness="a clip that starts moving after standing still looks the same as one that "
                 "stopped earlier: use stop_then_go for 'stop, then go'",
        subject="ego", tags=("ego", "longitudinal")),
    _seq_ev("lead_brake_then_ego_brake", "lead brakes, then ego brakes",
            "The vehicle ahead in the ego lane brakes, and then the ego vehicle brakes.",
            [make_step("lead brakes", _ent(classes=FOUR_WHEEL),
                   [_gate("distance", "lt", 40.0), _gate("abs_loc_x", "lt", 1.5)],
                   [_tc("distance", 3, 6.0, "negative")]),
             {**_BRAKES, "gap": {"min_seconds": 0.0, "max_seconds": 4.0}, "same_track": False}],
            [r"(car|vehicle|truck|bus|lead\w*)( (ahead|in front))?( of us)? brak\w*,? (and )?then "
             r"(we|the ego|our car|i) (brake|slow)"],
            ["the car ahead brakes and then we brake", "we brake after the lead vehicle brakes"],
            parts=("lead_brake", "ego_brake"), tags=("longitudinal", "sequence")),
    _seq_ev("cut_in_then_ego_brake", "cut-in, then ego brakes",
            "A vehicle cuts into the ego lane ahead, and then the ego vehicle brakes.",
            [make_step("cut-in", _ent(classes=VEHICLES),
                   [_gate("distance", "lt", 30.0), _gate("abs_loc_x", "lt", 1.5)],
                   [_tc("abs_loc_x", 4, 3.0, "negative")]),
             {**_BRAKES, "gap": {"min_seconds": 0.0, "max_seconds": 4.0}, "same_track": False}],
            [r"cut[s]?[- ]?in\w*,? (and )?then (we|the ego|our car|i) (brake|slow)"],
            ["a car cuts in and then we brake", "we brake after a vehicle cuts in front of us"],
            weakness="an ego lane change also sweeps a track into the ego lane; see cut_in",
            parts=("cut_in", "ego_brake"), tags=("lateral", "sequence")),
    _seq_ev("cut_in_then_brake", "cut-in, then the same vehicle brakes",
            "A vehicle cuts into the ego lane ahead and then brakes (the same vehicle).",
            [make_step("cut-in", _ent(classes=VEHICLES),
                   [_gate("distance", "lt", 30.0), _gate("abs_loc_x", "lt", 1.5)],
                   [_tc("abs_loc_x", 4, 3.0, "negative")]),
             make_step("it brakes", _ent(classes=VEHICLES), [_gate("abs_loc_x", "lt", 1.5)],
                   [_tc("distance", 3, 5.0, "negative")], gap=(0.0, 5.0), same_track=True)],
            [r"cut[s]?[- ]?in\w*,? (and )?then (brakes|slams|slows)"],
            ["a car cuts in and then brakes", "a vehicle cuts in front of us and then slows down"],
            parts=("cut_in", "lead_brake"), subject="object", tags=("lateral", "sequence")),
    _seq_ev("stop_then_go", "stop, then go",
            "The ego vehicle slows to a stop and then pulls away again.",
            [make_step("slows", _ent("ego"), [], [_tc("speed", 4, 3.0, "negative")]),
             make_step("stopped", _ent("ego"), [_gate("speed", "lt", 0.5)], [], gap=(0.0, 3.0)),
             make_step("pulls away", _ent("ego"), [], [_tc("speed", 4, 3.0, "positive")],
                   gap=(0.0, 10.0))],
            [r"(?<!\bin )(?<!\bin heavy )(?<!\bin slow )stop[- ]and[- ]go",
             r"stop\w*,? (and )?then (go|pull|drive|start|move|set)\w*"],
            ["we stop and then pull away", "stop-and-go: the ego car halts, then drives off"],
            parts=("sudden_stop", "ego_pull_away"), tags=("ego", "longitudinal", "sequence")),
    _seq_ev("pedestrian_crossing_while_stopped", "pedestrian crosses while the ego is stopped",
            "A pedestrian crosses the road ahead while the ego vehicle stands still.",
            [make_step("pedestrian crosses", _ent(classes=["pedestrian"]),
                   [_gate("distance", "lt", 25.0), _gate("abs_loc_x", "lt", 2.0)],
                   [_tc("loc_x", 4, 4.0)]),
             make_step("ego stopped", _ent("ego"), [_gate("speed", "lt", 0.5)], [], gap=(0.0, 0.0))],
            [r"pedestrians? (is |are )?(crossing|cross\w*|walk\w* across)[^.;]* while (we|the ego|our car|i)"
             r" (are |is |am )?(stopp\w*|stand\w*|wait\w*|stationary|parked)"],
            ["a pedestrian crosses while we are stopped", "people cross in front while we wait"],
            parts=("pedestrian_crossing", "ego_stationary"), subject="object",
            tags=("crossing", "vru", "sequence")),
    _seq_ev("ego_brake_no_lead", "ego brakes with no vehicle ahead",
            "The ego vehicle brakes while no vehicle is ahead in its lane (braking for something "
            "else: a junction, a crossing, a light).",
            [make_step("ego brakes", _ent("ego"), [_gate("accel", "lt", -1.0)],
                   [_tc("speed", 4, 5.0, "negative")])],
            [r"brak\w*[^.;]*(with no|without( a| any)?|no) (car|vehicle|lead\w*|traffic|one)s?"
             r"( (ahead|in front))?",
             r"(brak\w*|slow\w* down|decelerat\w*|stop\w*)[^.;]*\b((empty|clear|open|deserted|free) "
             r"(road|lane|street|stretch)|(road|lane|street|way) (ahead |in front )?(is |being )?(empty|clear|"
             r"open|deserted|free)|nothing( is| was)? (ahead|in front)|no(body| one)( is| was)? (ahead|in front))"],
            ["we brake with no car ahead of us", "the ego slows down sharply without a vehicle in front"],
            absent=[_absent("vehicle ahead in the lane", _VEH_AHEAD,
                            [_gate("distance", "gt", 0.0), _gate("distance", "lt", 30.0),
                             _gate("abs_loc_x", "lt", 1.5)], step=0, before=4.0, after=1.0)],
            weakness="an undetected or occluded lead vehicle looks like no lead at all",
            parts=("ego_brake",), tags=("ego", "longitudinal", "negation")),
    _seq_ev("lane_change_clear", "lane change into a clear lane",
            "The ego vehicle changes lanes to the left (steers over, then straightens) while no "
            "vehicle is beside, just ahead or behind it in the target lane.",
            [make_step("steers over", _ent("ego"), [_gate("speed", "gt", 3.0)],
                   [_tc("heading", 3, 0.1, "positive")]),
             make_step("straightens", _ent("ego"), [_gate("speed", "gt", 3.0)],
                   [_tc("heading", 3, 0.1, "negative")], gap=(0.5, 5.0))],
            [r"(lane[- ]?chang\w*|chang\w* lanes?|switch\w* lanes?|moves? over)[^.;]*"
             r"(clear|empty|free|(with no|without( a| any)?|no) (car|vehicle|one|traffic|truck)s?)",
             r"(lane[- ]?chang\w*|chang\w* lanes?|switch\w* lanes?|moves? over)[^.;]*\b(nothing|"
             r"nobody|no[- ]one) (in|beside|next to|alongside|there|around|behind)",
             r"(mov|switch|shift|pull|swing|swung|slid|slide|steer|merg|go|goes|went|head|drift|hop|"
             r"nudg|ease|eas)\w* (over |across )?(in)?to (the|an?|another) [^.;]*lane[^.;]*\b"
             r"(clear|empty|free|vacant|unoccupied|deserted|open|nobody|no[- ]one|"
             r"(with no|without( a| any)?|no) (car|vehicle|one|traffic|truck)s?)\b",
             r"(mov|switch|shift|pull|swing|swung|slid|slide|steer|merg|go|goes|went|head|drift|hop|"
             r"nudg|ease|eas)\w* (over |across |out |left |right )*(in)?to (an?|the) (completely |totally |entirely )?"
             r"(clear|empty|free|vacant|unoccupied|deserted|open) "],
            ["we change lanes into a clear lane", "a lane change with no vehicle in the target lane"],
            absent=[_absent("vehicle in the target lane", _ent(classes=VEHICLES),
                            [_gate("loc_x", "lt", -1.5), _gate("loc_x", "gt", -5.5),
                             _gate("distance", "gt", -15.0), _gate("distance", "lt", 15.0)],
                            step=0, before=2.0, after=2.0),
                    _absent("a turn, not a lane change", _ent("ego"), [],
                            [_tc("heading", 4, 0.6)], step=0, before=2.0, after=4.0)],
            weakness="the lane change is read from the ego heading (over, then back; a heading "
                     "change of a turn's size is negated, but an S-bend looks the same); a forward camera cannot see a vehicle behind in the target lane "
                     "(only 360° track records, e.g. Argoverse 2, can); the form is the left-hand "
                     "change (the adapter mirrors it for 'right')",
            parts=("ego_lane_change",), tags=("ego", "lateral", "left", "negation", "sequence")),
)

EVENT_KEYS = tuple(e.key for e in EVENTS)
PAPER_EVENT_KEYS = tuple(e.key for e in EVENTS if e.paper)
_BY_KEY = {e.key: e for e in EVENTS}

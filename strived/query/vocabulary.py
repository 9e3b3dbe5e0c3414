"""The one query vocabulary: every word list that reads a query (or a caption), each concept once.

`parse.parse_query` applies these lists to a query; the matcher, composition, adapter and router
read the parsed value (`ParsedQuery`), never these lists directly. The event phrases themselves
(which words name a cut-in, a hard brake, ...) live with each event in the inventory
(`strived.events`, the ``lexicon`` of each `EventDef`).

Lists are regular expressions over lower-cased text (``\\b``-bounded) or sets of surface words.
A longer phrase is listed before its prefix ("ego car" before "ego") so that a span covers it.
"""

from __future__ import annotations

import re


def _words_re(words) -> re.Pattern:
    """A ``\\b(...)\\b`` regex over literal words or phrases, longest first."""
    alts = sorted({re.escape(w) for w in words}, key=lambda w: (-len(w), w))
    return re.compile(r"\b(" + "|".join(alts) + r")\b")


# ---- tokens -----------------------------------------------------------------------------------

WORD = re.compile(r"[a-z0-9][a-z0-9'\-]*")        # surface words (literal text search)
TOKEN = re.compile(r"[a-z][a-z\-']+")             # content tokens (word overlap; matcher features)
CLASS_TOKEN = re.compile(r"[a-z][a-z\-]+")        # road-user class lookup ("truck's" -> "truck")
PROPER_NOUN = re.compile(r"(?<=[a-z,;] )([A-Z][a-zA-Z]{2,})")   # a capitalised word mid-sentence
STOP = frozenset("a an the of to in on at by for with from our us we is are was be it its this that "
                 "and or into onto as just ahead front".split())
STEM_SUFFIXES = ("ing", "es", "ed", "s", "ly")


def stem(tok: str) -> str:
    """A crude suffix stripper (keeps ≥ 3 letters): "braking" -> "brak", "lanes" -> "lan"."""
    for suf in STEM_SUFFIXES:
        if tok.endswith(suf) and len(tok) - len(suf) >= 3:
            return tok[: -len(suf)]
    return tok


# ---- who acts: the ego vehicle, another road user ---------------------------------------------

# The camera car. ("us" is left out: an object pronoun, "a car cuts in front of us" is about the car.)
# ("the driver's side" is a side, not the driver.)
# "our van", "my truck", "the dashcam vehicle": the ego is whatever vehicle "our"/"my" names.
EGO_VEHICLE = (r"(car|vehicle|van|truck|lorry|bus|coach|suv|taxi|cab|pickup|jeep|motorbike|"
               r"motorcycle|scooter)")
EGO = re.compile(r"\b(ego[- ](car|vehicle)|ego|we|i'm|i|(our|my|own) " + EGO_VEHICLE + r"|"
                 r"the (car|vehicle) i'm in|the driver(?!'?s? side)|(the )?(camera|dashcam|recording) "
                 r"(car|vehicle)|ego-vehicle)\b")
# The ego named other than as the actor ("next to us", "our braking"): who a part of a composed
# query is about when it names no actor.
EGO_REFERENCE = re.compile(r"\b(us|our|my)\b")
# Vehicles that have an ego analogue among the events (lead_brake vs ego_brake, ...).
VEHICLE_NOUNS = ("car", "vehicle", "truck", "bus", "van", "motorbike", "motorcycle", "scooter")
# A vehicle introduced as a grammatical actor ("another car", "the truck") or by its position
# ahead of the ego: the matcher's and adapter's "the query is about another vehicle".
# The vehicle ahead named by the ego following it ("the car we're following"): no ego actor.
FOLLOWED = r"(we're|we are|we were|we'd been|we've been|i'm|i am|i was) following|we follow"
OTHER_VEHICLE = re.compile(r"\b(another|other|a|the) (" + "|".join(VEHICLE_NOUNS) + r")\b|"
                           r"\b(ahead|in front|lead\w*|preceding|" + FOLLOWED + r")\b")
# Any road user named as a noun: who a sentence (or a part of one) is about, by first mention.
ROAD_USER = re.compile(
    r"\b(cars?|vehicles?|trucks?|lorry|lorries|bus|buses|vans?|suv|taxi|motorbikes?|motorcycles?|"
    r"scooters?|pedestrians?|person|people|cyclists?|bicycles?|bikes?|child|someone|somebody|"
    r"driver|object|road user|dog|animal|lead\w*)\b")
# A negated part naming vehicles as things ("no car ahead", "no one in the left lane").
VEHICLE_THINGS = re.compile(r"\b(cars?|vehicles?|trucks?|bus|buses|van|one|anyone|traffic|lead\w*)\b")
PERSON_PRONOUN = re.compile(r"\b(one|anyone|somebody|someone)\b")

# ---- where: side, ahead / behind, distance ----------------------------------------------------

SIDE_LEFT = re.compile(r"\b(left|left[- ]hand|driver'?s? side)\b")
# ("right" as an intensifier is no side: "right in front of us", "right behind", "right past us".)
SIDE_RIGHT = re.compile(r"\b(right[- ]hand|passenger'?s? side|right(?! (in front|ahead|behind|next to|"
                        r"beside|alongside|away|now|there|here|up to|before|after|then|past|by|under|"
                        r"in the middle|into (our|my|the ego'?s?) (lane|path)|into (us|the back|the rear)|"
                        r"on (our|my) (bumper|tail)|through)\b))\b")
LEAD = re.compile(r"\b(ahead|in front|lead\w*|preceding|" + FOLLOWED + r")\b")
AHEAD_IN_LANE = re.compile(r"\b(ahead|in front|lead\w*|in (our|the|my) lane)\b")
BEHIND = re.compile(r"\b(behind|back)\b")
WITHIN_METRES = re.compile(r"\bwithin\s+(\d+(?:\.\d+)?)\s*(m|metres|meters)\b")
CLOSE = re.compile(r"\b(close|closely|near|nearby|tight|inches|narrow\w*)\b")
EXTREME = re.compile(r"\b(extremely|very|dangerously)\b")

# ---- road users: words -> detector classes ----------------------------------------------------

CLASS_WORDS: dict[str, tuple[str, ...]] = {
    "truck": ("truck",), "trucks": ("truck",), "lorry": ("truck",), "lorries": ("truck",),
    "bus": ("bus",), "buses": ("bus",), "van": ("car",), "suv": ("car",), "sedan": ("car",),
    "motorbike": ("motorcycle",), "motorbikes": ("motorcycle",), "motorcycle": ("motorcycle",),
    "motorcycles": ("motorcycle",), "scooter": ("motorcycle",), "scooters": ("motorcycle",),
    "moped": ("motorcycle",), "motorcyclist": ("motorcycle",), "biker": ("motorcycle",),
    "bicycle": ("bicycle",), "bicycles": ("bicycle",), "bike": ("bicycle",), "bikes": ("bicycle",),
    "cyclist": ("bicycle",), "cyclists": ("bicycle",),
    "two-wheeler": ("motorcycle", "bicycle"), "two-wheelers": ("motorcycle", "bicycle"),
    "pedestrian": ("pedestrian",), "pedestrians": ("pedestrian",), "person": ("pedestrian",),
    "people": ("pedestrian",), "child": ("pedestrian",), "walker": ("pedestrian",),
    "walkers": ("pedestrian",), "children": ("pedestrian",), "kid": ("pedestrian",),
    "kids": ("pedestrian",), "man": ("pedestrian",), "woman": ("pedestrian",), "men": ("pedestrian",),
    "women": ("pedestrian",), "jaywalker": ("pedestrian",), "jaywalkers": ("pedestrian",),
    "jogger": ("pedestrian",), "joggers": ("pedestrian",),
}

# ---- conditions and places --------------------------------------------------------------------

HIGHWAY_WORDS = frozenset("highway motorway freeway expressway".split())
HIGHWAY = _words_re(HIGHWAY_WORDS)
# What the records cannot measure (weather, light, a driver's state, a reason): forces adaptation.
CONDITION = re.compile(
    r"\b(snow\w*|rain\w*|ic[ey]|icy|fog\w*|wet|slippery|flood\w*|storm\w*|hail\w*|blizzard|"
    r"for no (apparent |obvious )?reason|at night|nighttime|glare|drunk\w*)\b")

# ---- surface words: likely to appear literally in a video's generated summary text ------------

COLOURS = frozenset("red blue green yellow white black grey gray silver orange brown purple pink "
                    "beige gold golden dark-coloured light-coloured".split())
MAKES = frozenset("toyota honda bmw audi mercedes benz volkswagen vw ford tesla nissan hyundai kia "
                  "volvo jeep chevrolet chevy subaru mazda porsche fiat renault peugeot skoda lexus "
                  "dodge ram gmc mini suzuki mitsubishi citroen opel seat prius civic corolla golf "
                  "f-150 model camry jaguar landrover land rover ferrari lamborghini harley vespa "
                  "taxi cab ambulance police firetruck fire-truck school".split())
WEATHER_TIME = frozenset("rain rainy raining snow snowy snowing fog foggy mist night nighttime dark "
                         "dusk dawn sunset sunrise sunny wet storm hail glare evening morning tunnel "
                         "daytime".split())
PLACES = HIGHWAY_WORDS | frozenset("city downtown urban rural village bridge roundabout parking "
                                   "garage toll gas station school mountain desert country "
                                   "countryside street avenue boulevard".split())
RARE_CLASSES = frozenset("truck lorry bus motorcycle motorbike scooter moped bicycle bike cyclist "
                         "pedestrian pedestrians person people child dog animal trailer tram train "
                         "barrier cone cones".split())

# ---- motion: what moves and where its motion ends in the view ---------------------------------

MOTION = re.compile(r"\b(turn\w*|u-turn|brak\w*|stop\w*|slow\w*|accelerat\w*|speed\w*|revers\w*|"
                    r"swerv\w*|merg\w*|chang\w* lanes?|lane chang\w*|overtak\w*|pass\w*|cut\w*|"
                    r"cross\w*|approach\w*|pull\w*|drift\w*|collid\w*|hit\w*|crash\w*|rear-end\w*|"
                    r"standing still|stationary|waiting|park\w*|moves?|moving|rid\w*|walk\w*|"
                    r"enter\w*|leav\w*|exit\w*|veer\w*|chang\w*|overtaken|drives? off)\b")
# Motion that ends in the middle of the view (dense sees it) ...
CENTRAL = re.compile(r"\b(cut\w* in|cut\w* into|in front|ahead|approach\w*|cross\w*|across|"
                     r"brak\w*|pull\w* (in|out)|rear-end\w*|collid\w*|hit\w*|crash\w*|into our lane|"
                     r"toward\w*|stops? in front|oncoming)\b")
# ... verbs whose motion ends there whatever else the query says ...
CENTRAL_END = re.compile(r"\b(cut\w* in|cut\w* into|into our lane|cross\w*|across|rear-end\w*|"
                         r"collid\w*|hit\w*|crash\w*|pull\w* in)\b")
# ... and motion that ends off-centre (the frames look like ordinary driving).
OFF_CENTRE = re.compile(r"\b(cut\w* out|out of (our|the|my) lane|leav\w* (our|the) lane|overtak\w*|"
                        r"chang\w* out|pass\w*|alongside|beside|next to|on (the|its|our) (left|right)|"
                        r"adjacent|parallel|lane chang\w*|chang\w* lanes?)\b")
# The cues the lexicon uses to derive finer events from a clause.
# A turn: "turn", a turning idiom with a side ("take / make / hang / hook / swing a left", "hooks
# right"), or a plain motion verb with a side into a junction or side road ("goes left at the
# junction", "heads right into a side street"). Not a traffic light turning green.
_TURN_PLACE = (r"(junction|intersection|crossroads?|corner|lights|t-junction|side[- ]?(street|road)|"
               r"(main |next |a |the )?(street|road|avenue|lane|alley|drive\w*|car park|parking))")
TURN = re.compile(
    r"\b((?<!light )(?<!lights )(?<!signal )turn\w*|"
    r"(tak\w*|took|mak\w*|made|hang\w*|hung|hook\w*|swing\w*|swung|bang\w*|chuck\w*|throw\w*|"
    r"threw|whip\w*|pull\w*|do|does|doing|did)( a| an)? (?=(left|right)\b)|"
    r"(go|goes|going|went|head\w*|bear\w*|veer\w*|peel\w*|pull\w*|branch\w*|swing\w*|swung|"
    r"hook\w*) (off )?(to the )?(left|right)(?=[^.;]*\b(at|into|onto|down|off)\b[^.;]*\b" + _TURN_PLACE + r"))")
BRAKE = re.compile(r"\b(brak\w*|slow\w* down|decelerat\w*)\b")
SLOWS = re.compile(r"\b(brak\w*|slow\w* down|slows|decelerat\w*)\b")
# Leaving a lane: said of the vehicle ahead ("the car in front pulls out into the next lane") it is
# a cut-out.
LANE_LEAVE = re.compile(
    r"\b(chang\w* lanes?|switch\w* lanes?|lane[- ]chang\w*|(pull|swing|swung|mov|peel|steer|veer|"
    r"duck|dart|nip|slip|head|go|goes|went|drift|shift|slid)\w* (out|over|off|aside|away|across|"
    r"(in)?to (the|an?|another) (\w+ )?lane)|(leav|exit)\w* (our|the|my|ego'?s?) lane|out of (our|the|my|"
    r"ego'?s?) lane|get\w* out of (our|the|my) (way|lane))\b")
# Crossing a road user's path: a crossing verb, or a motion verb "across" / "out into the road".
CROSSING = re.compile(
    r"\b(cross(es|ed|ing)?\b(?! traffic)|across (our|my|the ego'?s?|ego'?s?) (path|bows?|nose)|"
    r"across in front|"
    r"(walk|run|ran|dash|dart|step|stroll|wander|hurr|jog|skip|stumbl|limp|scurr|amble|march|"
    r"shuffl|sprint|rush|come|came|pull|drive|drove|go|goes|went|ride|rode|cycl|pedal|cut|mov|"
    r"trot|bolt|jump|leap|edg|creep|crept)\w* (straight |right |out )?(across|over the (road|street)|"
    r"out (into|onto)(?! (the|a|an) (\w+ )?lane)|out in front|into the (road|street)|"
    r"off the (kerb|curb|pavement|sidewalk)|out from between)|"
    r"(walk|step|stepp|stroll|wander|jog|amble|hurr|stumbl|limp|run|ran)\w* (out )?(right |just )?in front|"
    r"(pull|come|came|emerg|nos|edg|turn|shoot|shot|dart|creep|crept)\w* (out )?(of|from) (a|the|an) (\w+ )?"
    r"(side[- ]?(street|road)|junction|t-junction|driveway|drive|car park|parking \w+|entrance|exit|"
    r"turning|junction)\b|"
    r"across (the|a|an) (junction|intersection|crossroads|road|street|carriageway|traffic)\b)")
# Who crosses: the road user named nearest before the crossing cue (`parse._crosser`); the
# cue's own verb ("cycles across", "walks across") when no road user but a pronoun is named.
CROSSER_CYCLIST = re.compile(
    r"\b(cyclists?|bicycl\w*|bikes?|push[- ]?bikes?|bike riders?|e-?bikes?|"
    r"on (a|his|her|their) (bike|bicycle))\b")
CROSSER_PEDESTRIAN = re.compile(
    r"\b(pedestrians?|person|people|persons|man|men|woman|women|lady|ladies|gentleman|child|"
    r"children|kids?|boys?|girls?|toddlers?|teen\w*|students?|pupils?|jaywalk\w*|walkers?|joggers?|"
    r"runners?|pensioners?|elderly|mums?|moms?|dads?|mother|father|family|crowd|on foot)\b")
CROSSER_VEHICLE = re.compile(
    r"\b(cars?|vehicles?|trucks?|lorr(y|ies)|bus|buses|vans?|suvs?|taxis?|cabs?|coach|pickups?|"
    r"jeeps?|motorbikes?|motorcycles?|scooters?|mopeds?|tractors?|trams?|trains?|drivers?|"
    r"traffic|sedans?|hatchbacks?)\b")
CROSSER_ANIMAL = re.compile(r"\b(animals?|dogs?|cats?|deer|birds?|horses?|cows?|sheep|foxe?s?|"
                            r"badgers?|rabbits?|goats?|geese|ducks?|debris|objects?|ball)\b")
CROSSER_PRONOUN = re.compile(r"\b(someone|somebody|anyone|anybody|a guy|a bloke|a lad|they)\b")
CROSSING_BY_BIKE = re.compile(r"\b(cycl(e|es|ed|ing)|pedal\w*)\b")
CROSSING_BY_CAR = re.compile(r"\b(driv\w*|drove|pull\w* out)\b")

STOPS = re.compile(r"\b(stop|stops|stopped|stopping|halt\w*|standstill|come to a stop|comes to a stop|"
                   r"pull\w* up|draw\w* up|drew up)\b")

# ---- negation ---------------------------------------------------------------------------------

NEGATORS = re.compile(
    r"\b(no|not|never|without|none|nor|neither|nobody|avoid\w*|prevent\w*|almost|nearly|narrowly|"
    r"instead of|fail\w* to|didn't|doesn't|don't|isn't|wasn't|aren't|weren't|cannot|can't|"
    r"free of|absence of)\b|n't\b")
# Negators of a thing named right after them ("not a truck", "no buses", "without a cyclist"); the
# event negators above also negate events ("nearly hit a cyclist" still names the cyclist).
THING_NEGATORS = re.compile(r"\b(no|not|without|nor|neither|none of|instead of|rather than|except|"
                            r"free of|absence of)\b")
THING_NEG_WINDOW_TOKENS = 2
# A negation's scope ends at these: "did not stop and crashed" still asserts the crash.
SCOPE_BREAK = re.compile(r"\b(and|but|then|while|when|after|before|until|so|because|however)\b|[,:]")
CLAUSE_SPLIT = re.compile(r"[.;!?\n]+")
NEG_WINDOW_TOKENS = 5     # a negator governs a phrase at most this many tokens after it

# ---- composition: two parts of a query in time ------------------------------------------------

# "when" is left out on purpose: "when we turn left" usually names a situation, not an order.
CONNECTIVE = re.compile(
    r"\b(and then|, then|then|followed by|after which|afterwards|after|before|while|"
    r"without|with no|and no|but no|while no)\b")
# "X and Y" joins two events that a library composite may compose ("someone cuts in and we have
# to brake"); the matcher reads it only when both halves name a composite's parts.
# (The object of "forcing us to" stays with the second part: "us to brake" is the ego braking.)
COMPOUND_AND = re.compile(r"(,\s*|\s)(and (so |also )?|so (that )?|as |when |whilst |"
                          r"((which |that )?(forces|forced|makes|made|causes|caused)|forcing|making|causing) "
                          r"(?=(us|me|the ego|ego|our car)\b))(?=\S)")
ABSENT_CONNECTIVES = ("without", "with no", "and no", "but no", "while no")
WITHIN_SECONDS = re.compile(r"\bwithin\s+(\d+(?:\.\d+)?)\s*(s|sec|secs|second|seconds)\b")

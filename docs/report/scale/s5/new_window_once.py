# One RuleScorer.score of the cut-in rule with a window no run has used (a new value each time), in a new
# process, under cProfile; prints "ms <wall>". Run as: (cd CHECKOUT && PYTHONPATH=CHECKOUT python new_window_once.py LIB)
import cProfile, pstats, time, sys
from strived.store import Library
from strived.rules import RuleScorer, parse_rule
from strived.evaluation.scale import _CUT_IN
lib=Library.open(sys.argv[1])
sc=RuleScorer(lib); r=parse_rule(_CUT_IN); sc.score(r)
fresh = dict(_CUT_IN, soft_scores=[dict(_CUT_IN["soft_scores"][0], window_seconds=round(2.0 + (time.time_ns() % 10**6) / 10**6 * 3, 6))])
pr=cProfile.Profile(); t=time.perf_counter(); pr.enable()
sc.score(parse_rule(fresh))
pr.disable(); print("ms", (time.perf_counter()-t)*1e3)
pstats.Stats(pr).sort_stats("cumtime").print_stats(30)

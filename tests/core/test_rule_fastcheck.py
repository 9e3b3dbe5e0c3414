"""The fast schema check of rule documents (`strived.rules.fastcheck`): it says yes to every
shipped rule (so a new process parses the rule library without importing jsonschema) and never
says yes where jsonschema finds an error (thousands of mutated documents); a wrong document still
gets jsonschema's messages."""

from __future__ import annotations

import copy
import json
import random
import subprocess
import sys

import jsonschema
import pytest

from strived.errors import RuleError
from strived.rules import parse_rule
from strived.rules.fastcheck import conforms
from strived.rules.schema import RULE_SCHEMA

_VALIDATOR = jsonschema.Draft202012Validator(RULE_SCHEMA)


def _shipped_docs() -> list[dict]:
    from strived.rulelib.library import load_default_library

    out = []
    for p in ("tracks", "video"):
        lib = load_default_library(profile=p)
        out += [lib.rule(k).to_dict() for k in lib.keys()]
    return out


def test_every_shipped_rule_takes_the_fast_path():
    docs = _shipped_docs()
    assert len(docs) > 50 and any("sequence" in d for d in docs)
    for d in docs:
        assert conforms(d, RULE_SCHEMA), d.get("event")
        assert not list(_VALIDATOR.iter_errors(d))


def test_a_new_process_parses_the_rule_library_without_jsonschema():
    code = ("import sys\n"
            "from strived.rulelib.library import load_default_library\n"
            "n = sum(len(load_default_library(profile=p).keys()) for p in ('tracks', 'video'))\n"
            "print(n, 'jsonschema' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert int(out[0]) > 50 and out[1] == "False"


_BAD_VALUES = [None, True, False, 0, 1, -1, 0.5, -1e12, 1e12, 3601.0, 1e300, "", "x", "car" * 100, [], [1],
               ["car"] * 70, {}, {"x": 1}, "lt", "<", "positive", "any", "object", "ego", "speed", 2.0**0.5]


def _paths(doc, path=()):
    yield path
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _paths(v, path + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from _paths(v, path + (i,))


def _mutate(doc: dict, rng: random.Random) -> dict:
    d = copy.deepcopy(doc)
    for _ in range(rng.randint(1, 3)):
        paths = [p for p in _paths(d) if p]
        if not paths:
            break
        path = rng.choice(paths)
        parent = d
        for k in path[:-1]:
            parent = parent[k]
        key = path[-1]
        op = rng.random()
        if op < 0.5:
            parent[key] = copy.deepcopy(rng.choice(_BAD_VALUES))
        elif op < 0.7 and isinstance(parent, dict):
            del parent[key]
        elif op < 0.85 and isinstance(parent, dict):
            parent[rng.choice(["extra", "weight", "gap", "same_track", "min_seconds", "role", "step"])] = \
                copy.deepcopy(rng.choice(_BAD_VALUES))
        elif isinstance(parent, list):
            parent.append(copy.deepcopy(rng.choice([parent[key], 1, None, {}])))
    return d


def test_the_fast_check_never_accepts_what_jsonschema_rejects():
    rng = random.Random(7)
    docs = _shipped_docs()
    yes_no = [0, 0]
    for k in range(6000):
        d = _mutate(rng.choice(docs), rng)
        errs = list(_VALIDATOR.iter_errors(d))
        if conforms(d, RULE_SCHEMA):
            assert not errs, (json.dumps(d)[:400], [e.message for e in errs])
            yes_no[0] += 1
        else:
            yes_no[1] += 1
    assert min(yes_no) > 500             # both answers were exercised


@pytest.mark.parametrize("doc, pointer", [
    ({"entity": {"role": "driver"}, "soft_scores": []}, "/entity/role"),
    ({"entity": {}, "soft_scores": [{"type": "temporal_change", "field": "loc_x", "window_seconds": True,
                                     "magnitude": 1.0}]}, "/soft_scores/0/window_seconds"),
    ({"entity": {}, "soft_scores": [], "hard_gates": [{"field": "distance", "op": "lt"}]}, "/hard_gates/0"),
    ({"entity": {}, "soft_scores": [], "colour": "red"}, ""),
])
def test_a_wrong_document_still_gets_the_schema_messages(doc, pointer):
    with pytest.raises(RuleError) as e:
        parse_rule(doc)
    assert pointer in [p for p, _ in e.value.errors]

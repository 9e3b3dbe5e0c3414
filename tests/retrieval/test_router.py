"""The offline router applies the three dashcam facts deterministically."""

from __future__ import annotations

import pytest

from strived.retrieval.router import offline_route, route, surface_tokens


def _primary(w):
    return max(sorted(w), key=lambda s: w[s])


@pytest.mark.parametrize("query,primary,end", [
    ("we make a right turn", "dense", "n/a"),                       # fact 1: ego motion
    ("ego car brakes and slows down sharply", "dense", "n/a"),
    ("the ego car is standing still, waiting", "dense", "n/a"),
    ("someone overtakes us on the left", "rule", "off-centre"),     # fact 2, ends off-centre
    ("the car in front of us changes out of our lane", "rule", "off-centre"),
    ("a vehicle cuts into our lane from the right, just ahead of us", "rule", "central"),
    ("a cyclist rides across the street ahead of us", "rule", "central"),
])
def test_primary_source(query, primary, end):
    r = offline_route(query)
    assert _primary(r.weights) == primary and r.source == "offline" and r.notice is None
    assert r.details["end_position"] == end
    assert r.reasoning


def test_dense_weight_lower_when_object_ends_off_centre():
    off = offline_route("a car overtakes us on the right").weights["dense"]
    central = offline_route("a car cuts in just ahead of us").weights["dense"]
    assert off < central


def test_bm25_only_for_surface_tokens():
    assert offline_route("a vehicle cuts into our lane").weights["bm25"] == 0.0
    assert offline_route("ego car changes lanes").weights["bm25"] == 0.0
    assert offline_route("a red car cuts into our lane").weights["bm25"] > 0
    assert offline_route("a Toyota passes us at night in the rain").weights["bm25"] >= 0.4
    toks = surface_tokens("a silver Tesla overtakes us near Munich at dusk")
    assert toks["colour"] == ["silver"] and toks["make_model"] == ["tesla"]
    assert "munich" in toks["proper_noun"] and toks["weather_time"] == ["dusk"]


def test_deterministic_and_no_llm_means_offline():
    q = "a truck or bus passes extremely close to us"
    assert route(q).weights == route(q).weights
    assert route(q).source in ("fitted", "offline")     # no LLM: an offline router, never the LLM
    assert route(q, mode="wordlist").weights == offline_route(q).weights
    assert all(w >= 0 for w in route(q).weights.values())

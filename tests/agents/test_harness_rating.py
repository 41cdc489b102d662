"""Ratings over the archive: paired win counts fitted with Bradley-Terry, so harnesses that never met compare."""

from __future__ import annotations

import math

import pytest

from lamarck.agents.harness_rating import REFERENCE_RATING, Comparison, ratings, win_probability


def test_an_even_record_rates_both_alike_and_an_unplayed_harness_at_the_reference() -> None:
    rated = ratings([Comparison(a="a", b="b", wins=5, losses=5)], players=["idle"])
    assert rated["a"] == pytest.approx(rated["b"]) and rated["idle"] == REFERENCE_RATING
    assert win_probability(rated["a"], rated["b"]) == pytest.approx(0.5)


def test_more_wins_mean_a_higher_rating_shrunk_by_the_prior() -> None:
    rated = ratings([Comparison(a="a", b="b", wins=9, losses=1)])
    chance = win_probability(rated["a"], rated["b"])
    assert rated["a"] > REFERENCE_RATING > rated["b"] and 0.5 < chance < 0.9


def test_an_undefeated_harness_stays_finite() -> None:
    rated = ratings([Comparison(a="a", b="b", wins=12, losses=0)])
    assert all(math.isfinite(value) for value in rated.values()) and rated["a"] > rated["b"]


def test_harnesses_that_never_met_compare_through_the_ones_they_did() -> None:
    rated = ratings([Comparison(a="a", b="b", wins=8, losses=2), Comparison(a="b", b="c", wins=8, losses=2)])
    assert rated["a"] > rated["b"] > rated["c"]
    assert win_probability(rated["a"], rated["c"]) > win_probability(rated["a"], rated["b"]) > 0.5


def test_the_fit_matches_the_observed_share_with_a_negligible_prior() -> None:
    rated = ratings([Comparison(a="a", b="b", wins=30, losses=10)], prior=1e-6)
    assert win_probability(rated["a"], rated["b"]) == pytest.approx(0.75, abs=1e-3)

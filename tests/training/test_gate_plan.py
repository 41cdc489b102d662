"""The gate's pre-registered plan: alpha spent evenly over planned looks, and the power of its task count."""

from __future__ import annotations

import pytest

from lamarck.training.gate import decide, look_alpha, sign_test_p, sign_test_power


def test_alpha_is_spent_evenly_over_the_planned_looks_and_then_is_gone() -> None:
    assert [look_alpha(0.05, look, 10) for look in (1, 5, 10)] == [0.005, 0.005, 0.005]
    assert look_alpha(0.05, 11, 10) == 0.0
    with pytest.raises(ValueError, match="looks count from 1"):
        look_alpha(0.05, 0, 10)


def test_a_spent_plan_refuses_even_a_clear_winner() -> None:
    results = {"arithmetic": ([True] * 20, [False] * 20)}
    assert decide("c", "h", results, ["arithmetic"], alpha=0.005).promote
    refused = decide("c", "h", results, ["arithmetic"], alpha=0.0)
    assert not refused.promote and "alpha spent" in refused.reason


def test_power_grows_with_tasks_and_matches_a_direct_count() -> None:
    small, large = (sign_test_power(n, 0.15, 0.015, 0.005) for n in (20, 120))
    assert small < 0.3 < 0.8 < large
    # all discordant pairs are wins: power is the chance of enough of them to pass
    need = next(d for d in range(1, 30) if sign_test_p(d, 0) < 0.005)
    n, p = 10, 0.5
    from math import comb

    direct = sum(comb(n, d) * p**d * (1 - p) ** (n - d) for d in range(need, n + 1))
    assert sign_test_power(n, p, 0.0, 0.005) == pytest.approx(direct)
    assert sign_test_power(0, 0.2, 0.0, 0.05) == 0.0

"""One rating for every archived harness of an environment, so any two compare without re-running both.

Each round judges challengers against the champion on the same development tasks; a task one solves and the other
does not is a win for one side (ties carry no information, as in the gate's sign test). Those paired win counts,
over all rounds, are fitted with a Bradley-Terry model: P(A beats B on a discordant task) = s_A / (s_A + s_B). The
fit is Hunter's MM iteration with a weak prior (every harness plays ``prior`` virtual wins and losses against a fixed
reference of strength 1), which keeps undefeated or winless harnesses finite and leaves an unplayed one at the
reference. Strengths are reported on the Elo scale: 1500 + 400 log10(s), so 400 points is 10:1 odds.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable

from pydantic import BaseModel, Field

REFERENCE_RATING = 1500.0


class Comparison(BaseModel):
    """``a`` won ``wins`` and lost ``losses`` of the tasks where it and ``b`` disagreed."""

    a: str
    b: str
    wins: int = Field(ge=0)
    losses: int = Field(ge=0)


def ratings(
    comparisons: Iterable[Comparison],
    *,
    players: Iterable[str] = (),
    prior: float = 1.0,
    iterations: int = 500,
    tolerance: float = 1e-9,
) -> dict[str, float]:
    """Elo-scale ratings for every harness named in ``comparisons`` or ``players``."""
    wins: dict[str, float] = defaultdict(float)
    games: dict[tuple[str, str], float] = defaultdict(float)
    names = set(players)
    for c in comparisons:
        names.update((c.a, c.b))
        if c.a == c.b:
            continue
        wins[c.a] += c.wins
        wins[c.b] += c.losses
        key = (c.a, c.b) if c.a < c.b else (c.b, c.a)
        games[key] += c.wins + c.losses
    opponents: dict[str, list[tuple[str, float]]] = defaultdict(list)
    for (x, y), n in games.items():
        if n > 0:
            opponents[x].append((y, n))
            opponents[y].append((x, n))
    strength = {name: 1.0 for name in names}
    for _ in range(iterations):
        moved = 0.0
        for name in names:
            # the prior: ``prior`` wins and ``prior`` losses against the reference (strength 1)
            denominator = 2 * prior / (strength[name] + 1.0)
            denominator += sum(n / (strength[name] + strength[other]) for other, n in opponents[name])
            updated = (wins[name] + prior) / denominator
            moved = max(moved, abs(math.log(updated) - math.log(strength[name])))
            strength[name] = updated
        if moved < tolerance:
            break
    return {name: REFERENCE_RATING + 400.0 * math.log10(value) for name, value in strength.items()}


def win_probability(rating_a: float, rating_b: float) -> float:
    """The chance A beats B on a task where they disagree."""
    return 1.0 / (1.0 + math.pow(10.0, (rating_b - rating_a) / 400.0))

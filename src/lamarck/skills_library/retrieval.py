"""Ranking skills for a query: meaning (embedding similarity) plus a small bonus for a good record of use.

``score = similarity + usage_weight * (posterior_mean - prior_mean) + environment_bonus`` where the posterior mean
of success-when-used has a Beta(prior_successes, prior_failures) prior, so a skill with few uses sits near the
prior and neither a lucky first use nor an unlucky one moves it much. Similarity is cosine similarity from the
vector memory's ``skills`` collection, or word overlap when the library has no memory.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from lamarck.memory.base import MemoryRecord, Metadata
from lamarck.skills_library.skill import SkillView

SKILLS_COLLECTION = "skills"
_WORD = re.compile(r"[a-z0-9]+")


@dataclass(frozen=True)
class RankingConfig:
    usage_weight: float = 0.2
    prior_successes: float = 2.0
    prior_failures: float = 2.0
    environment_bonus: float = 0.05
    candidates_per_slot: int = 3  # fetch k * this many neighbours before re-ranking


def posterior_success(times_used: int, times_succeeded: int, config: RankingConfig) -> float:
    a, b = config.prior_successes, config.prior_failures
    return (times_succeeded + a) / (times_used + a + b)


def score(similarity: float, view: SkillView, environment_match: bool, config: RankingConfig) -> float:
    prior = config.prior_successes / (config.prior_successes + config.prior_failures)
    usage = posterior_success(view.times_used, view.times_succeeded, config) - prior
    return similarity + config.usage_weight * usage + (config.environment_bonus if environment_match else 0.0)


def document(view: SkillView) -> str:
    """The text embedded for a skill: what it does, in words, then its signature."""
    words = view.name.replace("_", " ")
    description = view.description or words
    return f"{words}: {description} {view.signature}"


def record(view: SkillView, environment: str | None = None) -> MemoryRecord:
    metadata: Metadata = {
        "name": view.name,
        "provenance": view.provenance,
        "status": view.status,
        "version": view.version,
        "utility": posterior_success(view.times_used, view.times_succeeded, RankingConfig()),
    }
    if environment:
        metadata["environment"] = environment
    return MemoryRecord(id=view.name, text=document(view), metadata=metadata)


def lexical_similarity(query: str, text: str) -> float:
    """Word overlap (Jaccard), the fallback when there is no vector memory."""
    left, right = set(_WORD.findall(query.lower())), set(_WORD.findall(text.lower()))
    if not left or not right:
        return 0.0
    return len(left & right) / len(left | right)

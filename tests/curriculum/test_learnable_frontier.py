"""The learnable-cells frontier prefers a cell the student fails and the teacher sometimes solves."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from lamarck.curriculum.learnable import CellEvidence, LearnableFrontier

LADDER = {"arithmetic": (1, 2, 3, 4, 5)}


def test_a_learnable_cell_beats_a_mastered_and_an_impossible_one() -> None:
    evidence = {
        ("arithmetic", 1): CellEvidence(student_greedy=1.0, teacher_attempts=40, teacher_passes=40),  # mastered
        ("arithmetic", 2): CellEvidence(student_greedy=0.9, teacher_attempts=40, teacher_passes=30),  # mastered
        ("arithmetic", 3): CellEvidence(student_greedy=0.2, teacher_attempts=40, teacher_passes=18),  # learnable
        ("arithmetic", 4): CellEvidence(student_greedy=0.0, teacher_attempts=40, teacher_passes=0),  # out of reach
        ("arithmetic", 5): CellEvidence(student_greedy=0.0, teacher_attempts=40, teacher_passes=0),
    }
    frontier = LearnableFrontier(LADDER)
    weights = frontier.weights(evidence)
    assert ("arithmetic", 1) not in weights and ("arithmetic", 2) not in weights
    assert weights[("arithmetic", 3)][0] > 10 * weights[("arithmetic", 4)][0]
    picks = Counter(slot.difficulty for slot in frontier.select(evidence, 200, rng=random.Random(0)))
    assert picks[3] > 0.8 * 200
    assert picks[1] == picks[2] == 0


def test_an_untried_level_is_explored_only_just_above_what_the_teacher_solves() -> None:
    evidence = {("arithmetic", 1): CellEvidence(student_greedy=0.5, teacher_attempts=20, teacher_passes=15)}
    weights = LearnableFrontier(LADDER).weights(evidence)
    assert set(weights) == {("arithmetic", 1), ("arithmetic", 2)}
    assert weights[("arithmetic", 2)][1].startswith("explore")


def test_a_promotion_that_masters_everything_still_gives_a_batch() -> None:
    evidence = {
        ("arithmetic", d): CellEvidence(student_greedy=1.0, teacher_attempts=9, teacher_passes=9)
        for d in LADDER["arithmetic"]
    }
    slots = LearnableFrontier(LADDER).select(evidence, 3, rng=random.Random(1))
    assert [s.difficulty for s in slots] == [5, 5, 5]


def test_bad_settings_are_refused_with_a_clear_message() -> None:
    with pytest.raises(ValueError, match="mastered must be in"):
        LearnableFrontier(LADDER, mastered=0.0)
    with pytest.raises(ValueError, match="batch_size must be at least 1"):
        LearnableFrontier(LADDER).select({}, 0, rng=random.Random(0))


def test_a_cell_the_teacher_nearly_always_solves_and_the_student_fails_is_the_richest() -> None:
    """Rows per task: the student fails (1 - s) and the teacher's ladder solves (t). The variance t(1 - t) of the
    teacher's success would have ranked the level the student half solves first, and the ladder's hinted
    successes at the higher level last."""
    evidence = {
        ("arithmetic", 2): CellEvidence(student_greedy=0.5, teacher_attempts=20, teacher_passes=10),
        ("arithmetic", 3): CellEvidence(student_greedy=0.0, teacher_attempts=20, teacher_passes=19),
    }
    weights = LearnableFrontier(LADDER).weights(evidence)
    assert weights[("arithmetic", 3)][0] > 3 * weights[("arithmetic", 2)][0]
    assert "teacher solves 0.91 of tasks" in weights[("arithmetic", 3)][1]


def test_after_a_promotion_the_band_starts_just_above_what_the_new_student_solves() -> None:
    """A new release has development-slice scores but no rollouts yet. The reference run of session 9 sent every
    python_functions batch to level 8 after its promotion (384 attempts, 0 passes) because levels 1-2 were mastered
    and nothing above them counted as reached."""
    ladder = {"python_functions": tuple(range(1, 9))}
    scores = {1: 1.0, 2: 0.9, 3: 0.33, 4: 0.0, 5: 0.0, 6: 0.0, 7: 0.0, 8: 0.0}
    evidence = {("python_functions", d): CellEvidence(student_greedy=s) for d, s in scores.items()}
    picks = Counter(slot.difficulty for slot in LearnableFrontier(ladder).select(evidence, 200, rng=random.Random(0)))
    assert set(picks) == {3, 4}


def test_a_promoted_student_is_sent_past_the_level_it_half_solves() -> None:
    """A case shaped like the arithmetic hour of commit 0a024a0 after its promotion: an easy level the student
    half solves and its samples nearly always solve, against a harder one it never solves greedily and its samples
    solve a third of the time. Weighted by rows per task alone the two drew alike, and the later jobs' rows, mostly
    from levels 1-3, started training at a loss of 0.07-0.28. A row's worth falls with the student's success, so
    the harder level must lead."""
    evidence = {
        ("arithmetic", 1): CellEvidence(student_greedy=2 / 3, teacher_attempts=20, teacher_passes=19),
        ("arithmetic", 4): CellEvidence(student_greedy=0.0, teacher_attempts=20, teacher_passes=6),
    }
    weights = LearnableFrontier(LADDER).weights(evidence)
    assert weights[("arithmetic", 4)][0] > 2.5 * weights[("arithmetic", 1)][0]

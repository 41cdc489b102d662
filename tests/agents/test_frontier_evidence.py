"""The frontier's rollout evidence counts tasks, not samples: a task solved at any rung of the ladder is solved."""

from __future__ import annotations

import pytest

from lamarck.agents.frontier_evidence import ladder_entry, rollout_evidence, rung_evidence
from lamarck.agents.harness import HarnessSpec
from lamarck.agents.hint_ladder import RUNG_STRIDE
from lamarck.platform.storage import repositories as repo
from lamarck.platform.storage.database import Database
from lamarck.platform.storage.trajectory import Message, Trajectory


def _record(
    db: Database, run_id: str, task_id: str, outcomes: list[str], harness: str, generation: int, model: str = "m"
) -> None:
    with db.session() as session:
        for index, outcome in enumerate(outcomes):
            repo.record_episode(
                session,
                task_id=task_id,
                model_version=model,
                run_id=run_id,
                outcome=outcome,
                harness_version=harness,
                generation=generation,
                sample_index=index,
                trajectory=Trajectory(messages=[Message(role="user", content="q")]),
            )


def test_a_task_counts_once_per_generation_and_is_solved_by_any_sample_at_any_rung(db: Database) -> None:
    harness = HarnessSpec(environment="arithmetic")
    with db.session() as session:
        run_id = repo.create_run(session, config={}).id
        hard = repo.add_task(session, environment="arithmetic", difficulty=5, prompt="hard").id
        easy = repo.add_task(session, environment="arithmetic", difficulty=2, prompt="easy").id
        never = repo.add_task(session, environment="arithmetic", difficulty=5, prompt="never").id
    # four unaided samples fail, four partial-hint samples fail, one of four full-hint samples passes
    _record(db, run_id, hard, ["failed"] * 11 + ["passed"], harness.version_id, generation=1)
    _record(db, run_id, easy, ["passed", "failed", "passed", "failed"], harness.version_id, generation=1)
    _record(db, run_id, never, ["failed"] * 12, harness.version_id, generation=1)
    _record(db, run_id, never, ["passed"], "another-harness", generation=1)
    _record(db, run_id, never, ["passed"], harness.version_id, generation=1, model="another-model")

    evidence = rollout_evidence(db, run_id=run_id, model_version="m", harnesses={"arithmetic": harness}, generation=1)
    assert evidence[("arithmetic", 5)] == (2.0, 1.0)
    assert evidence[("arithmetic", 2)] == (1.0, 1.0)

    later = rollout_evidence(db, run_id=run_id, model_version="m", harnesses={"arithmetic": harness}, generation=4)
    assert later[("arithmetic", 5)] == pytest.approx((1.0, 0.5))  # three generations on: half the weight


def test_a_rung_that_failed_every_task_of_a_cell_is_skipped_until_its_evidence_fades(db: Database) -> None:
    harness = HarnessSpec(environment="arithmetic")
    with db.session() as session:
        run_id = repo.create_run(session, config={}).id
        hard = [repo.add_task(session, environment="arithmetic", difficulty=5, prompt=f"hard {i}").id for i in range(4)]
        easy = repo.add_task(session, environment="arithmetic", difficulty=2, prompt="easy").id
    for task_id in hard:  # unaided and partial rungs fail, the full rung solves it
        with db.session() as session:
            for rung, outcome in ((0, "failed"), (1, "failed"), (2, "passed")):
                repo.record_episode(
                    session,
                    task_id=task_id,
                    model_version="m",
                    run_id=run_id,
                    outcome=outcome,
                    harness_version=harness.version_id,
                    generation=1,
                    sample_index=rung * RUNG_STRIDE,
                    trajectory=Trajectory(messages=[Message(role="user", content="q")]),
                )
    _record(db, run_id, easy, ["passed"], harness.version_id, generation=1)

    evidence = rung_evidence(db, run_id=run_id, model_version="m", harnesses={"arithmetic": harness}, generation=1)
    assert evidence[(("arithmetic", 5), 0)] == (4.0, 0.0)
    assert evidence[(("arithmetic", 5), 2)] == (4.0, 4.0)
    assert ladder_entry(evidence, rungs=3, skip_after=4.0) == {("arithmetic", 5): 2}
    assert ladder_entry(evidence, rungs=2, skip_after=4.0) == {("arithmetic", 5): 1}  # the top rung always runs
    assert ladder_entry(evidence, rungs=3, skip_after=5.0) == {}  # too little evidence to call a rung dead

    later = rung_evidence(db, run_id=run_id, model_version="m", harnesses={"arithmetic": harness}, generation=4)
    assert ladder_entry(later, rungs=3, skip_after=4.0) == {}  # faded: the bottom rung is tried again
    other = rung_evidence(db, run_id=run_id, model_version="m2", harnesses={"arithmetic": harness}, generation=1)
    assert ladder_entry(other, rungs=3, skip_after=4.0) == {}  # a new model version starts without the evidence

"""The frontier's rollout evidence counts tasks, not samples: a task solved at any rung of the ladder is solved."""

from __future__ import annotations

import pytest

from lamarck.agents.frontier_evidence import rollout_evidence
from lamarck.agents.harness import HarnessSpec
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

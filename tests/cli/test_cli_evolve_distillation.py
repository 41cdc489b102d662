"""The whole loop with the real model: ``lamarck evolve`` queues distillation to its embedded Celery worker, the
worker trains a LoRA candidate with TRL, and the run gates it on held-out tasks before it ends.

How many of two tiny generations' attempts the base model passes depends on the CPU's numerics (1 of 30 on one CI
machine, more here), so two verified episodes from an earlier run are recorded first, the way the executor records
them: the distillation threshold is met whatever the model's luck, and the run's own passes join the dataset."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import typer
from sqlalchemy import select
from typer.testing import CliRunner

from lamarck.agents.evaluation import default_harness_for
from lamarck.agents.executor import student_opening, student_view
from lamarck.commands.evolve import evolve
from lamarck.curriculum.heldout import training_task
from lamarck.curriculum.registry import get_environment
from lamarck.platform.events import EventBus
from lamarck.platform.storage import repositories as repo
from lamarck.platform.storage.database import Database
from lamarck.platform.storage.migrate import upgrade
from lamarck.platform.storage.records import Evaluation
from lamarck.platform.storage.trajectory import Message, Trajectory
from lamarck.training.dataset_io import dataset_dir, load_dataset

app = typer.Typer()
app.command("evolve")(evolve)
app.command("noop")(lambda: None)  # a second command keeps Typer from folding "evolve" into the root


def record_earlier_pass(db: Database, seed: int) -> str:
    """A level-1 arithmetic task and a verified episode that answers it, opening as the executor opens for the
    student."""
    env = get_environment("arithmetic")
    spec = training_task(env, 1, random.Random(seed))
    harness = default_harness_for(env)
    messages = student_opening(spec, env, harness)
    messages[0].meta.update(student_view(spec, env, harness))
    messages.append(Message(role="assistant", content=f"ANSWER: {spec.reference['answer']}"))
    with db.session() as session:
        task = repo.add_task(
            session,
            environment="arithmetic",
            difficulty=1,
            prompt=spec.prompt,
            reference=dict(spec.reference),
            meta=dict(spec.metadata),
        )
        return repo.record_episode(
            session,
            task_id=task.id,
            model_version="smollm2-135m",
            trajectory=Trajectory(messages=messages),
            outcome="passed",
        ).id


@pytest.mark.slow
def test_evolve_distils_a_candidate_and_gates_it_with_the_real_model(  # type: ignore[no-untyped-def]
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model_store
) -> None:
    data = tmp_path / "data"
    for key, value in {
        "DATA_DIR": str(data),
        "MODEL_STORE_DIR": str(model_store.root),
        "TRAINING__MIN_NEW_EPISODES": "2",
        "TRAINING__MAX_STEPS": "2",
        "TRAINING__BATCH_SIZE": "2",
        "TRAINING__GATE_PER_LEVEL": "1",
        "TRAINING__GATE_FOCUS_PER_LEVEL": "2",
        "TRAINING__GATE_ENVIRONMENTS": "[]",
        "TRAINING__ANCHOR_LEVELS": "0",  # two tiny generations may pass only level-1 tasks; train on them anyway
        # the base model's rare passes are seldom sound (the process filter has its own unit tests)
        "TRAINING__PROCESS_FILTER": "false",
        "TRAINING__VALIDATION_SHARE": "0",  # two steps cannot lower a validation loss; here the gate alone decides
    }.items():
        monkeypatch.setenv(f"LAMARCK_{key}", value)
    db = Database(f"sqlite:///{data / 'lamarck.db'}")
    upgrade(db)
    with db.session() as session:  # what `lamarck models import-default` records
        repo.register_model_version(session, version_id="smollm2-135m", base="smollm2-135m", status="promoted")
    earlier = {record_earlier_pass(db, seed) for seed in (11, 12)}
    result = CliRunner().invoke(
        app,
        [
            "evolve",
            "--env",
            "arithmetic",
            "--generations",
            "2",
            "--batch",
            "4",
            "--samples",
            "2",
            "--llm-share",
            "0",
            "--no-judge",
            "--no-repair",
            "--seed",
            "3",
            "--hint",
            "none",
            "--hint",
            "full",
            "--frontier",
            "thompson",
        ],
    )
    # the ladder's two ends, and the frontier that starts at level 1, where the base model passes at all
    assert result.exit_code == 0, result.output
    assert "distillation queued from smollm2-135m" in result.output, result.output
    assert "gate: smollm2-135m-ft-" in result.output, result.output

    try:
        with db.session() as session:
            candidates = [v for v in repo.list_model_versions(session) if v.id != "smollm2-135m"]
            assert candidates, "no candidate was trained"
            assert len({v.dataset_digest for v in candidates}) == len(candidates), "the same data trained twice"
            for version in candidates:
                assert version.adapter_path and Path(version.adapter_path, "adapter_config.json").is_file()
                assert version.training_metrics["sft"]["steps"] == 2
                assert "gate" in version.eval_scores and version.reason
                assert version.status in ("candidate", "promoted", "retired")
            gated = set(session.scalars(select(Evaluation.model_version).where(Evaluation.kind == "gate")))
        trained = {
            row.episode_id
            for version in candidates
            for row in load_dataset(dataset_dir(data, version.dataset_digest)).rows
        }
        assert earlier <= trained, "the earlier run's verified episodes were not distilled"
        types = [e.type for e in EventBus(db).replay(limit=100_000)]
        assert "job.succeeded" in types and "model.candidate" in types and "model.gate" in types
        assert types.index("model.gate") > types.index("model.candidate")
        assert gated == {version.id for version in candidates}  # every candidate was judged before the run ended
        succeeded = {e.payload["job"] for e in EventBus(db).replay(limit=100_000) if e.type == "job.succeeded"}
        assert len(succeeded) == len(candidates), "one job, one candidate"
    finally:
        db.dispose()

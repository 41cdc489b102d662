"""The recipe's decisions without a model: the split by task, steps from data size, the schedule, the verdict, and a
refused job that is neither retrained nor scheduled again."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from training_helpers import add_episode, add_task

from lamarck.platform.container import Container
from lamarck.platform.settings import Settings, TrainingSettings
from lamarck.platform.storage.database import Database
from lamarck.training import pipeline, recipe, registry
from lamarck.training.device import TrainDevice
from lamarck.training.recipe import CandidateRefused, Evaluation, ValidationReport
from lamarck.training.registry import RegistryError
from lamarck.training.traces_to_rows import TrainingRow


def _rows(tasks: int, per_task: int = 2) -> list[TrainingRow]:
    return [
        TrainingRow(
            task_id=f"task-{t}",
            episode_id=f"ep-{t}-{k}",
            environment="arithmetic",
            difficulty=2,
            messages=[{"role": "user", "content": f"q{t}"}, {"role": "assistant", "content": f"a{t}.{k}"}],
            train_turns=[1],
        )
        for t in range(tasks)
        for k in range(per_task)
    ]


def test_the_split_keeps_every_task_on_one_side_and_is_stable() -> None:
    rows = _rows(20)
    split = recipe.split_by_task(rows, 0.2)
    train_tasks = {r.task_id for r in split.train}
    val_tasks = {r.task_id for r in split.validation}
    assert len(val_tasks) == 4 and not train_tasks & val_tasks
    assert len(split.train) + len(split.validation) == len(rows) and len(split.validation) == 8
    assert sorted(val_tasks) == split.validation_tasks
    assert recipe.split_by_task(list(reversed(rows)), 0.2).validation_tasks == split.validation_tasks
    assert recipe.split_by_task(rows, 0.2, seed=1).validation_tasks != split.validation_tasks


@pytest.mark.parametrize(("tasks", "share"), [(3, 0.15), (20, 0.0), (1, 0.9)])
def test_no_split_when_it_would_hold_out_no_task_or_every_task(tasks: int, share: float) -> None:
    split = recipe.split_by_task(_rows(tasks), share)
    assert not split.validation and len(split.train) == 2 * tasks and "no validation split" in split.note


def test_steps_follow_the_data_size_between_a_minimum_and_the_cap() -> None:
    settings = TrainingSettings(epochs=2, batch_size=4, grad_accum=1, min_steps=10, max_steps=60)
    assert recipe.planned_steps(57, settings) == math.ceil(2 * 57 / 4) == 29
    assert recipe.planned_steps(8, settings) == 10
    assert recipe.planned_steps(500, settings) == 60
    assert recipe.planned_steps(57, settings.model_copy(update={"grad_accum": 2})) == 15


def test_the_schedule_warms_up_then_decays() -> None:
    from lamarck.training.sft import plan, sft_config

    device = TrainDevice("cpu", "fp32", "test")
    settings = TrainingSettings(epochs=2, batch_size=4, warmup_ratio=0.1, evaluations=6)
    job = plan(settings, 57, validation=True)
    assert (job.steps, job.warmup_steps, job.scheduler, job.eval_steps) == (29, 3, "cosine", 5)
    config = sft_config(Path("/tmp/unused"), settings, device, job)
    assert config.lr_scheduler_type == "cosine" and config.warmup_steps == 3 and config.learning_rate == 1e-3
    assert config.eval_strategy == "steps" and config.eval_steps == 5 and config.save_steps == 5
    assert config.load_best_model_at_end and config.metric_for_best_model == "eval_loss"
    assert not config.greater_is_better and config.prediction_loss_only and not config.bf16

    old = TrainingSettings(
        lr_scheduler="constant",
        warmup_ratio=0.0,
        learning_rate=3e-4,
        early_stopping_patience=0,
        keep_best=False,
        save_steps=20,
    )
    job = plan(old, 57, validation=False, max_steps=30)
    config = sft_config(Path("/tmp/unused"), old, device, job)
    assert (job.steps, config.lr_scheduler_type, config.warmup_steps, config.save_steps) == (30, "constant", 0, 20)
    assert config.eval_strategy == "no" and not config.load_best_model_at_end
    assert recipe.scheduler_type(old.model_copy(update={"warmup_ratio": 0.1})) == "constant_with_warmup"


def _report(start: float, losses: list[float], planned: int = 12, kept: str = "last") -> ValidationReport:
    evaluations = [Evaluation(step=2 * (i + 1), loss=loss) for i, loss in enumerate(losses)]
    return ValidationReport.of(
        rows=6, tasks=3, start_loss=start, evaluations=evaluations, planned_steps=planned, kept=kept
    )


def test_the_verdict_refuses_a_validation_loss_that_only_rose() -> None:
    falling = _report(1.0, [0.8, 0.6, 0.7])
    assert (falling.best_loss, falling.best_step, falling.last_loss, falling.last_step) == (0.6, 4, 0.7, 6)
    assert falling.stopped_early and recipe.refusal(falling, 0.05) is None

    rising = _report(1.0, [1.1, 1.3, 1.6])
    assert rising.best_step == 0 and rising.best_loss == 1.0
    assert "never fell below the parent's 1.0000" in (recipe.refusal(rising, 0.05) or "")

    spiked = _report(1.0, [0.9, 1.2, 1.4])
    assert spiked.best_step == 2 and "rose to 1.4000 at step 6" in (recipe.refusal(spiked, 0.05) or "")
    assert recipe.refusal(_report(1.0, [0.9, 1.04, 1.04]), 0.05) is None  # within the margin
    assert "rose" in (recipe.refusal(_report(1.0, [0.9, float("nan")]), 0.05) or "")  # diverged
    assert recipe.refusal(None, 0.05) is None
    assert not _report(1.0, [0.9] * 6).stopped_early


def test_the_verdict_judges_the_weights_the_job_keeps() -> None:
    """A job that keeps its best checkpoint returns weights below the parent's loss: a later rise does not refuse it."""
    assert recipe.refusal(_report(1.0, [0.9, 1.2, 1.4], kept="best"), 0.05) is None
    assert recipe.refusal(_report(1.0, [0.9, float("nan")], kept="best"), 0.05) is None
    assert "never fell" in (recipe.refusal(_report(1.0, [1.1, 1.3], kept="best"), 0.05) or "")
    assert "keeps its last weights" in (recipe.refusal(_report(1.0, [0.9, 1.2, 1.4], kept="last"), 0.05) or "")


def test_a_refusal_is_bad_input_for_the_job_guard() -> None:
    from lamarck.training.tasks import bad_input_errors

    assert issubclass(CandidateRefused, RegistryError)
    assert isinstance(CandidateRefused("x"), bad_input_errors())


def test_a_refused_dataset_is_not_trained_or_scheduled_again(tmp_path: Path, sqlite_db: Database) -> None:
    settings = Settings(
        data_dir=tmp_path / "data",
        database_url=sqlite_db.url,
        training=TrainingSettings(min_new_episodes=2, process_filter=False),
    )
    container = Container(settings)
    sent: list[tuple[str, dict[str, Any]]] = []
    try:
        for seed in (310, 311):
            task, prompt = add_task(sqlite_db, difficulty=2, seed=seed)
            add_episode(sqlite_db, task, prompt)
        first = pipeline.maybe_schedule_distillation(container, lambda name, kwargs: sent.append((name, kwargs)))
        assert first.scheduled and first.dataset_digest is not None
        version = registry.candidate_id("smollm2-135m", first.dataset_digest)
        pipeline.record_refusal(
            container,
            pipeline.Refusal(
                version_id=version,
                parent_version="smollm2-135m",
                dataset_digest=first.dataset_digest,
                reason="validation loss never fell below the parent's 1.0000",
                metrics={"sft": {"validation": {"last_loss": float("nan")}}},
            ),
            bus=None,
        )
        assert pipeline.refused(container, version).metrics["sft"]["validation"]["last_loss"] in (None, "NaN")
        with pytest.raises(CandidateRefused, match="refused before: validation loss never fell"):
            pipeline.train_candidate(container, parent_version="smollm2-135m", dataset_digest=first.dataset_digest)
        again = pipeline.maybe_schedule_distillation(container, lambda name, kwargs: sent.append((name, kwargs)))
        assert not again.scheduled and "refused: validation loss never fell" in again.reason and len(sent) == 1
        with sqlite_db.session() as session:
            assert registry.trained_from(session, parent_id="smollm2-135m", dataset_digest=first.dataset_digest) is None
            assert registry.champion(session) == "smollm2-135m"
    finally:
        container.close()

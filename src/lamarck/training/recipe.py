"""The training recipe's decisions, as plain functions: the validation split, the step budget, the schedule and the
verdict on a finished run.

Why each exists: the evolution runs trained 30 steps at a constant learning rate over ~67 rows with nothing held
out, so a job could memorise its rows (loss 0.41 to 0.09) and nobody could tell. Here a share of the *tasks* is
held out (rows of one task, e.g. two passes of it, would otherwise leak between the sides), the number of steps
follows the data (epochs over the training side, capped), and a job whose validation loss never improves on the
parent's is refused instead of becoming a candidate.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from lamarck.platform.settings import TrainingSettings
from lamarck.training.registry import RegistryError
from lamarck.training.traces_to_rows import TrainingRow


class CandidateRefused(RegistryError):
    """A trained job whose validation loss rose: no candidate is registered and the champion keeps serving.

    A ``RegistryError``, so the job guard records it once as bad input (``job.failed``, not retried)."""


class ValidationSplit(BaseModel):
    train: list[TrainingRow]
    validation: list[TrainingRow]
    validation_tasks: list[str] = Field(default_factory=list)
    note: str = ""  # why there is no validation side, when there is none


class Evaluation(BaseModel):
    model_config = ConfigDict(ser_json_inf_nan="strings")  # a diverged run's NaN survives a JSON round trip

    step: int
    loss: float


class ValidationReport(BaseModel):
    """Validation loss over one job: before the first step (the parent), at every evaluation, best and last."""

    model_config = ConfigDict(ser_json_inf_nan="strings")

    rows: int
    tasks: int
    start_loss: float
    evaluations: list[Evaluation] = Field(default_factory=list)
    best_loss: float
    best_step: int  # 0: no evaluation improved on the parent
    last_loss: float
    last_step: int
    stopped_early: bool = False
    kept: str = "last"  # which weights the job returns: "best" (the best checkpoint) or "last"

    @classmethod
    def of(
        cls,
        *,
        rows: int,
        tasks: int,
        start_loss: float,
        evaluations: Sequence[Evaluation],
        planned_steps: int,
        kept: str,
    ) -> ValidationReport:
        best = min((e for e in evaluations if math.isfinite(e.loss)), key=lambda e: e.loss, default=None)
        last = evaluations[-1] if evaluations else None
        improved = best is not None and best.loss < start_loss
        return cls(
            rows=rows,
            tasks=tasks,
            start_loss=start_loss,
            evaluations=list(evaluations),
            best_loss=best.loss if improved and best is not None else start_loss,
            best_step=best.step if improved and best is not None else 0,
            last_loss=last.loss if last is not None else start_loss,
            last_step=last.step if last is not None else 0,
            stopped_early=last is not None and last.step < planned_steps,
            kept=kept,
        )


def task_order_key(task_id: str, seed: int) -> str:
    return hashlib.sha256(f"{seed}:{task_id}".encode()).hexdigest()


def split_by_task(rows: Sequence[TrainingRow], share: float, *, seed: int = 0) -> ValidationSplit:
    """Hold out ``round(share * tasks)`` whole tasks, chosen by a hash of (seed, task id).

    Deterministic for a set of tasks, whatever the order of the rows. No split (everything trains) when the share
    rounds to no task or to all of them.
    """
    tasks = sorted({row.task_id for row in rows}, key=lambda task: task_order_key(task, seed))
    count = math.floor(share * len(tasks) + 0.5)
    if share <= 0 or count < 1 or count >= len(tasks):
        return ValidationSplit(
            train=list(rows), validation=[], note=f"no validation split: {len(tasks)} tasks at share {share:g}"
        )
    held = set(tasks[:count])
    return ValidationSplit(
        train=[r for r in rows if r.task_id not in held],
        validation=[r for r in rows if r.task_id in held],
        validation_tasks=sorted(held),
    )


def planned_steps(train_rows: int, settings: TrainingSettings) -> int:
    """``ceil(epochs * rows / (batch * accumulation))``, at least ``min_steps``, at most ``max_steps``."""
    per_step = settings.batch_size * settings.grad_accum
    wanted = math.ceil(settings.epochs * train_rows / per_step)
    return min(settings.max_steps, max(settings.min_steps, wanted))


def eval_every(steps: int, evaluations: int) -> int:
    return max(1, math.ceil(steps / evaluations))


def warmup_steps(steps: int, ratio: float) -> int:
    return math.ceil(ratio * steps) if ratio > 0 else 0


def scheduler_type(settings: TrainingSettings) -> str:
    """The transformers scheduler name; "constant" with warmup is transformers' ``constant_with_warmup``."""
    if settings.lr_scheduler == "constant":
        return "constant_with_warmup" if settings.warmup_ratio > 0 else "constant"
    return settings.lr_scheduler


def refusal(report: ValidationReport | None, rise_margin: float) -> str | None:
    """Why a finished job must not become a candidate, or None when it may.

    The verdict is on the weights the job returns. Refused when no evaluation beat the parent's validation loss;
    when the job keeps its last weights, also when the last evaluation ended above the parent's by more than
    ``rise_margin`` (relative): those weights fit the training rows and got worse on tasks they did not see. A job
    that keeps its best checkpoint returns weights below the parent's loss, so a later rise does not refuse it
    (the reference run refused two such jobs). Without a validation side the gate alone decides.
    """
    if report is None or not report.evaluations:
        return None
    if report.best_step == 0:
        best = min(e.loss for e in report.evaluations)
        return (
            f"validation loss never fell below the parent's {report.start_loss:.4f} "
            f"(best {best:.4f} over {len(report.evaluations)} evaluations, {report.rows} rows of "
            f"{report.tasks} held-out tasks)"
        )
    if report.kept == "best":
        return None
    if not math.isfinite(report.last_loss) or report.last_loss > report.start_loss * (1 + rise_margin):
        return (
            f"validation loss rose to {report.last_loss:.4f} at step {report.last_step}, more than "
            f"{rise_margin:.0%} above the parent's {report.start_loss:.4f} (best {report.best_loss:.4f} at "
            f"step {report.best_step}), and the job keeps its last weights"
        )
    return None

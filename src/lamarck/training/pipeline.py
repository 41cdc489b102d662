"""The plain functions behind the training jobs: schedule, build the dataset, train a candidate, register it.

Every step is idempotent on (parent version, dataset digest): the candidate's id is derived from both, a digest
already trained from a parent is refused, and the dataset directory is content-addressed. Rollouts never wait on
any of this: the champion keeps serving until the gate promotes something else.

A job whose validation loss rose (``recipe.refusal``) registers nothing: its reason and metrics are written to
``data_dir/training/refused/<candidate id>.json`` and published as ``training.refused``, the job ends with
``CandidateRefused`` (recorded once as a failed job, not retried), a redelivery refuses again without training, and
the same dataset is not scheduled again from the same parent. Its dataset and episodes stay where they were.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict
from sqlalchemy import func, select

from lamarck.platform.container import Container
from lamarck.platform.event_types import (
    CandidateTrained,
    JobFailed,
    TrainingDatasetRefused,
    TrainingMetrics,
    TrainingRefused,
    TrainingScheduled,
)
from lamarck.platform.events import EventBus
from lamarck.platform.storage.records import Episode, ModelVersion
from lamarck.training import registry
from lamarck.training.dataset_io import dataset_dir, load_dataset, save_dataset
from lamarck.training.recipe import CandidateRefused, refusal
from lamarck.training.traces_to_rows import DistillationSet, NoNewEpisodes, build_dataset, with_replay

log = logging.getLogger(__name__)

Sender = Callable[[str, dict[str, Any]], Any]  # (task name, kwargs) -> anything; the Celery send in production


class ScheduleResult(BaseModel):
    scheduled: bool
    reason: str
    parent_version: str
    new_episodes: int
    dataset_digest: str | None = None
    job: str | None = None  # the job key when scheduled (see ``distill_job_key``)


class CandidateResult(BaseModel):
    version_id: str
    parent_version: str
    dataset_digest: str
    created: bool  # False when an earlier delivery of the same job had already made it
    metrics: dict[str, Any] = {}


class Refusal(BaseModel):
    """A trained job that produced no candidate, and why."""

    model_config = ConfigDict(ser_json_inf_nan="strings")

    version_id: str  # the candidate id it would have had
    parent_version: str
    dataset_digest: str
    reason: str
    metrics: dict[str, Any] = {}


def refusal_path(data_dir: Path, version_id: str) -> Path:
    return data_dir / "training" / "refused" / f"{version_id}.json"


def refused(container: Container, version_id: str) -> Refusal | None:
    path = refusal_path(container.settings.data_dir, version_id)
    return Refusal.model_validate_json(path.read_text()) if path.is_file() else None


def record_refusal(container: Container, refusal_record: Refusal, bus: EventBus | None) -> None:
    path = refusal_path(container.settings.data_dir, refusal_record.version_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(refusal_record.model_dump_json(indent=2))
    tmp.replace(path)
    log.warning("training: %s refused: %s", refusal_record.version_id, refusal_record.reason)
    if bus is not None:
        bus.publish(TrainingRefused.model_validate(refusal_record.model_dump(mode="json")))


DISTILL_TASK = "lamarck.train.distill"


def distill_job_key(parent_version: str, dataset_digest: str) -> str:
    """The lease and job-log key of one distillation job: one parent, one dataset."""
    return f"train:{parent_version}:{dataset_digest[:16]}"


def data_since(container: Container, parent_version: str) -> datetime | None:
    """Episodes after this cutoff are new for a child of ``parent_version`` (None: all episodes)."""
    with container.db.session() as session:
        parent = session.get(ModelVersion, parent_version)
        until = (parent.training_metrics or {}).get("data_until") if parent is not None else None
    return datetime.fromisoformat(until) if until else None


def count_new_episodes(container: Container, since: datetime | None) -> int:
    with container.db.session() as session:
        query = select(func.count(Episode.id)).where(Episode.outcome == "passed")
        if since is not None:
            query = query.where(Episode.created_at > since)
        return int(session.scalar(query) or 0)


def dataset_since(container: Container, parent_version: str) -> datetime | None:
    """Where a job's rows begin: after the parent's data when it warm-starts from the parent, at the first episode
    when it trains from the base (``train_from="base"``: every row so far, ReST-EM)."""
    if container.settings.training.train_from == "base":
        return None
    return data_since(container, parent_version)


def prepare_dataset(container: Container, parent_version: str) -> DistillationSet:
    since = dataset_since(container, parent_version)
    with container.db.session() as session:
        dataset = build_dataset(
            session, parent_version=parent_version, settings=container.settings.training, since=since
        )
        if not dataset.rows:
            raise NoNewEpisodes(f"no new verified episodes since {parent_version}: nothing to train")
        dataset = with_replay(session, dataset, container.settings.training)
    save_dataset(dataset, container.settings.data_dir)
    return dataset


class DatasetRefused(ValueError):
    """A check of the run's side refused the dataset before any job was queued; the message says why."""


def sibling_datasets(container: Container, parent_version: str) -> list[set[str]]:
    """The episodes of each dataset a job from ``parent_version`` trained on (its candidates, promoted or not)."""
    with container.db.session() as session:
        digests = [v.dataset_digest for v in registry.children(session, parent_id=parent_version) if v.dataset_digest]
    return [episodes for digest in digests if (episodes := dataset_episodes(container, digest)) is not None]


def dataset_episodes(container: Container, digest: str | None) -> set[str] | None:
    directory = dataset_dir(container.settings.data_dir, digest) if digest else None
    if directory is None or not directory.is_dir():
        return None
    return {row.episode_id for row in load_dataset(directory).rows}


def parent_episodes(container: Container, parent_version: str) -> set[str]:
    """The episodes the parent itself trained on (none for the base): a job from the base repeats them, and they
    are not new to it."""
    with container.db.session() as session:
        parent = session.get(ModelVersion, parent_version)
        digest = parent.dataset_digest if parent is not None else None
    return dataset_episodes(container, digest) or set()


def maybe_schedule_distillation(
    container: Container,
    send: Sender,
    *,
    bus: EventBus | None = None,
    check: Callable[[DistillationSet], None] | None = None,
) -> ScheduleResult:
    """Queue a train job when enough new verified episodes exist since the champion and this data is untrained.

    A job needs rows no earlier job from the same parent trained on, at least ``min_new_row_share`` times as many as
    the largest of those jobs had, so a refused candidate is not retrained on near-identical rows. Measured against
    the earlier jobs, not against this dataset: while the champion stays, its dataset keeps every row since it, and
    a share of the whole would ask each job for as many new rows as all earlier jobs together (a reference run
    stalled for 27 minutes at 41 new of 87). ``check`` (the run's student-view check) may refuse the dataset with a
    reason."""
    with container.db.session() as session:
        parent = registry.champion(session)
    since = data_since(container, parent)
    new = count_new_episodes(container, since)
    minimum = container.settings.training.min_new_episodes
    if new < minimum:
        return ScheduleResult(
            scheduled=False, reason=f"{new} new verified episodes < {minimum}", parent_version=parent, new_episodes=new
        )
    try:
        dataset = prepare_dataset(container, parent)
    except NoNewEpisodes as exc:
        return ScheduleResult(scheduled=False, reason=str(exc), parent_version=parent, new_episodes=new)
    with container.db.session() as session:
        done = registry.trained_from(session, parent_id=parent, dataset_digest=dataset.digest)
    if done is not None:
        return ScheduleResult(
            scheduled=False,
            reason=f"dataset already trained as {done.id}",
            parent_version=parent,
            new_episodes=new,
            dataset_digest=dataset.digest,
        )
    before = refused(container, registry.candidate_id(parent, dataset.digest))
    if before is not None:
        return ScheduleResult(
            scheduled=False,
            reason=f"dataset already trained and refused: {before.reason}",
            parent_version=parent,
            new_episodes=new,
            dataset_digest=dataset.digest,
        )
    inherited = parent_episodes(container, parent)
    siblings = [episodes - inherited for episodes in sibling_datasets(container, parent)]
    seen = inherited.union(*siblings)
    fresh = sum(row.episode_id not in seen for row in dataset.new_rows)
    wanted = container.settings.training.min_new_row_share
    largest = max((len(rows) for rows in siblings), default=0)
    if siblings and fresh < wanted * largest:
        return ScheduleResult(
            scheduled=False,
            parent_version=parent,
            new_episodes=new,
            dataset_digest=dataset.digest,
            reason=f"only {fresh} of {len(dataset.new_rows)} rows are new to {parent}'s jobs "
            f"(< {wanted:.0%} of the {largest} new rows its largest job trained on)",
        )
    if check is not None:
        try:
            check(dataset)
        except DatasetRefused as exc:
            if bus is not None:
                bus.publish(
                    TrainingDatasetRefused(parent_version=parent, dataset_digest=dataset.digest, reason=str(exc))
                )
            return ScheduleResult(
                scheduled=False,
                reason=f"dataset refused: {exc}",
                parent_version=parent,
                new_episodes=new,
                dataset_digest=dataset.digest,
            )
    job = distill_job_key(parent, dataset.digest)
    if bus is not None:  # before the send: a job that fails at once must not read as scheduled after its failure
        bus.publish(
            TrainingScheduled(
                parent_version=parent,
                dataset_digest=dataset.digest,
                rows=len(dataset.rows),
                pairs=len(dataset.pairs),
            )
        )
    try:
        send(DISTILL_TASK, {"parent_version": parent, "dataset_digest": dataset.digest})
    except Exception as exc:
        if bus is not None:
            error = f"could not queue the job: {type(exc).__name__}: {exc}"[:500]
            bus.publish(
                JobFailed(
                    job=job, task=DISTILL_TASK, celery_id=None, attempt=0, redelivered=False, error=error,
                    final=True, retryable=True,
                )
            )  # fmt: skip
        raise
    return ScheduleResult(
        scheduled=True,
        reason=f"{len(dataset.rows)} rows from {new} new verified episodes",
        parent_version=parent,
        new_episodes=new,
        dataset_digest=dataset.digest,
        job=job,
    )


def load_or_rebuild(container: Container, parent_version: str, digest: str) -> DistillationSet:
    """The dataset from the shared data dir, or rebuilt from SQL on a host that lacks it (digest must match)."""
    directory = dataset_dir(container.settings.data_dir, digest)
    if directory.is_dir():
        return load_dataset(directory)
    dataset = prepare_dataset(container, parent_version)
    if dataset.digest != digest:
        raise NoNewEpisodes(
            f"dataset {digest[:12]} is not on this host and the episodes now give {dataset.digest[:12]}: schedule again"
        )
    return dataset


def train_candidate(
    container: Container,
    *,
    parent_version: str,
    dataset_digest: str,
    bus: EventBus | None = None,
    max_steps: int | None = None,
) -> CandidateResult:
    settings = container.settings
    version_id = registry.candidate_id(parent_version, dataset_digest)
    with container.db.session() as session:
        existing = registry.trained_from(session, parent_id=parent_version, dataset_digest=dataset_digest)
        if existing is not None:
            return CandidateResult(
                version_id=existing.id, parent_version=parent_version, dataset_digest=dataset_digest, created=False
            )
    before = refused(container, version_id)
    if before is not None:
        raise CandidateRefused(f"{version_id} was refused before: {before.reason}")
    dataset = load_or_rebuild(container, parent_version, dataset_digest)
    spec = container.model_store.resolve(parent_version)
    work = settings.data_dir / "training" / version_id
    tensorboard = settings.data_dir / "tensorboard" / version_id

    def sink(metrics: dict[str, Any]) -> None:
        if bus is not None:
            bus.publish(TrainingMetrics(version=version_id, **metrics))

    from lamarck.training.sft import train_sft

    from_base = settings.training.train_from == "base"
    result = train_sft(
        base_dir=spec.base_dir,
        rows=dataset.rows,
        work_dir=work / "sft",
        settings=settings.training,
        parent_adapter=None if from_base else spec.adapter_dir,
        tensorboard_dir=tensorboard / "sft",
        on_metrics=sink,
        max_steps=max_steps,
    )
    adapter = Path(result.output_dir)
    metrics: dict[str, Any] = {
        "sft": result.model_dump(mode="json"),
        "rows": len(dataset.rows),
        "pairs": len(dataset.pairs),
        "data_until": dataset.until.isoformat() if dataset.until else None,
        "environments": dataset.environments,
        "counts": dataset.counts(),
        "by_hint": dataset.by_hint(),
        "train_from": settings.training.train_from,
        "replayed": dataset.replayed,
    }
    reason = refusal(result.validation, settings.training.refuse_rise)
    if reason is not None:
        record_refusal(
            container,
            Refusal(
                version_id=version_id,
                parent_version=parent_version,
                dataset_digest=dataset_digest,
                reason=reason,
                metrics=metrics,
            ),
            bus,
        )
        shutil.rmtree(work, ignore_errors=True)
        raise CandidateRefused(f"{version_id}: {reason}")
    if settings.training.dpo and dataset.pairs:
        from lamarck.training.dpo import train_dpo

        dpo = train_dpo(
            base_dir=spec.base_dir,
            adapter_dir=adapter,
            pairs=dataset.pairs,
            work_dir=work / "dpo",
            settings=settings.training,
            tensorboard_dir=tensorboard / "dpo",
            on_metrics=sink,
        )
        adapter = Path(dpo.output_dir)
        metrics["dpo"] = dpo.model_dump()
    check_adapter_loads(adapter, spec.base_dir)
    container.model_store.add_adapter(version_id, adapter, base=spec.base_name)
    with container.db.session() as session:
        if spec.adapter_dir is None:
            registry.ensure_base_registered(session, spec.version)
        registry.register_candidate(
            session,
            version_id=version_id,
            base=spec.base_name,
            adapter_path=str(container.model_store.adapter_root / version_id),
            parent_id=parent_version,
            dataset_digest=dataset_digest,
            training_metrics=metrics,
        )
    shutil.rmtree(work, ignore_errors=True)  # checkpoints are only for resuming; the adapter is in the store
    if bus is not None:
        validation = result.validation
        bus.publish(
            CandidateTrained(
                version=version_id,
                parent=parent_version,
                digest=dataset_digest,
                first_loss=result.first_loss,
                last_loss=result.last_loss,
                val_loss_start=validation.start_loss if validation else None,
                val_loss_best=validation.best_loss if validation else None,
            )
        )
    return CandidateResult(
        version_id=version_id,
        parent_version=parent_version,
        dataset_digest=dataset_digest,
        created=True,
        metrics=metrics,
    )


def check_adapter_loads(adapter_dir: Path, base_dir: Path) -> None:
    """Refuse an adapter the serving engine cannot load, before it is registered."""
    import json

    from lamarck.platform.llm.runner import load_lora

    layers = json.loads((base_dir / "config.json").read_text())["num_hidden_layers"]
    load_lora(adapter_dir, layers)

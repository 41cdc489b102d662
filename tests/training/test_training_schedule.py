"""Scheduling distillation: enough new verified episodes since the champion, deduped by dataset digest."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from training_helpers import add_episode, add_task

from lamarck.platform.container import Container
from lamarck.platform.events import EventBus
from lamarck.platform.settings import Settings, TrainingSettings
from lamarck.platform.storage.database import Database
from lamarck.training import registry
from lamarck.training.dataset_io import dataset_dir, load_dataset
from lamarck.training.pipeline import maybe_schedule_distillation


def record_candidate_of_base(db: Database, digest: str) -> None:
    """A job from the base ran on ``digest`` and registered its candidate (not promoted)."""
    with db.session() as session:
        registry.ensure_base_registered(session)
        registry.register_candidate(
            session,
            version_id=registry.candidate_id("smollm2-135m", digest),
            base="smollm2-135m",
            adapter_path=None,
            parent_id="smollm2-135m",
            dataset_digest=digest,
            training_metrics={},
        )


def test_schedules_once_enough_new_episodes_exist_and_never_the_same_data_twice(
    tmp_path: Path, sqlite_db: Database
) -> None:
    settings = Settings(
        data_dir=tmp_path / "data",
        database_url=sqlite_db.url,
        training=TrainingSettings(min_new_episodes=3, process_filter=False, anchor_levels=0),
    )
    container = Container(settings)  # the helpers' level-1 `calc` episodes: no process filter, no anchor cap
    sent: list[tuple[str, dict[str, Any]]] = []

    def send(name: str, kwargs: dict[str, Any]) -> None:
        sent.append((name, kwargs))

    try:
        task, prompt = add_task(sqlite_db, seed=300)
        add_episode(sqlite_db, task, prompt)
        first = maybe_schedule_distillation(container, send)
        assert not first.scheduled and "1 new verified episodes < 3" in first.reason
        for seed in (301, 302):
            task, prompt = add_task(sqlite_db, seed=seed)
            add_episode(sqlite_db, task, prompt)
        bus = EventBus(sqlite_db)
        second = maybe_schedule_distillation(container, send, bus=bus)
        assert second.scheduled and second.dataset_digest is not None
        assert sent == [
            ("lamarck.train.distill", {"parent_version": "smollm2-135m", "dataset_digest": second.dataset_digest})
        ]
        assert (dataset_dir(settings.data_dir, second.dataset_digest) / "rows.parquet").is_file()
        assert [e.type for e in bus.replay()] == ["training.scheduled"]
        # the job ran and made a candidate from this digest
        record_candidate_of_base(sqlite_db, second.dataset_digest)
        third = maybe_schedule_distillation(container, send)
        assert not third.scheduled and "already trained" in third.reason and len(sent) == 1
    finally:
        container.close()


def test_a_dataset_with_too_few_rows_new_to_the_parents_jobs_is_not_queued(tmp_path: Path, sqlite_db: Database) -> None:
    settings = Settings(
        data_dir=tmp_path / "data",
        database_url=sqlite_db.url,
        training=TrainingSettings(min_new_episodes=1, process_filter=False, anchor_levels=0, min_new_row_share=0.5),
    )
    container = Container(settings)
    sent: list[tuple[str, dict[str, Any]]] = []
    try:
        for seed in range(400, 404):
            task, prompt = add_task(sqlite_db, seed=seed)
            add_episode(sqlite_db, task, prompt)
        first = maybe_schedule_distillation(container, lambda name, kwargs: sent.append((name, kwargs)))
        assert first.scheduled and first.dataset_digest is not None
        # trained, then refused by the gate: the champion is still the base
        record_candidate_of_base(sqlite_db, first.dataset_digest)
        task, prompt = add_task(sqlite_db, seed=410)  # one new episode beside four trained ones: < half of 4
        add_episode(sqlite_db, task, prompt)
        again = maybe_schedule_distillation(container, lambda name, kwargs: sent.append((name, kwargs)))
        assert not again.scheduled and "only 1 of 5 rows are new" in again.reason and len(sent) == 1
        assert "50% of the 4 new rows its largest job trained on" in again.reason
        task, prompt = add_task(sqlite_db, seed=411)  # two new of six: a third of this dataset, but half the last job's
        add_episode(sqlite_db, task, prompt)
        later = maybe_schedule_distillation(container, lambda name, kwargs: sent.append((name, kwargs)))
        assert later.scheduled and len(sent) == 2
    finally:
        container.close()


def test_a_share_above_one_makes_each_retry_from_the_same_parent_wait_for_more_rows_than_the_last(
    tmp_path: Path, sqlite_db: Database
) -> None:
    """Fewer, bigger jobs: with a share of 2, a refused job of 2 rows is retried only once 4 rows are new to it."""
    settings = Settings(
        data_dir=tmp_path / "data",
        database_url=sqlite_db.url,
        training=TrainingSettings(min_new_episodes=1, process_filter=False, anchor_levels=0, min_new_row_share=2.0),
    )
    container = Container(settings)
    sent: list[tuple[str, dict[str, Any]]] = []
    try:
        for seed in (600, 601):
            task, prompt = add_task(sqlite_db, seed=seed)
            add_episode(sqlite_db, task, prompt)
        first = maybe_schedule_distillation(container, lambda name, kwargs: sent.append((name, kwargs)))
        assert first.scheduled and first.dataset_digest is not None
        record_candidate_of_base(sqlite_db, first.dataset_digest)
        for seed in (610, 611, 612):
            task, prompt = add_task(sqlite_db, seed=seed)
            add_episode(sqlite_db, task, prompt)
        waiting = maybe_schedule_distillation(container, lambda name, kwargs: sent.append((name, kwargs)))
        assert not waiting.scheduled and "only 3 of 5 rows are new" in waiting.reason and len(sent) == 1
        assert "200% of the 2 new rows its largest job trained on" in waiting.reason
        task, prompt = add_task(sqlite_db, seed=613)
        add_episode(sqlite_db, task, prompt)
        bigger = maybe_schedule_distillation(container, lambda name, kwargs: sent.append((name, kwargs)))
        assert bigger.scheduled and len(sent) == 2
    finally:
        container.close()


def test_a_job_from_the_base_trains_on_every_row_so_far_and_needs_rows_new_to_the_champion(
    tmp_path: Path, sqlite_db: Database
) -> None:
    """ReST-EM: after a promotion, the next dataset holds the champion's rows again, but only the rows the champion
    did not train on count as new."""
    settings = Settings(
        data_dir=tmp_path / "data",
        database_url=sqlite_db.url,
        training=TrainingSettings(
            min_new_episodes=1, process_filter=False, anchor_levels=0, min_new_row_share=0.5, train_from="base"
        ),
    )
    container = Container(settings)
    sent: list[tuple[str, dict[str, Any]]] = []
    try:
        for seed in range(500, 504):
            task, prompt = add_task(sqlite_db, seed=seed)
            add_episode(sqlite_db, task, prompt)
        first = maybe_schedule_distillation(container, lambda name, kwargs: sent.append((name, kwargs)))
        assert first.scheduled and first.dataset_digest is not None
        champion = registry.candidate_id("smollm2-135m", first.dataset_digest)
        with sqlite_db.session() as session:
            registry.ensure_base_registered(session)
            registry.register_candidate(
                session,
                version_id=champion,
                base="smollm2-135m",
                adapter_path=None,
                parent_id="smollm2-135m",
                dataset_digest=first.dataset_digest,
                training_metrics={"data_until": None},
            )
            registry.promote(session, version_id=champion)
        for seed in range(510, 512):
            task, prompt = add_task(sqlite_db, seed=seed)
            add_episode(sqlite_db, task, prompt)
        second = maybe_schedule_distillation(container, lambda name, kwargs: sent.append((name, kwargs)))
        assert second.scheduled and second.parent_version == champion
        assert second.dataset_digest is not None
        rows = load_dataset(dataset_dir(settings.data_dir, second.dataset_digest)).rows
        assert len(rows) == 6  # the champion's four and the two since
        with sqlite_db.session() as session:
            registry.register_candidate(
                session,
                version_id=registry.candidate_id(champion, second.dataset_digest),
                base="smollm2-135m",
                adapter_path=None,
                parent_id=champion,
                dataset_digest=second.dataset_digest,
                training_metrics={},
            )
        task, prompt = add_task(sqlite_db, seed=520)  # one row new to both jobs, against the sibling's two new ones
        add_episode(sqlite_db, task, prompt)
        third = maybe_schedule_distillation(container, lambda name, kwargs: sent.append((name, kwargs)))
        assert third.scheduled, third.reason  # 1 >= 50% of 2: the champion's own rows are not counted against it
    finally:
        container.close()


def test_a_warm_start_with_replay_carries_earlier_rows_that_do_not_count_as_new(
    tmp_path: Path, sqlite_db: Database
) -> None:
    settings = Settings(
        data_dir=tmp_path / "data",
        database_url=sqlite_db.url,
        training=TrainingSettings(
            min_new_episodes=1, process_filter=False, anchor_levels=0, min_new_row_share=0.5, replay_share=1.0
        ),
    )
    container = Container(settings)
    sent: list[tuple[str, dict[str, Any]]] = []
    try:
        for seed in range(700, 704):
            task, prompt = add_task(sqlite_db, seed=seed)
            add_episode(sqlite_db, task, prompt)
        first = maybe_schedule_distillation(container, lambda name, kwargs: sent.append((name, kwargs)))
        assert first.scheduled and first.dataset_digest is not None
        first_rows = load_dataset(dataset_dir(settings.data_dir, first.dataset_digest))
        assert first_rows.replayed == 0  # from the base model nothing came before
        champion = registry.candidate_id("smollm2-135m", first.dataset_digest)
        with sqlite_db.session() as session:
            registry.ensure_base_registered(session)
            registry.register_candidate(
                session,
                version_id=champion,
                base="smollm2-135m",
                adapter_path=None,
                parent_id="smollm2-135m",
                dataset_digest=first.dataset_digest,
                training_metrics={"data_until": first_rows.until.isoformat() if first_rows.until else None},
            )
            registry.promote(session, version_id=champion)
        for seed in range(710, 712):
            task, prompt = add_task(sqlite_db, seed=seed)
            add_episode(sqlite_db, task, prompt)
        second = maybe_schedule_distillation(container, lambda name, kwargs: sent.append((name, kwargs)))
        assert second.scheduled and second.dataset_digest is not None, second.reason
        dataset = load_dataset(dataset_dir(settings.data_dir, second.dataset_digest))
        earlier = {row.episode_id for row in first_rows.rows}
        assert len(dataset.rows) == 4 and dataset.replayed == 2  # two new rows, one earlier row per new row
        assert {row.episode_id for row in dataset.rows[2:]} <= earlier
        assert not {row.episode_id for row in dataset.new_rows} & earlier
    finally:
        container.close()


def test_the_schedule_is_recorded_before_the_send_and_a_send_that_fails_ends_the_job(
    tmp_path: Path, sqlite_db: Database
) -> None:
    settings = Settings(
        data_dir=tmp_path / "data",
        database_url=sqlite_db.url,
        training=TrainingSettings(min_new_episodes=1, process_filter=False, anchor_levels=0),
    )
    container = Container(settings)
    bus = EventBus(sqlite_db)
    seen: list[str] = []

    def send(name: str, kwargs: dict[str, Any]) -> None:
        seen.extend(e.type for e in bus.replay())  # what a job failing at once would be recorded after
        raise ConnectionError("broker down")

    try:
        task, prompt = add_task(sqlite_db, seed=800)
        add_episode(sqlite_db, task, prompt)
        with pytest.raises(ConnectionError):
            maybe_schedule_distillation(container, send, bus=bus)
        assert seen == ["training.scheduled"]
        failed = [e for e in bus.replay() if e.type == "job.failed"]
        assert (
            len(failed) == 1 and "could not queue the job: ConnectionError: broker down" in failed[0].payload["error"]
        )
        assert failed[0].payload["job"].startswith("train:smollm2-135m:")
    finally:
        container.close()

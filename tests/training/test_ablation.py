"""The ablation replays a promoted lineage without the privileged-hint rows: it follows parents, drops only those
rows, skips a job left empty, and really trains what is left (a tiny real LoRA run on SmolLM2)."""

from __future__ import annotations

from pathlib import Path

import pytest
from training_helpers import add_episode, add_task

from lamarck.agents.critic_repair import REPAIR_SOURCE
from lamarck.platform.container import Container
from lamarck.platform.settings import DEFAULT_MODEL_VERSION, Settings, TrainingSettings
from lamarck.platform.storage import repositories as repo
from lamarck.platform.storage.database import Database
from lamarck.training import pipeline
from lamarck.training.ablation import PRIVILEGED_HINTS, ablate, lineage, replayed_jobs, without_hints
from lamarck.training.dataset_io import save_dataset
from lamarck.training.traces_to_rows import DistillationSet, TrainingRow, dataset_digest


def _row(hint: str, index: int = 0) -> TrainingRow:
    return TrainingRow(
        task_id=f"t{index}",
        episode_id=f"e{index}",
        environment="arithmetic",
        difficulty=2,
        messages=[{"role": "user", "content": "1 + 1"}, {"role": "assistant", "content": "ANSWER: 2"}],
        train_turns=[1],
        hint_level=hint,
    )


def _register_chain(db: Database, digests: list[str], starts: list[str] | None = None) -> list[str]:
    versions, parent = [], DEFAULT_MODEL_VERSION
    with db.session() as session:
        repo.register_model_version(
            session, version_id=DEFAULT_MODEL_VERSION, base=DEFAULT_MODEL_VERSION, status="promoted"
        )
        for index, digest in enumerate(digests):
            version = f"ft-{index}"
            repo.register_model_version(
                session,
                version_id=version,
                base=DEFAULT_MODEL_VERSION,
                parent_id=parent,
                dataset_digest=digest,
                training_metrics={"train_from": starts[index]} if starts else {},
            )
            versions.append(version)
            parent = version
    return versions


def test_lineage_runs_from_the_first_job_to_the_version(sqlite_db: Database) -> None:
    versions = _register_chain(sqlite_db, ["a", "b", "c"])
    with sqlite_db.session() as session:
        assert lineage(session, versions[-1]) == versions
        assert lineage(session, versions[0]) == versions[:1]
        assert lineage(session, DEFAULT_MODEL_VERSION) == []


def test_the_replay_starts_at_the_last_job_that_trained_from_the_base(sqlite_db: Database) -> None:
    versions = _register_chain(sqlite_db, ["a", "b", "c", "d"], starts=["champion", "base", "base", "champion"])
    with sqlite_db.session() as session:
        assert replayed_jobs(session, versions[-1]) == [("ft-2", "c"), ("ft-3", "d")]
        assert replayed_jobs(session, versions[1]) == [("ft-1", "b")]
        assert replayed_jobs(session, versions[0]) == [("ft-0", "a")]


def test_only_privileged_hint_rows_are_dropped() -> None:
    rows = [_row(hint, i) for i, hint in enumerate(["none", "glossary", "demonstrations", "partial", "full"])]
    repaired = _row("none", 5).model_copy(update={"repaired": True})
    tagged = _row(REPAIR_SOURCE, 6)
    kept = without_hints([*rows, repaired, tagged], PRIVILEGED_HINTS)
    assert [(r.hint_level, r.repaired) for r in kept] == [
        ("none", False),
        ("glossary", False),
        ("demonstrations", False),
    ]
    assert len(without_hints([*rows, repaired], {"partial", "full"})) == 4  # repairs kept when not asked to drop


def test_the_base_model_has_nothing_to_replay(tmp_path: Path, sqlite_db: Database, model_store) -> None:  # type: ignore[no-untyped-def]
    container = Container(
        Settings(data_dir=tmp_path / "data", database_url=sqlite_db.url, model_store_dir=model_store.root)
    )
    try:
        found = ablate(container, DEFAULT_MODEL_VERSION)
        assert found.version is None and found.steps == [] and "nothing to replay" in found.note
    finally:
        container.close()


@pytest.mark.slow
def test_a_lineage_is_retrained_without_its_privileged_rows(tmp_path: Path, sqlite_db: Database, model_store) -> None:  # type: ignore[no-untyped-def]
    for seed in range(3):
        task, prompt = add_task(sqlite_db, seed=300 + seed)
        add_episode(sqlite_db, task, prompt, answer=str(seed))
    settings = Settings(
        data_dir=tmp_path / "data",
        database_url=sqlite_db.url,
        model_store_dir=model_store.root,
        training=TrainingSettings(
            max_steps=2,
            batch_size=2,
            lora_rank=4,
            lora_alpha=8,
            save_steps=2,
            process_filter=False,
            anchor_levels=0,
            validation_share=0.0,
        ),
    )
    container = Container(settings)
    made: str | None = None
    try:
        real = pipeline.prepare_dataset(container, DEFAULT_MODEL_VERSION).rows
        assert len(real) == 3

        def hinted(row: TrainingRow, hint: str) -> TrainingRow:  # a new weight: the digest sees content, not hints
            return row.model_copy(update={"hint_level": hint, "weight": 0.5 if hint == "partial" else 0.25})

        first = [real[0], hinted(real[1], "partial"), real[2]]
        second = [hinted(row, "full") for row in real]
        digests = []
        for rows in (first, second):
            dataset = DistillationSet(parent_version=DEFAULT_MODEL_VERSION, rows=rows)
            dataset = dataset.model_copy(update={"digest": dataset_digest(dataset)})
            save_dataset(dataset, settings.data_dir)
            digests.append(dataset.digest)
        versions = _register_chain(sqlite_db, digests)

        found = ablate(container, versions[-1], max_steps=2)
        made = found.version
        assert [(s.replays, s.rows, s.kept) for s in found.steps] == [(versions[0], 3, 2), (versions[1], 3, 0)]
        assert found.steps[0].seconds is not None and found.steps[1].seconds is None
        assert made == f"{versions[0]}-without-critic_repair-full-partial"
        spec = model_store.resolve(made)
        assert spec.adapter_dir is not None and (spec.adapter_dir / "adapter_config.json").is_file()
        with sqlite_db.session() as session:
            assert made not in {v.id for v in repo.list_model_versions(session)}
    finally:
        container.close()
        if made is not None:
            model_store.remove_adapter(made)

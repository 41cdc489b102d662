"""Tiny real runs of the recipe on SmolLM2 (fp32, CPU): validation loss that falls keeps the best checkpoint and an
adapter llama.cpp can serve; validation loss that only rises produces no candidate, with its reason recorded."""

from __future__ import annotations

from pathlib import Path

import pytest
from training_helpers import add_episode, add_task

from lamarck.platform.container import Container
from lamarck.platform.events import EventBus
from lamarck.platform.settings import Settings, TrainingSettings
from lamarck.platform.storage.database import Database
from lamarck.training import pipeline, recipe, registry
from lamarck.training.dataset_io import dataset_dir
from lamarck.training.recipe import CandidateRefused
from lamarck.training.sft import LORA_TARGETS, train_sft
from lamarck.training.traces_to_rows import TrainingRow

pytestmark = pytest.mark.slow


def _code_rows(tasks: int) -> list[TrainingRow]:
    return [
        TrainingRow(
            task_id=f"t{k}",
            episode_id=f"e{k}",
            environment="arithmetic",
            difficulty=2,
            train_turns=[1],
            messages=[
                {"role": "user", "content": f"What is the code of locker {k}?"},
                {"role": "assistant", "content": "The code is zebra-7731."},
            ],
        )
        for k in range(tasks)
    ]


def test_falling_validation_loss_keeps_the_best_checkpoint_on_every_linear_layer(  # type: ignore[no-untyped-def]
    tmp_path: Path, model_store
) -> None:
    import gguf

    from lamarck.platform.llm.gguf_files import write_lora_gguf

    base = model_store.resolve("smollm2-135m").base_dir
    settings = TrainingSettings(
        batch_size=2,
        epochs=2,
        min_steps=1,
        learning_rate=3e-3,
        lora_rank=4,
        lora_alpha=8,
        validation_share=0.25,
        evaluations=3,
        early_stopping_patience=2,
        warmup_ratio=0.2,
    )
    result = train_sft(base_dir=base, rows=_code_rows(8), work_dir=tmp_path / "job", settings=settings)
    report = result.validation
    assert report is not None and (report.rows, report.tasks) == (2, 2) and result.train_rows == 6
    assert (result.planned_steps, result.warmup_steps, result.lr_scheduler) == (6, 2, "cosine")
    assert [e.step for e in report.evaluations] == [2, 4, 6]
    assert report.best_step > 0 and report.best_loss < 0.5 * report.start_loss, report
    assert report.kept == "best" and recipe.refusal(report, settings.refuse_rise) is None

    out = tmp_path / "adapter.gguf"
    write_lora_gguf(Path(result.output_dir), base, out)
    kinds = {t.name.split(".")[2] for t in gguf.GGUFReader(out).tensors if t.name.startswith("blk.0.")}
    assert kinds == {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"}
    assert len(LORA_TARGETS) == 7


def test_a_job_whose_validation_loss_rises_produces_no_candidate(  # type: ignore[no-untyped-def]
    tmp_path: Path, sqlite_db: Database, model_store
) -> None:
    for seed in range(4):
        task, prompt = add_task(sqlite_db, difficulty=2, seed=400 + seed)
        add_episode(sqlite_db, task, prompt, answer=str(seed))
    training = TrainingSettings(
        batch_size=3,
        epochs=1,
        min_steps=2,
        max_steps=2,
        learning_rate=0.5,
        lora_rank=4,
        lora_alpha=8,
        warmup_ratio=0.0,
        validation_share=0.25,
        evaluations=2,
        early_stopping_patience=1,
        process_filter=False,
    )
    settings = Settings(
        data_dir=tmp_path / "data", database_url=sqlite_db.url, model_store_dir=model_store.root, training=training
    )
    container = Container(settings)
    bus = EventBus(sqlite_db)
    try:
        dataset = pipeline.prepare_dataset(container, "smollm2-135m")
        version = registry.candidate_id("smollm2-135m", dataset.digest)
        with pytest.raises(CandidateRefused, match="validation loss never fell below the parent's"):
            pipeline.train_candidate(container, parent_version="smollm2-135m", dataset_digest=dataset.digest, bus=bus)

        refusal = pipeline.refused(container, version)
        assert refusal is not None and refusal.metrics["sft"]["validation"]["best_step"] == 0
        events = [e for e in bus.replay(limit=10_000) if e.type == "training.refused"]
        assert len(events) == 1 and events[0].payload["reason"] == refusal.reason
        with sqlite_db.session() as session:
            assert registry.trained_from(session, parent_id="smollm2-135m", dataset_digest=dataset.digest) is None
            assert registry.champion(session) == "smollm2-135m"
        assert version not in model_store.versions()
        assert not (settings.data_dir / "training" / version).exists()  # checkpoints gone, the data is not
        assert (dataset_dir(settings.data_dir, dataset.digest) / "rows.parquet").is_file()

        with pytest.raises(CandidateRefused, match="refused before"):  # a redelivery does not train again
            pipeline.train_candidate(container, parent_version="smollm2-135m", dataset_digest=dataset.digest)
    finally:
        container.close()

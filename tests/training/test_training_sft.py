"""A tiny real LoRA SFT run on SmolLM2 (CPU, in the precision this machine trains in) through the pipeline: loss drops,
the engine serves the adapter."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from training_helpers import add_episode, add_task

from lamarck.platform.container import Container
from lamarck.platform.events import EventBus
from lamarck.platform.llm.sampling import SamplingParams
from lamarck.platform.settings import Settings, TrainingSettings
from lamarck.platform.storage import repositories as repo
from lamarck.platform.storage.database import Database
from lamarck.training import pipeline
from lamarck.training.device import choose_device
from lamarck.training.sft import tokenized_rows

pytestmark = pytest.mark.slow


def _mean_loss(model, data) -> float:  # type: ignore[no-untyped-def]
    import torch

    losses = []
    with torch.no_grad():
        for row in data:
            out = model(input_ids=torch.tensor([row["input_ids"]]), labels=torch.tensor([row["labels"]]))
            losses.append(float(out.loss))
    return sum(losses) / len(losses)


def test_cpu_trains_in_fp32_without_checkpointing() -> None:
    device = choose_device("auto", flags=frozenset({"avx512f", "avx512_bf16"}))
    assert device.precision == "fp32" or device.device == "cuda"
    assert device.trainer_kwargs()["activation_checkpointing"] is False
    assert choose_device("auto", flags=frozenset({"amx_bf16"})).precision == "bf16" or device.device == "cuda"


def test_tiny_sft_lowers_loss_and_the_engine_serves_the_adapter(
    tmp_path: Path,
    sqlite_db: Database,
    model_store,
    local_engine,  # type: ignore[no-untyped-def]
) -> None:
    tag = uuid.uuid4().hex[:6]
    for seed in range(3):
        task, prompt = add_task(sqlite_db, seed=200 + seed)
        add_episode(sqlite_db, task, prompt, answer=f"zebra {tag} {seed}")
    settings = Settings(
        data_dir=tmp_path / "data",
        database_url=sqlite_db.url,
        model_store_dir=model_store.root,
        training=TrainingSettings(
            max_steps=4,
            batch_size=3,
            learning_rate=3e-3,
            lora_rank=8,
            lora_alpha=16,
            save_steps=2,
            process_filter=False,
            anchor_levels=0,
        ),
    )  # the helper's rows are placeholders
    container = Container(settings)
    bus = EventBus(sqlite_db)
    dataset = pipeline.prepare_dataset(container, "smollm2-135m")
    made = None
    try:
        made = pipeline.train_candidate(
            container, parent_version="smollm2-135m", dataset_digest=dataset.digest, bus=bus
        )
        assert made.created
        sft = made.metrics["sft"]
        assert sft["precision"] == choose_device("auto").precision and sft["steps"] == 4
        assert sft["last_loss"] < sft["first_loss"]
        spec = model_store.resolve(made.version_id)
        assert spec.adapter_dir is not None and (spec.adapter_dir / "adapter_config.json").is_file()
        with sqlite_db.session() as session:
            version = repo.get_model_version(session, version_id=made.version_id)
            assert version.parent_id == "smollm2-135m" and version.dataset_digest == dataset.digest
            assert version.status == "candidate" and version.training_metrics["rows"] == 3
        assert any(e.type == "training.metrics" for e in bus.replay(limit=10_000))
        assert list((tmp_path / "data" / "tensorboard").rglob("events.out.tfevents*"))

        # the adapter lowers the loss on its own rows
        from peft import PeftModel
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(spec.base_dir, local_files_only=True)
        data = tokenized_rows(tokenizer, dataset.rows, 1024)
        base = AutoModelForCausalLM.from_pretrained(spec.base_dir, local_files_only=True)
        before = _mean_loss(base, data)
        after = _mean_loss(PeftModel.from_pretrained(base, str(spec.adapter_dir)), data)
        assert after < before * 0.8, (before, after)

        # the local engine loads it by version name and its output changes
        prompt = dataset.rows[0].messages[:2]
        params = SamplingParams(max_tokens=12, temperature=0.0)
        base_out = local_engine.chat("smollm2-135m", prompt, params)[0].text
        tuned_out = local_engine.chat(made.version_id, prompt, params)[0].text
        assert tuned_out != base_out

        again = pipeline.train_candidate(container, parent_version="smollm2-135m", dataset_digest=dataset.digest)
        assert not again.created and again.version_id == made.version_id
    finally:
        container.close()
        if made is not None:
            local_engine.forget_adapter(made.version_id)
            model_store.remove_adapter(made.version_id)


def test_an_adapter_the_engine_cannot_load_is_refused(tmp_path: Path, model_store) -> None:  # type: ignore[no-untyped-def]
    from lamarck.platform.llm.runner import UnsupportedModelError

    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "adapter_config.json").write_text(
        json.dumps({"peft_type": "LORA", "r": 4, "lora_alpha": 8, "target_modules": ["q_proj"], "use_dora": True})
    )
    with pytest.raises((UnsupportedModelError, ValueError, OSError)):
        pipeline.check_adapter_loads(bad, model_store.resolve("smollm2-135m").base_dir)


def _tiny_rows():  # type: ignore[no-untyped-def]
    from lamarck.training.traces_to_rows import TrainingRow

    return [
        TrainingRow(
            task_id="t",
            episode_id="e",
            environment="arithmetic",
            difficulty=1,
            train_turns=[1],
            messages=[{"role": "user", "content": "What is 2+2?"}, {"role": "assistant", "content": "ANSWER: 4"}],
        )
    ]


def test_a_killed_job_resumes_from_its_checkpoint_then_dpo_continues_it(  # type: ignore[no-untyped-def]
    tmp_path: Path, model_store
) -> None:
    from lamarck.training.dpo import train_dpo
    from lamarck.training.sft import latest_checkpoint, train_sft
    from lamarck.training.traces_to_rows import PreferencePair

    base = model_store.resolve("smollm2-135m").base_dir
    settings = TrainingSettings(max_steps=2, batch_size=1, save_steps=1, lora_rank=4, dpo_steps=2)
    first = train_sft(base_dir=base, rows=_tiny_rows(), work_dir=tmp_path / "job", settings=settings)
    assert not first.resumed and latest_checkpoint(tmp_path / "job").name == "checkpoint-2"
    # a redelivered job with the same work dir picks up at step 2 instead of starting over
    second = train_sft(base_dir=base, rows=_tiny_rows(), work_dir=tmp_path / "job", settings=settings, max_steps=3)
    assert second.resumed and second.steps == 3

    pair = PreferencePair(
        task_id="t",
        environment="arithmetic",
        difficulty=1,
        chosen_episode_id="a",
        rejected_episode_id="b",
        prompt=[{"role": "user", "content": "What is 2+2?"}],
        chosen=[{"role": "assistant", "content": "ANSWER: 4"}],
        rejected=[{"role": "assistant", "content": "ANSWER: 5"}],
    )
    dpo = train_dpo(
        base_dir=base,
        adapter_dir=Path(second.output_dir),
        pairs=[pair, pair],
        work_dir=tmp_path / "dpo",
        settings=settings,
    )
    assert dpo.steps == 2 and dpo.precision == choose_device("auto").precision
    pipeline.check_adapter_loads(Path(dpo.output_dir), base)


def test_a_job_from_the_base_starts_a_fresh_adapter_on_every_row_though_its_parent_is_the_champion(  # type: ignore[no-untyped-def]
    tmp_path: Path, sqlite_db: Database, model_store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ReST-EM (``train_from="base"``): the champion stays the lineage parent and the gate's opponent, but the job
    loads no adapter and trains on the champion's rows as well as the new ones."""
    from lamarck.training import registry, sft

    started_from: list[Path | None] = []
    real_load_model = sft.load_model

    def spy(base_dir, parent_adapter, settings, device):  # type: ignore[no-untyped-def]
        started_from.append(parent_adapter)
        return real_load_model(base_dir, parent_adapter, settings, device)

    monkeypatch.setattr(sft, "load_model", spy)
    tag = uuid.uuid4().hex[:6]

    def add(seeds: range) -> None:
        for seed in seeds:
            task, prompt = add_task(sqlite_db, seed=seed)
            add_episode(sqlite_db, task, prompt, answer=f"quail {tag} {seed}")

    def container(train_from: str) -> Container:
        training = TrainingSettings(
            max_steps=2, batch_size=2, lora_rank=4, lora_alpha=8, process_filter=False, anchor_levels=0,
            validation_share=0.0, train_from=train_from,
        )  # fmt: skip
        return Container(
            Settings(
                data_dir=tmp_path / "data",
                database_url=sqlite_db.url,
                model_store_dir=model_store.root,
                training=training,
            )
        )

    made: list[str] = []
    add(range(600, 603))
    warm, fresh = container("champion"), container("base")
    try:
        first = pipeline.train_candidate(
            warm,
            parent_version="smollm2-135m",
            dataset_digest=pipeline.prepare_dataset(warm, "smollm2-135m").digest,
        )
        made.append(first.version_id)
        with sqlite_db.session() as session:
            registry.promote(session, version_id=first.version_id)
        add(range(610, 612))
        champion_adapter = model_store.resolve(first.version_id).adapter_dir

        continued = pipeline.prepare_dataset(warm, first.version_id)
        assert len(continued.rows) == 2  # warm start: the rows since the champion's data
        again = pipeline.train_candidate(warm, parent_version=first.version_id, dataset_digest=continued.digest)
        made.append(again.version_id)
        assert started_from[-1] == champion_adapter

        everything = pipeline.prepare_dataset(fresh, first.version_id)
        assert len(everything.rows) == 5  # from the base: the champion's three rows and the two since
        restarted = pipeline.train_candidate(fresh, parent_version=first.version_id, dataset_digest=everything.digest)
        made.append(restarted.version_id)
        assert started_from[-1] is None
        with sqlite_db.session() as session:
            version = registry.show(session, version_id=restarted.version_id)
        assert version.parent_id == first.version_id and version.training_metrics["train_from"] == "base"
    finally:
        warm.close()
        fresh.close()
        for version_id in made:
            model_store.remove_adapter(version_id)

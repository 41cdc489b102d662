"""Dataset building on a real database: dedupe, balance, held-out filtering and leak check, masks, pairs, digest."""

from __future__ import annotations

import pytest
from training_helpers import add_episode, add_task, trajectory

from lamarck.curriculum.heldout import heldout_set
from lamarck.platform.settings import TrainingSettings
from lamarck.platform.storage.database import Database
from lamarck.training import registry
from lamarck.training.dataset_io import load_dataset, save_dataset
from lamarck.training.traces_to_rows import (
    LESSONS_HEADER,
    DistillationSet,
    HeldoutLeak,
    TrainingRow,
    build_dataset,
    dataset_digest,
    kept_at_weight,
    render_for_model,
    tokenize_row,
)


def _build(db: Database, **settings: object):  # type: ignore[no-untyped-def]
    """The helpers' episodes call a generic `calc` tool on level-1 tasks: these tests check dedupe, balance, masks
    and leaks, so the process filter and the anchor cap (tested in test_dataset_filters.py) are off unless asked."""
    options: dict[str, object] = {"process_filter": False, "anchor_levels": 0, "rows_per_task": 64, **settings}
    with db.session() as session:
        return build_dataset(session, parent_version="smollm2-135m", settings=TrainingSettings(**options))


def test_rows_are_deduped_marked_stripped_and_paired(sqlite_db: Database) -> None:
    task, prompt = add_task(sqlite_db, seed=1)
    first = add_episode(sqlite_db, task, prompt)
    add_episode(sqlite_db, task, prompt)  # same task, same text: a duplicate
    failed = add_episode(sqlite_db, task, prompt, outcome="failed", answer="7")
    repaired = add_episode(sqlite_db, task, prompt, answer="six", repaired_from=failed)
    dataset = _build(sqlite_db, repaired_weight=1.0)
    assert [r.episode_id for r in dataset.rows] == [first, repaired]
    assert dataset.dropped["duplicate"] == 1
    native, fixed = dataset.rows
    assert not native.repaired and native.weight == 1.0
    assert fixed.repaired and fixed.weight == 1.0
    system = native.messages[0]["content"]
    assert LESSONS_HEADER not in system and "double check" not in system
    assert "When you know the answer" in system and "calc: evaluate" in system
    assert native.train_turns == [2, 4]
    [pair] = dataset.pairs
    assert pair.chosen_episode_id == first and pair.rejected_episode_id == failed
    assert pair.prompt == native.messages[:2]
    assert pair.chosen[-1]["content"] == "ANSWER: 6" and pair.rejected[-1]["content"] == "ANSWER: 7"
    assert dataset.leak_check.startswith("passed")


def test_feedback_and_few_shot_turns_carry_no_loss(sqlite_db: Database) -> None:
    task, prompt = add_task(sqlite_db, seed=2)
    add_episode(sqlite_db, task, prompt, few_shot="Tom has 1 apple. How many?", bad_first=True)
    [row] = _build(sqlite_db).rows
    roles = [m["role"] for m in row.messages]
    assert roles == ["system", "user", "assistant", "user", "assistant", "user", "assistant", "user", "assistant"]
    assert row.train_turns == [6, 8]  # not the few-shot reply (2), not the malformed reply (4)


def test_balance_caps_each_cell(sqlite_db: Database) -> None:
    for seed in range(5):
        task, prompt = add_task(sqlite_db, difficulty=1, seed=100 + seed)
        add_episode(sqlite_db, task, prompt)
    task, prompt = add_task(sqlite_db, difficulty=2, seed=7)
    add_episode(sqlite_db, task, prompt)
    dataset = _build(sqlite_db, cap_per_cell=2)
    assert dataset.counts() == {"arithmetic": {"1": 2, "2": 1}}
    assert dataset.dropped["over_cell_cap"] == 3


def test_heldout_tasks_are_dropped_and_a_leak_fails_loudly(sqlite_db: Database) -> None:
    held = heldout_set("arithmetic", per_level=1)[0]
    task, prompt = add_task(sqlite_db, difficulty=held.difficulty, prompt=held.prompt)
    add_episode(sqlite_db, task, prompt)
    dataset = _build(sqlite_db)
    assert dataset.rows == [] and dataset.dropped["heldout_task"] == 1
    # a held-out prompt smuggled in through a few-shot example must stop the whole dataset
    task, prompt = add_task(sqlite_db, seed=3)
    add_episode(sqlite_db, task, prompt, few_shot=held.prompt)
    with pytest.raises(HeldoutLeak, match="held-out prompt"):
        _build(sqlite_db)


def test_a_saved_dataset_keeps_each_rows_hint_source(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The parquet file once dropped the hint level, so every reloaded row (and the job's report) said 'none'."""
    rows = [
        TrainingRow(
            task_id=f"t{i}",
            episode_id=f"e{i}",
            environment="arithmetic",
            difficulty=3,
            messages=[{"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": "ANSWER: 1"}],
            train_turns=[1],
            prompt_length=1,
            hint_level=level,
        )
        for i, level in enumerate(["none", "partial", "full", "full"])
    ]
    dataset = DistillationSet(parent_version="smollm2-135m", rows=rows)
    dataset.digest = dataset_digest(dataset)
    loaded = load_dataset(save_dataset(dataset, tmp_path))
    assert loaded.by_hint() == {"full": 2, "none": 1, "partial": 1} == dataset.by_hint()


def test_digest_is_stable_and_a_trained_digest_is_refused(sqlite_db: Database, tmp_path) -> None:  # type: ignore[no-untyped-def]
    task, prompt = add_task(sqlite_db, seed=4)
    add_episode(sqlite_db, task, prompt)
    first = _build(sqlite_db)
    assert _build(sqlite_db).digest == first.digest
    path = save_dataset(first, tmp_path)
    loaded = load_dataset(path)
    assert loaded.digest == first.digest and loaded.rows == first.rows
    card = (path / "README.md").read_text()
    assert first.digest in card and "| arithmetic |" in card and "leak check: passed" in card
    with sqlite_db.session() as session:
        registry.ensure_base_registered(session)
        registry.register_candidate(
            session,
            version_id=registry.candidate_id("smollm2-135m", first.digest),
            base="smollm2-135m",
            adapter_path=None,
            parent_id="smollm2-135m",
            dataset_digest=first.digest,
            training_metrics={},
        )
    with sqlite_db.session() as session, pytest.raises(registry.DigestAlreadyTrained):
        registry.register_candidate(
            session,
            version_id="other-name",
            base="smollm2-135m",
            adapter_path=None,
            parent_id="smollm2-135m",
            dataset_digest=first.digest,
            training_metrics={},
        )
    task, prompt = add_task(sqlite_db, seed=5)
    add_episode(sqlite_db, task, prompt)
    assert _build(sqlite_db).digest != first.digest


def test_assistant_only_loss_mask_token_by_token(model_store) -> None:  # type: ignore[no-untyped-def]
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_store.resolve("smollm2-135m").base_dir, local_files_only=True)
    messages = render_for_model(
        trajectory("Ana has 3 bags of 2 apples. How many apples?", "6", few_shot="Tom has 1 apple.", bad_first=True)
    )
    turns = [6, 8]
    ids, labels = tokenize_row(tokenizer, messages, turns)
    text = tokenizer.apply_chat_template(messages, tokenize=False)
    assert ids == tokenizer(text, add_special_tokens=False)["input_ids"]
    assert len(labels) == len(ids)
    # walk the conversation turn by turn: every token of a trained turn's content and its <|im_end|> is labelled,
    # every other token (headers, system, user, observations, few-shot and rejected replies) is -100
    end_id = tokenizer.convert_tokens_to_ids("<|im_end|>")
    position = 0
    for index, message in enumerate(messages):
        header = tokenizer(f"<|im_start|>{message['role']}\n", add_special_tokens=False)["input_ids"]
        body = tokenizer(message["content"], add_special_tokens=False)["input_ids"] + [end_id]
        newline = tokenizer("\n", add_special_tokens=False)["input_ids"]
        assert ids[position : position + len(header)] == header
        assert all(label == -100 for label in labels[position : position + len(header)])
        position += len(header)
        assert ids[position : position + len(body)] == body
        expected = body if index in turns else [-100] * len(body)
        assert labels[position : position + len(body)] == expected, f"turn {index}"
        position += len(body)
        assert ids[position : position + len(newline)] == newline and labels[position] == -100
        position += len(newline)
    assert position == len(ids)


def test_repaired_rows_are_trained_in_proportion_to_their_weight_and_always_the_same_ones(sqlite_db: Database) -> None:
    repaired = []
    for seed in range(40):
        task, prompt = add_task(sqlite_db, seed=700 + seed)
        failed = add_episode(sqlite_db, task, prompt, outcome="failed", answer="7")
        repaired.append(add_episode(sqlite_db, task, prompt, answer="six", repaired_from=failed))
    half = _build(sqlite_db, repaired_weight=0.5)
    kept = {row.episode_id for row in half.rows}
    assert kept == {e for e in repaired if kept_at_weight(e, 0.5)}
    assert 8 <= len(kept) <= 32 and half.dropped["repaired_subsampled"] == 40 - len(kept)
    assert _build(sqlite_db, repaired_weight=0.5).digest == half.digest
    assert len(_build(sqlite_db, repaired_weight=1.0).rows) == 40
    assert _build(sqlite_db, repaired_weight=0.0).rows == []

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from lamarck.platform.llm.engine import LocalEngine, SamplingParams
from lamarck.platform.llm.model_store import ModelStore, ModelStoreError

MODEL = "lamarck/smollm2-135m"
QUESTIONS = ["What is the capital of France?", "Name three colors.", "Write a haiku about autumn leaves.", "2+2=?"]


def chat(question: str) -> list[dict]:
    return [{"role": "user", "content": question}]


def test_greedy_answer(local_engine: LocalEngine) -> None:
    [done] = local_engine.chat(MODEL, chat("What is the capital of France?"), SamplingParams(max_tokens=12))
    assert "Paris" in done.text
    assert done.prompt_tokens > 10 and 0 < done.completion_tokens <= 12 and done.latency_s > 0
    assert done.finish_reason == "stop"


@pytest.mark.slow
def test_batched_equals_single(local_engine: LocalEngine) -> None:
    params = SamplingParams(max_tokens=16)
    batched = local_engine.chat_batch(MODEL, [chat(q) for q in QUESTIONS], params)
    alone = [local_engine.chat(MODEL, chat(q), params) for q in QUESTIONS]
    assert [b[0].text for b in batched] == [a[0].text for a in alone]


@pytest.mark.slow
def test_seeded_sampling_reproducible(local_engine: LocalEngine) -> None:
    params = SamplingParams(max_tokens=10, temperature=1.0, top_p=0.9, seed=7, n=2)
    first = [c.text for c in local_engine.chat(MODEL, chat("Tell me a story."), params)]
    second = [c.text for c in local_engine.chat(MODEL, chat("Tell me a story."), params)]
    assert first == second
    other = [c.text for c in local_engine.chat(MODEL, chat("Tell me a story."), SamplingParams(
        max_tokens=10, temperature=1.0, top_p=0.9, seed=8, n=2))]
    assert other != first


def test_stop_sequence_and_length(local_engine: LocalEngine) -> None:
    [done] = local_engine.chat(MODEL, chat("What is the capital of France?"), SamplingParams(max_tokens=12, stop=["Paris"]))
    assert done.finish_reason == "stop" and "Paris" not in done.text and done.text.startswith("The capital")
    [short] = local_engine.chat(MODEL, chat("Write a long poem."), SamplingParams(max_tokens=3))
    assert short.finish_reason == "length" and short.completion_tokens == 3


def test_raw_generate(local_engine: LocalEngine) -> None:
    [[done]] = local_engine.generate("smollm2-135m", ["The capital of France is"], SamplingParams(max_tokens=4))
    assert done.completion_tokens == 4 and done.text


@pytest.mark.slow
def test_threads_are_batched_together(local_engine: LocalEngine) -> None:
    params = SamplingParams(max_tokens=8)
    expected = {q: local_engine.chat(MODEL, chat(q), params)[0].text for q in QUESTIONS}
    results: dict[str, str] = {}
    barrier = threading.Barrier(len(QUESTIONS))
    before = len(local_engine.batches)

    def ask(question: str) -> None:
        barrier.wait()
        results[question] = local_engine.chat(MODEL, chat(question), params)[0].text

    threads = [threading.Thread(target=ask, args=(q,)) for q in QUESTIONS]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == expected
    assert max(b.requests for b in local_engine.batches[before:]) > 1


def test_unknown_model(local_engine: LocalEngine) -> None:
    with pytest.raises(ModelStoreError, match="lamarck models list"):
        local_engine.chat("lamarck/nope", chat("hi"), SamplingParams(max_tokens=2))


@pytest.fixture(scope="module")
def adapter_dir(model_store: ModelStore, tmp_path_factory: pytest.TempPathFactory) -> Path:
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    base = AutoModelForCausalLM.from_pretrained(model_store.resolve("smollm2-135m").base_dir, local_files_only=True)
    config = LoraConfig(r=4, lora_alpha=16, target_modules=["q_proj", "v_proj", "down_proj"], init_lora_weights=False)
    peft_model = get_peft_model(base, config)
    with torch.no_grad():  # large enough to change greedy output
        for name, param in peft_model.named_parameters():
            if "lora_B" in name:
                param.normal_(0, 0.2)
    out = tmp_path_factory.mktemp("adapter")
    peft_model.save_pretrained(out)
    return out


@pytest.mark.slow
def test_lora_swap(model_store: ModelStore, local_engine: LocalEngine, adapter_dir: Path,
                   tmp_path: Path) -> None:
    version = "test-lora-swap"
    model_store.add_adapter(version, adapter_dir, base="smollm2-135m")
    try:
        params = SamplingParams(max_tokens=8)
        base_before = local_engine.chat(MODEL, chat("What is the capital of France?"), params)[0].text
        tuned = local_engine.chat(f"lamarck/{version}", chat("What is the capital of France?"), params)[0].text
        base_after = local_engine.chat(MODEL, chat("What is the capital of France?"), params)[0].text
        assert tuned != base_before
        assert base_after == base_before
        assert version in local_engine.versions()
        again = local_engine.chat(version, chat("What is the capital of France?"), params)[0].text
        assert again == tuned
    finally:
        local_engine.forget_adapter(version)
        model_store.remove_adapter(version)


def test_bad_params() -> None:
    with pytest.raises(ValueError, match="max_tokens"):
        SamplingParams(max_tokens=0)
    with pytest.raises(ValueError, match="top_p"):
        SamplingParams(top_p=0)


def test_closed_engine_refuses(model_store: ModelStore) -> None:
    from lamarck.platform.llm.engine import EngineClosedError

    engine = LocalEngine(model_store)
    engine.close()
    with pytest.raises(EngineClosedError):
        engine.chat(MODEL, chat("hi"))


# ---- shared prefill, speculative decoding, n > 1 ----------------------------------------------------------------

COPY_QUESTIONS = [
    "Repeat this list exactly: apple, banana, cherry, date, elderberry, fig, grape.",
    "Fix the typo and return the sentence: 'The quick brwn fox jumps over the lazy dog.'",
    "Summarize: The cat sat on the mat. The cat was happy. The mat was red.",
    "List the days of the week.",
]


@pytest.fixture
def batcher_settings(local_engine: LocalEngine) -> Iterator[object]:
    batcher = local_engine._batcher
    saved = (batcher.min_shared_prefix, batcher.draft_tokens)
    yield batcher
    batcher.min_shared_prefix, batcher.draft_tokens = saved


def test_draft_lookup() -> None:
    from lamarck.platform.llm.speculative import Backoff, draft

    assert draft([1, 2, 3, 4, 9, 2, 3], 2) == [4, 9]  # latest earlier match of the last 2-gram
    assert draft([5, 1, 2, 3, 7, 8, 0, 1, 2, 3], 3) == [7, 8, 0]  # longest n-gram first
    assert draft([1, 2, 3], 4) == [] and draft([1, 2, 1, 2], 0) == []
    backoff = Backoff()
    backoff.record(0)
    assert not backoff.ready() and backoff.ready()
    backoff.record(2)
    assert backoff.ready()


@pytest.mark.slow
def test_shared_prefill_equals_plain(local_engine: LocalEngine, batcher_settings) -> None:  # type: ignore[no-untyped-def]
    params = SamplingParams(max_tokens=24)
    conversations = [chat(q) for q in QUESTIONS + COPY_QUESTIONS]
    batcher_settings.draft_tokens = 0
    batcher_settings.min_shared_prefix = 10**9
    plain = [c[0].text for c in local_engine.chat_batch(MODEL, conversations, params)]
    alone = [local_engine.chat(MODEL, c, params)[0].text for c in conversations[:3]]
    batcher_settings.min_shared_prefix = 16  # the chat template's system prompt is shared
    shared = [c[0].text for c in local_engine.chat_batch(MODEL, conversations, params)]
    assert shared == plain and plain[:3] == alone
    # n > 1 greedy and duplicate prompts: prefilled once, every copy equals the single answer
    many = local_engine.chat(MODEL, conversations[0], SamplingParams(max_tokens=24, n=3))
    assert [c.text for c in many] == [plain[0]] * 3


@pytest.mark.slow
def test_speculative_equals_plain(local_engine: LocalEngine, batcher_settings) -> None:  # type: ignore[no-untyped-def]
    runner = local_engine._runner
    calls = {"verify": 0}
    forward = runner.forward

    def counting(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls["verify"] += bool(kwargs.get("all_logits"))
        return forward(*args, **kwargs)

    params = SamplingParams(max_tokens=40)
    questions = COPY_QUESTIONS + QUESTIONS[:2]
    batcher_settings.draft_tokens = 0
    plain = [local_engine.chat(MODEL, chat(q), params)[0].text for q in questions]
    batcher_settings.draft_tokens = 7
    runner.forward = counting
    try:
        fast = [local_engine.chat(MODEL, chat(q), params)[0].text for q in questions]
    finally:
        del runner.forward
    assert fast == plain
    assert calls["verify"] > 0
    stopped = local_engine.chat(MODEL, chat(COPY_QUESTIONS[0]), SamplingParams(max_tokens=40, stop=["cherry"]))[0]
    assert stopped.finish_reason == "stop" and "cherry" not in stopped.text


@pytest.mark.slow
def test_n_samples_reproducible(local_engine: LocalEngine) -> None:
    params = SamplingParams(max_tokens=12, temperature=0.9, seed=11, n=4)
    first = [c.text for c in local_engine.chat(MODEL, chat("Tell me a joke."), params)]
    second = [c.text for c in local_engine.chat(MODEL, chat("Tell me a joke."), params)]
    assert first == second
    assert len(set(first)) > 1  # the n samples share a prefill but not their random streams

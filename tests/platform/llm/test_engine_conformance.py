"""One suite for every engine that serves ``lamarck/<version>`` in-process: llama.cpp (default) and the torch engine."""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from lamarck.platform.llm.continuous import EngineClosedError
from lamarck.platform.llm.model_store import ModelStore, ModelStoreError
from lamarck.platform.llm.sampling import SamplingParams
from lamarck.platform.llm.serving import ServingEngine, open_engine
from lamarck.platform.settings import EngineSettings

MODEL = "lamarck/smollm2-135m"
QUESTIONS = ["What is the capital of France?", "Name three colors.", "Write a haiku about autumn leaves.", "2+2=?"]


def chat(question: str) -> list[dict]:
    return [{"role": "user", "content": question}]


@pytest.fixture(scope="module")
def torch_engine(model_store: ModelStore) -> Iterator[ServingEngine]:
    engine = open_engine(model_store, EngineSettings(backend="torch", batch_window_ms=20.0))
    yield engine
    engine.close()


@pytest.fixture(params=["llamacpp", "torch"])
def engine(request: pytest.FixtureRequest) -> ServingEngine:
    if request.param == "llamacpp":
        return request.getfixturevalue("local_engine")
    return request.getfixturevalue("torch_engine")


def test_greedy_answer_counts_tokens(engine: ServingEngine) -> None:
    [done] = engine.chat(MODEL, chat("Name three colors."), SamplingParams(max_tokens=12))
    assert "Red" in done.text or "red" in done.text
    assert done.prompt_tokens > 10 and 0 < done.completion_tokens <= 12 and done.latency_s > 0
    assert done.finish_reason in ("stop", "length")


@pytest.mark.slow
def test_batched_equals_single(engine: ServingEngine) -> None:
    params = SamplingParams(max_tokens=16)
    batched = engine.chat_batch(MODEL, [chat(q) for q in QUESTIONS], params)
    alone = [engine.chat(MODEL, chat(q), params) for q in QUESTIONS]
    assert [b[0].text for b in batched] == [a[0].text for a in alone]


@pytest.mark.slow
def test_seeded_sampling_reproducible(engine: ServingEngine) -> None:
    params = SamplingParams(max_tokens=10, temperature=1.0, top_p=0.9, seed=7, n=2)
    first = [c.text for c in engine.chat(MODEL, chat("Tell me a story."), params)]
    second = [c.text for c in engine.chat(MODEL, chat("Tell me a story."), params)]
    assert first == second
    other = [
        c.text
        for c in engine.chat(
            MODEL, chat("Tell me a story."), SamplingParams(max_tokens=10, temperature=1.0, top_p=0.9, seed=8, n=2)
        )
    ]
    assert other != first


@pytest.mark.slow
def test_n_samples_share_a_prompt_not_a_random_stream(engine: ServingEngine) -> None:
    params = SamplingParams(max_tokens=12, temperature=0.9, seed=11, n=4)
    first = [c.text for c in engine.chat(MODEL, chat("Tell me a joke."), params)]
    assert first == [c.text for c in engine.chat(MODEL, chat("Tell me a joke."), params)]
    assert len(set(first)) > 1
    greedy = engine.chat(MODEL, chat("Tell me a joke."), SamplingParams(max_tokens=12, n=3))
    assert len({c.text for c in greedy}) == 1


def test_stop_sequence_and_length(engine: ServingEngine) -> None:
    [plain] = engine.chat(MODEL, chat("Name three colors."), SamplingParams(max_tokens=12))
    word = plain.text.split()[1]
    [done] = engine.chat(MODEL, chat("Name three colors."), SamplingParams(max_tokens=12, stop=[word]))
    assert done.finish_reason == "stop" and word not in done.text and plain.text.startswith(done.text)
    [short] = engine.chat(MODEL, chat("Write a long poem."), SamplingParams(max_tokens=3))
    assert short.finish_reason == "length" and short.completion_tokens == 3


def test_stop_after_keeps_the_match_and_ends_there(engine: ServingEngine) -> None:
    [plain] = engine.chat(MODEL, chat("Name three colors."), SamplingParams(max_tokens=16))
    word = plain.text.split()[1]
    params = SamplingParams(max_tokens=16, stop_after=[re.escape(word)])
    [done] = engine.chat(MODEL, chat("Name three colors."), params)
    assert done.finish_reason == "stop" and done.text.endswith(word) and plain.text.startswith(done.text)
    assert done.completion_tokens < plain.completion_tokens
    deltas, future = engine.stream_chat(MODEL, chat("Name three colors."), params)
    assert "".join(deltas) == done.text == future.result().text


def test_raw_generate(engine: ServingEngine) -> None:
    [[done]] = engine.generate("smollm2-135m", ["The capital of France is"], SamplingParams(max_tokens=4))
    assert done.completion_tokens == 4 and done.text


def test_stream_equals_whole(engine: ServingEngine) -> None:
    params = SamplingParams(max_tokens=16)
    whole = engine.chat(MODEL, chat("Name three colors."), params)[0]
    deltas, future = engine.stream_chat(MODEL, chat("Name three colors."), params)
    assert "".join(deltas) == whole.text == future.result().text


@pytest.mark.slow
def test_threads_get_the_answers_they_would_get_alone(engine: ServingEngine) -> None:
    params = SamplingParams(max_tokens=8)
    expected = {q: engine.chat(MODEL, chat(q), params)[0].text for q in QUESTIONS}
    results: dict[str, str] = {}
    barrier = threading.Barrier(len(QUESTIONS))

    def ask(question: str) -> None:
        barrier.wait()
        results[question] = engine.chat(MODEL, chat(question), params)[0].text

    threads = [threading.Thread(target=ask, args=(q,)) for q in QUESTIONS]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for question in QUESTIONS:  # its own answer, not another's: batched int8 arithmetic may drift a few tokens in
        own = _shared_prefix(results[question], expected[question])
        others = [_shared_prefix(results[question], expected[q]) for q in QUESTIONS if q != question]
        assert own > max(others), (question, results, expected)


def _shared_prefix(a: str, b: str) -> int:
    return len(os.path.commonprefix([a, b]))


def test_unknown_model(engine: ServingEngine) -> None:
    with pytest.raises(ModelStoreError, match="lamarck models list"):
        engine.chat("lamarck/nope", chat("hi"), SamplingParams(max_tokens=2))


@pytest.fixture(scope="module")
def adapter_dir(model_store: ModelStore, tmp_path_factory: pytest.TempPathFactory) -> Path:
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    base = AutoModelForCausalLM.from_pretrained(model_store.resolve("smollm2-135m").base_dir, local_files_only=True)
    config = LoraConfig(
        r=4, lora_alpha=16, target_modules=["q_proj", "k_proj", "v_proj", "down_proj"], init_lora_weights=False
    )
    peft_model = get_peft_model(base, config)
    with torch.no_grad():  # large enough to change greedy output
        for name, param in peft_model.named_parameters():
            if "lora_B" in name:
                param.normal_(0, 0.2)
    out = tmp_path_factory.mktemp("adapter")
    peft_model.save_pretrained(out)
    return out


@pytest.mark.slow
def test_adapter_served_by_version_beside_the_base(
    model_store: ModelStore, engine: ServingEngine, adapter_dir: Path
) -> None:
    version = "test-lora-swap"
    model_store.add_adapter(version, adapter_dir, base="smollm2-135m")
    try:
        params = SamplingParams(max_tokens=8)
        question = chat("What is the capital of France?")
        base_before = engine.chat(MODEL, question, params)[0].text
        assert version in engine.versions()
        both: dict[str, str] = {}

        def ask(model: str) -> None:
            both[model] = engine.chat(model, question, params)[0].text

        threads = [threading.Thread(target=ask, args=(m,)) for m in (MODEL, f"lamarck/{version}")]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert both[MODEL] == base_before
        assert both[f"lamarck/{version}"] != base_before
        assert engine.chat(version, question, params)[0].text == both[f"lamarck/{version}"]
    finally:
        engine.forget_adapter(version)
        model_store.remove_adapter(version)


def test_closed_engine_refuses(model_store: ModelStore) -> None:
    engine = open_engine(model_store, EngineSettings(slots=2, slot_tokens=256))
    engine.close()
    with pytest.raises(EngineClosedError):
        engine.chat(MODEL, chat("hi"))


def test_bad_params() -> None:
    with pytest.raises(ValueError, match="max_tokens"):
        SamplingParams(max_tokens=0)
    with pytest.raises(ValueError, match="top_p"):
        SamplingParams(top_p=0)
    with pytest.raises(ValueError, match=r"stop_after\[1\] is not a valid regular expression"):
        SamplingParams(stop_after=["ok", "(unclosed"])

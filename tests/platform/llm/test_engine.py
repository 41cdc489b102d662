from __future__ import annotations

import threading
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

"""What only the llama.cpp engine does: serving files, exactness in F32, int8 agreement, prefix reuse, continuity."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from lamarck.platform.llm.continuous import ContinuousBatcher
from lamarck.platform.llm.engine import LocalEngine
from lamarck.platform.llm.gguf_files import ADAPTER_FILE, base_gguf
from lamarck.platform.llm.model_store import ModelStore, ModelStoreError
from lamarck.platform.llm.sampling import SamplingParams
from lamarck.platform.settings import EngineSettings

MODEL = "smollm2-135m"
PROMPTS = ["What is the capital of France?", "Name three colors.", "2+2=?", "Write a haiku about autumn leaves."]


def chat(question: str) -> list[dict]:
    return [{"role": "user", "content": question}]


@pytest.fixture(scope="module")
def f32_engine(model_store: ModelStore) -> Iterator[LocalEngine]:
    engine = LocalEngine(model_store, EngineSettings(format="f32", slots=8, slot_tokens=1024))
    yield engine
    engine.close()


def test_serving_files_are_written_once(model_store: ModelStore) -> None:
    spec = model_store.resolve(MODEL)
    path = base_gguf(spec, "q8_0")
    stamp = path.stat().st_mtime_ns
    assert base_gguf(spec, "q8_0") == path and path.stat().st_mtime_ns == stamp
    with pytest.raises(ModelStoreError, match="serving format"):
        base_gguf(spec, "q2_k")  # type: ignore[arg-type]


@pytest.mark.slow
def test_f32_greedy_matches_transformers(model_store: ModelStore, f32_engine: LocalEngine) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    base_dir = model_store.resolve(MODEL).base_dir
    model = AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32, local_files_only=True).eval()
    tokenizer = f32_engine.tokenizer
    for question in PROMPTS:
        ids = tokenizer(f32_engine.render_chat(chat(question)), add_special_tokens=False, return_tensors="pt")
        with torch.inference_mode():
            out = model.generate(**ids, max_new_tokens=16, do_sample=False, pad_token_id=tokenizer.eos_token_id)
        expected = tokenizer.decode(out[0, ids["input_ids"].shape[1] :], skip_special_tokens=True)
        got = f32_engine.chat(MODEL, chat(question), SamplingParams(max_tokens=16))[0].text
        assert got == expected, question


@pytest.mark.slow
def test_f32_adapter_matches_peft(model_store: ModelStore, f32_engine: LocalEngine, tmp_path: Path) -> None:
    """The LoRA conversion (including llama.cpp's rotary row order for q and k) reproduces peft's greedy output."""
    import torch
    from peft import LoraConfig, PeftModel, get_peft_model
    from transformers import AutoModelForCausalLM

    base_dir = model_store.resolve(MODEL).base_dir
    torch.manual_seed(1)
    model = AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32, local_files_only=True)
    peft_model = get_peft_model(
        model, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "k_proj", "o_proj", "up_proj"])
    )
    with torch.no_grad():
        for name, param in peft_model.named_parameters():
            if "lora_B" in name:
                param.normal_(0, 0.15)
    peft_model.save_pretrained(tmp_path / "adapter")
    version = "test-f32-peft"
    model_store.add_adapter(version, tmp_path / "adapter", base=MODEL)
    try:
        tuned = PeftModel.from_pretrained(
            AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32, local_files_only=True),
            str(tmp_path / "adapter"),
        ).eval()
        tokenizer = f32_engine.tokenizer
        base_text = f32_engine.chat(MODEL, chat(PROMPTS[3]), SamplingParams(max_tokens=12))[0].text
        ids = tokenizer(f32_engine.render_chat(chat(PROMPTS[3])), add_special_tokens=False, return_tensors="pt")
        with torch.inference_mode():
            out = tuned.generate(**ids, max_new_tokens=12, do_sample=False, pad_token_id=tokenizer.eos_token_id)
        expected = tokenizer.decode(out[0, ids["input_ids"].shape[1] :], skip_special_tokens=True)
        got = f32_engine.chat(version, chat(PROMPTS[3]), SamplingParams(max_tokens=12))[0].text
        assert got == expected and got != base_text
    finally:
        f32_engine.forget_adapter(version)
        model_store.remove_adapter(version)


@pytest.mark.slow
def test_int8_and_f32_agree_on_a_fixed_task_set(local_engine: LocalEngine, f32_engine: LocalEngine) -> None:
    """Q8_0 rounds weights and activations to 8 bits, so single answers may differ; verdicts must mostly agree."""
    from lamarck.curriculum.environments.arithmetic import ArithmeticEnv

    env = ArithmeticEnv()
    rng = random.Random(5)
    tasks = [env.generate(level, rng) for level in (1, 1, 2, 2, 3) for _ in range(4)]
    params = SamplingParams(max_tokens=48, stop=["<|im_end|>"])
    conversations = [
        [{"role": "system", "content": "Solve it. End with 'The answer is N.'"}, {"role": "user", "content": t.prompt}]
        for t in tasks
    ]
    q8 = [c[0].text for c in local_engine.chat_batch(MODEL, conversations, params)]
    f32 = [c[0].text for c in f32_engine.chat_batch(MODEL, conversations, params)]
    verdicts = [(env.verify(t, a).passed, env.verify(t, b).passed) for t, a, b in zip(tasks, q8, f32, strict=True)]
    agree = sum(a == b for a, b in verdicts)
    assert agree >= 0.8 * len(tasks), verdicts  # the stated tolerance: at most 1 in 5 verdicts differ
    assert abs(sum(a for a, _ in verdicts) - sum(b for _, b in verdicts)) <= 0.15 * len(tasks)


@pytest.mark.slow
def test_prefix_reuse_changes_nothing(model_store: ModelStore) -> None:
    system = {"role": "system", "content": "You are a careful assistant. " * 12}
    conversations = [[system, {"role": "user", "content": q}] for q in PROMPTS]
    params = SamplingParams(max_tokens=8)
    cold = LocalEngine(model_store, EngineSettings(slots=1, slot_tokens=512))  # one slot: reuse only in place
    try:
        before = cold.prefix_stats["reused_tokens"]
        alone = [cold.chat(MODEL, c, params)[0].text for c in conversations]
        assert cold.prefix_stats["reused_tokens"] - before > 3 * 60  # the shared system prompt is not prefilled again
    finally:
        cold.close()
    # a fresh engine, so which slots the rows take (and so how llama.cpp splits the batch into passes) is the same
    # on every run: a suffix prefilled after a cached prefix, or in another pass, runs other matmul kernels than a
    # whole prompt (other tile sizes), so a near-tie may flip; a wrong position or a stale cache changes every answer
    warm = LocalEngine(model_store, EngineSettings(slots=8, slot_tokens=512))
    try:
        together = [c[0].text for c in warm.chat_batch(MODEL, conversations, params)]
        again = [c[0].text for c in warm.chat_batch(MODEL, conversations, params)]  # every prompt reused in place
        assert warm.prefix_stats["reused_tokens"] > 4 * 60
    finally:
        warm.close()
    assert sum(a == b for a, b in zip(together, alone, strict=True)) >= 3, (together, alone)
    assert sum(a == b for a, b in zip(again, alone, strict=True)) >= 3, (again, alone)


REPEATING = [
    "Repeat this line four times: the red fox jumps over the lazy dog.",
    "Count from 1 to 20, separated by commas.",
    "Write the word hello ten times.",
    "Copy exactly: CALL calculator: (16 - 2) + 12",
]


def test_a_lone_greedy_row_speculates_without_changing_its_output(
    model_store: ModelStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    params = SamplingParams(max_tokens=40)

    def answers() -> tuple[list[tuple[str, int]], dict[str, int], int]:
        engine = LocalEngine(model_store, EngineSettings(slots=2, slot_tokens=512))  # fresh: no cached prefixes
        try:
            out = [engine.chat(MODEL, chat(q), params)[0] for q in REPEATING]  # one at a time: each row alone
            return [(c.text, c.completion_tokens) for c in out], engine.prefix_stats, len(engine.steps)
        finally:
            engine.close()

    drafted, stats, steps = answers()
    monkeypatch.setattr(ContinuousBatcher, "_speculate", lambda self, version, row: False)
    plain, plain_stats, plain_steps = answers()
    assert plain_stats["drafted_tokens"] == 0
    assert stats["drafted_tokens"] > 0 and stats["confirmed_tokens"] >= stats["drafted_tokens"] // 2, stats
    assert steps < plain_steps  # the confirmed guesses were generated without steps of their own
    same = sum(a == b for a, b in zip(drafted, plain, strict=True))
    assert same >= 3, (drafted, plain)  # a near-tie may flip under the multi-position kernels, as with prefixes


@pytest.mark.slow
def test_a_late_request_joins_the_running_batch(local_engine: LocalEngine) -> None:
    """Steps are told apart by time, not by index: the engine keeps only its last 2,000 steps, so on a shared engine
    an index taken before the request can already be past the end."""
    long = SamplingParams(max_tokens=96, ignore_eos=True)
    began = time.perf_counter()
    first = threading.Thread(target=local_engine.chat, args=(MODEL, chat("Count to fifty."), long))
    first.start()
    deadline = time.monotonic() + 60
    while not any(s.at > began and s.rows == 1 and s.prefill_tokens == 0 for s in local_engine.steps):
        assert time.monotonic() < deadline, "the first request never started decoding"
        time.sleep(0.01)
    late = local_engine.chat(MODEL, chat("Name three colors."), SamplingParams(max_tokens=4))[0]
    first.join()
    assert late.completion_tokens <= 4
    steps = [s for s in local_engine.steps if s.at > began]
    assert any(s.rows == 1 and s.prefill_tokens > 0 for s in steps)  # the late prompt prefilled beside a decode
    assert any(s.rows == 2 for s in steps)  # both decoded in one step


def test_a_prompt_longer_than_a_slot_is_refused(model_store: ModelStore) -> None:
    engine = LocalEngine(model_store, EngineSettings(slots=2, slot_tokens=64))
    try:
        with pytest.raises(ValueError, match="engine.slot_tokens"):
            engine.chat(MODEL, chat("word " * 100))
        with pytest.raises(ValueError, match="engine.slots"):
            engine.chat(MODEL, chat("hi"), SamplingParams(n=3))
    finally:
        engine.close()


@pytest.mark.slow
def test_a_broken_adapter_file_fails_its_version_and_the_base_keeps_serving(
    model_store: ModelStore, local_engine: LocalEngine, tmp_path: Path
) -> None:
    version = "test-broken-gguf"
    model_store.add_adapter(version, _tiny_adapter(model_store, tmp_path), base=MODEL)
    try:
        (model_store.resolve(version).adapter_dir / ADAPTER_FILE).write_bytes(b"GGUF but not really")
        with pytest.raises(ModelStoreError, match="could not load the adapter"):
            local_engine.chat(version, chat("hi"), SamplingParams(max_tokens=2))
        assert local_engine.chat(MODEL, chat("Name three colors."), SamplingParams(max_tokens=4))[0].text
    finally:
        local_engine.forget_adapter(version)
        model_store.remove_adapter(version)


def _tiny_adapter(model_store: ModelStore, out: Path) -> Path:
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(model_store.resolve(MODEL).base_dir, local_files_only=True)
    get_peft_model(base, LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj"])).save_pretrained(out)
    return out


def test_a_finished_rows_slot_is_kept_for_its_episodes_next_step(model_store: ModelStore) -> None:
    engine = LocalEngine(model_store, EngineSettings(slots=4, slot_tokens=512))
    try:
        first_turn = chat("Name three colors.")
        first = engine.chat(MODEL, first_turn, SamplingParams(max_tokens=16))[0]
        engine.chat(MODEL, chat("Write a haiku about autumn leaves."), SamplingParams(max_tokens=16))  # in between
        follow_up = [
            *first_turn,
            {"role": "assistant", "content": first.text},
            {"role": "user", "content": "Two more?"},
        ]
        before = engine.prefix_stats["reused_tokens"]
        engine.chat(MODEL, follow_up, SamplingParams(max_tokens=4))
        reused = engine.prefix_stats["reused_tokens"] - before
    finally:
        engine.close()
    # the other conversation took another free slot, so the first one's prompt and reply were still cached
    assert reused >= first.prompt_tokens + first.completion_tokens - 4

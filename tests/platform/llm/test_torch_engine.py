"""What only the project's own PyTorch engine does: shared-prefix prefill and prompt-lookup speculative decoding."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from lamarck.platform.llm.model_store import ModelStore
from lamarck.platform.llm.sampling import SamplingParams
from lamarck.platform.llm.torch_engine import TorchEngine
from lamarck.platform.settings import EngineSettings

MODEL = "lamarck/smollm2-135m"
QUESTIONS = ["What is the capital of France?", "Name three colors.", "Write a haiku about autumn leaves.", "2+2=?"]
COPY_QUESTIONS = [
    "Repeat this list exactly: apple, banana, cherry, date, elderberry, fig, grape.",
    "Fix the typo and return the sentence: 'The quick brwn fox jumps over the lazy dog.'",
    "Summarize: The cat sat on the mat. The cat was happy. The mat was red.",
    "List the days of the week.",
]


def chat(question: str) -> list[dict]:
    return [{"role": "user", "content": question}]


@pytest.fixture(scope="module")
def engine(model_store: ModelStore) -> Iterator[TorchEngine]:
    engine = TorchEngine(model_store, EngineSettings(backend="torch", batch_window_ms=20.0))
    yield engine
    engine.close()


@pytest.fixture
def batcher_settings(engine: TorchEngine) -> Iterator[object]:
    batcher = engine._batcher
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
def test_shared_prefill_equals_plain(engine: TorchEngine, batcher_settings) -> None:  # type: ignore[no-untyped-def]
    params = SamplingParams(max_tokens=24)
    conversations = [chat(q) for q in QUESTIONS + COPY_QUESTIONS]
    batcher_settings.draft_tokens = 0
    batcher_settings.min_shared_prefix = 10**9
    plain = [c[0].text for c in engine.chat_batch(MODEL, conversations, params)]
    alone = [engine.chat(MODEL, c, params)[0].text for c in conversations[:3]]
    batcher_settings.min_shared_prefix = 16  # the chat template's system prompt is shared
    shared = [c[0].text for c in engine.chat_batch(MODEL, conversations, params)]
    assert shared == plain and plain[:3] == alone
    many = engine.chat(MODEL, conversations[0], SamplingParams(max_tokens=24, n=3))
    assert [c.text for c in many] == [plain[0]] * 3


@pytest.mark.slow
def test_speculative_equals_plain(engine: TorchEngine, batcher_settings) -> None:  # type: ignore[no-untyped-def]
    runner = engine._runner
    calls = {"verify": 0}
    forward = runner.forward

    def counting(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls["verify"] += bool(kwargs.get("all_logits"))
        return forward(*args, **kwargs)

    params = SamplingParams(max_tokens=40)
    questions = COPY_QUESTIONS + QUESTIONS[:2]
    batcher_settings.draft_tokens = 0
    plain = [engine.chat(MODEL, chat(q), params)[0].text for q in questions]
    batcher_settings.draft_tokens = 7
    runner.forward = counting
    try:
        fast = [engine.chat(MODEL, chat(q), params)[0].text for q in questions]
    finally:
        del runner.forward
    assert fast == plain
    assert calls["verify"] > 0

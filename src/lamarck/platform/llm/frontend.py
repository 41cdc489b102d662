"""What both local engines share: chat rendering and tokenization with the model's own tokenizer, the blocking and
streaming calls over an engine's ``_submit``, and the versions of the store an engine can serve."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from concurrent.futures import Future

from lamarck.platform.llm.model_store import ModelStore, ModelStoreError
from lamarck.platform.llm.sampling import Completion, SamplingParams


class EngineFrontEnd:
    store: ModelStore
    base: str
    tokenizer: object  # a transformers tokenizer, shared by threads under ``_tokenizer_lock``
    _tokenizer_lock: threading.Lock

    def _submit(
        self, model: str, prompt: str, params: SamplingParams, stream: queue.Queue[str | None] | None = None
    ) -> list[Future[Completion]]:
        raise NotImplementedError

    def versions(self) -> list[str]:
        return [v for v in self.store.versions() if self._serves(v)]

    def chat(self, model: str, messages: list[dict], params: SamplingParams | None = None) -> list[Completion]:
        return self.chat_batch(model, [messages], params)[0]

    def chat_batch(
        self, model: str, conversations: list[list[dict]], params: SamplingParams | None = None
    ) -> list[list[Completion]]:
        return self.generate(model, [self.render_chat(c) for c in conversations], params)

    def generate(self, model: str, prompts: list[str], params: SamplingParams | None = None) -> list[list[Completion]]:
        params = params or SamplingParams()
        futures = [self._submit(model, prompt, params) for prompt in prompts]
        return [[f.result() for f in group] for group in futures]

    def stream_chat(
        self, model: str, messages: list[dict], params: SamplingParams | None = None
    ) -> tuple[Iterator[str], Future[Completion]]:
        """Text deltas as they are generated (n must be 1), and the final completion."""
        params = params or SamplingParams()
        if params.n != 1:
            raise ValueError("streaming supports n=1 only")
        deltas: queue.Queue[str | None] = queue.Queue()
        [future] = self._submit(model, self.render_chat(messages), params, stream=deltas)
        future.add_done_callback(lambda _f: deltas.put(None))

        def iterate() -> Iterator[str]:
            while (delta := deltas.get()) is not None:
                yield delta

        return iterate(), future

    def render_chat(self, messages: list[dict]) -> str:
        clean = [{"role": m.get("role", "user"), "content": _text(m.get("content"))} for m in messages]
        if not clean:
            raise ValueError("messages must not be empty")
        with self._tokenizer_lock:
            return self.tokenizer.apply_chat_template(  # type: ignore[attr-defined]
                clean, tokenize=False, add_generation_prompt=True
            )

    def count_tokens(self, text: str) -> int:
        return len(self._encode(text))

    def _serves(self, version: str) -> bool:
        try:
            spec = self.store.resolve(version)
        except ModelStoreError:
            return False
        return spec.base_dir.name == self.base

    def _encode(self, text: str) -> list[int]:
        with self._tokenizer_lock:
            return self.tokenizer(text, add_special_tokens=False)["input_ids"]  # type: ignore[operator]

    def _decode(self, ids: list[int]) -> str:
        with self._tokenizer_lock:
            return self.tokenizer.decode(ids, skip_special_tokens=True)  # type: ignore[attr-defined]


def _text(content: object) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return str(content)

"""What both local engines share: chat rendering and tokenization with the model's own tokenizer, the blocking and
streaming calls over an engine's ``_submit``, and the versions of the store an engine can serve."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from concurrent.futures import Future
from typing import TYPE_CHECKING

from lamarck.platform.llm.model_store import ModelStore, ModelStoreError
from lamarck.platform.llm.sampling import Completion, SamplingParams

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

ChatMessages = list[dict[str, object]]


class EngineFrontEnd:
    store: ModelStore
    base: str
    tokenizer: PreTrainedTokenizerBase  # shared by threads under ``_tokenizer_lock``
    _tokenizer_lock: threading.Lock

    def _submit(
        self, model: str, prompt: str, params: SamplingParams, stream: queue.Queue[str | None] | None = None
    ) -> list[Future[Completion]]:
        raise NotImplementedError

    def versions(self) -> list[str]:
        return [v for v in self.store.versions() if self._serves(v)]

    def chat(self, model: str, messages: ChatMessages, params: SamplingParams | None = None) -> list[Completion]:
        return self.chat_batch(model, [messages], params)[0]

    def chat_batch(
        self, model: str, conversations: list[ChatMessages], params: SamplingParams | None = None
    ) -> list[list[Completion]]:
        return self.generate(model, [self.render_chat(c) for c in conversations], params)

    def generate(self, model: str, prompts: list[str], params: SamplingParams | None = None) -> list[list[Completion]]:
        params = params or SamplingParams()
        futures = [self._submit(model, prompt, params) for prompt in prompts]
        return [[f.result() for f in group] for group in futures]

    def stream_chat(
        self, model: str, messages: ChatMessages, params: SamplingParams | None = None
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

    def render_chat(self, messages: ChatMessages) -> str:
        clean = [{"role": str(m.get("role", "user")), "content": _text(m.get("content"))} for m in messages]
        if not clean:
            raise ValueError("messages must not be empty")
        with self._tokenizer_lock:
            text = self.tokenizer.apply_chat_template(clean, tokenize=False, add_generation_prompt=True)
        if not isinstance(text, str):
            raise TypeError(f"the tokenizer's chat template rendered {type(text).__name__}, not text")
        return text

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
            ids: list[int] = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        return ids

    def _decode(self, ids: list[int]) -> str:
        with self._tokenizer_lock:
            text = self.tokenizer.decode(ids, skip_special_tokens=True)
        if not isinstance(text, str):
            raise TypeError(f"the tokenizer decoded one sequence to {type(text).__name__}, not text")
        return text


def _text(content: object) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return str(content)

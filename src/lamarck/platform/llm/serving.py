"""What serves ``lamarck/<version>`` models in-process: the Protocol both local engines meet, and the factory."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Future
from typing import Protocol

from lamarck.platform.llm.frontend import ChatMessages
from lamarck.platform.llm.model_store import ModelStore
from lamarck.platform.llm.sampling import Completion, SamplingParams
from lamarck.platform.settings import EngineSettings


class ServingEngine(Protocol):
    """Chat and raw generation for every model version of one base model in the store."""

    def versions(self) -> list[str]: ...

    def chat(self, model: str, messages: ChatMessages, params: SamplingParams | None = None) -> list[Completion]: ...

    def chat_batch(
        self, model: str, conversations: list[ChatMessages], params: SamplingParams | None = None
    ) -> list[list[Completion]]: ...

    def generate(
        self, model: str, prompts: list[str], params: SamplingParams | None = None
    ) -> list[list[Completion]]: ...

    def stream_chat(
        self, model: str, messages: ChatMessages, params: SamplingParams | None = None
    ) -> tuple[Iterator[str], Future[Completion]]: ...

    def render_chat(self, messages: ChatMessages) -> str: ...

    def count_tokens(self, text: str) -> int: ...

    def forget_adapter(self, version: str) -> None: ...

    def close(self) -> None: ...


def open_engine(store: ModelStore, settings: EngineSettings | None = None) -> ServingEngine:
    """The engine ``settings.backend`` names: llama.cpp (the default) or the project's own PyTorch engine."""
    settings = settings or EngineSettings()
    if settings.backend == "torch":
        from lamarck.platform.llm.torch_engine import TorchEngine

        return TorchEngine(store, settings)
    from lamarck.platform.llm.engine import LocalEngine

    return LocalEngine(store, settings)

"""The embedded local engine: llama.cpp serving every model version of the store, with continuous batching.

One base model is loaded once (Q8_0 by default: int8 weights with the CPU's VNNI dot products; F32 on request);
each adapter version is converted once to llama.cpp's LoRA format and applied per step, so candidate and champion
are served side by side and a newly promoted version is served at its next request, without a restart. Prompts
are rendered and tokenized with the model's own Hugging Face tokenizer, the one training uses.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import threading
import time
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING

from lamarck.platform.llm.continuous import ContinuousBatcher, EngineClosedError, Group, Row, StepRecord
from lamarck.platform.llm.frontend import EngineFrontEnd
from lamarck.platform.llm.gguf_files import adapter_gguf, base_gguf
from lamarck.platform.llm.llama_runtime import LlamaContext, LlamaModel
from lamarck.platform.llm.model_store import ModelStore, ModelStoreError, _offline, strip_prefix
from lamarck.platform.llm.row_sampling import RowChooser
from lamarck.platform.llm.sampling import Completion, SamplingParams
from lamarck.platform.settings import DEFAULT_MODEL_VERSION, EngineSettings

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

log = logging.getLogger(__name__)

__all__ = ["Completion", "EngineClosedError", "LocalEngine", "SamplingParams"]


class LocalEngine(EngineFrontEnd):
    def __init__(
        self, store: ModelStore, settings: EngineSettings | None = None, base: str = DEFAULT_MODEL_VERSION
    ) -> None:
        self.store = store
        self.settings = settings or EngineSettings()
        if self.settings.device != "cpu":
            raise ValueError(
                f"the local engine runs on cpu only, not {self.settings.device!r}: set engine.device = 'cpu'"
            )
        spec = store.resolve(base)
        if spec.adapter_dir is not None:
            raise ModelStoreError(f"{base!r} is an adapter, not a base model: pass a base model version")
        self.base = spec.version
        self.format = self.settings.format
        started = time.perf_counter()
        self._tokenizer_lock = threading.Lock()
        self.tokenizer = _tokenizer(spec.base_dir)
        self.model = LlamaModel(base_gguf(spec, self.format))
        threads = self.settings.threads or os.cpu_count() or 1
        self.context = LlamaContext(
            self.model,
            sequences=self.settings.slots,
            tokens_per_sequence=self.settings.slot_tokens,
            batch_tokens=self.settings.batch_tokens,
            threads=threads,
        )
        self._adapters: dict[str, object | None] = {self.base: None}
        self._adapter_lock = threading.Lock()
        self._batcher = ContinuousBatcher(
            self.context,
            use_version=self._use_version,
            decode_text=self._decode,
            eos_ids=_eos_ids(self.tokenizer, spec.base_dir),
            release=self._release,
        )
        self.setup_seconds = time.perf_counter() - started

    # ---- public API --------------------------------------------------------------------------

    @property
    def steps(self) -> list[StepRecord]:
        """The most recent decode steps (for tests and metrics)."""
        return list(self._batcher.steps)

    @property
    def prefix_stats(self) -> dict[str, int]:
        batcher = self._batcher
        return {
            "prefilled_tokens": batcher.prefilled_tokens,
            "reused_tokens": batcher.reused_tokens,
            "drafted_tokens": batcher.drafted_tokens,
            "confirmed_tokens": batcher.confirmed_tokens,
        }

    def forget_adapter(self, version: str) -> None:
        """Drop a loaded adapter and its cached prefixes, so the next request reloads it from the store."""
        version = strip_prefix(version)
        if version != self.base:
            self._batcher.forget_version(version)

    def close(self) -> None:
        self._batcher.close()
        self.context.close()
        self.model.close()

    def __enter__(self) -> LocalEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- request side ------------------------------------------------------------------------

    def _check(self, version: str) -> None:
        """Fail fast, in the caller's thread: unknown versions, foreign bases, adapters that do not convert."""
        if version in self._adapters:
            return
        spec = self.store.resolve(version)
        if spec.base_dir.name != self.base:
            raise ModelStoreError(
                f"model {version!r} is built on {spec.base_dir.name!r} but this engine serves {self.base!r}: "
                "start an engine for that base"
            )
        if spec.adapter_dir is not None:
            adapter_gguf(spec)

    def _submit(
        self, model: str, prompt: str, params: SamplingParams, stream: queue.Queue[str | None] | None = None
    ) -> list[Future[Completion]]:
        version = strip_prefix(model)
        self._check(version)
        ids = self._encode(prompt)
        if not ids:
            raise ValueError("prompt is empty")
        room = self.context.tokens_per_sequence
        if len(ids) >= room:
            raise ValueError(
                f"prompt has {len(ids)} tokens; this engine's slots hold at most {room - 1} (raise engine.slot_tokens)"
            )
        if params.n > self.context.sequences:
            raise ValueError(f"n={params.n} is more than the engine's {self.context.sequences} slots (engine.slots)")
        now = time.perf_counter()
        rows = [Row(ids, params, RowChooser(params, index), Future(), now, stream=stream) for index in range(params.n)]
        self._batcher.submit(Group(version, rows))
        return [row.future for row in rows]

    # ---- batcher thread ----------------------------------------------------------------------

    def _use_version(self, version: str) -> None:
        with self._adapter_lock:
            if version not in self._adapters:
                spec = self.store.resolve(version)
                log.info("local engine: loading adapter %s", version)
                self._adapters[version] = self.model.load_adapter(adapter_gguf(spec))
            adapter = self._adapters[version]
        self.context.use_adapter(adapter)

    def _release(self, version: str) -> None:
        with self._adapter_lock:
            adapter = self._adapters.pop(version, None)
        if adapter is not None:
            self.context.use_adapter(None)
            self.model.free_adapter(adapter)


def _tokenizer(base_dir: Path) -> PreTrainedTokenizerBase:
    with _offline():
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(base_dir, local_files_only=True)


def _eos_ids(tokenizer: PreTrainedTokenizerBase, base_dir: Path) -> set[int]:
    eos = {tokenizer.eos_token_id}
    try:
        configured = json.loads((base_dir / "config.json").read_text()).get("eos_token_id")
    except (OSError, ValueError):
        configured = None
    eos |= set(configured) if isinstance(configured, list) else {configured}
    return {e for e in eos if e is not None}

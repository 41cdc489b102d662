"""The project's own PyTorch engine (fp32): one base model, LoRA adapters per model version, dynamic batching.

The embedded default is the llama.cpp engine (``engine.py``); this one stays selectable (``engine.backend = "torch"``)
and is measured beside it in ``benchmarks/bench_engine.py``.

Callers on any thread submit requests; one scheduler thread gathers what arrives within
``batch_window_ms`` (up to ``max_batch_size`` rows of the same model version) and runs it as one batch.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from lamarck.platform.llm.batching import BatchRunner, Row
from lamarck.platform.llm.continuous import EngineClosedError
from lamarck.platform.llm.frontend import EngineFrontEnd
from lamarck.platform.llm.model_store import ModelStore, ModelStoreError, strip_prefix
from lamarck.platform.llm.runner import LlamaRunner, LoraWeights, load_lora
from lamarck.platform.llm.sampling import Completion, RowSampler, SamplingParams
from lamarck.platform.settings import DEFAULT_MODEL_VERSION, EngineSettings

if TYPE_CHECKING:
    from transformers import PreTrainedConfig, PreTrainedTokenizerBase

log = logging.getLogger(__name__)

__all__ = ["Completion", "EngineClosedError", "SamplingParams", "TorchEngine"]


@dataclass
class _Request:
    version: str
    rows: list[Row]


@dataclass(frozen=True)
class BatchRecord:
    """What one scheduler batch held (for tests and metrics)."""

    version: str
    rows: int
    requests: int


class TorchEngine(EngineFrontEnd):
    def __init__(
        self, store: ModelStore, settings: EngineSettings | None = None, base: str = DEFAULT_MODEL_VERSION
    ) -> None:
        self.store = store
        self.settings = settings or EngineSettings()
        if self.settings.device != "cpu":
            raise ValueError(
                f"the local engine runs on cpu only, not {self.settings.device!r}: set engine.device = 'cpu'"
            )
        if self.settings.dtype not in ("auto", "float32"):
            log.warning(
                "local engine: dtype %s requested; computing in float32 for batch-independent output",
                self.settings.dtype,
            )
        if self.settings.threads:
            torch.set_num_threads(self.settings.threads)
        spec = store.resolve(base)
        if spec.adapter_dir is not None:
            raise ModelStoreError(f"{base!r} is an adapter, not a base model: pass a base model version")
        self.base = spec.version
        self._tokenizer_lock = threading.Lock()
        self._adapters: dict[str, LoraWeights | None] = {self.base: None}
        self._adapter_lock = threading.Lock()
        self.tokenizer, runner, config = self._load(spec.base_dir)
        eos = {self.tokenizer.eos_token_id}
        eos |= set(config.eos_token_id) if isinstance(config.eos_token_id, list) else {config.eos_token_id}
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.tokenizer.eos_token_id
        self._batcher = BatchRunner(
            runner, self._decode, {e for e in eos if e is not None}, pad, config.max_position_embeddings
        )
        self._runner = runner
        self._queue: queue.Queue[_Request | None] = queue.Queue()
        self._closed = False
        self.batches: list[BatchRecord] = []
        self._thread = threading.Thread(target=self._schedule, name="lamarck-engine", daemon=True)
        self._thread.start()

    @staticmethod
    def _load(base_dir: Path) -> tuple[PreTrainedTokenizerBase, LlamaRunner, PreTrainedConfig]:
        from lamarck.platform.llm.model_store import _offline

        with _offline():
            from transformers import AutoModelForCausalLM, AutoTokenizer
            from transformers.utils import logging as transformers_logging

            tokenizer = AutoTokenizer.from_pretrained(base_dir, local_files_only=True)
            transformers_logging.disable_progress_bar()  # a plain-weights load takes under a second
            try:
                model = AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32, local_files_only=True)
            finally:
                transformers_logging.enable_progress_bar()
        model.eval()
        runner = LlamaRunner(model)
        return tokenizer, runner, model.config

    # ---- public API --------------------------------------------------------------------------

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._queue.put(None)
        self._thread.join(timeout=60)

    def __enter__(self) -> TorchEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- request side ------------------------------------------------------------------------

    def _lora_for(self, version: str) -> LoraWeights | None:
        with self._adapter_lock:
            if version in self._adapters:
                return self._adapters[version]
            spec = self.store.resolve(version)
            if spec.base_dir.name != self.base:
                raise ModelStoreError(
                    f"model {version!r} is built on {spec.base_dir.name!r} but this engine serves {self.base!r}: "
                    "start an engine for that base"
                )
            if spec.adapter_dir is None:
                self._adapters[version] = None
            else:
                log.info("local engine: loading adapter %s", version)
                self._adapters[version] = load_lora(spec.adapter_dir, self._runner.num_layers)
            return self._adapters[version]

    def forget_adapter(self, version: str) -> None:
        """Drop a cached adapter so the next request reloads it from the store."""
        with self._adapter_lock:
            if version != self.base:
                self._adapters.pop(strip_prefix(version), None)

    def _submit(
        self, model: str, prompt: str, params: SamplingParams, stream: queue.Queue[str | None] | None = None
    ) -> list[Future[Completion]]:
        if self._closed:
            raise EngineClosedError("the local engine is closed: create a new engine")
        version = strip_prefix(model)
        self._lora_for(version)  # fails fast, in the caller's thread, for unknown versions
        ids = self._encode(prompt)
        if not ids:
            raise ValueError("prompt is empty")
        if len(ids) >= self._batcher.max_positions:
            raise ValueError(f"prompt has {len(ids)} tokens; the model takes at most {self._batcher.max_positions - 1}")
        now = time.perf_counter()
        futures: list[Future[Completion]] = []
        rows = []
        for index in range(params.n):
            future: Future[Completion] = Future()
            futures.append(future)
            rows.append(Row(ids, params, RowSampler(params, index), now, future.set_result, stream=stream))
        self._queue.put(_Request(version, rows))
        return futures

    # ---- scheduler ---------------------------------------------------------------------------

    def _schedule(self) -> None:
        pending: list[_Request] = []
        window = self.settings.batch_window_ms / 1000.0
        limit = self.settings.max_batch_size
        while True:
            if not pending:
                item = self._queue.get()
                if item is None:
                    break
                pending.append(item)
            deadline = time.perf_counter() + window
            stop = False
            while sum(len(r.rows) for r in pending) < limit:
                remaining = deadline - time.perf_counter()
                try:
                    item = self._queue.get(timeout=remaining) if remaining > 0 else self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    stop = True
                    break
                pending.append(item)
            version = pending[0].version
            chosen: list[_Request] = []
            rows: list[Row] = []
            rest: list[_Request] = []
            for request in pending:
                if request.version == version and (not rows or len(rows) + len(request.rows) <= limit):
                    chosen.append(request)
                    rows.extend(request.rows)
                else:
                    rest.append(request)
            pending = rest
            self._run_batch(version, chosen, rows)
            if stop:
                break
        for request in pending + self._drain():
            for row in request.rows:
                _fail(row, EngineClosedError("the local engine was closed before this request ran"))

    def _drain(self) -> list[_Request]:
        left: list[_Request] = []
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return left
            if item is not None:
                left.append(item)

    def _run_batch(self, version: str, requests: list[_Request], rows: list[Row]) -> None:
        self.batches.append(BatchRecord(version, len(rows), len(requests)))
        del self.batches[:-1000]
        try:
            self._batcher.run(rows, self._lora_for(version))
        except BaseException as exc:  # deliver the failure to every waiting caller
            log.exception("local engine: batch for %s failed", version)
            for row in rows:
                _fail(row, exc)


def _fail(row: Row, exc: BaseException) -> None:
    future = getattr(row.deliver, "__self__", None)
    if isinstance(future, Future) and not future.done():
        future.set_exception(exc)

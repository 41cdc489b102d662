"""A thin, typed layer over llama.cpp's C API (through llama-cpp-python's ctypes bindings).

Only what the engine needs: load a model and LoRA adapters, one context with many sequences, a reusable batch,
decode, the logits of the rows that asked for them, and sequence operations on the KV cache.
"""

from __future__ import annotations

import ctypes
import threading
from pathlib import Path

import numpy as np

from lamarck.platform.llm.model_store import ModelStoreError

_quiet_lock = threading.Lock()
_log_callback: object | None = None


def quiet_llama() -> None:
    """Send llama.cpp's own logging nowhere (it writes to stderr by default); idempotent."""
    global _log_callback
    import llama_cpp

    with _quiet_lock:
        if _log_callback is None:
            _log_callback = llama_cpp.llama_log_callback(lambda level, text, data: None)
            llama_cpp.llama_log_set(_log_callback, ctypes.c_void_p(0))
            llama_cpp.llama_backend_init()


class LlamaModel:
    """Weights loaded once (memory-mapped); any number of contexts and adapters can use them."""

    def __init__(self, path: Path) -> None:
        import llama_cpp

        quiet_llama()
        params = llama_cpp.llama_model_default_params()
        params.n_gpu_layers = 0
        self.path = path
        self.pointer = llama_cpp.llama_model_load_from_file(str(path).encode(), params)
        if not self.pointer:
            raise ModelStoreError(f"llama.cpp could not load {path}: delete it so it is written again")
        vocab = llama_cpp.llama_model_get_vocab(self.pointer)
        self.n_vocab = int(llama_cpp.llama_vocab_n_tokens(vocab))
        self._adapters: list[object] = []

    def load_adapter(self, path: Path) -> object:
        import llama_cpp

        adapter = llama_cpp.llama_adapter_lora_init(self.pointer, str(path).encode())
        if not adapter:
            raise ModelStoreError(f"llama.cpp could not load the adapter {path}: delete it so it is converted again")
        self._adapters.append(adapter)
        return adapter

    def free_adapter(self, adapter: object) -> None:
        import llama_cpp

        if adapter in self._adapters:
            self._adapters.remove(adapter)
            llama_cpp.llama_adapter_lora_free(adapter)

    def close(self) -> None:
        import llama_cpp

        if self.pointer:
            llama_cpp.llama_model_free(self.pointer)  # frees its adapters too
            self.pointer = None
            self._adapters.clear()


class LlamaContext:
    """One llama.cpp context: a KV cache of ``sequences`` streams of ``tokens_per_sequence`` cells each."""

    def __init__(
        self,
        model: LlamaModel,
        *,
        sequences: int,
        tokens_per_sequence: int,
        batch_tokens: int,
        threads: int,
        unified: bool = False,
        flash_attention: bool = True,
    ) -> None:
        import llama_cpp

        params = llama_cpp.llama_context_default_params()
        params.n_ctx = sequences * tokens_per_sequence if not unified else tokens_per_sequence
        params.n_batch = batch_tokens
        params.n_ubatch = min(batch_tokens, 512)
        params.n_seq_max = sequences
        params.n_threads = threads
        params.n_threads_batch = threads
        params.kv_unified = unified
        params.no_perf = True
        params.flash_attn_type = (
            llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED if flash_attention else llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED
        )
        self.model = model
        self.sequences = sequences
        self.tokens_per_sequence = tokens_per_sequence
        self.batch_tokens = batch_tokens
        self.pointer = llama_cpp.llama_init_from_model(model.pointer, params)
        if not self.pointer:
            raise ModelStoreError(
                f"llama.cpp could not create a context of {sequences} x {tokens_per_sequence} tokens: "
                "lower engine.slots or engine.slot_tokens"
            )
        self.memory = llama_cpp.llama_get_memory(self.pointer)
        self.batch = llama_cpp.llama_batch_init(batch_tokens, 0, 1)
        self._tokens = np.ctypeslib.as_array(self.batch.token, shape=(batch_tokens,))
        self._positions = np.ctypeslib.as_array(self.batch.pos, shape=(batch_tokens,))
        self._n_seq = np.ctypeslib.as_array(self.batch.n_seq_id, shape=(batch_tokens,))
        self._wants = np.ctypeslib.as_array(self.batch.logits, shape=(batch_tokens,))
        self._seq_ptrs = [self.batch.seq_id[i] for i in range(batch_tokens)]
        self._adapter: object | None = None
        self._threads = threads

    def set_threads(self, threads: int) -> None:
        import llama_cpp

        if threads != self._threads:
            llama_cpp.llama_set_n_threads(self.pointer, threads, threads)
            self._threads = threads

    def use_adapter(self, adapter: object | None) -> None:
        """Serve the next decodes with ``adapter`` (None: the base weights)."""
        import llama_cpp

        if adapter is self._adapter:
            return
        if adapter is None:
            status = llama_cpp.llama_set_adapters_lora(self.pointer, None, 0, None)
        else:
            # llama_cpp declares the adapter handle as c_void_p, but ctypes hands back the address as an int, which
            # the pointer array takes as it is
            adapters = (llama_cpp.llama_adapter_lora_p_ctypes * 1)(adapter)  # type: ignore[misc]
            scales = (ctypes.c_float * 1)(1.0)
            status = llama_cpp.llama_set_adapters_lora(self.pointer, adapters, 1, scales)
        if status != 0:
            raise ModelStoreError(f"llama.cpp refused the adapter (status {status}): it does not fit this base model")
        self._adapter = adapter

    def decode(
        self, tokens: list[int], positions: list[int], sequences: list[int], outputs: list[int]
    ) -> list[np.ndarray]:
        """Run one batch; returns the logits [vocab] of each batch row in ``outputs``: views into llama.cpp's buffer,
        valid until the next decode."""
        import llama_cpp

        count = len(tokens)
        if not 0 < count <= self.batch_tokens:
            raise ValueError(f"a decode takes 1 to {self.batch_tokens} tokens, got {count}")
        self._tokens[:count] = tokens
        self._positions[:count] = positions
        self._n_seq[:count] = 1
        self._wants[:count] = 0
        self._wants[outputs] = 1
        seq_ptrs = self._seq_ptrs
        for i, sequence in enumerate(sequences):
            seq_ptrs[i][0] = sequence
        self.batch.n_tokens = count
        status = llama_cpp.llama_decode(self.pointer, self.batch)
        if status != 0:
            raise DecodeError(status)
        vocab = self.model.n_vocab
        return [
            np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(self.pointer, index), shape=(vocab,))
            for index in outputs
        ]

    def remove(self, sequence: int, start: int = 0) -> None:
        """Forget ``sequence``'s cells from position ``start`` on."""
        import llama_cpp

        llama_cpp.llama_memory_seq_rm(self.memory, sequence, start, -1)

    def copy(self, source: int, target: int) -> None:
        """Make ``target`` hold what ``source`` holds (a whole-stream copy, done at the next decode)."""
        import llama_cpp

        llama_cpp.llama_memory_seq_cp(self.memory, source, target, -1, -1)

    def close(self) -> None:
        import llama_cpp

        if self.pointer:
            llama_cpp.llama_batch_free(self.batch)
            llama_cpp.llama_free(self.pointer)
            self.pointer = None


class DecodeError(RuntimeError):
    def __init__(self, status: int) -> None:
        reason = {1: "no room in the KV cache", 2: "aborted"}.get(status, "llama.cpp error")
        super().__init__(f"llama_decode failed with status {status} ({reason})")
        self.status = status

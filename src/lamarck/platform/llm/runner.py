"""A lean Llama forward pass over a Hugging Face checkpoint, with a preallocated KV cache and LoRA deltas.

Why not ``model.generate``: on 2 CPU cores its per-step overhead (growing cache concatenation, mask building,
generic logits processing) costs more than the matmuls. Here the weights are fused (q|k|v and gate|up), the cache is
written in place, and finished rows are dropped from the batch.

Measured on the 2-core AMD/MKL box (see benchmarks/bench_engine.py):

* MKL picks a gemv-like kernel for 1-3 rows and a gemm kernel from 4 rows on. The gemv path is ~1.4x faster with the
  weight stored [in, out] (``x @ W_t``); the gemm path is 1.1-1.8x faster with [out, in] (``F.linear``). So q|k|v, o
  and gate|up are kept in both layouts (+~320 MB), down in one (no difference), and the tied lm_head uses the
  embedding ([out, in]) or a transposed copy. Within each kernel class a row's result does not depend on the number of
  rows, which keeps batched and single greedy output alike.
* Two OpenMP threads on a busy 2-core machine stall a few ms at every parallel region (the second thread waits for the
  scheduler), which made small-row matmuls 10-20x slower than one thread and even 60-token x 32-row prefills 2x
  slower. Forwards run on one thread when they have few rows or when other processes load the machine
  (``threads_for``), on all threads otherwise.

Numerics stay fp32 everywhere so a prompt's greedy output does not depend on the batch it ran in.
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F

if TYPE_CHECKING:
    from transformers import PreTrainedModel

log = logging.getLogger(__name__)

_LORA_KEY = re.compile(
    r"layers\.(\d+)\.(?:self_attn|mlp)\.(q_proj|k_proj|v_proj|o_proj|gate_proj|up_proj|down_proj)\.lora_([AB])\.weight$"
)


class UnsupportedModelError(ValueError):
    pass


@dataclass
class LoraWeights:
    """One adapter: per layer, per projection name, (A^T [in, r], B^T [r, out] * scale)."""

    layers: list[LayerLora] = field(default_factory=list)


def load_lora(adapter_dir: Path, num_layers: int) -> LoraWeights:
    from peft import LoraConfig
    from peft.utils import load_peft_weights

    config = LoraConfig.from_pretrained(str(adapter_dir))
    if getattr(config, "use_dora", False):
        raise UnsupportedModelError(f"adapter {adapter_dir.name}: DoRA adapters are not supported by the local engine")
    if config.alpha_pattern:
        raise UnsupportedModelError(f"adapter {adapter_dir.name}: alpha_pattern is not supported by the local engine")
    state = load_peft_weights(str(adapter_dir), device="cpu")
    pairs: dict[tuple[int, str], dict[str, torch.Tensor]] = {}
    for key, tensor in state.items():
        match = _LORA_KEY.search(key)
        if match is None:
            raise UnsupportedModelError(f"adapter {adapter_dir.name}: weight {key} is not a LoRA projection weight")
        pairs.setdefault((int(match[1]), match[2]), {})[match[3]] = tensor.float()
    weights = LoraWeights(layers=[{} for _ in range(num_layers)])
    for (layer, proj), ab in pairs.items():
        a, b = ab["A"], ab["B"]
        rank = a.shape[0]
        scale = config.lora_alpha / (rank**0.5 if config.use_rslora else rank)
        weights.layers[layer][proj] = (a.t().contiguous(), (b * scale).t().contiguous())
    return weights


@dataclass
class KVCache:
    keys: list[torch.Tensor]
    values: list[torch.Tensor]
    key_valid: torch.Tensor  # [B, Tmax] bool
    length: int = 0

    def keep(self, rows: torch.Tensor) -> None:
        """Keep (or repeat: an index may appear several times) the given rows."""
        self.keys = [k.index_select(0, rows) for k in self.keys]
        self.values = [v.index_select(0, rows) for v in self.values]
        self.key_valid = self.key_valid.index_select(0, rows)


GEMM_MIN_ROWS = 4  # from here on MKL runs a gemm kernel (and F.linear over [out, in] weights is the faster layout)

# one projection's weights: [in, out] for the gemv path and, where kept, [out, in] for the gemm path
Projection = tuple[torch.Tensor, torch.Tensor | None]
# one layer's adapter: projection name -> (A^T, B^T * scale)
LayerLora = dict[str, tuple[torch.Tensor, torch.Tensor]]


@dataclass
class _Layer:
    ln1: torch.Tensor
    ln2: torch.Tensor
    qkv: Projection
    o: Projection
    gate_up: Projection
    down: Projection


def _submodule(model: torch.nn.Module, path: str) -> torch.nn.Module:
    module = model
    for name in path.split("."):
        child = getattr(module, name, None)
        if not isinstance(child, torch.nn.Module):
            raise UnsupportedModelError(f"the local engine runs Llama-style models: {path!r} is not a module")
        module = child
    return module


def _weight(model: torch.nn.Module, path: str) -> torch.Tensor:
    """The named weight, detached and in fp32."""
    owner, _, name = path.rpartition(".")
    tensor = getattr(_submodule(model, owner) if owner else model, name, None)
    if not isinstance(tensor, torch.Tensor):
        raise UnsupportedModelError(f"the local engine runs Llama-style models: {path!r} is not a weight")
    return tensor.detach().float()


class LlamaRunner:
    # forwards with fewer rows (batch * steps) always run on one thread: MKL's small-row kernels gain nothing from two
    single_thread_rows = 8

    def __init__(self, model: PreTrainedModel, threads: int | None = None) -> None:
        config = model.config
        if config.model_type not in ("llama", "mistral", "qwen2") or getattr(config, "attention_bias", False):
            raise UnsupportedModelError(f"the local engine runs Llama-style models, not {config.model_type!r}")
        self.config = config
        self.threads = threads or torch.get_num_threads()
        self.num_heads: int = config.num_attention_heads
        self.num_kv: int = config.num_key_value_heads
        self.head_dim: int = getattr(config, "head_dim", None) or config.hidden_size // self.num_heads
        self.hidden_size: int = config.hidden_size
        self.inter: int = config.intermediate_size
        self.eps: float = config.rms_norm_eps
        with torch.no_grad():
            positions = torch.arange(config.max_position_embeddings)[None]
            rotary = _submodule(model, "model.rotary_emb")
            rope: tuple[torch.Tensor, torch.Tensor] = rotary(torch.zeros(1, dtype=torch.float32), positions)
            cos, sin = rope
        half = self.head_dim // 2
        self.cos = cos[0].float().contiguous()  # [P, D]
        # rotate_half(x) * sin == swap_halves(x) * (sin with its first half negated)
        self.sin_signed = torch.cat([-sin[0, :, :half], sin[0, :, half:]], dim=-1).float().contiguous()
        self.embed = _weight(model, "model.embed_tokens.weight")
        self.lm_head = _weight(model, "lm_head.weight")  # [vocab, hidden]; the embedding when tied
        self.lm_head_t = self.lm_head.t().contiguous()
        self.final_norm = _weight(model, "model.norm.weight")
        q, kv = self.num_heads * self.head_dim, self.num_kv * self.head_dim
        self.qkv_slices = {"q_proj": slice(0, q), "k_proj": slice(q, q + kv), "v_proj": slice(q + kv, q + 2 * kv)}
        self.gate_up_slices = {"gate_proj": slice(0, self.inter), "up_proj": slice(self.inter, 2 * self.inter)}
        layers = _submodule(model, "model.layers")
        if not isinstance(layers, torch.nn.ModuleList):
            raise UnsupportedModelError("the local engine runs Llama-style models: model.layers is not a list")
        self.layers: list[_Layer] = []
        for layer in layers:
            qkv = torch.cat(
                [_weight(layer, f"self_attn.{name}.weight") for name in ("q_proj", "k_proj", "v_proj")]
            ).contiguous()
            o = _weight(layer, "self_attn.o_proj.weight").contiguous()
            gate_up = torch.cat([_weight(layer, "mlp.gate_proj.weight"), _weight(layer, "mlp.up_proj.weight")])
            gate_up = gate_up.contiguous()
            self.layers.append(
                _Layer(
                    ln1=_weight(layer, "input_layernorm.weight"),
                    ln2=_weight(layer, "post_attention_layernorm.weight"),
                    qkv=(qkv.t().contiguous(), qkv),
                    o=(o.t().contiguous(), o),
                    gate_up=(gate_up.t().contiguous(), gate_up),
                    down=(_weight(layer, "mlp.down_proj.weight").t().contiguous(), None),
                )
            )

    @property
    def num_layers(self) -> int:
        return len(self.layers)

    def threads_for(self, rows: int) -> int:
        """One thread for small forwards, and for all while other processes keep the CPUs busy (the 1-minute load
        average minus this engine's own full thread count exceeds a quarter core). Counting the engine at its full
        count, not the count it last ran with, keeps a quiet machine from locking the engine into one thread."""
        if rows < self.single_thread_rows or self.threads == 1:
            return 1
        others = os.getloadavg()[0] - self.threads
        return 1 if others > 0.25 else self.threads

    def _norm(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        return F.rms_norm(x, (x.shape[-1],), weight, self.eps)

    @staticmethod
    def _proj(
        x: torch.Tensor,
        w: Projection,
        lora: LayerLora | None,
        slices: dict[str, slice] | None,
        name: str,
    ) -> torch.Tensor:
        w_t, w_out_in = w
        y = F.linear(x, w_out_in) if w_out_in is not None and x.shape[0] >= GEMM_MIN_ROWS else x @ w_t
        if lora:
            if slices is None:
                if name in lora:
                    a, b = lora[name]
                    y += (x @ a) @ b
            else:
                for proj, part in slices.items():
                    if proj in lora:
                        a, b = lora[proj]
                        y[:, part] += (x @ a) @ b
        return y

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        x = self._norm(hidden, self.final_norm)
        return F.linear(x, self.lm_head) if x.shape[0] >= GEMM_MIN_ROWS else x @ self.lm_head_t

    def new_cache(self, batch: int, max_len: int) -> KVCache:
        shape = (batch, self.num_kv, max_len, self.head_dim)
        return KVCache(
            keys=[torch.empty(shape) for _ in self.layers],
            values=[torch.empty(shape) for _ in self.layers],
            key_valid=torch.zeros(batch, max_len, dtype=torch.bool),
        )

    def forward(
        self,
        input_ids: torch.Tensor,  # [B, T]
        positions: torch.Tensor,  # [B, T]
        cache: KVCache,
        lora: LoraWeights | None,
        token_valid: torch.Tensor | None = None,  # [B, T] bool, False for padding (prefill only)
        all_logits: bool = False,
    ) -> torch.Tensor:
        """Run T new tokens per row, append them to the cache; return the last position's logits [B, vocab]
        (``all_logits``: every position's, [B, T, vocab])."""
        batch, steps = input_ids.shape
        threads = self.threads_for(batch * steps)
        if torch.get_num_threads() != threads:
            torch.set_num_threads(threads)
        start, end = cache.length, cache.length + steps
        cache.key_valid[:, start:end] = True if token_valid is None else token_valid
        keys_ok = cache.key_valid[:, :end]
        if steps == 1:
            mask = torch.zeros(batch, 1, 1, end).masked_fill_(~keys_ok[:, None, None, :], float("-inf"))
        else:
            causal = torch.ones(steps, end, dtype=torch.bool).tril_(diagonal=start)
            allowed = causal[None] & keys_ok[:, None, :]
            # a padding query may see no valid key at all; let it see itself so no softmax row is all -inf (NaN)
            allowed |= torch.eye(steps, end, dtype=torch.bool, device=allowed.device).roll(start, 1)[None]
            mask = torch.zeros(batch, 1, steps, end).masked_fill_(~allowed[:, None], float("-inf"))
        hidden = F.embedding(input_ids, self.embed).view(batch * steps, -1)
        cos = self.cos[positions].view(batch * steps, 1, -1)
        sin = self.sin_signed[positions].view(batch * steps, 1, -1)
        heads, kv, dim = self.num_heads, self.num_kv, self.head_dim
        q_dim, kv_dim = heads * dim, kv * dim
        half = dim // 2
        for index, layer in enumerate(self.layers):
            adapter = lora.layers[index] if lora is not None else None
            x = self._norm(hidden, layer.ln1)
            qkv = self._proj(x, layer.qkv, adapter, self.qkv_slices, "qkv")
            qk = qkv[:, : q_dim + kv_dim].view(batch * steps, heads + kv, dim)
            swapped = qk.unflatten(-1, (2, half)).flip(-2).flatten(-2)
            qk = (qk * cos + swapped * sin).view(batch, steps, heads + kv, dim)
            q = qk[:, :, :heads].transpose(1, 2)
            cache.keys[index][:, :, start:end] = qk[:, :, heads:].transpose(1, 2)
            cache.values[index][:, :, start:end] = qkv[:, q_dim + kv_dim :].view(batch, steps, kv, dim).transpose(1, 2)
            attn = F.scaled_dot_product_attention(
                q, cache.keys[index][:, :, :end], cache.values[index][:, :, :end], attn_mask=mask, enable_gqa=True
            )
            attn = attn.transpose(1, 2).reshape(batch * steps, q_dim)
            hidden = hidden + self._proj(attn, layer.o, adapter, None, "o_proj")
            x = self._norm(hidden, layer.ln2)
            gate_up = self._proj(x, layer.gate_up, adapter, self.gate_up_slices, "gate_up")
            gate, up = gate_up.split(self.inter, dim=1)
            hidden = hidden + self._proj(F.silu(gate) * up, layer.down, adapter, None, "down_proj")
        cache.length = end
        if all_logits:
            return self.logits(hidden).view(batch, steps, -1)
        return self.logits(hidden.view(batch, steps, -1)[:, -1])

"""A lean Llama forward pass over a Hugging Face checkpoint, with a preallocated KV cache and LoRA deltas.

Why not ``model.generate``: on 2 CPU cores its per-step overhead (growing cache concatenation, mask building,
generic logits processing) costs more than the matmuls. Here the weights are kept pre-transposed and fused
(q|k|v and gate|up), the cache is written in place, and finished rows are dropped from the batch.

Numerics stay fp32 everywhere so a prompt's greedy output does not depend on the batch it ran in.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F

log = logging.getLogger(__name__)

_LORA_KEY = re.compile(r"layers\.(\d+)\.(?:self_attn|mlp)\.(q_proj|k_proj|v_proj|o_proj|gate_proj|up_proj|down_proj)\.lora_([AB])\.weight$")


class UnsupportedModelError(ValueError):
    pass


@dataclass
class LoraWeights:
    """One adapter: per layer, per projection name, (A^T [in, r], B^T [r, out] * scale)."""

    layers: list[dict[str, tuple[torch.Tensor, torch.Tensor]]] = field(default_factory=list)


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
        self.keys = [k.index_select(0, rows) for k in self.keys]
        self.values = [v.index_select(0, rows) for v in self.values]
        self.key_valid = self.key_valid.index_select(0, rows)


class LlamaRunner:
    def __init__(self, model: torch.nn.Module) -> None:
        config = model.config
        if config.model_type not in ("llama", "mistral", "qwen2") or getattr(config, "attention_bias", False):
            raise UnsupportedModelError(f"the local engine runs Llama-style models, not {config.model_type!r}")
        self.config = config
        self.num_heads = config.num_attention_heads
        self.num_kv = config.num_key_value_heads
        self.head_dim = getattr(config, "head_dim", None) or config.hidden_size // self.num_heads
        self.eps = config.rms_norm_eps
        self.rotary = model.model.rotary_emb
        self.embed = model.model.embed_tokens.weight.detach().float()
        self.lm_head_t = model.lm_head.weight.detach().float().t().contiguous()
        self.final_norm = model.model.norm.weight.detach().float()
        q, kv = self.num_heads * self.head_dim, self.num_kv * self.head_dim
        self.qkv_slices = {"q_proj": slice(0, q), "k_proj": slice(q, q + kv), "v_proj": slice(q + kv, q + 2 * kv)}
        inter = config.intermediate_size
        self.gate_up_slices = {"gate_proj": slice(0, inter), "up_proj": slice(inter, 2 * inter)}
        self.layers = []
        for layer in model.model.layers:
            attn, mlp = layer.self_attn, layer.mlp
            cat = torch.cat
            self.layers.append({
                "ln1": layer.input_layernorm.weight.detach().float(),
                "ln2": layer.post_attention_layernorm.weight.detach().float(),
                "qkv": cat([attn.q_proj.weight, attn.k_proj.weight, attn.v_proj.weight]).detach().float().t().contiguous(),
                "o": attn.o_proj.weight.detach().float().t().contiguous(),
                "gate_up": cat([mlp.gate_proj.weight, mlp.up_proj.weight]).detach().float().t().contiguous(),
                "down": mlp.down_proj.weight.detach().float().t().contiguous(),
            })

    @property
    def num_layers(self) -> int:
        return len(self.layers)

    def _norm(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * weight

    @staticmethod
    def _proj(x: torch.Tensor, w: torch.Tensor, lora: dict | None, slices: dict[str, slice] | None, name: str) -> torch.Tensor:
        y = x @ w
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
        token_valid: torch.Tensor | None = None,  # [B, T] bool, False for left padding (prefill only)
    ) -> torch.Tensor:
        """Run T new tokens per row, append them to the cache, return last-position logits [B, vocab]."""
        batch, steps = input_ids.shape
        start, end = cache.length, cache.length + steps
        cache.key_valid[:, start:end] = True if token_valid is None else token_valid
        keys_ok = cache.key_valid[:, :end]
        if steps == 1:
            mask = torch.zeros(batch, 1, 1, end).masked_fill_(~keys_ok[:, None, None, :], float("-inf"))
        else:
            causal = torch.ones(steps, end, dtype=torch.bool).tril_(diagonal=start)
            allowed = causal[None] & keys_ok[:, None, :]
            if start == 0:  # a left-padding query sees only itself, so no softmax row is all -inf (NaN)
                allowed |= torch.eye(steps, end, dtype=torch.bool)[None]
            mask = torch.zeros(batch, 1, steps, end).masked_fill_(~allowed[:, None], float("-inf"))
        hidden = F.embedding(input_ids, self.embed).view(batch * steps, -1)
        cos, sin = self.rotary(hidden, positions)
        cos, sin = cos[:, None], sin[:, None]  # [B, 1, T, D]
        heads, kv, dim = self.num_heads, self.num_kv, self.head_dim
        q_dim, kv_dim = heads * dim, kv * dim
        for index, layer in enumerate(self.layers):
            adapter = lora.layers[index] if lora is not None else None
            x = self._norm(hidden, layer["ln1"])
            qkv = self._proj(x, layer["qkv"], adapter, self.qkv_slices, "qkv")
            q = qkv[:, :q_dim].view(batch, steps, heads, dim).transpose(1, 2)
            k = qkv[:, q_dim:q_dim + kv_dim].view(batch, steps, kv, dim).transpose(1, 2)
            v = qkv[:, q_dim + kv_dim:].view(batch, steps, kv, dim).transpose(1, 2)
            q = q * cos + _rotate_half(q) * sin
            k = k * cos + _rotate_half(k) * sin
            cache.keys[index][:, :, start:end] = k
            cache.values[index][:, :, start:end] = v
            attn = F.scaled_dot_product_attention(
                q, cache.keys[index][:, :, :end], cache.values[index][:, :, :end], attn_mask=mask, enable_gqa=True
            )
            attn = attn.transpose(1, 2).reshape(batch * steps, q_dim)
            hidden = hidden + self._proj(attn, layer["o"], adapter, None, "o_proj")
            x = self._norm(hidden, layer["ln2"])
            gate_up = self._proj(x, layer["gate_up"], adapter, self.gate_up_slices, "gate_up")
            gate, up = gate_up.split(self.config.intermediate_size, dim=1)
            hidden = hidden + self._proj(F.silu(gate) * up, layer["down"], adapter, None, "down_proj")
        cache.length = end
        last = hidden.view(batch, steps, -1)[:, -1]
        return self._norm(last, self.final_norm) @ self.lm_head_t


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)

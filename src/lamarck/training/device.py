"""Where and in which precision to train.

TRL's ``SFTConfig`` turns bf16 autocast and gradient checkpointing on by default. On CPUs without bf16 matrix
units, bf16 autocast is far slower than fp32 (about 400x on the reference machine) because the
kernels fall back to scalar conversion paths, and checkpointing repeats the forward pass for nothing on a
135M model. So: bf16 on CUDA devices that support it and on CPUs with AMX tiles (``amx_bf16``); fp32 everywhere
else. ``avx512_bf16`` alone only adds dot-product instructions and is not enough to win in training.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TypedDict

log = logging.getLogger(__name__)

Precision = Literal["fp32", "bf16"]


class DeviceArguments(TypedDict):
    """The TrainingArguments fields that depend on the device."""

    use_cpu: bool
    bf16: bool
    fp16: bool
    activation_checkpointing: bool
    dataloader_num_workers: int
    dataloader_pin_memory: bool


@dataclass(frozen=True)
class TrainDevice:
    device: Literal["cpu", "cuda"]
    precision: Precision
    reason: str

    @property
    def use_cpu(self) -> bool:
        return self.device == "cpu"

    @property
    def bf16(self) -> bool:
        return self.precision == "bf16"

    def trainer_kwargs(self) -> DeviceArguments:
        """The TrainingArguments fields that depend on the device (shared by SFT and DPO)."""
        return {
            "use_cpu": self.use_cpu,
            "bf16": self.bf16,
            "fp16": False,
            "activation_checkpointing": False,  # transformers 5 name; TRL defaults the old alias to True
            "dataloader_num_workers": 0,
            "dataloader_pin_memory": not self.use_cpu,
        }


@functools.lru_cache(maxsize=1)
def cpu_flags() -> frozenset[str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return frozenset()
    for line in text.splitlines():
        if line.startswith("flags"):
            return frozenset(line.split(":", 1)[1].split())
    return frozenset()


def cpu_has_bf16_units(flags: frozenset[str] | None = None) -> bool:
    return "amx_bf16" in (cpu_flags() if flags is None else flags)


def choose_device(
    precision: Literal["auto", "fp32", "bf16"] = "auto", *, flags: frozenset[str] | None = None
) -> TrainDevice:
    import torch

    if torch.cuda.is_available():
        supported = torch.cuda.is_bf16_supported()
        if precision == "fp32" or (precision == "auto" and not supported):
            return TrainDevice("cuda", "fp32", "cuda without bf16 support" if not supported else "fp32 requested")
        if precision == "bf16" and not supported:
            log.warning("training: bf16 requested but this GPU lacks it; using fp32")
            return TrainDevice("cuda", "fp32", "bf16 requested, unsupported")
        return TrainDevice("cuda", "bf16", "cuda with bf16")
    if precision == "bf16":
        return TrainDevice("cpu", "bf16", "bf16 requested")
    if precision == "fp32":
        return TrainDevice("cpu", "fp32", "fp32 requested")
    if cpu_has_bf16_units(flags):
        return TrainDevice("cpu", "bf16", "cpu with amx_bf16")
    return TrainDevice("cpu", "fp32", "cpu without bf16 matrix units (no amx_bf16)")

"""Request parameters, results, and next-token choice per row (greedy or temperature/top-p with a row seed)."""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from typing import Literal

import torch


@dataclass
class SamplingParams:
    max_tokens: int = 256
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int | None = None
    stop: list[str] = field(default_factory=list)
    stop_after: list[str] = field(default_factory=list)
    """Regular expressions: generation ends with the first match, which is kept (``stop`` strings are cut off).

    A caller that knows its output format stops the model right after the part it will use: the executor stops
    at the end of the first action instead of decoding the guessed result and second call a small model writes
    after it. Not an OpenAI parameter; the local engines and ``lamarck serve-model`` honour it."""
    n: int = 1
    ignore_eos: bool = False  # benchmarks only: generate exactly max_tokens
    stop_patterns: tuple[re.Pattern[str], ...] = field(init=False, repr=False, compare=False, default=())

    def __post_init__(self) -> None:
        if self.max_tokens < 1:
            raise ValueError(f"max_tokens must be at least 1, got {self.max_tokens}")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.n < 1:
            raise ValueError(f"n must be at least 1, got {self.n}")
        if isinstance(self.stop, str):
            self.stop = [self.stop]
        self.stop = [s for s in self.stop if s]
        if isinstance(self.stop_after, str):
            self.stop_after = [self.stop_after]
        patterns = []
        for index, pattern in enumerate(self.stop_after):
            try:
                patterns.append(re.compile(pattern))
            except re.error as exc:
                raise ValueError(f"stop_after[{index}] is not a valid regular expression: {exc}") from None
        self.stop_patterns = tuple(patterns)

    @property
    def watches_text(self) -> bool:
        """Whether each new token's text must be checked for stop strings or patterns."""
        return bool(self.stop or self.stop_patterns)


@dataclass
class Completion:
    text: str
    finish_reason: Literal["stop", "length"]
    prompt_tokens: int
    completion_tokens: int
    latency_s: float


class RowSampler:
    """Chooses next tokens for one row; its own generator makes sampled output independent of batch mates."""

    def __init__(self, params: SamplingParams, index: int) -> None:
        self.temperature = params.temperature
        self.top_p = params.top_p
        self.generator: torch.Generator | None = None
        if self.temperature > 0:
            seed = params.seed if params.seed is not None else random.getrandbits(63)
            self.generator = torch.Generator().manual_seed((seed + 1_000_003 * index) % (1 << 63))

    @property
    def greedy(self) -> bool:
        return self.generator is None

    def choose(self, logits: torch.Tensor) -> int:
        """``logits``: [vocab] fp32 for this row."""
        if self.generator is None:
            return int(logits.argmax())
        probs = torch.softmax(logits / self.temperature, dim=-1)
        if self.top_p < 1.0:
            sorted_probs, order = probs.sort(descending=True)
            cumulative = sorted_probs.cumsum(0)
            keep = cumulative - sorted_probs < self.top_p  # always keeps the top token
            sorted_probs = sorted_probs * keep
            choice = torch.multinomial(sorted_probs, 1, generator=self.generator)
            return int(order[choice])
        return int(torch.multinomial(probs, 1, generator=self.generator))


def choose_tokens(logits: torch.Tensor, samplers: list[RowSampler]) -> list[int]:
    """Batch argmax for greedy rows, per-row sampling for the rest."""
    greedy = logits.argmax(-1).tolist()
    return [g if s.greedy else s.choose(logits[i]) for i, (g, s) in enumerate(zip(greedy, samplers, strict=True))]

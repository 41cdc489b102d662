"""Next-token choice for rows of a batch from llama.cpp's logits: greedy, or temperature and top-p with a seed per row.

Each sampled row owns a numpy generator seeded from the request's seed and the row's index, so its output does not
depend on which other rows share the batch.
"""

from __future__ import annotations

import random

import numpy as np

from lamarck.platform.llm.sampling import SamplingParams

_NUCLEUS_CANDIDATES = 1024  # top-p looks at the most likely tokens first and sorts all of them only if it must


class RowChooser:
    def __init__(self, params: SamplingParams, index: int) -> None:
        self.temperature = params.temperature
        self.top_p = params.top_p
        self.rng: np.random.Generator | None = None
        if self.temperature > 0:
            seed = params.seed if params.seed is not None else random.getrandbits(63)
            self.rng = np.random.default_rng((seed + 1_000_003 * index) % (1 << 63))

    @property
    def greedy(self) -> bool:
        return self.rng is None

    def choose(self, logits: np.ndarray) -> int:
        """``logits``: [vocab] float32 for this row."""
        if self.rng is None:
            return int(logits.argmax())
        scaled = logits.astype(np.float64) / self.temperature
        scaled -= scaled.max()
        probs = np.exp(scaled)
        probs /= probs.sum()
        if self.top_p < 1.0:
            return self._nucleus(probs)
        cumulative = np.cumsum(probs)
        return int(min(np.searchsorted(cumulative, self.rng.random() * cumulative[-1], side="right"), len(probs) - 1))

    def _nucleus(self, probs: np.ndarray) -> int:
        assert self.rng is not None
        k = min(_NUCLEUS_CANDIDATES, len(probs))
        top = np.argpartition(-probs, k - 1)[:k]
        order = top[np.argsort(-probs[top], kind="stable")]
        if probs[order].sum() < self.top_p:
            order = np.argsort(-probs, kind="stable")
        sorted_probs = probs[order]
        cumulative = np.cumsum(sorted_probs)
        keep = int(np.searchsorted(cumulative - sorted_probs, self.top_p, side="left"))  # keeps the top token
        kept = cumulative[max(keep, 1) - 1]
        pick = int(np.searchsorted(cumulative[: max(keep, 1)], self.rng.random() * kept, side="right"))
        return int(order[min(pick, max(keep, 1) - 1)])

"""Prompt-lookup drafts for lossless speculative greedy decoding at batch 1.

A lone greedy row is memory-bound: every token reads all weights once. When the last few tokens already occurred
earlier in the prompt or the output, the tokens that followed them are a cheap guess for what comes next. The runner
scores the current token plus the guess in one forward (T = k + 1 rows through each matmul, which costs about as much
as 2-2.5 single steps), and the longest prefix of the guess that greedy decoding would have produced is kept, plus
the model's own next token after it. Misses back off so text that never repeats pays almost nothing.
"""

from __future__ import annotations

from dataclasses import dataclass


def draft(context: list[int], limit: int, longest: int = 3, shortest: int = 2) -> list[int]:
    """Up to ``limit`` tokens that followed the latest earlier occurrence of the context's last n-gram (longest n
    first); empty when nothing matches."""
    if limit <= 0:
        return []
    size = len(context)
    for n in range(longest, shortest - 1, -1):
        if size <= n:
            continue
        tail = context[-n:]
        first = tail[0]
        for i in range(size - n - 1, -1, -1):
            if context[i] == first and context[i : i + n] == tail:
                return context[i + n : i + n + limit]
    return []


@dataclass
class Backoff:
    """Skips speculation for a while after drafts that were rejected outright (doubling, capped)."""

    wait: int = 0
    penalty: int = 0
    cap: int = 16

    def ready(self) -> bool:
        if self.wait > 0:
            self.wait -= 1
            return False
        return True

    def record(self, accepted: int) -> None:
        if accepted:
            self.penalty = 0
        else:
            self.penalty = min(self.cap, max(1, self.penalty * 2))
            self.wait = self.penalty

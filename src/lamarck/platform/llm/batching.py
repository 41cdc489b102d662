"""One batched generation: shared prefill, step decode with a KV cache, rows leave as they finish.

Prefill work is shared: identical prompts (n > 1 samples, duplicate requests) are prefilled once and their cache rows
copied; a token prefix common to all prompts of the batch (e.g. a system prompt) of at least ``min_shared_prefix``
tokens is prefilled once and the distinct suffixes are prefilled after it. A lone greedy row decodes speculatively
with prompt-lookup drafts (see speculative.py).
"""

from __future__ import annotations

import queue
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from lamarck.platform.llm.runner import KVCache, LlamaRunner, LoraWeights
from lamarck.platform.llm.sampling import Completion, RowSampler, SamplingParams, choose_tokens
from lamarck.platform.llm.speculative import Backoff, draft
from lamarck.platform.llm.stops import stop_cut, stream_delta


@dataclass
class Row:
    """One completion to produce: a prompt, its sampler, and where the result goes."""

    prompt_ids: list[int]
    params: SamplingParams
    sampler: RowSampler
    submitted: float
    deliver: Callable[[Completion], None]
    stream: queue.Queue[str | None] | None = None
    generated: list[int] = field(default_factory=list)
    text: str = ""
    emitted: int = 0
    finish_reason: str | None = None
    hit_eos: bool = False


class BatchRunner:
    min_shared_prefix = 16  # tokens; a shorter common prefix is not worth a separate forward
    draft_tokens = 7  # speculative tokens per verification forward at batch 1 (0: off)

    def __init__(
        self,
        runner: LlamaRunner,
        decode: Callable[[list[int]], str],
        eos_ids: set[int],
        pad_id: int,
        max_positions: int,
    ) -> None:
        self.runner = runner
        self.decode = decode
        self.eos_ids = eos_ids
        self.pad_id = pad_id
        self.max_positions = max_positions

    def run(self, rows: list[Row], lora: LoraWeights | None) -> None:
        with torch.inference_mode():
            self._run(rows, lora)

    def _prefill(self, rows: list[Row], lora: LoraWeights | None, budget: int) -> tuple[KVCache, torch.Tensor]:
        """Prefill every row's prompt (each distinct prompt once, a common prefix once); return cache and logits."""
        unique: dict[tuple[int, ...], int] = {}
        which = [unique.setdefault(tuple(r.prompt_ids), len(unique)) for r in rows]
        prompts = list(unique)
        shared = _common_prefix(prompts) if len(prompts) > 1 else 0
        shared = min(shared, min(len(p) for p in prompts) - 1)
        if shared < self.min_shared_prefix:
            shared = 0
        width = max(len(p) for p in prompts) - shared
        cache = self.runner.new_cache(1 if shared else len(prompts), shared + width + budget)
        if shared:
            self.runner.forward(torch.tensor([prompts[0][:shared]]), torch.arange(shared)[None], cache, lora)
            cache.keep(torch.zeros(len(prompts), dtype=torch.long))
        ids = torch.full((len(prompts), width), self.pad_id, dtype=torch.long)
        valid = torch.zeros(len(prompts), width, dtype=torch.bool)
        for i, prompt in enumerate(prompts):
            ids[i, width - len(prompt) + shared :] = torch.tensor(prompt[shared:])
            valid[i, width - len(prompt) + shared :] = True
        positions = (valid.long().cumsum(1) - 1).clamp_(min=0) + shared
        logits = self.runner.forward(ids, positions, cache, lora, token_valid=valid)
        if len(prompts) < len(rows):
            index = torch.tensor(which)
            cache.keep(index)
            logits = logits.index_select(0, index)
        return cache, logits

    def _run(self, rows: list[Row], lora: LoraWeights | None) -> None:
        budget = [min(r.params.max_tokens, self.max_positions - len(r.prompt_ids)) for r in rows]
        cache, logits = self._prefill(rows, lora, max(budget))
        next_pos = torch.tensor([len(r.prompt_ids) for r in rows])
        active = list(range(len(rows)))
        backoff = Backoff()
        while True:
            tokens = choose_tokens(logits, [rows[i].sampler for i in active])
            keep: list[int] = []
            for slot, (i, token) in enumerate(zip(active, tokens, strict=True)):
                if not self._advance(rows[i], token, budget[i]):
                    keep.append(slot)
            if not keep:
                return
            if len(keep) < len(active):
                index = torch.tensor(keep)
                cache.keep(index)
                next_pos = next_pos.index_select(0, index)
                tokens = [tokens[s] for s in keep]
                active = [active[s] for s in keep]
            if len(active) == 1 and rows[active[0]].sampler.greedy and self.draft_tokens and backoff.ready():
                row = rows[active[0]]
                guess = draft(
                    row.prompt_ids + row.generated, min(self.draft_tokens, budget[active[0]] - len(row.generated) - 1)
                )
                if guess:
                    verified = self._speculate(row, tokens[0], guess, budget[active[0]], next_pos, cache, lora)
                    if verified is None:
                        return
                    accepted, logits = verified
                    backoff.record(accepted)
                    next_pos += 1 + accepted
                    continue
            logits = self.runner.forward(torch.tensor(tokens)[:, None], next_pos[:, None], cache, lora)
            next_pos += 1

    def _speculate(
        self,
        row: Row,
        token: int,
        guess: list[int],
        budget: int,
        next_pos: torch.Tensor,
        cache: KVCache,
        lora: LoraWeights | None,
    ) -> tuple[int, torch.Tensor] | None:
        """Score ``token`` + ``guess`` in one forward; add the accepted guess tokens to the row. Returns (accepted,
        logits after the last accepted token), or None when the row finished."""
        start = cache.length
        steps = 1 + len(guess)
        positions = (next_pos[0] + torch.arange(steps))[None]
        logits = self.runner.forward(torch.tensor([[token, *guess]]), positions, cache, lora, all_logits=True)[0]
        predicted = logits.argmax(-1).tolist()
        accepted = 0
        for guessed, wanted in zip(guess, predicted, strict=False):
            if guessed != wanted:
                break
            accepted += 1
            if self._advance(row, guessed, budget):
                return None
        cache.length = start + 1 + accepted
        return accepted, logits[accepted : accepted + 1]

    def _advance(self, row: Row, token: int, budget: int) -> bool:
        """Add a token to a row; return True when the row is finished (and delivered)."""
        if token in self.eos_ids and not row.params.ignore_eos:
            row.finish_reason = "stop"
            row.hit_eos = True
        else:
            row.generated.append(token)
            if row.params.watches_text or row.stream is not None:
                row.text = self.decode(row.generated)
                cut = stop_cut(row.text, row.params)
                if cut is not None:
                    row.text = row.text[:cut]
                    row.finish_reason = "stop"
            if row.finish_reason is None and len(row.generated) >= budget:
                row.finish_reason = "length"
        if row.finish_reason is None:
            self._emit(row, final=False)
            return False
        if not (row.params.watches_text or row.stream is not None):
            row.text = self.decode(row.generated)
        self._emit(row, final=True)
        row.deliver(
            Completion(
                text=row.text,
                finish_reason=row.finish_reason,  # type: ignore[arg-type]
                prompt_tokens=len(row.prompt_ids),
                completion_tokens=len(row.generated) + int(row.hit_eos),
                latency_s=time.perf_counter() - row.submitted,
            )
        )
        return True

    @staticmethod
    def _emit(row: Row, final: bool) -> None:
        if row.stream is not None:
            row.emitted = stream_delta(row.stream, row.text, row.emitted, row.params.stop, final)


def _common_prefix(prompts: list[tuple[int, ...]]) -> int:
    first, size = prompts[0], min(len(p) for p in prompts)
    for i in range(size):
        token = first[i]
        if any(p[i] != token for p in prompts):
            return i
    return size

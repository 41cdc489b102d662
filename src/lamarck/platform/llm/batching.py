"""One batched generation: left-padded prefill, step decode with a KV cache, rows leave as they finish."""

from __future__ import annotations

import queue
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from lamarck.platform.llm.runner import LlamaRunner, LoraWeights
from lamarck.platform.llm.sampling import Completion, RowSampler, SamplingParams, choose_tokens


@dataclass
class Row:
    """One completion to produce: a prompt, its sampler, and where the result goes."""

    prompt_ids: list[int]
    params: SamplingParams
    sampler: RowSampler
    submitted: float
    deliver: Callable[[Completion], None]
    stream: queue.Queue | None = None
    generated: list[int] = field(default_factory=list)
    text: str = ""
    emitted: int = 0
    finish_reason: str | None = None
    hit_eos: bool = False


class BatchRunner:
    def __init__(self, runner: LlamaRunner, decode: Callable[[list[int]], str], eos_ids: set[int], pad_id: int,
                 max_positions: int) -> None:
        self.runner = runner
        self.decode = decode
        self.eos_ids = eos_ids
        self.pad_id = pad_id
        self.max_positions = max_positions

    def run(self, rows: list[Row], lora: LoraWeights | None) -> None:
        with torch.inference_mode():
            self._run(rows, lora)

    def _run(self, rows: list[Row], lora: LoraWeights | None) -> None:
        width = max(len(r.prompt_ids) for r in rows)
        budget = [min(r.params.max_tokens, self.max_positions - len(r.prompt_ids)) for r in rows]
        cache = self.runner.new_cache(len(rows), width + max(budget))
        ids = torch.full((len(rows), width), self.pad_id, dtype=torch.long)
        valid = torch.zeros(len(rows), width, dtype=torch.bool)
        for i, row in enumerate(rows):
            ids[i, width - len(row.prompt_ids):] = torch.tensor(row.prompt_ids)
            valid[i, width - len(row.prompt_ids):] = True
        positions = (valid.long().cumsum(1) - 1).clamp_(min=0)
        logits = self.runner.forward(ids, positions, cache, lora, token_valid=valid)
        next_pos = torch.tensor([len(r.prompt_ids) for r in rows])
        active = list(range(len(rows)))
        while True:
            tokens = choose_tokens(logits, [rows[i].sampler for i in active])
            keep: list[int] = []
            for slot, (i, token) in enumerate(zip(active, tokens)):
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
            logits = self.runner.forward(torch.tensor(tokens)[:, None], next_pos[:, None], cache, lora)
            next_pos += 1

    def _advance(self, row: Row, token: int, budget: int) -> bool:
        """Add a token to a row; return True when the row is finished (and delivered)."""
        if token in self.eos_ids and not row.params.ignore_eos:
            row.finish_reason = "stop"
            row.hit_eos = True
        else:
            row.generated.append(token)
            if row.params.stop or row.stream is not None:
                row.text = self.decode(row.generated)
                cut = _first_stop(row.text, row.params.stop)
                if cut is not None:
                    row.text = row.text[:cut]
                    row.finish_reason = "stop"
            if row.finish_reason is None and len(row.generated) >= budget:
                row.finish_reason = "length"
        if row.finish_reason is None:
            self._emit(row, final=False)
            return False
        if not (row.params.stop or row.stream is not None):
            row.text = self.decode(row.generated)
        self._emit(row, final=True)
        row.deliver(Completion(
            text=row.text,
            finish_reason=row.finish_reason,  # type: ignore[arg-type]
            prompt_tokens=len(row.prompt_ids),
            completion_tokens=len(row.generated) + int(row.hit_eos),
            latency_s=time.perf_counter() - row.submitted,
        ))
        return True

    @staticmethod
    def _emit(row: Row, final: bool) -> None:
        if row.stream is None:
            return
        end = len(row.text)
        if not final:
            # hold back a possible stop-sequence prefix and a half-decoded character
            end -= max((len(s) - 1 for s in row.params.stop), default=0)
            if row.text.endswith("\ufffd"):
                end = min(end, len(row.text) - 1)
        if end > row.emitted:
            row.stream.put(row.text[row.emitted:end])
            row.emitted = end


def _first_stop(text: str, stops: list[str]) -> int | None:
    found = [i for i in (text.find(s) for s in stops) if i >= 0]
    return min(found) if found else None

"""Continuous batching over one llama.cpp context: rows join and leave the running batch at every step.

Each row generates in a *slot*: a KV stream of its own (llama.cpp's non-unified cache, so attention reads only the
row's cells). A slot keeps its tokens after its row finishes, and a new row starts from the longest token prefix
any slot holds: in place when its own slot holds it, otherwise copied from the slot that does. The next ReAct step
of an episode, or any task sharing a system prompt and demonstrations, prefills only what is new. The samples of
one request are prefilled once and copied. Busy slots are kept at the lowest indices, because llama.cpp splits a
batch into one pass per run of consecutive sequence ids.

A finished row's slot holds its episode's prompt and reply, which the episode's next step (sent a few milliseconds
later, after the tool call) starts from. So a new row takes the free slot whose whole content its prompt continues,
or else an empty slot or the one released longest ago (copying a shared prefix into it). Compaction, which moves busy
rows into lower free slots, first moves a recently finished row's tokens aside to a higher empty or stale slot, so
an episode coming back for its next step still finds them.

A step serves one model version (llama.cpp applies a LoRA adapter per context); rows of other versions wait a step.
A greedy row that decodes alone (a batch-1 request, or the last of a batch) feeds prompt-lookup guesses after its
next token in the same decode and keeps those greedy decoding confirms (speculative decoding: the same output, up to
the rounding of the kernels a multi-position decode runs, which can flip a near-tie as a cached prefix can).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field

import numpy as np

from lamarck.platform.llm.llama_runtime import LlamaContext
from lamarck.platform.llm.row_sampling import RowChooser
from lamarck.platform.llm.sampling import Completion, SamplingParams
from lamarck.platform.llm.speculative import Backoff, draft
from lamarck.platform.llm.stops import stop_cut, stream_delta

log = logging.getLogger(__name__)

MIN_COPY_PREFIX = 32  # tokens; a shorter shared prefix is cheaper to prefill than to copy a stream for
KEEP_STEPS = 300  # a finished row's tokens are moved aside rather than overwritten for this many steps
CONTINUATION_SLACK = 8  # tokens at the end of a finished reply that its re-rendered next prompt may not repeat
DRAFT_TOKENS = 8  # at most this many prompt-lookup guesses scored with a lone greedy row's next token


class EngineClosedError(RuntimeError):
    pass


@dataclass
class Row:
    prompt: list[int]
    params: SamplingParams
    chooser: RowChooser
    future: Future[Completion]
    submitted: float
    stream: queue.Queue[str | None] | None = None
    generated: list[int] = field(default_factory=list)
    text: str = ""
    emitted: int = 0
    finish_reason: str | None = None
    hit_eos: bool = False
    slot: Slot | None = None
    fed: int = 0  # prompt tokens already in the slot
    pending: int | None = None  # a sampled token not yet fed
    budget: int = 0
    follows: bool = False  # a further sample of a prompt another row prefills; its stream is copied from that row
    backoff: Backoff = field(default_factory=Backoff)  # of its prompt-lookup drafts, when it decodes alone
    draft_size: int = 2  # guesses in its next draft: doubled when all are confirmed, cut to what was


@dataclass
class Group:
    """The rows of one prompt (n samples): the first is prefilled, the others copy its stream."""

    version: str
    rows: list[Row]


@dataclass(frozen=True)
class Forget:
    """A request, queued behind earlier work, to drop a version's cached prefixes and its adapter."""

    version: str


@dataclass
class Slot:
    index: int
    tokens: list[int] = field(default_factory=list)
    version: str | None = None
    row: Row | None = None
    released: int = -1_000_000  # the step its last row finished in
    _array: np.ndarray | None = None
    _array_of: tuple[int, int] = (0, -1)  # (id, length) of the token list the array was made from

    def array(self) -> np.ndarray:
        """The tokens as an array; remade when the list is replaced (compaction, copies) or grows."""
        key = (id(self.tokens), len(self.tokens))
        if self._array is None or self._array_of != key:
            self._array, self._array_of = np.asarray(self.tokens, dtype=np.int64), key
        return self._array


@dataclass(frozen=True)
class StepRecord:
    """One decode: which version, how many rows generated, how many prompt tokens were prefilled."""

    version: str
    rows: int
    prefill_tokens: int
    seconds: float = 0.0  # in llama_decode
    at: float = 0.0  # perf_counter when it ended


class ContinuousBatcher:
    def __init__(
        self,
        context: LlamaContext,
        *,
        use_version: Callable[[str], None],
        decode_text: Callable[[list[int]], str],
        eos_ids: set[int],
        release: Callable[[str], None] | None = None,
    ) -> None:
        self.context = context
        self.use_version = use_version
        self.release = release
        self.decode_text = decode_text
        self.eos_ids = eos_ids
        self.slots = [Slot(i) for i in range(context.sequences)]
        self.steps: deque[StepRecord] = deque(maxlen=2000)
        self.prefilled_tokens = 0
        self.reused_tokens = 0
        self.drafted_tokens = 0  # prompt-lookup guesses scored, and those greedy decoding confirmed
        self.confirmed_tokens = 0
        self._queue: queue.Queue[Group | Forget | None] = queue.Queue()
        self._waiting: deque[Group] = deque()
        self._active: list[Row] = []
        self._followers: dict[int, list[Row]] = {}  # id(lead row) -> rows that copy its prefill
        self._closed = False
        self._last_version: str | None = None
        self._step_count = 0
        self._thread = threading.Thread(target=self._loop, name="lamarck-llama", daemon=True)
        self._thread.start()

    @property
    def max_tokens_per_row(self) -> int:
        return self.context.tokens_per_sequence

    def submit(self, group: Group) -> None:
        if self._closed:
            raise EngineClosedError("the local engine is closed: create a new engine")
        self._queue.put(group)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._queue.put(None)
        self._thread.join(timeout=60)

    def forget_version(self, version: str) -> None:
        """Stop reusing cached prefixes computed under ``version`` (its weights changed)."""
        self._queue.put(Forget(version))

    # ---- the loop ----------------------------------------------------------------------------

    def _loop(self) -> None:
        try:
            while self._intake(block=not self._active and not self._waiting):
                version = self._choose_version()
                if version is None:
                    continue
                try:
                    self._step(version)
                except Exception as exc:  # deliver the failure to the rows of this version; others go on
                    log.exception("local engine: a step for %s failed", version)
                    self._fail_version(version, exc)
        finally:
            closed = EngineClosedError("the local engine was closed before this request finished")
            for row in [*self._active, *(r for g in self._waiting for r in g.rows)]:
                _fail(row, closed)
            while True:
                try:
                    group = self._queue.get_nowait()
                except queue.Empty:
                    break
                for row in group.rows if isinstance(group, Group) else []:
                    _fail(row, closed)

    def _intake(self, block: bool) -> bool:
        """Move submitted groups to the waiting line; False once the engine is closing."""
        first = True
        while True:
            try:
                group = self._queue.get(timeout=None) if block and first else self._queue.get_nowait()
            except queue.Empty:
                return True
            first = False
            if group is None:
                return False
            if isinstance(group, Forget):
                forgotten = group.version
                if any(r.slot is not None and r.slot.version == forgotten for r in self._active):
                    self._queue.put(group)  # rows of that version still run; forget after them
                    return True
                for slot in self.slots:
                    if slot.version == forgotten:
                        slot.tokens, slot.version = [], None
                if self.release is not None:
                    self.release(forgotten)
                continue
            self._waiting.append(group)

    def _choose_version(self) -> str | None:
        versions = [r.slot.version for r in self._active if r.slot is not None] + [g.version for g in self._waiting]
        if not versions:
            return None
        distinct = list(dict.fromkeys(versions))
        if self._last_version in distinct and len(distinct) > 1:
            after = distinct.index(self._last_version) + 1
            version = distinct[after % len(distinct)]
        else:
            version = distinct[0]
        self._last_version = version
        return version

    def _step(self, version: str) -> None:
        self._step_count += 1
        self.use_version(version)
        decoding = [
            r for r in self._active if r.slot is not None and r.slot.version == version and r.pending is not None
        ]
        self._admit(version, self.context.batch_tokens - len(decoding))
        prefilling = [
            r
            for r in self._active
            if r.slot is not None
            and r.slot.version == version
            and r.pending is None
            and not r.follows
            and r.fed < len(r.prompt)
        ]
        if len(decoding) == 1 and not prefilling and self._speculate(version, decoding[0]):
            self._compact()
            return
        room = self.context.batch_tokens - len(decoding)
        chunks: list[tuple[Row, list[int]]] = [(r, [r.pending]) for r in decoding if r.pending is not None]
        prefill = 0
        for row in prefilling:
            chunk = row.prompt[row.fed : row.fed + room]
            if not chunk:
                break
            chunks.append((row, chunk))
            room -= len(chunk)
            prefill += len(chunk)
        if not chunks:
            return
        chunks.sort(key=lambda item: item[0].slot.index if item[0].slot else 0)
        tokens: list[int] = []
        positions: list[int] = []
        sequences: list[int] = []
        askers: list[tuple[Row, int]] = []
        for row, chunk in chunks:
            assert row.slot is not None
            start = len(row.slot.tokens)
            tokens.extend(chunk)
            positions.extend(range(start, start + len(chunk)))
            sequences.extend([row.slot.index] * len(chunk))
            complete = row.pending is not None or row.fed + len(chunk) == len(row.prompt)
            if complete:
                askers.append((row, len(tokens) - 1))
        began = time.perf_counter()
        logits = self.context.decode(tokens, positions, sequences, [index for _, index in askers])
        ended = time.perf_counter()
        self.prefilled_tokens += prefill
        self.steps.append(StepRecord(version, len(decoding), prefill, ended - began, ended))
        for row, chunk in chunks:
            assert row.slot is not None
            row.slot.tokens.extend(chunk)
            if row.pending is None:
                row.fed += len(chunk)
            row.pending = None
        for (row, _), row_logits in zip(askers, logits, strict=True):
            followers = self._followers.pop(id(row), [])
            for follower in followers:
                assert follower.slot is not None and row.slot is not None
                self.context.copy(row.slot.index, follower.slot.index)
                follower.slot.tokens = list(row.slot.tokens)
                follower.fed, follower.follows = len(follower.prompt), False
            for member in [row, *followers]:
                self._advance(member, member.chooser.choose(row_logits))
        self._compact()

    def _speculate(self, version: str, row: Row) -> bool:
        """Decode a lone greedy row with prompt-lookup guesses (``speculative.draft``) fed after its next token, in
        one decode: alone, a step is bound by reading the weights, so scoring a few more positions costs little. The
        row keeps the guesses greedy decoding confirms, plus the model's own token after them, so its output is what
        one token per step would give (up to kernel rounding); rejected guesses' cells are removed. False when nothing
        was tried.

        Each guess costs about a quarter of a step on this CPU (measured: 11.9 ms for one position, 15.5 for two,
        21.2 for four), so the draft grows only while its guesses are confirmed, and a row whose drafts miss or find
        nothing stops drafting for a while (``Backoff``)."""
        slot, pending = row.slot, row.pending
        if slot is None or pending is None or not row.chooser.greedy or not row.backoff.ready():
            return False
        room = min(self.context.tokens_per_sequence - len(slot.tokens), row.budget - len(row.generated)) - 1
        guess = draft([*slot.tokens, pending], min(row.draft_size, room))
        if not guess:
            row.backoff.record(0)
            return False
        fed, start = [pending, *guess], len(slot.tokens)
        began = time.perf_counter()
        logits = self.context.decode(
            fed, list(range(start, start + len(fed))), [slot.index] * len(fed), list(range(len(fed)))
        )
        ended = time.perf_counter()
        self.steps.append(StepRecord(version, 1, 0, ended - began, ended))
        chosen: list[int] = []
        for index, position_logits in enumerate(logits):
            chosen.append(row.chooser.choose(position_logits))
            if index == len(guess) or chosen[-1] != guess[index]:
                break
        confirmed = len(chosen) - 1
        self.drafted_tokens += len(guess)
        self.confirmed_tokens += confirmed
        row.backoff.record(confirmed)
        row.draft_size = min(DRAFT_TOKENS, 2 * row.draft_size) if confirmed == len(guess) else max(1, confirmed + 1)
        row.pending, kept = None, 0
        for token in chosen:
            kept += 1  # fed[:kept] is the pending token and the guesses confirmed before this one: valid cells
            self._advance(row, token)
            if row.finish_reason is not None:
                break
        slot.tokens.extend(fed[:kept])
        self.context.remove(slot.index, start + kept)
        return True

    # ---- admission and slots -----------------------------------------------------------------

    def _admit(self, version: str, budget: int) -> None:
        """Bind waiting groups to free slots. A group whose prompt shares a long prefix, not yet held by any slot,
        with a prompt admitted in this same step waits one step, then copies that prefix instead of prefilling it
        again (a generation's tasks share their system prompt and demonstrations)."""
        kept: deque[Group] = deque()
        admitted: list[np.ndarray] = []
        while self._waiting:
            group = self._waiting.popleft()
            free = [s for s in self.slots if s.row is None]
            if group.version != version or len(free) < len(group.rows) or budget <= 0:
                kept.append(group)
                continue
            prompt = np.asarray(group.rows[0].prompt, dtype=np.int64)
            if admitted and self._sibling_prefill_helps(prompt, admitted, version):
                kept.append(group)
                continue
            admitted.append(prompt)
            lead, *followers = group.rows
            lead_slot = self._place(lead, version, free)
            budget -= len(lead.prompt) - lead.fed
            free = sorted((s for s in free if s is not lead_slot), key=lambda s: (s.released, s.index))
            for follower, slot in zip(followers, free, strict=False):
                self._bind(follower, slot, version)
                follower.follows = True
                self.context.remove(slot.index)
                slot.tokens = []
            if followers:
                self._followers[id(lead)] = followers
            self._active.extend(group.rows)
        self._waiting = kept

    def _sibling_prefill_helps(self, prompt: np.ndarray, admitted: list[np.ndarray], version: str) -> bool:
        limit = len(prompt) - 1
        held = max((_common_prefix(s.array(), prompt, limit) for s in self.slots if s.version == version), default=0)
        shared = max(_common_prefix(other, prompt, limit) for other in admitted)
        return shared - held >= MIN_COPY_PREFIX

    def _place(self, row: Row, version: str, free: list[Slot]) -> Slot:
        """Bind ``row`` to the free slot holding the longest prefix of its prompt (else the one released longest
        ago), starting from the longest cached prefix of its prompt, copied from another slot if that one is longer."""
        prompt = np.asarray(row.prompt, dtype=np.int64)
        limit = len(row.prompt) - 1  # the last prompt token is always fed, for its logits
        held = [(_common_prefix(slot.array(), prompt, limit) if slot.version == version else 0, slot) for slot in free]
        continuing = [(shared, slot) for shared, slot in held if shared >= len(slot.tokens) - CONTINUATION_SLACK > 0]
        if continuing:  # the slot of this episode's last step: everything it holds is this prompt's prefix
            own, target = max(continuing, key=lambda item: item[0])
        else:  # keep other episodes' caches: take the emptiest, then the longest-released slot, and copy a prefix
            own, target = min(held, key=lambda item: (len(item[1].tokens) > 0, item[1].released, item[1].index))
        donor, best = None, own
        for slot in self.slots:
            if slot is target or slot.version != version or len(slot.tokens) <= best:
                continue
            shared = _common_prefix(slot.array(), prompt, limit)
            if shared > best:
                donor, best = slot, shared
        if donor is not None and best - own >= MIN_COPY_PREFIX:
            self.context.copy(donor.index, target.index)
            target.tokens = donor.tokens[:best]
            self.context.remove(target.index, best)
        else:
            target.tokens = target.tokens[:own] if target.version == version else []
            self.context.remove(target.index, len(target.tokens))
        self._bind(row, target, version)
        row.fed = len(target.tokens)
        self.reused_tokens += row.fed
        return target

    def _bind(self, row: Row, slot: Slot, version: str) -> None:
        slot.row, slot.version, row.slot = row, version, slot
        room = self.context.tokens_per_sequence - len(row.prompt)
        row.budget = min(row.params.max_tokens, room)

    def _release(self, row: Row) -> None:
        if row.slot is not None:
            row.slot.row = None
            row.slot.released = self._step_count
            row.slot = None
        self._active.remove(row)

    def _compact(self) -> None:
        """Move the highest busy slots into lower free ones, so busy slots form one run of sequence ids. A free slot
        still holding a finished row's tokens is first moved out of the way to a higher empty or stale slot, so an
        episode coming back for its next step still finds its prompt and reply."""
        while True:
            free = [s for s in self.slots if s.row is None]
            busy = [s for s in self.slots if s.row is not None and s.row.pending is not None]
            if not free or not busy or free[0].index > busy[-1].index:
                return
            source, target = busy[-1], free[0]
            if target.tokens and self._step_count - target.released < KEEP_STEPS:
                spare = self._spare(above=source.index)
                if spare is not None:
                    self.context.copy(target.index, spare.index)
                    spare.tokens, spare.version, spare.released = list(target.tokens), target.version, target.released
            self.context.copy(source.index, target.index)
            target.tokens, target.version = list(source.tokens), source.version
            row = source.row
            assert row is not None
            source.row, target.row, row.slot = None, row, target
            source.released = -1_000_000  # it holds a copy of the moved row's tokens: worth nothing to keep

    def _spare(self, above: int) -> Slot | None:
        """A free slot above the busy range whose content matters least: empty, else released longest ago."""
        candidates = [s for s in self.slots if s.row is None and s.index > above]
        if not candidates:
            return None
        spare = min(candidates, key=lambda s: (len(s.tokens) > 0, s.released))
        return spare if not spare.tokens or self._step_count - spare.released >= KEEP_STEPS else None

    # ---- finishing ---------------------------------------------------------------------------

    def _advance(self, row: Row, token: int) -> None:
        if token in self.eos_ids and not row.params.ignore_eos:
            row.finish_reason, row.hit_eos = "stop", True
        else:
            row.generated.append(token)
            if row.params.watches_text or row.stream is not None:
                row.text = self.decode_text(row.generated)
                cut = stop_cut(row.text, row.params)
                if cut is not None:
                    row.text, row.finish_reason = row.text[:cut], "stop"
            if row.finish_reason is None and len(row.generated) >= row.budget:
                row.finish_reason = "length"
        if row.finish_reason is None:
            row.pending = token
            _emit(row, final=False)
            return
        if not (row.params.watches_text or row.stream is not None):
            row.text = self.decode_text(row.generated)
        _emit(row, final=True)
        self._release(row)
        if not row.future.done():
            row.future.set_result(
                Completion(
                    text=row.text,
                    finish_reason=row.finish_reason,  # type: ignore[arg-type]
                    prompt_tokens=len(row.prompt),
                    completion_tokens=len(row.generated) + int(row.hit_eos),
                    latency_s=time.perf_counter() - row.submitted,
                )
            )

    def _fail_version(self, version: str, exc: BaseException) -> None:
        for row in [r for r in self._active if r.slot is not None and r.slot.version == version]:
            slot = row.slot
            self._release(row)
            if slot is not None:
                self.context.remove(slot.index)
                slot.tokens, slot.version = [], None
            _fail(row, exc)
        for group in [g for g in self._waiting if g.version == version]:
            self._waiting.remove(group)
            for row in group.rows:
                _fail(row, exc)
        self._followers = {k: v for k, v in self._followers.items() if not v[0].future.done()}


def _common_prefix(held: np.ndarray, prompt: np.ndarray, limit: int) -> int:
    size = min(len(held), len(prompt), limit)
    if size <= 0:
        return 0
    differ = np.flatnonzero(held[:size] != prompt[:size])
    return int(differ[0]) if len(differ) else size


def _emit(row: Row, final: bool) -> None:
    if row.stream is not None:
        row.emitted = stream_delta(row.stream, row.text, row.emitted, row.params.stop, final)


def _fail(row: Row, exc: BaseException) -> None:
    if not row.future.done():
        row.future.set_exception(exc)

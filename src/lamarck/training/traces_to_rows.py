"""Verified traces -> training rows (SFT) and preference pairs (DPO), with dedupe, balance and a held-out leak check.

Rows are rendered with ``render_for_model``, the executor's own rendering, so the model
trains on the chat it is prompted with.
Context distillation: a row keeps the model's own turns and replaces the rollout's opening (skills, lessons,
worked examples, the teacher's hints) with the student's opening that the executor recorded with the rollout
(``student_rows``), so the behaviour the help induced moves into the weights and the row shows what the gate and
users see. Loss falls on the assistant turns the model wrote itself: few-shot examples and replies the harness
rejected as malformed are context only. A pass becomes a row only if its answer follows from its work
(``process_filter``); each task gives at most ``rows_per_task`` rows, and the easy anchor levels a capped share.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import re
from collections import defaultdict
from datetime import datetime
from typing import Any, TypedDict

from pydantic import BaseModel, Field
from sqlalchemy import select
from sqlalchemy.orm import Session

from lamarck.curriculum.environment import TaskSpec
from lamarck.curriculum.heldout import is_heldout
from lamarck.platform.settings import TrainingSettings
from lamarck.platform.storage import repositories as repo
from lamarck.platform.storage.records import Episode, Harness, Task
from lamarck.platform.storage.trajectory import STUDENT_OPENING, Trajectory, render_for_model
from lamarck.training.process_filter import chain_process, process_problem, tidy_process
from lamarck.training.student_rows import RowRefused, opening_length, student_row, trained_turns

log = logging.getLogger(__name__)

LESSONS_HEADER = "Lessons from earlier attempts:"
_LESSONS_BLOCK = re.compile(r"^" + re.escape(LESSONS_HEADER) + r"[ \t]*\n(?:- [^\n]*(?:\n|$))*", re.MULTILINE)


class HeldoutLeak(RuntimeError):
    """A held-out prompt would reach a training row; nothing is written or trained."""


class NoNewEpisodes(LookupError):
    """No new verified episodes since the parent model: nothing to train."""


class TrainingRow(BaseModel):
    task_id: str
    episode_id: str
    environment: str
    difficulty: int
    messages: list[dict[str, str]]
    train_turns: list[int]  # indices into messages that carry loss (assistant turns only)
    prompt_length: int = 0  # messages before the model's first own turn (system, few-shot, task)
    repaired: bool = False
    weight: float = 1.0
    hint_level: str = "none"  # the teacher's help in the rollout this row came from (removed from the row)


class _RowOrigin(TypedDict):
    """The fields a row takes from its episode and task, whichever way its messages are rendered."""

    task_id: str
    episode_id: str
    environment: str
    difficulty: int
    repaired: bool
    weight: float


class PreferencePair(BaseModel):
    task_id: str
    environment: str
    difficulty: int
    prompt: list[dict[str, str]]
    chosen: list[dict[str, str]]
    rejected: list[dict[str, str]]
    chosen_episode_id: str
    rejected_episode_id: str


class DistillationSet(BaseModel):
    parent_version: str
    rows: list[TrainingRow]
    pairs: list[PreferencePair] = Field(default_factory=list)
    digest: str = ""
    since: datetime | None = None
    until: datetime | None = None
    episodes_seen: int = 0
    dropped: dict[str, int] = Field(default_factory=dict)
    leak_check: str = "not run"
    replayed: int = 0  # the last rows come from before ``since`` (warm start with replay), not new episodes

    @property
    def new_rows(self) -> list[TrainingRow]:
        return self.rows[: len(self.rows) - self.replayed]

    def by_hint(self) -> dict[str, int]:
        """Rows per hint source (the teacher's help in the rollout each row came from)."""
        found: dict[str, int] = defaultdict(int)
        for row in self.rows:
            found[row.hint_level] += 1
        return dict(sorted(found.items()))

    def counts(self) -> dict[str, dict[str, int]]:
        cells: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        for row in self.rows:
            cells[row.environment][str(row.difficulty)] += 1
        return {env: dict(levels) for env, levels in sorted(cells.items())}

    @property
    def environments(self) -> list[str]:
        return sorted({row.environment for row in self.rows})


# building


def build_dataset(
    session: Session,
    *,
    parent_version: str,
    settings: TrainingSettings,
    since: datetime | None = None,
    until: datetime | None = None,
) -> DistillationSet:
    """Rows from passed episodes (native and critic-repaired) recorded after ``since`` and up to ``until``.

    Where an environment has a promoted harness, only episodes whose harness showed the same opening count: the
    student is served that harness, and a row opens with what its episode's harness showed. Harnesses that differ
    only in sampling (a teacher's rollout temperature, say) show the same opening; an episode whose harness is not
    archived is kept and left to the student-view check (``older_harness`` counts the dropped)."""
    query = select(Episode, Task).join(Task, Task.id == Episode.task_id).order_by(Episode.created_at, Episode.id)
    query = query.where(Episode.outcome.in_(("passed", "failed")))
    if since is not None:
        query = query.where(Episode.created_at > since)
    if until is not None:
        query = query.where(Episode.created_at <= until)
    found = list(session.execute(query).tuples())
    served = _OpeningKeys(session)
    dropped: dict[str, int] = defaultdict(int)
    passed: list[tuple[Episode, Task]] = []
    failed: dict[str, list[Episode]] = defaultdict(list)
    latest = since
    for episode, task in found:
        latest = episode.created_at if latest is None or episode.created_at > latest else latest
        if is_heldout(task.environment, task.prompt):
            dropped["heldout_task"] += 1
            continue
        if not served.shows_the_served_opening(task.environment, episode.harness_version):
            dropped["older_harness"] += 1
            continue
        if episode.outcome == "passed":
            if episode.repaired_from_id is not None and settings.repaired_weight == 0.0:
                dropped["repaired_weight_zero"] += 1
                continue
            if episode.repaired_from_id is not None and not kept_at_weight(episode.id, settings.repaired_weight):
                dropped["repaired_subsampled"] += 1
                continue
            passed.append((episode, task))
        else:
            failed[task.id].append(episode)
    built = []
    for episode, task in passed:
        try:
            built.append(episode_row(episode, task, settings))
        except RowRefused as refused:
            dropped[refused.reason] += 1
    rows = _dedupe(built, dropped)
    rows = _per_task(rows, settings.rows_per_task, dropped)
    rows = _balance(rows, settings.cap_per_cell, dropped)
    rows = _cap_anchors(rows, settings.anchor_levels, settings.anchor_share, dropped)
    tasks = {task.id: task for _, task in passed}
    pairs = preference_pairs(rows, failed, tasks)
    dataset = DistillationSet(
        parent_version=parent_version,
        rows=rows,
        pairs=pairs,
        since=since,
        until=until or latest,
        episodes_seen=len(found),
        dropped=dict(dropped),
    )
    check_no_leak(dataset)
    dataset.digest = dataset_digest(dataset)
    return dataset


def with_replay(session: Session, dataset: DistillationSet, settings: TrainingSettings) -> DistillationSet:
    """Warm start with replay: a job that continues the champion's adapter on the rows since its data also sees
    ``replay_share`` earlier rows per new row, so the adapter is not pulled toward whatever the newest rows are about
    (a python-only job from an arithmetic champion lost a third of its arithmetic gain). Earlier rows are built as
    any dataset is, under today's filters, and drawn by a hash of their episode id, so the same episodes give the
    same dataset."""
    if settings.replay_share <= 0 or dataset.since is None or not dataset.rows:
        return dataset
    earlier = build_dataset(session, parent_version=dataset.parent_version, settings=settings, until=dataset.since)
    count = min(len(earlier.rows), math.floor(settings.replay_share * len(dataset.rows) + 0.5))
    order = sorted(
        earlier.rows, key=lambda row: hashlib.sha256(f"{settings.seed}:{row.episode_id}".encode()).hexdigest()
    )
    replayed = dataset.model_copy(update={"rows": [*dataset.rows, *order[:count]], "replayed": count})
    replayed.digest = dataset_digest(replayed)
    return replayed


class _OpeningKeys:
    """Which harnesses show the student the same opening as its environment's promoted harness (cached per build)."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.cache: dict[str, str | None] = {}
        self.served = {env: self.key(harness_id) for env, harness_id in repo.promoted_harness_ids(session).items()}

    def key(self, harness_id: str) -> str | None:
        if harness_id not in self.cache:
            record = self.session.get(Harness, harness_id)
            spec = {k: v for k, v in (record.spec or {}).items() if k != "sampling"} if record is not None else None
            self.cache[harness_id] = json.dumps(spec, sort_keys=True) if spec is not None else None
        return self.cache[harness_id]

    def shows_the_served_opening(self, environment: str, harness_id: str | None) -> bool:
        if environment not in self.served or harness_id is None:
            return True
        key = self.key(harness_id)
        return key is None or key == self.served[environment]


def kept_at_weight(episode_id: str, weight: float) -> bool:
    """Loss weight as inclusion: a row of weight w is trained with probability w, decided by its episode id, so a
    repaired row contributes w in expectation and the same episodes always give the same dataset (and digest)."""
    if weight >= 1.0:
        return True
    fraction = int(hashlib.sha256(episode_id.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
    return fraction < weight


def episode_row(episode: Episode, task: Task, settings: TrainingSettings) -> TrainingRow:
    """The row a passed episode teaches; raises RowRefused with the reason when it teaches nothing sound."""
    trajectory = repo.episode_trajectory(episode)
    if settings.process_filter and episode.repaired_from_id is None:
        spec = TaskSpec(
            environment=task.environment,
            difficulty=task.difficulty,
            prompt=task.prompt,
            reference=dict(task.reference or {}),
            metadata=dict(task.meta or {}),
        )
        problem = process_problem(spec, trajectory, episode.answer or "")
        if problem is not None:
            raise RowRefused(problem.split(":")[0], problem)
        trajectory = tidy_process(spec, trajectory)
        if settings.stepwise_rows:
            trajectory = chain_process(spec, trajectory)
    repaired = episode.repaired_from_id is not None
    weight = settings.repaired_weight if repaired else 1.0
    common: _RowOrigin = {
        "task_id": task.id,
        "episode_id": episode.id,
        "environment": task.environment,
        "difficulty": task.difficulty,
        "repaired": repaired,
        "weight": weight,
    }
    if trajectory.messages and STUDENT_OPENING in trajectory.messages[0].meta:
        student = student_row(trajectory)
        return TrainingRow(
            messages=student.messages,
            train_turns=student.train_turns,
            prompt_length=student.prompt_length,
            hint_level=student.hint_level,
            **common,
        )
    trajectory = strip_lessons(trajectory)  # recorded before the executor kept the student's opening
    turns = trained_turns(trajectory.messages)
    if not turns:
        raise RowRefused("no_own_turn", "the model wrote no accepted reply")
    messages = render_for_model(trajectory)
    return TrainingRow(
        messages=[{"role": m["role"], "content": m["content"]} for m in messages],
        train_turns=turns,
        prompt_length=opening_length(trajectory),
        **common,
    )


def strip_lessons(trajectory: Trajectory) -> Trajectory:
    """The trajectory without the lessons block in its system message (context distillation)."""
    messages = []
    for message in trajectory.messages:
        if message.role == "system" and message.content and LESSONS_HEADER in message.content:
            content = _LESSONS_BLOCK.sub("", message.content)
            content = re.sub(r"\n{3,}", "\n\n", content).strip()
            message = message.model_copy(update={"content": content, "meta": {**message.meta, "lessons": []}})
        messages.append(message)
    return Trajectory(messages=messages)


def preference_pairs(
    rows: list[TrainingRow], failed: dict[str, list[Episode]], tasks: dict[str, Task]
) -> list[PreferencePair]:
    """Passed vs failed attempts at the same task and the same opening: one pair per failed attempt."""
    first_row: dict[str, TrainingRow] = {}
    for row in sorted(rows, key=lambda r: r.repaired):  # a native passed attempt is the better "chosen"
        first_row.setdefault(row.task_id, row)
    pairs = []
    for task_id, row in first_row.items():
        prompt = row.messages[: row.prompt_length]
        for episode in failed.get(task_id, []):
            trajectory = strip_lessons(repo.episode_trajectory(episode))
            rejected = render_for_model(trajectory)
            cut = opening_length(trajectory)
            if rejected[:cut] != prompt or cut >= len(rejected):
                continue  # another opening (harness, few-shot) or no reply at all: not a comparable pair
            task = tasks[task_id]
            pairs.append(
                PreferencePair(
                    task_id=task_id,
                    environment=task.environment,
                    difficulty=task.difficulty,
                    prompt=prompt,
                    chosen=row.messages[row.prompt_length :],
                    rejected=[{"role": m["role"], "content": m["content"]} for m in rejected[cut:]],
                    chosen_episode_id=row.episode_id,
                    rejected_episode_id=episode.id,
                )
            )
    return pairs


def _dedupe(rows: list[TrainingRow], dropped: dict[str, int]) -> list[TrainingRow]:
    """Same task and same trajectory text count once; a native row beats a repaired one."""
    kept: dict[tuple[str, str], TrainingRow] = {}
    for row in sorted(rows, key=lambda r: r.repaired):
        key = (row.task_id, _text_key(row.messages))
        if key in kept:
            dropped["duplicate"] += 1
            continue
        kept[key] = row
    order = {id(row): i for i, row in enumerate(rows)}
    return sorted(kept.values(), key=lambda r: order[id(r)])


def _per_task(rows: list[TrainingRow], limit: int, dropped: dict[str, int]) -> list[TrainingRow]:
    """At most ``limit`` distinct rows per task (native before repaired, then a stable hash order): many copies of
    one solved task would outweigh the tasks solved once."""
    by_task: dict[str, list[TrainingRow]] = defaultdict(list)
    for row in rows:
        by_task[row.task_id].append(row)
    keep: set[int] = set()
    for task_rows in by_task.values():
        ordered = sorted(task_rows, key=lambda r: (r.repaired, hashlib.sha256(r.episode_id.encode()).hexdigest()))
        keep.update(id(row) for row in ordered[:limit])
        if len(ordered) > limit:
            dropped["over_rows_per_task"] += len(ordered) - limit
    return [row for row in rows if id(row) in keep]


def _cap_anchors(
    rows: list[TrainingRow], anchor_levels: int, share: float, dropped: dict[str, int]
) -> list[TrainingRow]:
    """Rows of the easy anchor levels keep what the model can already do; they may be at most ``share`` of the
    dataset, so they cannot crowd out the frontier (an earlier run trained 64 level-1 rows of 67)."""
    anchors = [row for row in rows if row.difficulty <= anchor_levels]
    others = [row for row in rows if row.difficulty > anchor_levels]
    if not anchors:
        return rows
    allowed = int(share * len(others) / (1.0 - share)) if share < 1.0 else len(anchors)
    ordered = sorted(anchors, key=lambda r: hashlib.sha256(r.episode_id.encode()).hexdigest())
    kept = {id(row) for row in ordered[:allowed]}
    if len(anchors) > allowed:
        dropped["over_anchor_share"] += len(anchors) - allowed
    return [row for row in rows if row.difficulty > anchor_levels or id(row) in kept]


def _balance(rows: list[TrainingRow], cap: int, dropped: dict[str, int]) -> list[TrainingRow]:
    """At most ``cap`` rows per environment x difficulty; which ones is deterministic (hash order), not recency."""
    cells: dict[tuple[str, int], list[TrainingRow]] = defaultdict(list)
    for row in rows:
        cells[(row.environment, row.difficulty)].append(row)
    kept: list[TrainingRow] = []
    for key in sorted(cells):
        cell = sorted(cells[key], key=lambda r: (r.repaired, hashlib.sha256(r.episode_id.encode()).hexdigest()))
        kept += cell[:cap]
        if len(cell) > cap:
            dropped["over_cell_cap"] += len(cell) - cap
    return kept


def _text_key(messages: list[dict[str, str]]) -> str:
    return hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).hexdigest()


# the leak check and the digest


def check_no_leak(dataset: DistillationSet) -> None:
    """Raise HeldoutLeak if any user or system text of any row or pair is a held-out prompt."""
    items: list[TrainingRow | PreferencePair] = [*dataset.rows, *dataset.pairs]
    for item in items:
        messages = item.messages if isinstance(item, TrainingRow) else [*item.prompt, *item.chosen, *item.rejected]
        for message in messages:
            if message["role"] in ("user", "system") and is_heldout(item.environment, message["content"]):
                dataset.leak_check = f"FAILED: task {item.task_id} ({item.environment})"
                raise HeldoutLeak(
                    f"held-out prompt of {item.environment} would reach training (task {item.task_id}): "
                    "the dataset was refused; check the harness few-shot examples and task sources"
                )
    dataset.leak_check = f"passed: {len(dataset.rows)} rows and {len(dataset.pairs)} pairs checked"


def dataset_digest(dataset: DistillationSet) -> str:
    """sha256 over canonical rows and pairs; ids and order do not matter, content does."""
    canon_rows = sorted(
        json.dumps({"m": r.messages, "t": r.train_turns, "w": r.weight}, sort_keys=True) for r in dataset.rows
    )
    canon_pairs = sorted(
        json.dumps({"p": p.prompt, "c": p.chosen, "r": p.rejected}, sort_keys=True) for p in dataset.pairs
    )
    return hashlib.sha256(json.dumps([canon_rows, canon_pairs]).encode()).hexdigest()


# tokenization with assistant-only loss


def tokenize_row(tokenizer: Any, messages: list[dict[str, str]], train_turns: list[int]) -> tuple[list[int], list[int]]:
    """input_ids and labels (-100 outside the trained assistant turns) through the tokenizer's chat template.

    Each trained turn's loss covers its content and the end-of-turn token, so the model learns to stop; the
    ``<|im_start|>assistant`` header and everything the model was given are masked. Character offsets map the
    spans onto tokens, so the ids equal a plain tokenization of the rendered conversation.
    """
    spans: list[tuple[int, int]] = []
    previous = ""
    for index in range(len(messages)):
        text = tokenizer.apply_chat_template(messages[: index + 1], tokenize=False)
        if not text.startswith(previous):
            raise ValueError("the chat template does not render conversations prefix by prefix; cannot mask turns")
        if index in train_turns:
            content = messages[index]["content"]
            start = text.find(content, len(previous)) if content else -1
            if start < 0:
                raise ValueError(f"turn {index} content not found in its rendering")
            end = start + len(content)
            eos = tokenizer.eos_token or ""
            if eos and text.startswith(eos, end):
                end += len(eos)
            spans.append((start, end))
        previous = text
    encoded = tokenizer(previous, add_special_tokens=False, return_offsets_mapping=True)
    ids: list[int] = list(encoded["input_ids"])
    labels = [-100] * len(ids)
    for position, (start, end) in enumerate(encoded["offset_mapping"]):
        if end > start and any(s <= start and end <= e for s, e in spans):
            labels[position] = ids[position]
    return ids, labels

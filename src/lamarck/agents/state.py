"""The evolution loop's state: what one node hands the next, checkpointed after every node.

Ids, numbers and task specs (``TaskSpec``, revived by the checkpointer's serializer: ``checkpoints.STATE_MODELS``);
records live in SQL and nodes load them by id. Keys that parallel nodes write (``induce`` and ``assess`` run side by
side) have reducers. Checkpoints written before the specs were typed hold them as dicts: read a spec through
``task_spec``, which takes either.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

from lamarck.curriculum.environment import TaskSpec


def merge(left: dict[str, Any] | None, right: dict[str, Any] | None) -> dict[str, Any]:
    """Dict reducer: later writes win per key; writes from parallel nodes combine."""
    return {**(left or {}), **(right or {})}


class TaskItem(TypedDict):
    task_id: str
    source: str  # procedural | llm | replay
    spec: TaskSpec


class VerdictItem(TypedDict):
    episode_id: str
    task_id: str
    passed: bool
    reward: float
    lesson_id: str | None
    new_lesson: bool
    repaired: bool


class NewSkill(TypedDict):
    name: str
    episode_ids: list[str]


class RunState(TypedDict, total=False):
    run_id: str
    generation: int  # the generation being worked on, from 0
    generation_started: float  # epoch seconds when this generation's propose began
    tasks: list[TaskItem]
    episode_ids: list[str]  # this generation's attempts, in (task, sample) order
    verdicts: list[VerdictItem]
    new_skills: list[NewSkill]
    recent_prompts: list[str]  # for the proposer's novelty check across generations
    recent_failures: list[TaskSpec]  # tasks the frontier may replay
    timings: Annotated[dict[str, float], merge]  # node -> wall seconds, this generation
    agent_seconds: Annotated[dict[str, float], merge]  # node -> seconds inside the agent it adapts
    active_seconds: Annotated[float, operator.add]  # wall time spent in nodes over the whole run
    embedding_seconds: Annotated[dict[str, float], merge]  # node -> seconds in the embedding model, this generation
    embedded_texts: Annotated[dict[str, int], merge]  # node -> texts the embedding model embedded, this generation
    episodes_done: int  # attempts recorded over the whole run (the harness-critic's clock)
    harness_rounds: int  # harness-critic rounds the run has held; the next one is numbered this
    outcome: str  # finished | budget_exhausted, set by the last node


def task_spec(spec: TaskSpec | dict[str, Any]) -> TaskSpec:
    """A spec from the state, whether a checkpoint revived it as the model or (written by older code) as a dict."""
    return spec if isinstance(spec, TaskSpec) else TaskSpec.model_validate(spec)


GATED = ("propose", "execute", "critique", "record", "improve_harness")  # a stop request is honoured after these

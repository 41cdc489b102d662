"""A generation's summary per environment and difficulty, stored in ``Run.summary`` and sent as an event."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, Field
from sqlalchemy import select

from lamarck.agents.state import NewSkill, TaskItem, VerdictItem, task_spec
from lamarck.platform.storage.database import Database
from lamarck.platform.storage.records import Episode


class CellSummary(BaseModel):
    environment: str
    difficulty: int
    attempts: int = 0
    successes: int = 0
    mean_reward: float = 0.0
    tokens: int = 0  # executor tokens of these attempts
    mean_attempt_seconds: float = 0.0
    new_skills: int = 0
    new_lessons: int = 0

    @property
    def success_rate(self) -> float:
        return self.successes / self.attempts if self.attempts else 0.0


class GenerationSummary(BaseModel):
    generation: int
    cells: list[CellSummary]
    attempts: int = 0
    successes: int = 0
    mean_reward: float = 0.0
    tokens: int = 0  # every role's tokens during the generation
    cost_usd: float = 0.0
    wall_seconds: float = 0.0
    agent_seconds: float = 0.0  # inside the agents (model calls, verifiers, sandbox)
    node_seconds: dict[str, float] = Field(default_factory=dict)  # wall time per node (record's own excluded)
    repaired: int = 0
    new_skills: list[str] = Field(default_factory=list)
    new_lessons: int = 0
    usage_total: dict[str, float] = Field(default_factory=dict)  # the run's LLM usage after this generation
    embedding_seconds: float = 0.0  # in the embedding model (skill and lesson retrieval, lesson writes)
    embedded_texts: int = 0  # texts the embedding model embedded (cache hits excluded)
    embedding_seconds_per_episode: float = 0.0

    @property
    def success_rate(self) -> float:
        return self.successes / self.attempts if self.attempts else 0.0


def summarize(
    db: Database,
    *,
    generation: int,
    tasks: Sequence[TaskItem],
    episode_ids: Sequence[str],
    verdicts: Sequence[VerdictItem],
    new_skills: Sequence[NewSkill],
    wall_seconds: float,
    agent_seconds: float,
    node_seconds: dict[str, float] | None = None,
    usage_before: dict[str, Any],
    usage_after: dict[str, Any],
    embedding_seconds: float = 0.0,
    embedded_texts: int = 0,
) -> GenerationSummary:
    specs = {t["task_id"]: task_spec(t["spec"]) for t in tasks}
    cell_of = {task_id: (spec.environment, spec.difficulty) for task_id, spec in specs.items()}
    with db.session() as session:
        rows = session.execute(
            select(
                Episode.id, Episode.task_id, Episode.prompt_tokens, Episode.completion_tokens, Episode.wall_seconds
            ).where(Episode.id.in_(list(episode_ids)))
        ).all()
    episodes = {row.id: row for row in rows}
    cells: dict[tuple[str, int], dict[str, Any]] = {}

    def cell(key: tuple[str, int]) -> dict[str, Any]:
        return cells.setdefault(
            key, {"attempts": 0, "successes": 0, "reward": 0.0, "tokens": 0, "seconds": 0.0, "skills": 0, "lessons": 0}
        )

    episode_cell: dict[str, tuple[str, int]] = {}
    for episode_id in episode_ids:
        row = episodes.get(episode_id)
        if row is None or row.task_id not in cell_of:
            continue
        key = episode_cell[episode_id] = cell_of[row.task_id]
        stats = cell(key)
        stats["attempts"] += 1
        stats["tokens"] += row.prompt_tokens + row.completion_tokens
        stats["seconds"] += row.wall_seconds
    for verdict in verdicts:
        verdict_cell = episode_cell.get(verdict["episode_id"])
        if verdict_cell is None:
            continue
        stats = cell(verdict_cell)
        stats["successes"] += int(verdict["passed"])
        stats["reward"] += verdict["reward"]
        stats["lessons"] += int(verdict["new_lesson"])
    for skill in new_skills:
        keys = {episode_cell[e] for e in skill["episode_ids"] if e in episode_cell}
        for key in keys or ():
            cell(key)["skills"] += 1
    summaries = [
        CellSummary(
            environment=env,
            difficulty=difficulty,
            attempts=s["attempts"],
            successes=s["successes"],
            mean_reward=s["reward"] / s["attempts"] if s["attempts"] else 0.0,
            tokens=s["tokens"],
            mean_attempt_seconds=s["seconds"] / s["attempts"] if s["attempts"] else 0.0,
            new_skills=s["skills"],
            new_lessons=s["lessons"],
        )
        for (env, difficulty), s in sorted(cells.items())
    ]
    attempts = sum(c.attempts for c in summaries)
    tokens = int(_tokens(usage_after) - _tokens(usage_before))
    return GenerationSummary(
        generation=generation,
        cells=summaries,
        attempts=attempts,
        successes=sum(c.successes for c in summaries),
        mean_reward=sum(c.mean_reward * c.attempts for c in summaries) / attempts if attempts else 0.0,
        tokens=tokens,
        cost_usd=float(usage_after.get("cost_usd", 0.0)) - float(usage_before.get("cost_usd", 0.0)),
        wall_seconds=wall_seconds,
        agent_seconds=agent_seconds,
        node_seconds={node: round(seconds, 4) for node, seconds in (node_seconds or {}).items() if node != "record"},
        repaired=sum(int(v["repaired"]) for v in verdicts),
        new_skills=[skill["name"] for skill in new_skills],
        new_lessons=sum(int(v["new_lesson"]) for v in verdicts),
        usage_total={key: float(value) for key, value in usage_after.items()},
        embedding_seconds=embedding_seconds,
        embedded_texts=embedded_texts,
        embedding_seconds_per_episode=embedding_seconds / attempts if attempts else 0.0,
    )


def _tokens(usage: dict[str, Any]) -> float:
    return float(usage.get("prompt_tokens", 0)) + float(usage.get("completion_tokens", 0))

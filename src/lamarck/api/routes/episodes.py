"""Episodes: a run's attempts (filtered, cursor-paged), one attempt with its steps, verdict and release, and two
attempts aligned step by step."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Path, Query
from pydantic import BaseModel, ConfigDict, Field, JsonValue
from sqlalchemy.orm import Session

from lamarck.api.deps import ContainerDep, ReadKey
from lamarck.api.errors import KEYED_ERRORS, ErrorResponse, documented
from lamarck.api.query import known_query_only
from lamarck.api.routes.paging import Cursor, Limit, decode_cursor, next_cursor
from lamarck.api.text import ID_PATTERN
from lamarck.api.times import UtcDatetime
from lamarck.platform.storage import api_repositories as api_repo
from lamarck.platform.storage import repositories as repo
from lamarck.platform.storage.records import Episode, Step, Task, Verdict

router = APIRouter(tags=["episodes"], responses=documented(*KEYED_ERRORS), dependencies=[Depends(known_query_only)])

Outcome = Literal["pending", "answered", "no_answer", "passed", "failed"]
NAME_PATTERN = r"^[A-Za-z0-9._:-]{1,100}$"  # an environment's name
StepKind = Literal["prompt", "model_output", "tool_call", "observation"]
RunId = Annotated[str, Path(pattern=ID_PATTERN, description="The run's id.")]
EpisodeId = Annotated[str, Path(pattern=ID_PATTERN, description="The episode's id.")]
ERRORS: dict[int | str, dict[str, object]] = {code: {"model": ErrorResponse} for code in (401, 403, 404, 422)}


class EpisodeSummary(BaseModel):
    id: str
    run_id: str | None
    task_id: str
    environment: str
    difficulty: int
    generation: int | None
    outcome: Outcome | str
    reward: float | None
    answer: str | None
    model_version: str
    harness_version: str | None
    created_at: UtcDatetime


class EpisodePage(BaseModel):
    episodes: list[EpisodeSummary]
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page; null on the last page.")


class StepPublic(BaseModel):
    index: int
    role: str
    kind: StepKind = Field(
        description="What the step is: the prompt, the model's output, its tool call, or the tool's observation."
    )
    content: str | None
    name: str | None
    tool_calls: list[JsonValue] | None
    tool_call_id: str | None


class VerdictPublic(BaseModel):
    passed: bool
    reward: float
    source: str
    critique: str | None
    first_wrong_step: int | None = Field(description="The critic's first wrong step, where it named one by number.")
    first_error: str | None = Field(description="The critic's own words for where the attempt first went wrong.")
    lesson: str | None = Field(description="The lesson the critic drew, where it kept one.")
    lesson_id: str | None
    repaired_episode_id: str | None
    created_at: UtcDatetime


class Release(BaseModel):
    model_version: str
    harness: str | None


class EpisodeDetail(EpisodeSummary):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "id": "9f1c2a",
                    "run_id": "4be0d1",
                    "task_id": "77aa01",
                    "environment": "arithmetic",
                    "difficulty": 2,
                    "generation": 3,
                    "outcome": "failed",
                    "reward": 0.0,
                    "answer": "41",
                    "model_version": "smollm2-135m",
                    "harness_version": None,
                    "created_at": "2026-01-01T00:00:00Z",
                    "prompt": "What is 6 * 7?",
                    "failure_reason": None,
                    "steps": [],
                    "verdict": None,
                    "release": {"model_version": "smollm2-135m", "harness": None},
                }
            ]
        }
    )

    prompt: str
    failure_reason: str | None
    steps: list[StepPublic]
    verdict: VerdictPublic | None = Field(description="The latest verdict, once the critic has judged the attempt.")
    release: Release


class AlignedStep(BaseModel):
    index: int
    a: StepPublic | None
    b: StepPublic | None
    same: bool = Field(description="Both attempts have this step with the same role and content.")


class EpisodeComparison(BaseModel):
    a: EpisodeSummary
    b: EpisodeSummary
    same_task: bool
    steps: list[AlignedStep]
    first_difference: int | None = Field(description="The first step index where the attempts differ.")


def summary(episode: Episode, task: Task) -> EpisodeSummary:
    return EpisodeSummary(
        id=episode.id,
        run_id=episode.run_id,
        task_id=episode.task_id,
        environment=task.environment,
        difficulty=task.difficulty,
        generation=episode.generation,
        outcome=episode.outcome,
        reward=episode.reward,
        answer=episode.answer,
        model_version=episode.model_version,
        harness_version=episode.harness_version,
        created_at=episode.created_at,
    )


def step_public(step: Step) -> StepPublic:
    kind: StepKind
    if step.role == "tool":
        kind = "observation"
    elif step.role == "assistant":
        kind = "tool_call" if step.tool_calls else "model_output"
    else:
        kind = "prompt"
    return StepPublic(
        index=step.index,
        role=step.role,
        kind=kind,
        content=step.content,
        name=step.name,
        tool_calls=list(step.tool_calls) if step.tool_calls else None,
        tool_call_id=step.tool_call_id,
    )


@router.get(
    "/runs/{run_id}/episodes",
    operation_id="listRunEpisodes",
    response_model=EpisodePage,
    responses=ERRORS,
    summary="A run's episodes, newest first",
)
def list_run_episodes(
    run_id: RunId,
    container: ContainerDep,
    _: ReadKey,
    outcome: Annotated[Outcome | None, Query(description="Only episodes with this outcome.")] = None,
    environment: Annotated[str | None, Query(pattern=NAME_PATTERN, description="Only this environment's.")] = None,
    generation: Annotated[int | None, Query(ge=0, description="Only this generation's.")] = None,
    limit: Limit = 50,
    cursor: Cursor = None,
) -> EpisodePage:
    before = decode_cursor(cursor) if cursor else None
    with container.db.session() as session:
        repo.get_run(session, run_id=run_id)
        rows = api_repo.run_episodes_page(
            session,
            run_id=run_id,
            limit=limit + 1,
            outcome=outcome,
            environment=environment,
            generation=generation,
            before=before,
        )
        page = rows[:limit]
        last = page[-1][0] if page else None
        more = len(rows) > limit and last is not None
        return EpisodePage(
            episodes=[summary(e, t) for e, t in page],
            next_cursor=next_cursor(last.created_at, last.id) if more and last is not None else None,
        )


@router.get(
    "/episodes/compare",
    operation_id="compareEpisodes",
    response_model=EpisodeComparison,
    responses=ERRORS,
    summary="Two attempts aligned step by step",
)
def compare_episodes(
    container: ContainerDep,
    _: ReadKey,
    a: Annotated[str, Query(pattern=ID_PATTERN, description="The first episode's id.")],
    b: Annotated[str, Query(pattern=ID_PATTERN, description="The second episode's id.")],
) -> EpisodeComparison:
    with container.db.session() as session:
        first, second = _load(session, a), _load(session, b)
        steps_a = {s.index: step_public(s) for s in first[0].steps}
        steps_b = {s.index: step_public(s) for s in second[0].steps}
        aligned = [
            AlignedStep(index=i, a=steps_a.get(i), b=steps_b.get(i), same=_same(steps_a.get(i), steps_b.get(i)))
            for i in sorted(steps_a.keys() | steps_b.keys())
        ]
        return EpisodeComparison(
            a=summary(*first),
            b=summary(*second),
            same_task=first[1].id == second[1].id,
            steps=aligned,
            first_difference=next((s.index for s in aligned if not s.same), None),
        )


@router.get(
    "/episodes/{episode_id}",
    operation_id="getEpisode",
    response_model=EpisodeDetail,
    responses=ERRORS,
    summary="An episode with its steps, verdict and release",
)
def get_episode(episode_id: EpisodeId, container: ContainerDep, _: ReadKey) -> EpisodeDetail:
    with container.db.session() as session:
        episode, task = _load(session, episode_id)
        verdicts = repo.verdicts_for_episode(session, episode_id=episode_id)
        verdict = _verdict_public(session, verdicts[-1]) if verdicts else None
        return EpisodeDetail(
            **summary(episode, task).model_dump(),
            prompt=task.prompt,
            failure_reason=episode.failure_reason,
            steps=[step_public(s) for s in episode.steps],
            verdict=verdict,
            release=Release(model_version=episode.model_version, harness=episode.harness_version),
        )


class ModelCall(BaseModel):
    """One model call an episode made (or, for the executor's first step with several samples, shared)."""

    id: str
    role: str
    model: str
    step: int | None = Field(description="The attempt's step the call answered: 0 for its first reply.")
    ok: bool
    error: str | None
    attempts: int
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    prompt: list[JsonValue] | None = Field(
        description="The messages sent, secrets redacted; null when tracing.store_text was off."
    )
    response: list[str] | None = Field(description="The reply, one text per sample, secrets redacted; null as above.")
    trace_id: str | None = Field(description="The OpenTelemetry trace holding the call's `chat` span.")
    created_at: UtcDatetime


@router.get(
    "/episodes/{episode_id}/model-calls",
    operation_id="listEpisodeModelCalls",
    response_model=list[ModelCall],
    responses=ERRORS,
    summary="The model calls an episode made, in order, with their prompt and reply",
)
def list_episode_model_calls(episode_id: EpisodeId, container: ContainerDep, _: ReadKey) -> list[ModelCall]:
    with container.db.session() as session:
        repo.get_episode(session, episode_id=episode_id)
        return [
            ModelCall(
                id=call.id,
                role=call.role,
                model=call.model,
                step=call.step,
                ok=call.ok,
                error=call.error,
                attempts=call.attempts,
                prompt_tokens=call.prompt_tokens,
                completion_tokens=call.completion_tokens,
                latency_s=call.latency_s,
                prompt=list(call.prompt) if call.prompt is not None else None,
                response=[str(text) for text in call.response] if call.response is not None else None,
                trace_id=call.trace_id,
                created_at=call.created_at,
            )
            for call in repo.llm_calls_for_episode(session, episode_id=episode_id)
        ]


def _load(session: Session, episode_id: str) -> tuple[Episode, Task]:
    episode = repo.get_episode(session, episode_id=episode_id)
    return episode, repo.get_task(session, task_id=episode.task_id)


def _same(a: StepPublic | None, b: StepPublic | None) -> bool:
    return a is not None and b is not None and (a.role, a.content, a.tool_calls) == (b.role, b.content, b.tool_calls)


def _verdict_public(session: Session, verdict: Verdict) -> VerdictPublic:
    first_error = (verdict.details or {}).get("first_error")
    lesson = repo.lessons_by_ids(session, [verdict.lesson_id]).get(verdict.lesson_id) if verdict.lesson_id else None
    return VerdictPublic(
        passed=verdict.passed,
        reward=verdict.reward,
        source=verdict.source,
        critique=verdict.critique,
        first_wrong_step=_step_number(first_error),
        first_error=None if first_error is None else str(first_error),
        lesson=lesson.text if lesson is not None else None,
        lesson_id=verdict.lesson_id,
        repaired_episode_id=verdict.repaired_episode_id,
        created_at=verdict.created_at,
    )


def _step_number(first_error: object) -> int | None:
    """The judge names the first wrong step in free text ("2", "step 2: ..."): its first number, if it has one."""
    if isinstance(first_error, int) and not isinstance(first_error, bool):
        return first_error
    found = re.search(r"\d+", first_error) if isinstance(first_error, str) else None
    return int(found.group()) if found else None

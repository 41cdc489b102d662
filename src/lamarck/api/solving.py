"""Solving one's own task: a prompt, optionally verified by an environment against an expected answer, run by the
executor under a release (a model version and the harness the environment is served with).

The REST API's task routes and ``lamarck solve`` both call ``resolve`` (bad input fails here, before anything is
written) and then ``solve``.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from sqlalchemy.orm import Session

from lamarck.agents.evaluation import release_harness, verify_answer
from lamarck.agents.executor import Attempt, Executor, ExecutorInput
from lamarck.agents.harness import HarnessSpec, load_harness
from lamarck.api.text import NulFreeBody
from lamarck.curriculum.environment import Environment, Reward, TaskSpec, ToolSpec, TrainingNotAllowed
from lamarck.curriculum.registry import UnknownEnvironment, get_environment
from lamarck.platform.container import Container
from lamarck.platform.llm.version_names import version_call
from lamarck.platform.settings import DEFAULT_MODEL_VERSION
from lamarck.platform.storage import repositories as repo
from lamarck.platform.storage.repositories import NotFound

OPEN_ENVIRONMENT = "open"
Outcome = Literal["passed", "failed", "answered", "no_answer"]


class TaskError(ValueError):
    """A task that cannot be solved as asked; the message is one line and says what to fix."""


class TaskRequest(NulFreeBody):
    """One task for the executor."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"prompt": "What is 6 * 7?", "environment": "arithmetic", "expected": "42"},
                {"prompt": "Name the capital of France in one word."},
            ]
        },
    )

    prompt: str = Field(min_length=1, max_length=20_000, description="What to solve, as the model will read it.")
    environment: str | None = Field(
        None, max_length=100, description="An environment whose tools, answer format and verifier to use."
    )
    expected: str | None = Field(
        None, max_length=10_000, description="The expected answer; the environment's verifier scores against it."
    )
    model_version: str | None = Field(None, max_length=100, description="Default: the champion.")
    harness_version: str | None = Field(None, max_length=100, description="Default: the environment's served harness.")
    samples: int = Field(1, ge=1, le=16, description="Attempts at the task; the answer is the most common one.")

    @field_validator("prompt")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("the prompt is blank: give the text of the task")
        return value

    @model_validator(mode="after")
    def _expected_needs_environment(self) -> TaskRequest:
        if self.expected is not None and self.environment is None:
            raise ValueError("an expected answer needs an environment whose verifier checks it: add 'environment'")
        return self

    def digest(self) -> str:
        canonical = json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()


class Usage(BaseModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0


class TaskResult(BaseModel):
    answer: str | None = Field(description="The most common parsed answer over the samples.")
    outcome: Outcome = Field(description="passed/failed when verified; answered/no_answer otherwise.")
    reward: float | None = Field(None, description="Mean verifier score over the samples, when verified.")
    details: str = ""
    answers: list[str | None] = Field(default_factory=list, description="Each sample's answer, in order.")
    model_version: str
    harness_version: str
    environment: str
    episode_ids: list[str] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    seconds: float = 0.0


@dataclass(frozen=True)
class Resolved:
    """A request checked against what exists: the environment, the task, the release."""

    request: TaskRequest
    environment: Environment
    task: TaskSpec
    model_version: str
    harness: HarnessSpec


class OpenEnvironment:
    """The environment of a task given without one: no tools, no verifier, any answer accepted as said."""

    name: str = OPEN_ENVIRONMENT
    description: str = "A task given through the API without an environment: answered, not verified."
    difficulties: Sequence[int] = (0,)
    answer_format: str = "the final answer only"
    training_allowed: bool = False

    def generate(self, difficulty: int, rng: random.Random) -> TaskSpec:
        raise TrainingNotAllowed("the open environment has no generator: it only runs tasks given to it")

    def verify(self, task: TaskSpec, answer: str) -> Reward:
        return Reward.fail("the open environment has no verifier")

    def tools(self) -> list[ToolSpec]:
        return []


def resolve(container: Container, request: TaskRequest) -> Resolved:
    """Check the request against the registry, the model versions and the harnesses; TaskError if it cannot run."""
    env = _environment(container, request.environment)
    reference = {} if request.expected is None else {"answer": request.expected}
    task = TaskSpec(environment=env.name, difficulty=0, prompt=request.prompt, reference=reference)
    if request.expected is not None:
        _check_expected(env, task, request.expected)
    with container.db.session() as session:
        model_version = request.model_version
        if model_version is None:
            champion = repo.promoted_model_version(session)
            model_version = champion.id if champion is not None else DEFAULT_MODEL_VERSION
        route = container.gateway.route("executor")
        must_exist = request.model_version is not None or version_call(route, model_version) is not None
        if must_exist:
            try:
                repo.get_model_version(session, version_id=model_version)
            except NotFound as exc:
                raise TaskError(str(exc)) from None
        harness = _harness(session, env, request.harness_version) if request.harness_version else None
    return Resolved(request, env, task, model_version, harness or release_harness(container.db, env))


def _environment(container: Container, name: str | None) -> Environment:
    if name is None:
        return OpenEnvironment()
    try:
        return get_environment(name, sandbox=container.sandbox)
    except UnknownEnvironment as exc:
        raise TaskError(str(exc)) from None


def _check_expected(env: Environment, task: TaskSpec, expected: str) -> None:
    """The expected answer must be one the verifier accepts as itself; otherwise every answer would fail."""
    try:
        accepted = env.verify(task, expected).passed
    except Exception:  # a verifier that cannot read this reference: the environment needs more than an answer
        accepted = False
    if not accepted:
        raise TaskError(
            f"expected answer {expected!r} is not one the {env.name} verifier accepts: give it in the form "
            f"{env.name} answers take ({env.answer_format})"
        )


def _harness(session: Session, env: Environment, harness_id: str) -> HarnessSpec:
    try:
        spec = load_harness(session, harness_id=harness_id)
    except NotFound as exc:
        raise TaskError(f"{exc}: list them with `lamarck harness list`") from None
    if spec.environment not in (None, env.name):
        raise TaskError(f"harness {harness_id} is for {spec.environment}, not {env.name}: pick one of {env.name}'s")
    return spec


def solve(container: Container, resolved: Resolved, *, seed: int = 0) -> TaskResult:
    """Run the task, record its episodes and score them. Episodes stay unjudged (outcome "pending"): a user's task
    and expected answer are not training data unless someone decides so."""
    env, request = resolved.environment, resolved.request
    out = Executor(container.gateway, {env.name: env}, max_concurrency=request.samples).run(
        ExecutorInput(
            tasks=[resolved.task],
            model_version=resolved.model_version,
            harnesses={env.name: resolved.harness},
            samples_per_task=request.samples,
            seed=seed,
        )
    )
    rewards = [_reward(resolved, a) for a in out.attempts] if request.expected is not None else []
    episode_ids = _record(container, resolved, out.attempts)
    answers = [a.answer for a in out.attempts]
    answer = _most_common(answers)
    if rewards:
        chosen = next((r for a, r in zip(out.attempts, rewards, strict=True) if a.answer == answer), rewards[0])
        outcome: Outcome = "passed" if chosen.passed else "failed"
        reward, details = sum(r.score for r in rewards) / len(rewards), chosen.details
    else:
        outcome = "answered" if answer is not None else "no_answer"
        reward, details = None, next((a.failure_reason or "" for a in out.attempts if a.answer is None), "")
    prompt_tokens = sum(a.prompt_tokens for a in out.attempts)
    completion_tokens = sum(a.completion_tokens for a in out.attempts)
    return TaskResult(
        answer=answer,
        outcome=outcome,
        reward=reward,
        details=details,
        answers=answers,
        model_version=resolved.model_version,
        harness_version=resolved.harness.version_id,
        environment=env.name,
        episode_ids=episode_ids,
        usage=Usage(
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            total_tokens=prompt_tokens + completion_tokens,
        ),
        seconds=round(out.wall_seconds, 3),
    )


def _reward(resolved: Resolved, attempt: Attempt) -> Reward:
    return verify_answer(resolved.environment, resolved.task, attempt.answer, attempt.failure_reason)


def _most_common(answers: list[str | None]) -> str | None:
    given = [a for a in answers if a is not None]
    return Counter(given).most_common(1)[0][0] if given else None


def _record(container: Container, resolved: Resolved, attempts: list[Attempt]) -> list[str]:
    task = resolved.task
    with container.db.session() as session:
        task_id = repo.add_task(
            session,
            environment=task.environment,
            difficulty=task.difficulty,
            prompt=task.prompt,
            reference=task.reference,
            source="api",
        ).id
        return [
            repo.record_episode(
                session,
                task_id=task_id,
                model_version=resolved.model_version,
                harness_version=attempt.harness_version,
                trajectory=attempt.trajectory,
                answer=attempt.answer,
                failure_reason=attempt.failure_reason,
                sample_index=attempt.sample_index,
                prompt_tokens=attempt.prompt_tokens,
                completion_tokens=attempt.completion_tokens,
                wall_seconds=attempt.wall_seconds,
                episode_id=attempt.episode_id,
            ).id
            for attempt in attempts
        ]

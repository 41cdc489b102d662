"""Held-out evaluations asked for over HTTP: the same ``agents.evaluation.evaluate`` that ``lamarck eval`` and the
gate run, on the environment's held-out set, under a release (by default the champion and the served harness).

``check`` resolves a request against what exists (bad input fails there, naming what exists, before anything is
written); ``run`` is the work the task pool runs, and the evaluation's row records each step of it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Literal

from pydantic import ConfigDict, Field
from sqlalchemy.orm import Session

from lamarck.agents.evaluation import (
    EvaluationError,
    default_harness_for,
    evaluate,
    heldout_tasks,
    release_harness,
)
from lamarck.agents.harness import HarnessSpec, load_harness
from lamarck.api.text import NulFreeBody
from lamarck.curriculum.environment import Environment, TaskSpec
from lamarck.curriculum.heldout import RESERVED_PER_LEVEL
from lamarck.curriculum.registry import get_environment
from lamarck.platform.container import Container
from lamarck.platform.llm.version_names import version_call
from lamarck.platform.settings import DEFAULT_MODEL_VERSION
from lamarck.platform.storage import api_repositories as api_repo
from lamarck.platform.storage import repositories as repo
from lamarck.platform.storage.records import ModelVersion
from lamarck.platform.storage.repositories import NotFound

log = logging.getLogger(__name__)

MAX_TASKS = 200
NAME_PATTERN = r"^[A-Za-z0-9._:-]{1,100}$"
SHOWN = 10


class EvaluationInputError(ValueError):
    """A request that names something that does not exist, or asks for too much; one line naming what exists."""


class EvaluationCreate(NulFreeBody):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"environment": "arithmetic", "per_level": 1}]},
    )

    environment: str = Field(pattern=NAME_PATTERN, description="The environment whose held-out set to run.")
    model_version: str | None = Field(None, pattern=NAME_PATTERN, description="Default: the champion.")
    harness_version: str | None = Field(
        None,
        pattern=NAME_PATTERN,
        description="An archived harness id, or `default` (the environment's root harness); default: the harness "
        "the environment is served with.",
    )
    per_level: int = Field(1, ge=1, le=RESERVED_PER_LEVEL, description="Held-out tasks per difficulty level.")
    limit: int | None = Field(
        None, ge=1, le=MAX_TASKS, description="Only the first N tasks of the set (an evaluation-only set is whole)."
    )
    samples: int = Field(1, ge=1, le=16, description="Greedy attempts per task.")


@dataclass(frozen=True)
class Checked:
    """A request resolved against the registry, the model versions and the harnesses."""

    environment: Environment
    model_version: str
    harness: HarnessSpec
    tasks: list[TaskSpec]
    eval_set: str


def check(container: Container, request: EvaluationCreate) -> Checked:
    """UnknownEnvironment or EvaluationInputError (one line, naming what exists) when the request cannot run."""
    env = get_environment(request.environment, sandbox=container.sandbox)
    with container.db.session() as session:
        model_version = request.model_version
        if model_version is None:
            champion = repo.promoted_model_version(session)
            model_version = champion.id if champion is not None else DEFAULT_MODEL_VERSION
        route = container.gateway.route("executor")
        if request.model_version is not None or version_call(route, model_version) is not None:
            if session.get(ModelVersion, model_version) is None:
                known = api_repo.model_version_ids(session, limit=SHOWN)
                raise EvaluationInputError(
                    f"unknown model version {model_version!r}: "
                    + (f"use one of {', '.join(known)}" if known else "none is registered yet (`lamarck models`)")
                )
        harness = _harness(session, env, request.harness_version)
    tasks, eval_set = heldout_tasks(env, per_level=request.per_level, limit=request.limit)
    if len(tasks) > MAX_TASKS:
        raise EvaluationInputError(
            f"{env.name}'s held-out set is {len(tasks)} tasks at per_level {request.per_level}; the API runs at most "
            f"{MAX_TASKS}: lower per_level or set limit"
        )
    return Checked(env, model_version, harness or release_harness(container.db, env), tasks, eval_set)


def _harness(session: Session, env: Environment, harness_id: str | None) -> HarnessSpec | None:
    if harness_id is None:
        return None
    if harness_id == "default":
        return default_harness_for(env)
    try:
        spec = load_harness(session, harness_id=harness_id)
    except NotFound:
        problem = f"unknown harness {harness_id!r}"
    else:
        if spec.environment in (None, env.name):
            return spec
        problem = f"harness {harness_id!r} is for {spec.environment}, not {env.name}"
    known = ["default", *api_repo.harness_ids(session, environment=env.name, limit=SHOWN)]
    raise EvaluationInputError(f"{problem}: use one of {env.name}'s harnesses: {', '.join(known)}")


Outcome = Literal["succeeded", "failed"]


def run(container: Container, evaluation_id: str) -> Outcome | None:
    """Run one queued evaluation of exactly the release and tasks its row names, and record how it ended; None when
    it was not queued (already taken)."""
    with container.db.session() as session:
        evaluation = api_repo.start_evaluation(session, evaluation_id=evaluation_id)
        if evaluation is None:
            return None
        request = EvaluationCreate.model_validate((evaluation.decision or {}).get("request") or {})
        model_version, harness_version = evaluation.model_version or DEFAULT_MODEL_VERSION, evaluation.harness_version
        eval_set = evaluation.eval_set
    try:
        env = get_environment(request.environment, sandbox=container.sandbox)
        harness = _pinned_harness(container, env, harness_version)
        tasks, now = heldout_tasks(env, per_level=request.per_level, limit=request.limit)
        if now != eval_set:
            raise EvaluationInputError(f"{env.name}'s held-out set changed since it was asked for ({now}): ask again")
        result = evaluate(
            container.gateway,
            env,
            tasks,
            model_version,
            harness,
            samples=request.samples,
            eval_set=eval_set,
            max_concurrency=container.settings.engine.rollout_concurrency,
        )
    except (EvaluationError, EvaluationInputError, LookupError, ValueError) as exc:
        return _finish(container, evaluation_id, error=str(exc))
    except Exception as exc:
        log.exception("evaluation %s failed", evaluation_id)
        return _finish(container, evaluation_id, error=f"the evaluation could not run: {type(exc).__name__}: {exc}")
    details = {"samples": result.samples, "per_level": result.per_level, "seconds": round(result.seconds, 3)}
    with container.db.session() as session:
        api_repo.finish_evaluation(
            session, evaluation_id=evaluation_id, score=result.score, per_task=result.per_task, details=details
        )
    return "succeeded"


def _pinned_harness(container: Container, env: Environment, harness_version: str | None) -> HarnessSpec:
    """The harness the row names (a later promotion does not change what was asked for): the environment's root
    harness, which need not be archived, or an archived one."""
    default = default_harness_for(env)
    if harness_version is None or harness_version == default.version_id:
        return default
    with container.db.session() as session:
        return load_harness(session, harness_id=harness_version)


def _finish(container: Container, evaluation_id: str, *, error: str) -> Outcome:
    with container.db.session() as session:
        api_repo.finish_evaluation(session, evaluation_id=evaluation_id, error=" ".join(error.split()))
    return "failed"

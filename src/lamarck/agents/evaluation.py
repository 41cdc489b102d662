"""Held-out evaluation of a model version under a harness version: greedy, fixed tasks and seeds, verifier-scored.

The same tasks and seeds every time, so scores compare across model and harness versions. The
executor runs without skills or lessons: an evaluation measures the model and harness, not
whatever the library and memory held that day. The distillation gate calls ``evaluate`` too.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Sequence

from pydantic import BaseModel, Field

from lamarck.agents.executor import MODEL_CALL_FAILED, Executor, ExecutorInput
from lamarck.agents.harness import DEFAULT_ANSWER_FORMATS, HarnessSpec, default_harness, load_harness, promoted_harness
from lamarck.curriculum.environment import Environment, Reward, TaskSpec
from lamarck.curriculum.heldout import Slice, heldout_set, set_name
from lamarck.platform.llm.gateway import LLMGateway
from lamarck.platform.storage import repositories as repo
from lamarck.platform.storage.database import Database

log = logging.getLogger(__name__)

EVAL_SEED = 0


class EvaluationError(RuntimeError):
    """The model could not be evaluated (not: it answered wrongly); a score would be meaningless."""


class EvaluationResult(BaseModel):
    environment: str
    eval_set: str  # name, version and digest of the exact tasks, e.g. arithmetic-heldout-v1/pl5@3f2a9c1e0b7d
    model_version: str
    harness_version: str
    n_tasks: int
    samples: int = 1
    score: float = Field(ge=0.0, le=1.0)  # mean over tasks of the share of samples that passed
    per_task: dict[str, float]  # task key -> share of samples that passed
    per_level: dict[str, float] = Field(default_factory=dict)
    tokens: list[int] = Field(default_factory=list)  # per task, in order: prompt and completion tokens of its samples
    answered: list[float] = Field(default_factory=list)  # per task, in order: share of samples that parsed to an answer
    seconds: float = 0.0
    evaluation_id: str | None = None


def release_harness(db: Database, env: Environment) -> HarnessSpec:
    """The harness ``env``'s release is served with: its promoted harness, else its default. The executor, the gate
    and the distillation check all read it here, so the student is trained and judged on what it is served."""
    with db.session() as session:
        found = promoted_harness(session, env.name)
        return load_harness(session, harness_id=found) if found is not None else default_harness_for(env)


def default_harness_for(env: Environment) -> HarnessSpec:
    """The root harness of an environment; the environment's own answer format where the harness has none."""
    if env.name in DEFAULT_ANSWER_FORMATS:
        return default_harness(env.name)
    return default_harness(env.name, env.answer_format)


def tasks_digest(tasks: Sequence[TaskSpec]) -> str:
    digest = hashlib.sha256()
    for task in tasks:
        digest.update(task.fingerprint.encode())
    return digest.hexdigest()


def heldout_tasks(
    env: Environment, *, version: str | None = None, per_level: int = 5, limit: int | None = None
) -> tuple[list[TaskSpec], str]:
    """The held-out tasks (a prefix when ``limit`` is set) and the eval-set name that pins them; ``version`` None is
    the environment's current held-out version."""
    tasks = heldout_set(env.name, version, per_level=per_level, env=env)
    if limit is not None:
        tasks = tasks[:limit]
    size = f"pl{per_level}" if env.training_allowed else "all"
    if limit is not None:
        size += f"-first{limit}"
    return tasks, f"{set_name(env.name, version)}/{size}@{tasks_digest(tasks)[:12]}"


def evaluate(
    gateway: LLMGateway,
    env: Environment,
    tasks: Sequence[TaskSpec],
    model_version: str,
    harness: HarnessSpec,
    *,
    samples: int = 1,
    eval_set: str = "",
    seed: int = EVAL_SEED,
    max_concurrency: int = 32,
    as_sampled: bool = False,
) -> EvaluationResult:
    """Run every task greedily ``samples`` times and score the answers with the environment's verifier; with
    ``as_sampled``, run the harness as it is instead (its own sampling and samples per task), as the harness-critic
    compares harnesses whose sampling is what differs."""
    if not tasks:
        raise ValueError("an evaluation needs at least one task")
    if as_sampled:
        run, samples = harness, harness.sampling.samples_per_task
    else:
        run = harness.derive(sampling={"temperature": 0.0, "top_p": 1.0, "samples_per_task": samples})
    started = time.perf_counter()
    out = Executor(gateway, {env.name: env}, max_concurrency=max_concurrency).run(
        ExecutorInput(
            tasks=list(tasks),
            model_version=model_version,
            harnesses={env.name: run},
            samples_per_task=samples,
            seed=seed,
        )
    )
    broken = [a.failure_reason for a in out.attempts if (a.failure_reason or "").startswith(MODEL_CALL_FAILED)]
    if broken:
        raise EvaluationError(
            f"{len(broken)} of {len(out.attempts)} attempts could not reach {model_version}: {broken[0]}"
        )
    passes: dict[int, list[bool]] = {}
    tokens = [0] * len(tasks)
    parsed: dict[int, list[bool]] = {}
    for attempt in out.attempts:
        parsed.setdefault(attempt.task_index, []).append(attempt.answer is not None)
        reward = verify_answer(env, tasks[attempt.task_index], attempt.answer, attempt.failure_reason)
        passes.setdefault(attempt.task_index, []).append(reward.passed)
        tokens[attempt.task_index] += attempt.prompt_tokens + attempt.completion_tokens
    per_task: dict[str, float] = {}
    levels: dict[int, list[float]] = {}
    for index, task in enumerate(tasks):
        results = passes.get(index, [False])
        share = sum(results) / len(results)
        per_task[_key(task, index)] = share
        levels.setdefault(task.difficulty, []).append(share)
    return EvaluationResult(
        environment=env.name,
        eval_set=eval_set or f"{env.name}-custom@{tasks_digest(tasks)[:12]}",
        model_version=model_version,
        harness_version=harness.version_id,
        n_tasks=len(tasks),
        samples=samples,
        score=sum(per_task.values()) / len(per_task),
        per_task=per_task,
        per_level={str(level): sum(v) / len(v) for level, v in sorted(levels.items())},
        tokens=tokens,
        answered=[sum(parsed.get(i, [False])) / len(parsed.get(i, [False])) for i in range(len(tasks))],
        seconds=time.perf_counter() - started,
    )


def store_evaluation(db: Database, result: EvaluationResult, *, kind: str = "heldout") -> str:
    with db.session() as session:
        record = repo.add_evaluation(
            session,
            environment=result.environment,
            score=result.score,
            n_tasks=result.n_tasks,
            model_version=result.model_version,
            harness_version=result.harness_version,
            eval_set=result.eval_set,
            kind=kind,
            per_task=result.per_task,
            decision={"samples": result.samples, "per_level": result.per_level, "seconds": round(result.seconds, 3)},
        )
        return record.id


def verify_answer(env: Environment, task: TaskSpec, answer: str | None, failure: str | None) -> Reward:
    if answer is None:
        return Reward.fail(failure or "no answer")
    try:
        return env.verify(task, answer)
    except Exception as exc:  # a verifier bug scores the task as failed, it does not lose the evaluation
        log.exception("verifier of %s failed", env.name)
        return Reward.fail(f"verifier error: {type(exc).__name__}")


def _key(task: TaskSpec, index: int) -> str:
    return task.source_id or f"{index}:{task.fingerprint[:16]}"


def gate_evaluator(
    gateway: LLMGateway, environments: dict[str, Environment], db: Database | None = None, *, slice_: Slice = "gate"
) -> Callable[[str, str, Sequence[TaskSpec]], list[bool]]:
    """The distillation gate's evaluator: pass/fail per held-out task (or, with ``slice_="dev"``, per development
    task), in order, under the environment's release harness (its promoted harness; the default without ``db``).

    With ``db``, every evaluation is stored and a task this model and harness already met on the same slice is not
    run again: the champion is evaluated once per task, not once per candidate, even when a candidate's gate looks
    closely at other levels (greedy output barely depends on batching, but with llama.cpp a rare task flips with the
    batch's composition, so every candidate meets the same record). Tasks are matched by their slice id; a set with
    a task that has none is evaluated whole.
    """

    def evaluator(model_version: str, environment: str, tasks: Sequence[TaskSpec]) -> list[bool]:
        env = environments[environment]
        harness = release_harness(db, env) if db is not None else default_harness_for(env)
        keys = [_key(task, index) for index, task in enumerate(tasks)]
        if len(set(keys)) != len(keys):
            raise ValueError(f"{environment}: held-out tasks must have distinct ids to be compared one by one")
        prefix = f"{set_name(env.name, slice_=slice_)}/{slice_}@"
        by_id = all(task.source_id for task in tasks)
        known: dict[str, float] = {}
        if db is not None and by_id:
            with db.session() as session:
                for found in repo.evaluations_on(
                    session, model_version=model_version, harness_version=harness.version_id, eval_set_prefix=prefix
                ):
                    known.update(found.per_task)
        missing = [task for task, key in zip(tasks, keys, strict=True) if key not in known]
        if missing:
            eval_set = f"{prefix}{tasks_digest(missing)[:12]}"
            result = evaluate(gateway, env, missing, model_version, harness, eval_set=eval_set)
            if db is not None:
                store_evaluation(db, result)
            known.update(result.per_task)
        return [known[key] >= 0.5 for key in keys]

    return evaluator

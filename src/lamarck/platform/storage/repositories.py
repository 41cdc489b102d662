"""Repository functions the agents use. Every function takes the session first and keywords after it."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import func, select, tuple_
from sqlalchemy.orm import Session

from lamarck.platform.settings import DEFAULT_MODEL_VERSION
from lamarck.platform.storage.event_order import safe_xid_horizon
from lamarck.platform.storage.fingerprints import prompt_fingerprint
from lamarck.platform.storage.records import (
    Episode,
    Evaluation,
    Event,
    Harness,
    Lesson,
    LLMCall,
    ModelVersion,
    Run,
    RunStepDone,
    Step,
    Task,
    Verdict,
    utcnow,
)
from lamarck.platform.storage.trajectory import Message, ToolCall, Trajectory

MODEL_STATUSES = ("candidate", "promoted", "retired")


class NotFound(LookupError):
    """A record asked for by id does not exist."""


# runs


def create_run(session: Session, *, config: dict[str, Any], name: str = "") -> Run:
    run = Run(config=config, name=name, status="pending")
    session.add(run)
    session.flush()
    return run


def get_run(session: Session, *, run_id: str) -> Run:
    run = session.get(Run, run_id)
    if run is None:
        raise NotFound(f"no run {run_id!r}: list runs with `lamarck runs list`")
    return run


def list_runs(session: Session, *, limit: int = 50) -> list[Run]:
    return list(session.scalars(select(Run).order_by(Run.created_at.desc()).limit(limit)))


def set_run_status(session: Session, *, run_id: str, status: str, error: str | None = None) -> Run:
    run = get_run(session, run_id=run_id)
    run.status = status
    run.error = error
    if status in ("finished", "failed", "stopped", "budget_exhausted"):
        run.finished_at = utcnow()
    return run


# tasks


def mark_step_done(session: Session, *, run_id: str, step: str, generation: int) -> bool:
    """Record that ``step`` of ``generation`` is applied, in the caller's transaction; False if it already was (the
    caller then skips the step: a resumed node re-runs, its effects must not)."""
    if session.get(RunStepDone, (run_id, step, generation)) is not None:
        return False
    session.add(RunStepDone(run_id=run_id, step=step, generation=generation))
    session.flush()
    return True


def episodes_by_ids(session: Session, ids: list[str]) -> dict[str, Episode]:
    return {e.id: e for e in session.scalars(select(Episode).where(Episode.id.in_(ids)))}


def lessons_by_ids(session: Session, ids: list[str]) -> dict[str, Lesson]:
    return {lesson.id: lesson for lesson in session.scalars(select(Lesson).where(Lesson.id.in_(ids)))}


def generation_tasks(session: Session, *, run_id: str, generation: int) -> list[Task]:
    return list(session.scalars(select(Task).where(Task.run_id == run_id, Task.generation == generation)))


def episode_ids_by_key_prefix(session: Session, prefix: str) -> dict[str, str]:
    """Idempotency key -> episode id for the episodes whose key starts ``<prefix>:t`` (one generation's)."""
    query = select(Episode.idempotency_key, Episode.id).where(Episode.idempotency_key.like(f"{prefix}:t%"))
    return {key: episode_id for key, episode_id in session.execute(query) if key is not None}


def add_task(
    session: Session,
    *,
    environment: str,
    difficulty: int,
    prompt: str,
    reference: dict[str, Any] | None = None,
    meta: dict[str, Any] | None = None,
    source: str = "procedural",
    run_id: str | None = None,
    generation: int | None = None,
    task_id: str | None = None,
) -> Task:
    task = Task(
        environment=environment,
        difficulty=difficulty,
        prompt=prompt,
        reference=reference or {},
        meta=meta or {},
        source=source,
        run_id=run_id,
        generation=generation,
        fingerprint=prompt_fingerprint(prompt),
    )
    if task_id is not None:
        task.id = task_id
    session.add(task)
    session.flush()
    return task


def get_task(session: Session, *, task_id: str) -> Task:
    task = session.get(Task, task_id)
    if task is None:
        raise NotFound(f"no task {task_id!r}")
    return task


# episodes and their trajectories


def record_episode(
    session: Session,
    *,
    task_id: str,
    model_version: str,
    trajectory: Trajectory,
    harness_version: str | None = None,
    run_id: str | None = None,
    answer: str | None = None,
    outcome: str = "pending",
    reward: float | None = None,
    failure_reason: str | None = None,
    skills_used: list[str] | None = None,
    lessons_used: list[str] | None = None,
    sample_index: int = 0,
    prompt_tokens: int = 0,
    completion_tokens: int = 0,
    cost_usd: float = 0.0,
    wall_seconds: float = 0.0,
    generation: int | None = None,
    repaired_from_id: str | None = None,
    idempotency_key: str | None = None,
    episode_id: str | None = None,
) -> Episode:
    """Store one attempt with its steps. With an idempotency key, a second call returns the first episode.
    ``episode_id``: the id the attempt's model calls were already linked to (``Attempt.episode_id``)."""
    if idempotency_key is not None:
        existing = session.scalar(select(Episode).where(Episode.idempotency_key == idempotency_key))
        if existing is not None:
            return existing
    episode = Episode(
        **({"id": episode_id} if episode_id is not None else {}),
        task_id=task_id,
        model_version=model_version,
        harness_version=harness_version,
        run_id=run_id,
        answer=answer,
        outcome=outcome,
        reward=reward,
        failure_reason=failure_reason,
        skills_used=list(skills_used or []),
        lessons_used=list(lessons_used or []),
        sample_index=sample_index,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        cost_usd=cost_usd,
        wall_seconds=wall_seconds,
        generation=generation,
        repaired_from_id=repaired_from_id,
        idempotency_key=idempotency_key,
    )
    episode.steps = [_step_from_message(index, message) for index, message in enumerate(trajectory.messages)]
    session.add(episode)
    session.flush()
    return episode


def get_episode(session: Session, *, episode_id: str) -> Episode:
    episode = session.get(Episode, episode_id)
    if episode is None:
        raise NotFound(f"no episode {episode_id!r}")
    return episode


def list_episodes(
    session: Session,
    *,
    run_id: str | None = None,
    task_id: str | None = None,
    outcome: str | None = None,
    model_version: str | None = None,
    since: datetime | None = None,
    limit: int | None = None,
) -> list[Episode]:
    query = select(Episode).order_by(Episode.created_at, Episode.id)
    if run_id is not None:
        query = query.where(Episode.run_id == run_id)
    if task_id is not None:
        query = query.where(Episode.task_id == task_id)
    if outcome is not None:
        query = query.where(Episode.outcome == outcome)
    if model_version is not None:
        query = query.where(Episode.model_version == model_version)
    if since is not None:
        query = query.where(Episode.created_at > since)
    if limit is not None:
        query = query.limit(limit)
    return list(session.scalars(query))


def episode_trajectory(episode: Episode) -> Trajectory:
    return Trajectory(messages=[_message_from_step(step) for step in episode.steps])


def _step_from_message(index: int, message: Message) -> Step:
    return Step(
        index=index,
        role=message.role,
        content=message.content,
        name=message.name,
        tool_calls=[call.model_dump() for call in message.tool_calls] if message.tool_calls else None,
        tool_call_id=message.tool_call_id,
        meta=dict(message.meta),
    )


def _message_from_step(step: Step) -> Message:
    return Message(
        role=step.role,
        content=step.content,
        name=step.name,
        tool_calls=[ToolCall(**call) for call in step.tool_calls] if step.tool_calls else None,
        tool_call_id=step.tool_call_id,
        meta=dict(step.meta or {}),
    )


# verdicts and lessons


def add_verdict(
    session: Session,
    *,
    episode_id: str,
    reward: float,
    passed: bool,
    source: str,
    critique: str | None = None,
    judge_passed: bool | None = None,
    critic_model: str | None = None,
    lesson_id: str | None = None,
    repaired_episode_id: str | None = None,
    details: dict[str, Any] | None = None,
) -> Verdict:
    if source not in ("verifier", "judge", "both"):
        raise ValueError(f"verdict source {source!r} must be verifier, judge or both")
    verdict = Verdict(
        episode_id=episode_id,
        reward=reward,
        passed=passed,
        source=source,
        critique=critique,
        judge_passed=judge_passed,
        critic_model=critic_model,
        lesson_id=lesson_id,
        repaired_episode_id=repaired_episode_id,
        details=details or {},
    )
    session.add(verdict)
    session.flush()
    return verdict


def verdicts_for_episode(session: Session, *, episode_id: str) -> list[Verdict]:
    return list(session.scalars(select(Verdict).where(Verdict.episode_id == episode_id).order_by(Verdict.created_at)))


def add_lesson(
    session: Session, *, text: str, environment: str | None = None, source_episode_ids: list[str] | None = None
) -> Lesson:
    lesson = Lesson(text=text, environment=environment, source_episode_ids=list(source_episode_ids or []))
    session.add(lesson)
    session.flush()
    return lesson


# model versions


def register_model_version(
    session: Session,
    *,
    version_id: str,
    base: str,
    adapter_path: str | None = None,
    parent_id: str | None = None,
    dataset_digest: str | None = None,
    training_metrics: dict[str, Any] | None = None,
    status: str = "candidate",
) -> ModelVersion:
    """Register a model version; registering the same id again returns the existing record unchanged."""
    if status not in MODEL_STATUSES:
        raise ValueError(f"model status {status!r} must be one of {', '.join(MODEL_STATUSES)}")
    existing = session.get(ModelVersion, version_id)
    if existing is not None:
        return existing
    version = ModelVersion(
        id=version_id,
        base=base,
        adapter_path=adapter_path,
        parent_id=parent_id,
        dataset_digest=dataset_digest,
        training_metrics=training_metrics or {},
        status=status,
        promoted_at=utcnow() if status == "promoted" else None,
    )
    session.add(version)
    session.flush()
    return version


def get_model_version(session: Session, *, version_id: str) -> ModelVersion:
    version = session.get(ModelVersion, version_id)
    if version is None:
        hint = (
            "import it with `lamarck models import-default`"
            if version_id == DEFAULT_MODEL_VERSION
            else "list them with `lamarck models list`"
        )
        raise NotFound(f"no model version {version_id!r}: {hint}")
    return version


def list_model_versions(session: Session, *, status: str | None = None) -> list[ModelVersion]:
    query = select(ModelVersion).order_by(ModelVersion.created_at, ModelVersion.id)
    if status is not None:
        query = query.where(ModelVersion.status == status)
    return list(session.scalars(query))


def set_model_status(session: Session, *, version_id: str, status: str, reason: str | None = None) -> ModelVersion:
    if status not in MODEL_STATUSES:
        raise ValueError(f"model status {status!r} must be one of {', '.join(MODEL_STATUSES)}")
    version = get_model_version(session, version_id=version_id)
    version.status = status
    version.reason = reason
    if status == "promoted":
        version.promoted_at = utcnow()
    return version


def promoted_model_version(session: Session) -> ModelVersion | None:
    """The champion: the most recently promoted version."""
    query = (
        select(ModelVersion)
        .where(ModelVersion.status == "promoted")
        .order_by(ModelVersion.promoted_at.desc(), ModelVersion.created_at.desc())
        .limit(1)
    )
    return session.scalar(query)


# harnesses


def add_harness(
    session: Session,
    *,
    harness_id: str,
    spec: dict[str, Any],
    digest: str,
    environment: str | None = None,
    parent_id: str | None = None,
    status: str = "candidate",
    rationale: str | None = None,
) -> Harness:
    existing = session.get(Harness, harness_id)
    if existing is not None:
        return existing
    harness = Harness(
        id=harness_id,
        spec=spec,
        digest=digest,
        environment=environment,
        parent_id=parent_id,
        status=status,
        rationale=rationale,
    )
    session.add(harness)
    session.flush()
    return harness


def promoted_harness_ids(session: Session) -> dict[str, str]:
    """Environment -> the id of its promoted harness, for the environments that have one."""
    rows = session.execute(
        select(Harness.environment, Harness.id)
        .where(Harness.status == "promoted", Harness.environment.is_not(None))
        .order_by(Harness.created_at)
    )
    return {environment: harness_id for environment, harness_id in rows if environment is not None}


def get_harness(session: Session, *, harness_id: str) -> Harness:
    harness = session.get(Harness, harness_id)
    if harness is None:
        raise NotFound(f"no harness {harness_id!r}")
    return harness


# evaluations


def add_evaluation(
    session: Session,
    *,
    environment: str,
    score: float,
    n_tasks: int,
    model_version: str | None = None,
    harness_version: str | None = None,
    eval_set: str = "",
    kind: str = "heldout",
    per_task: dict[str, Any] | None = None,
    decision: dict[str, Any] | None = None,
) -> Evaluation:
    evaluation = Evaluation(
        environment=environment,
        score=score,
        n_tasks=n_tasks,
        model_version=model_version,
        harness_version=harness_version,
        eval_set=eval_set,
        kind=kind,
        per_task=per_task or {},
        decision=decision or {},
    )
    session.add(evaluation)
    session.flush()
    return evaluation


def evaluations_on(
    session: Session, *, model_version: str, harness_version: str, eval_set_prefix: str, kind: str = "heldout"
) -> list[Evaluation]:
    """Every evaluation of this model and harness on a task set whose name starts with ``eval_set_prefix`` (one
    slice of one environment), oldest first."""
    return list(
        session.scalars(
            select(Evaluation)
            .where(
                Evaluation.model_version == model_version,
                Evaluation.harness_version == harness_version,
                Evaluation.eval_set.startswith(eval_set_prefix, autoescape=True),
                Evaluation.kind == kind,
            )
            .order_by(Evaluation.created_at, Evaluation.id)
        )
    )


def find_evaluation(
    session: Session, *, model_version: str, harness_version: str, eval_set: str, kind: str = "heldout"
) -> Evaluation | None:
    """The newest evaluation of exactly this model, harness and task set (greedy evaluations are deterministic)."""
    return session.scalars(
        select(Evaluation)
        .where(
            Evaluation.model_version == model_version,
            Evaluation.harness_version == harness_version,
            Evaluation.eval_set == eval_set,
            Evaluation.kind == kind,
        )
        .order_by(Evaluation.created_at.desc())
        .limit(1)
    ).first()


def latest_job_event(session: Session, *, job: str) -> Event | None:
    """The newest ``job.*`` event of one job key (the event bus is the job log)."""
    for event in session.scalars(select(Event).where(Event.type.like("job.%")).order_by(Event.id.desc())):
        if (event.payload or {}).get("job") == job:
            return event
    return None


# LLM calls


def record_llm_call(
    session: Session,
    *,
    role: str,
    model: str,
    prompt_tokens: int,
    completion_tokens: int,
    latency_s: float,
    cost_usd: float | None = None,
    ok: bool = True,
    error: str | None = None,
    attempts: int = 1,
    run_id: str | None = None,
    episode_id: str | None = None,
    step: int | None = None,
    prompt: list[Any] | None = None,
    response: list[Any] | None = None,
    trace_id: str | None = None,
) -> LLMCall:
    call = LLMCall(
        role=role,
        model=model,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        latency_s=latency_s,
        cost_usd=cost_usd,
        ok=ok,
        error=error,
        attempts=attempts,
        run_id=run_id,
        episode_id=episode_id,
        step=step,
        prompt=prompt,
        response=response,
        trace_id=trace_id,
    )
    session.add(call)
    session.flush()
    return call


def llm_calls_for_episode(session: Session, *, episode_id: str) -> list[LLMCall]:
    """The model calls linked to an episode, in the order they were made."""
    query = select(LLMCall).where(LLMCall.episode_id == episode_id).order_by(LLMCall.created_at, LLMCall.step)
    return list(session.scalars(query))


def llm_usage(session: Session, *, run_id: str | None = None) -> dict[str, float]:
    query = select(
        func.count(LLMCall.id),
        func.coalesce(func.sum(LLMCall.prompt_tokens), 0),
        func.coalesce(func.sum(LLMCall.completion_tokens), 0),
        func.coalesce(func.sum(LLMCall.cost_usd), 0.0),
    )
    if run_id is not None:
        query = query.where(LLMCall.run_id == run_id)
    calls, prompt, completion, cost = session.execute(query).one()
    return {"calls": calls, "prompt_tokens": prompt, "completion_tokens": completion, "cost_usd": float(cost or 0.0)}


# events


def append_event(session: Session, *, type: str, payload: dict[str, Any], run_id: str | None = None) -> Event:
    event = Event(type=type, payload=payload, run_id=run_id)
    session.add(event)
    session.flush()
    return event


def events_after(session: Session, *, after_id: int = 0, run_id: str | None = None, limit: int = 1000) -> list[Event]:
    """Up to ``limit`` events that follow event ``after_id`` in delivery order, ``(xid, id)``, among those whose
    transaction is older than every one still running (``event_order``). An ``after_id`` that names no event
    counts from the nearest event below it."""
    query = (
        select(Event)
        .where(Event.xid < safe_xid_horizon(), tuple_(Event.xid, Event.id) > tuple_(*event_position(session, after_id)))
        .order_by(Event.xid, Event.id)
        .limit(limit)
    )
    if run_id is not None:
        query = query.where(Event.run_id == run_id)
    return list(session.scalars(query))


def event_position(session: Session, event_id: int) -> tuple[int, int]:
    """Where event ``event_id`` sits in delivery order: ``(xid, id)``."""
    if event_id <= 0:
        return (-1, event_id)
    xid = session.scalar(select(Event.xid).where(Event.id <= event_id).order_by(Event.id.desc()).limit(1))
    return (-1 if xid is None else xid, event_id)


def last_safe_event_id(session: Session) -> int:
    """The id of the last event a reader may deliver now (0 when there is none)."""
    query = select(Event.id).where(Event.xid < safe_xid_horizon()).order_by(Event.xid.desc(), Event.id.desc()).limit(1)
    return session.scalar(query) or 0

"""Store executor attempts as Episodes with their Steps (idempotent, so a resumed run never records twice)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from lamarck.agents.executor import Attempt
from lamarck.platform.storage import repositories as repo
from lamarck.platform.storage.database import Database


def record_attempts(
    db: Database,
    attempts: Sequence[Attempt],
    *,
    task_ids: Sequence[str] | Mapping[int, str],
    model_version: str,
    run_id: str | None = None,
    generation: int | None = None,
    key_prefix: str | None = None,
    done_step: str | None = None,
) -> list[str]:
    """Episode ids in the order of ``attempts``. With ``key_prefix``, recording the same attempt twice is a no-op.
    ``done_step`` (with ``run_id`` and ``generation``) is marked done in the same transaction, so a reader that finds
    the mark finds every episode, even when there were none to record."""
    ids: list[str] = []
    with db.session() as session:
        if done_step is not None:
            if run_id is None or generation is None:
                raise ValueError("done_step needs the run_id and generation it belongs to")
            repo.mark_step_done(session, run_id=run_id, step=done_step, generation=generation)
        for attempt in attempts:
            key = None
            if key_prefix is not None:
                key = f"{key_prefix}:t{attempt.task_index}:s{attempt.sample_index}"
            episode = repo.record_episode(
                session,
                task_id=task_ids[attempt.task_index],
                model_version=model_version,
                harness_version=attempt.harness_version,
                trajectory=attempt.trajectory,
                run_id=run_id,
                answer=attempt.answer,
                outcome="failed" if attempt.failure_reason else "pending",
                reward=0.0 if attempt.failure_reason else None,
                failure_reason=attempt.failure_reason,
                skills_used=attempt.skills_used,
                lessons_used=attempt.lessons_used,
                sample_index=attempt.sample_index,
                prompt_tokens=attempt.prompt_tokens,
                completion_tokens=attempt.completion_tokens,
                wall_seconds=attempt.wall_seconds,
                generation=generation,
                idempotency_key=key,
                episode_id=attempt.episode_id,
            )
            ids.append(episode.id)
    return ids

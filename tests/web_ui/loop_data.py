"""A run as the loop leaves it, written with the loop's own repository functions (the API tests' ``_loop``) and its
typed events on the real bus; ``add_generation`` is one more generation arriving while the browser watches."""

from __future__ import annotations

from api.test_loop_reads import Loop, _loop, _trajectory
from lamarck.agents.summary import CellSummary, GenerationSummary
from lamarck.platform.container import Container
from lamarck.platform.event_types import EpisodeFinished, GenerationSummarized, RunStarted, VerdictGiven
from lamarck.platform.storage import repositories as repo


def running_loop(container: Container, generations: int = 3) -> Loop:
    """Generations 0..generations-1 of arithmetic d1 (g + 1 of 4 solved) and string_ops d2 (failed), running."""
    loop = _loop(container, generations=generations)
    with container.db.session() as session:
        repo.set_run_status(session, run_id=loop.run_id, status="running")
        run = repo.get_run(session, run_id=loop.run_id)
        run.config = {**run.config, "generations": 10}
    container.bus.publish(
        RunStarted(config={"environments": ["arithmetic", "string_ops"]}, next=["propose"], generation=0),
        run_id=loop.run_id,
    )
    for generation in range(generations):
        summarize(container, loop.run_id, generation, attempts=5, successes=generation + 1)
    return loop


def summarize(container: Container, run_id: str, generation: int, *, attempts: int, successes: int) -> None:
    summary = GenerationSummary(
        generation=generation,
        cells=[CellSummary(environment="arithmetic", difficulty=1, attempts=attempts, successes=successes)],
        attempts=attempts,
        successes=successes,
    )
    container.bus.publish(GenerationSummarized(**summary.model_dump()), run_id=run_id)


def add_generation(container: Container, run_id: str, generation: int, *, difficulty: int) -> list[str]:
    """Four arithmetic attempts at ``difficulty`` (three pass), with the events the loop publishes for them."""
    ids = []
    for i in range(4):
        passed = i < 3
        with container.db.session() as session:
            task = repo.add_task(session, environment="arithmetic", difficulty=difficulty, prompt="6*7?", run_id=run_id)
            episode = repo.record_episode(
                session,
                task_id=task.id,
                run_id=run_id,
                model_version="smollm2-135m",
                trajectory=_trajectory("42" if passed else "41"),
                answer="42" if passed else "41",
                outcome="passed" if passed else "failed",
                reward=1.0 if passed else 0.0,
                generation=generation,
            )
        ids.append(episode.id)
        container.bus.publish(
            EpisodeFinished(
                generation=generation,
                episode_id=episode.id,
                task_id=task.id,
                environment="arithmetic",
                difficulty=difficulty,
                sample=0,
                hint="none",
                outcome="answered",
                failure_reason=None,
                steps=4,
                skills_used=[],
                tokens=20,
            ),
            run_id=run_id,
        )
        container.bus.publish(
            VerdictGiven(
                generation=generation,
                episode_id=episode.id,
                passed=passed,
                reward=1.0 if passed else 0.0,
                source="verifier",
                judge_passed=None,
                repaired_episode_id=None,
            ),
            run_id=run_id,
        )
    summarize(container, run_id, generation, attempts=4, successes=3)
    return ids

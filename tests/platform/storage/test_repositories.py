"""The repository suite, run against SQLite and PostgreSQL."""

from __future__ import annotations

import pytest

from lamarck.platform.storage import repositories as repo
from lamarck.platform.storage.database import Database
from lamarck.platform.storage.trajectory import Message, ToolCall, Trajectory


def _trajectory() -> Trajectory:
    return Trajectory(
        messages=[
            Message(role="system", content="You solve arithmetic."),
            Message(role="user", content="What is 17 * 3?"),
            Message(
                role="assistant",
                content="I will use the calculator.",
                tool_calls=[ToolCall(id="call_1", name="calculator", arguments={"expression": "17*3"})],
            ),
            Message(role="tool", content="51", tool_call_id="call_1", name="calculator", meta={"ms": 0.2}),
            Message(role="assistant", content="The answer is 51."),
        ]
    )


def test_episode_round_trip_keeps_the_trajectory(db: Database) -> None:
    with db.session() as session:
        run = repo.create_run(session, config={"environments": ["arithmetic"]}, name="r")
        task = repo.add_task(session, environment="arithmetic", difficulty=1, prompt="What is 17 * 3?", run_id=run.id)
        episode = repo.record_episode(
            session,
            task_id=task.id,
            run_id=run.id,
            model_version="smollm2-135m",
            harness_version="arithmetic-default",
            trajectory=_trajectory(),
            answer="51",
            outcome="passed",
            reward=1.0,
            skills_used=["calculator"],
            prompt_tokens=40,
            completion_tokens=12,
        )
        episode_id = episode.id
    with db.session() as session:
        stored = repo.get_episode(session, episode_id=episode_id)
        assert repo.episode_trajectory(stored) == _trajectory()
        assert repo.episode_trajectory(stored).to_chat() == _trajectory().to_chat()
        assert stored.skills_used == ["calculator"]
        assert [e.id for e in repo.list_episodes(session, outcome="passed")] == [episode_id]
        assert repo.list_episodes(session, outcome="failed") == []


def test_idempotency_key_records_an_episode_once(db: Database) -> None:
    with db.session() as session:
        task = repo.add_task(session, environment="arithmetic", difficulty=1, prompt="1+1")
        first = repo.record_episode(
            session, task_id=task.id, model_version="m", trajectory=Trajectory(), idempotency_key="run:g0:t0:s0"
        )
        second = repo.record_episode(
            session, task_id=task.id, model_version="m", trajectory=Trajectory(), idempotency_key="run:g0:t0:s0"
        )
        assert first.id == second.id
        assert len(repo.list_episodes(session, task_id=task.id)) == 1


def test_verdicts_lessons_and_evaluations(db: Database) -> None:
    with db.session() as session:
        task = repo.add_task(session, environment="arithmetic", difficulty=2, prompt="2+2")
        episode = repo.record_episode(session, task_id=task.id, model_version="m", trajectory=_trajectory())
        lesson = repo.add_lesson(session, text="Use the calculator for products.", source_episode_ids=[episode.id])
        repo.add_verdict(
            session, episode_id=episode.id, reward=0.0, passed=False, source="verifier", lesson_id=lesson.id
        )
        with pytest.raises(ValueError, match="must be verifier, judge or both"):
            repo.add_verdict(session, episode_id=episode.id, reward=1.0, passed=True, source="vibes")
        repo.add_evaluation(session, environment="arithmetic", score=0.25, n_tasks=4, model_version="m")
    with db.session() as session:
        verdicts = repo.verdicts_for_episode(session, episode_id=episode.id)
        assert [(v.passed, v.lesson_id) for v in verdicts] == [(False, lesson.id)]


def test_model_versions_register_promote_and_retire(db: Database) -> None:
    with db.session() as session:
        repo.register_model_version(session, version_id="base", base="base", status="promoted")
        again = repo.register_model_version(session, version_id="base", base="other", status="candidate")
        assert again.base == "base" and again.status == "promoted"
        repo.register_model_version(session, version_id="child", base="base", parent_id="base", adapter_path="a/")
        assert repo.promoted_model_version(session).id == "base"
        repo.set_model_status(session, version_id="child", status="promoted")
        repo.set_model_status(session, version_id="base", status="retired", reason="superseded")
        assert repo.promoted_model_version(session).id == "child"
        assert [v.id for v in repo.list_model_versions(session, status="retired")] == ["base"]
        with pytest.raises(repo.NotFound, match="lamarck models list"):
            repo.get_model_version(session, version_id="nope")
        with pytest.raises(repo.NotFound, match="import it with `lamarck models import-default`"):
            repo.get_model_version(session, version_id="smollm2-135m")  # a fresh data dir: the fix is the import
        with pytest.raises(ValueError, match="candidate, promoted, retired"):
            repo.set_model_status(session, version_id="child", status="great")


def test_llm_calls_and_usage(db: Database) -> None:
    with db.session() as session:
        repo.record_llm_call(
            session, role="executor", model="m", prompt_tokens=10, completion_tokens=5, latency_s=0.1, run_id="r1"
        )
        repo.record_llm_call(
            session,
            role="critic",
            model="m",
            prompt_tokens=3,
            completion_tokens=2,
            latency_s=0.1,
            run_id="r1",
            ok=False,
            error="boom",
        )
        repo.record_llm_call(session, role="critic", model="m", prompt_tokens=100, completion_tokens=2, latency_s=0.1)
    with db.session() as session:
        usage = repo.llm_usage(session, run_id="r1")
        assert (usage["calls"], usage["prompt_tokens"], usage["completion_tokens"]) == (2, 13, 7)


def test_events_are_monotonic_and_replayable(db: Database) -> None:
    with db.session() as session:
        ids = [repo.append_event(session, type="tick", payload={"i": i}, run_id="r").id for i in range(5)]
        repo.append_event(session, type="other", payload={}, run_id="q")
    assert ids == sorted(ids)
    with db.session() as session:
        replay = repo.events_after(session, after_id=ids[1], run_id="r")
        assert [event.payload["i"] for event in replay] == [2, 3, 4]


def test_harness_lineage_and_runs(db: Database) -> None:
    with db.session() as session:
        repo.add_harness(session, harness_id="h1", spec={"temperature": 0}, digest="d1", environment="arithmetic")
        repo.add_harness(session, harness_id="h2", spec={"temperature": 0.5}, digest="d2", parent_id="h1")
        assert repo.get_harness(session, harness_id="h2").parent_id == "h1"
        run = repo.create_run(session, config={"generations": 3})
        repo.set_run_status(session, run_id=run.id, status="finished")
        assert repo.get_run(session, run_id=run.id).finished_at is not None
        with pytest.raises(repo.NotFound, match="lamarck runs list"):
            repo.get_run(session, run_id="missing")


def test_failed_unit_of_work_changes_nothing(db: Database) -> None:
    with pytest.raises(RuntimeError):
        with db.session() as session:
            repo.add_task(session, environment="arithmetic", difficulty=1, prompt="x")
            raise RuntimeError("boom")
    with db.session() as session:
        from sqlalchemy import func, select

        from lamarck.platform.storage.records import Task

        assert session.scalar(select(func.count(Task.id))) == 0


def test_stored_tasks_share_the_curriculum_fingerprint(db: Database) -> None:
    from lamarck.curriculum.environment import TaskSpec

    spec = TaskSpec(environment="arithmetic", difficulty=1, prompt="  What is\n2 + 2?  ")
    with db.session() as session:
        stored = repo.add_task(session, environment="arithmetic", difficulty=1, prompt="what is 2 + 2?")
        assert stored.fingerprint == spec.fingerprint

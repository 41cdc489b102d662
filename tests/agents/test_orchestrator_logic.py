"""The evolution loop with scripted models on every role: a full run, events, summaries, budget and stop."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from sqlalchemy import func, select
from test_orchestrator_support import scripted_orchestrator, small_config

from lamarck.agents.checkpoints import STATE_MODELS, open_checkpointer, state_serializer
from lamarck.agents.runs import Budget, RunError, request_stop
from lamarck.curriculum.environment import TaskSpec
from lamarck.curriculum.registry import UnknownEnvironment
from lamarck.platform.events import EventBus
from lamarck.platform.storage import repositories as repo
from lamarck.platform.storage.database import Database
from lamarck.platform.storage.records import CapabilityCell, Episode, Lesson, Run, Task, Verdict
from lamarck.training import registry


class Recorder:
    def __init__(self) -> None:
        self.events: list[str] = []
        self.nodes: list[tuple[str, int, bool]] = []

    def on_event(self, event) -> None:  # type: ignore[no-untyped-def]
        self.events.append(event.type)

    def on_node(self, node: str, generation: int, finished: bool) -> None:
        self.nodes.append((node, generation, finished))


def test_full_run_records_everything_once(sqlite_db: Database, tmp_path: Path) -> None:
    recorder = Recorder()
    with scripted_orchestrator(sqlite_db, tmp_path, listener=recorder, builtins=True) as orchestrator:
        run_id = orchestrator.start(small_config())
        outcome = orchestrator.run(run_id)
    assert outcome.status == "finished" and outcome.generations_done == 2
    with sqlite_db.session() as session:
        run = session.get(Run, run_id)
        assert run.finished_at is not None and set(run.summary["generations"]) == {"0", "1"}
        assert session.scalar(select(func.count()).select_from(Task).where(Task.run_id == run_id)) == 8
        originals = list(
            session.scalars(select(Episode).where(Episode.run_id == run_id, Episode.repaired_from_id.is_(None)))
        )
        assert len(originals) == 16
        assert len({(e.task_id, e.sample_index) for e in originals}) == 16
        verdicts = Counter(v.episode_id for v in session.scalars(select(Verdict)))
        assert set(verdicts) == {e.id for e in originals} and set(verdicts.values()) == {1}
        cells = list(session.scalars(select(CapabilityCell)))
        assert sum(c.attempts for c in cells) == 16
        assert sum(c.successes for c in cells) == sum(e.outcome == "passed" for e in originals)
        lessons = [lesson.text for lesson in session.scalars(select(Lesson).where(Lesson.status == "active"))]
        assert lessons and len(lessons) == len(set(lessons))  # a retired lesson may be learned again
    counts = Counter(recorder.events)
    assert counts["run_started"] == 1 and counts["run_finished"] == 1
    assert counts["tasks_proposed"] == 2 and counts["generation_summary"] == 2
    assert counts["episode_finished"] == 16 and counts["verdict"] == 16 and counts["lesson"] >= 1
    finished = [n for n, g, done in recorder.nodes if done and g == 0]
    assert finished[:3] == ["propose", "execute", "critique"] and set(finished[3:5]) == {"induce", "assess"}
    assert finished[5:] == ["record"]
    summary = outcome.summaries[0]
    assert summary.attempts == 8 and summary.cells and summary.cells[0].environment == "arithmetic"
    assert summary.tokens > 0 and summary.wall_seconds >= summary.agent_seconds > 0
    assert summary.embedded_texts >= 4 and summary.embedding_seconds > 0  # 4 prompts, then lessons; cache hits free
    assert summary.embedding_seconds_per_episode == pytest.approx(summary.embedding_seconds / summary.attempts)


def test_events_replay_from_an_id(sqlite_db: Database, tmp_path: Path) -> None:
    with scripted_orchestrator(sqlite_db, tmp_path) as orchestrator:
        run_id = orchestrator.start(small_config(generations=1, batch_size=2, samples_per_task=1))
        orchestrator.run(run_id)
    bus = EventBus(sqlite_db)
    events = bus.replay(run_id=run_id)
    assert events[0].type == "run_started" and events[-1].type == "run_finished"
    assert [e.id for e in events] == sorted(e.id for e in events)
    middle = events[len(events) // 2].id
    later = bus.replay(run_id=run_id, after_id=middle)
    assert [e.id for e in later] == [e.id for e in events if e.id > middle]


def test_budget_stops_the_run_cleanly(sqlite_db: Database, tmp_path: Path) -> None:
    with scripted_orchestrator(sqlite_db, tmp_path) as orchestrator:
        run_id = orchestrator.start(small_config(generations=5, budget=Budget(max_tokens=1)))
        outcome = orchestrator.run(run_id)
        assert outcome.status == "budget_exhausted" and outcome.generations_done == 1
        with pytest.raises(RunError, match="nothing to resume"):
            orchestrator.resume(run_id)
    types = [e.type for e in EventBus(sqlite_db).replay(run_id=run_id)]
    assert types[-1] == "budget_exhausted" and "generation_summary" in types


def test_stop_request_is_honoured_between_nodes_and_resume_finishes(sqlite_db: Database, tmp_path: Path) -> None:
    class StopAfterExecute(Recorder):
        def on_node(self, node: str, generation: int, finished: bool) -> None:
            if node == "execute" and finished and generation == 0:
                assert request_stop(sqlite_db, self.run_id) == "stopping"

    listener = StopAfterExecute()
    with scripted_orchestrator(sqlite_db, tmp_path, listener=listener) as orchestrator:
        listener.run_id = run_id = orchestrator.start(small_config(generations=1))
        outcome = orchestrator.run(run_id)
        assert outcome.status == "stopped" and outcome.generations_done == 0
        with sqlite_db.session() as session:
            assert session.scalar(select(func.count()).select_from(Verdict)) == 0
            episodes = session.scalar(select(func.count()).select_from(Episode))
        assert episodes == 8
        outcome = orchestrator.resume(run_id)
    assert outcome.status == "finished" and outcome.generations_done == 1
    with sqlite_db.session() as session:
        assert session.scalar(select(func.count()).select_from(Episode).where(Episode.repaired_from_id.is_(None))) == 8
        assert session.scalar(select(func.count()).select_from(Verdict)) == 8


def test_bad_configs_change_nothing(sqlite_db: Database, tmp_path: Path) -> None:
    with scripted_orchestrator(sqlite_db, tmp_path) as orchestrator:
        with pytest.raises(UnknownEnvironment, match="unknown environment 'chess'"):
            orchestrator.start(small_config(environments=["chess"]))
        with pytest.raises(RunError, match="evaluation-only"):
            orchestrator.start(small_config(environments=["humaneval"]))
        with pytest.raises(repo.NotFound, match="no harness"):
            orchestrator.start(small_config(harnesses={"arithmetic": "nope"}))
        with pytest.raises(repo.NotFound):
            orchestrator.resume("0" * 32)
    with sqlite_db.session() as session:
        assert session.scalar(select(func.count()).select_from(Run)) == 0


def test_a_run_that_follows_the_champion_switches_versions_between_generations(
    sqlite_db: Database, tmp_path: Path
) -> None:
    class Promoter(Recorder):
        """Promotes a distilled version as soon as the first generation is recorded."""

        def on_node(self, node: str, generation: int, finished: bool) -> None:
            if node == "record" and generation == 0 and finished:
                with sqlite_db.session() as session:
                    repo.register_model_version(session, version_id="child", base="smollm2-135m", parent_id=None)
                    repo.set_model_status(session, version_id="child", status="promoted")

    with sqlite_db.session() as session:
        repo.register_model_version(session, version_id="smollm2-135m", base="smollm2-135m", status="promoted")
    with scripted_orchestrator(sqlite_db, tmp_path, listener=Promoter()) as orchestrator:
        run_id = orchestrator.start(small_config(follow_champion=True))
        assert orchestrator.run(run_id).status == "finished"
    with sqlite_db.session() as session:
        by_generation = {
            (e.generation, e.model_version)
            for e in session.scalars(
                select(Episode).where(Episode.run_id == run_id, Episode.repaired_from_id.is_(None))
            )
        }
    assert by_generation == {(0, "smollm2-135m"), (1, "child")}


@pytest.mark.parametrize(("policy", "second"), [("better_candidate", "unproven"), ("champion", "smollm2-135m")])
def test_a_refused_candidate_better_on_dev_rolls_out_while_the_champion_stays(
    sqlite_db: Database, tmp_path: Path, policy: str, second: str
) -> None:
    class Gate(Recorder):
        """Records a refused candidate that was better on the dev slice as soon as the first generation is recorded."""

        def on_node(self, node: str, generation: int, finished: bool) -> None:
            if node == "record" and generation == 0 and finished:
                with sqlite_db.session() as session:
                    repo.register_model_version(
                        session,
                        version_id="unproven",
                        base="smollm2-135m",
                        parent_id="smollm2-135m",
                        status="candidate",
                    )
                    registry.record_decision(
                        session, version_id="unproven", scores={"dev_better": True}, reason="not significantly better"
                    )

    with sqlite_db.session() as session:
        repo.register_model_version(session, version_id="smollm2-135m", base="smollm2-135m", status="promoted")
    with scripted_orchestrator(sqlite_db, tmp_path, listener=Gate()) as orchestrator:
        run_id = orchestrator.start(small_config(follow_champion=True, rollout_sampler=policy))
        assert orchestrator.run(run_id).status == "finished"
    with sqlite_db.session() as session:
        by_generation = {
            (e.generation, e.model_version)
            for e in session.scalars(
                select(Episode).where(Episode.run_id == run_id, Episode.repaired_from_id.is_(None))
            )
        }
        assert registry.champion(session) == "smollm2-135m"
    assert by_generation == {(0, "smollm2-135m"), (1, second)}


def test_a_checkpoint_written_with_plain_dict_specs_resumes(sqlite_db: Database, tmp_path: Path) -> None:
    """Runs checkpointed before RunState held TaskSpec models stored specs as dicts and a ``config`` key: stop a run
    after its rollouts, rewrite its last checkpoint in that old shape, and resume it to the end."""

    class StopAfterExecute(Recorder):
        def on_node(self, node: str, generation: int, finished: bool) -> None:
            if node == "execute" and finished and generation == 0:
                request_stop(sqlite_db, self.run_id)

    listener = StopAfterExecute()
    with scripted_orchestrator(sqlite_db, tmp_path, listener=listener) as orchestrator:
        listener.run_id = run_id = orchestrator.start(small_config(generations=2))
        assert orchestrator.run(run_id).status == "stopped"
        with open_checkpointer(sqlite_db, tmp_path) as saver:
            last = saver.get_tuple({"configurable": {"thread_id": run_id}})
            assert last is not None and last.parent_config is not None
            values = last.checkpoint["channel_values"]
            assert all(isinstance(item["spec"], TaskSpec) for item in values["tasks"])
            values["tasks"] = [{**item, "spec": item["spec"].model_dump(mode="json")} for item in values["tasks"]]
            values["config"] = small_config(generations=2).model_dump(mode="json")
            saver.put(last.parent_config, last.checkpoint, last.metadata, {})
            rewritten = saver.get_tuple({"configurable": {"thread_id": run_id}})
            assert rewritten is not None
            assert isinstance(rewritten.checkpoint["channel_values"]["tasks"][0]["spec"], dict)
        outcome = orchestrator.resume(run_id)
    assert outcome.status == "finished" and outcome.generations_done == 2
    with sqlite_db.session() as session:
        assert session.scalar(select(func.count()).select_from(Episode).where(Episode.repaired_from_id.is_(None))) == 16
        assert session.scalar(select(func.count()).select_from(Verdict)) == 16


def test_the_checkpointer_revives_the_task_specs_it_was_told_of() -> None:
    serde = state_serializer()
    spec = TaskSpec(environment="arithmetic", difficulty=2, prompt="2 + 2?", reference={"answer": 4})
    revived = serde.loads_typed(serde.dumps_typed({"tasks": [{"task_id": "t", "source": "procedural", "spec": spec}]}))
    assert revived["tasks"][0]["spec"] == spec and isinstance(revived["tasks"][0]["spec"], TaskSpec)
    assert STATE_MODELS == (TaskSpec,)

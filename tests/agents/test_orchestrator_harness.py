"""The harness-critic as a node of the loop (scripted models): it runs every K episodes, archives its round under the
run, is not held twice when the run is killed after it and resumed, and the next episodes run under the promoted
harness unless the run pins one."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from sqlalchemy import select
from test_orchestrator_support import scripted_orchestrator, small_config

from lamarck.agents import nodes
from lamarck.agents.evaluation import default_harness_for
from lamarck.agents.harness import save_harness
from lamarck.agents.harness_archive import lineage_rows, promote_harness, round_done
from lamarck.curriculum.registry import get_environment
from lamarck.platform.settings import HarnessCriticSettings
from lamarck.platform.storage.database import Database
from lamarck.platform.storage.records import Episode, Harness

SMALL_ROUND = HarnessCriticSettings(
    dev_per_level=1,
    knob_proposals=1,
    demonstration_proposals=0,
    rewrite_proposals=1,
    early_tasks=2,
    keep=1,
    budget_tasks=40,
)


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, dict]] = []  # type: ignore[type-arg]
        self.nodes: list[tuple[str, int]] = []

    def on_event(self, event) -> None:  # type: ignore[no-untyped-def]
        self.events.append((event.type, event.payload))

    def on_node(self, node: str, generation: int, finished: bool) -> None:
        if finished:
            self.nodes.append((node, generation))


def _harness_of_episodes(db: Database, run_id: str) -> dict[int, set[str | None]]:
    with db.session() as session:
        found: dict[int, set[str | None]] = {}
        for episode in session.scalars(select(Episode).where(Episode.run_id == run_id)):
            found.setdefault(episode.generation, set()).add(episode.harness_version)
        return found


def test_a_round_runs_every_k_episodes_and_is_archived_under_the_run(sqlite_db: Database, tmp_path: Path) -> None:
    recorder = Recorder()
    with scripted_orchestrator(sqlite_db, tmp_path, listener=recorder, harness_critic=SMALL_ROUND) as orchestrator:
        run_id = orchestrator.start(
            small_config(generations=3, batch_size=2, samples_per_task=1, harness_critic_every=4)
        )
        outcome = orchestrator.run(run_id)
    assert outcome.status == "finished" and outcome.generations_done == 3
    # 2 episodes a generation: due after generation 1 (4 episodes), not after the last generation
    assert [node for node in recorder.nodes if node[0] == "improve_harness"] == [("improve_harness", 2)]
    rounds = [payload for kind, payload in recorder.events if kind == "harness_round"]
    assert len(rounds) == 1 and rounds[0]["environment"] == "arithmetic" and rounds[0]["round"] == 0
    assert rounds[0]["tasks_evaluated"] <= SMALL_ROUND.budget_tasks
    assert rounds[0]["challengers"] + rounds[0]["invalid"] >= 2  # the knob move and the scripted (junk) rewrite
    with sqlite_db.session() as session:
        assert round_done(session, "arithmetic", run_id=run_id, round_=0)
        assert not round_done(session, "arithmetic", run_id="another run", round_=0)
        promoted = session.scalar(select(Harness.id).where(Harness.status == "promoted"))
        games = [
            (record.id, game)
            for record in session.scalars(select(Harness))
            for game in (record.eval_scores or {}).get("games", [])
        ]
        assert len(games) == rounds[0]["challengers"]
        assert all(game["vs"] == rounds[0]["champion"] and game["run"] == run_id for _, game in games)
        assert {row["id"] for row in lineage_rows(session, "arithmetic")} == {
            rounds[0]["champion"],
            *(harness for harness, _ in games),
        }
    assert promoted == rounds[0]["promoted"] or (rounds[0]["promoted"] is None and promoted == rounds[0]["champion"])
    assert _harness_of_episodes(sqlite_db, run_id)[2] == {promoted}


def test_a_run_without_the_setting_never_holds_a_round(sqlite_db: Database, tmp_path: Path) -> None:
    recorder = Recorder()
    with scripted_orchestrator(sqlite_db, tmp_path, listener=recorder) as orchestrator:
        run_id = orchestrator.start(small_config(generations=2, batch_size=2, samples_per_task=1))
        orchestrator.run(run_id)
    assert not [node for node in recorder.nodes if node[0] == "improve_harness"]
    with sqlite_db.session() as session:
        assert session.scalar(select(Harness.id)) is None


def test_a_round_killed_before_its_checkpoint_is_not_held_again(
    sqlite_db: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []
    real = nodes.run_round

    def then_killed(*args, **kwargs):  # type: ignore[no-untyped-def]
        out = real(*args, **kwargs)
        calls.append(kwargs["round_"])
        if len(calls) == 1:
            raise KeyboardInterrupt  # archived, but the node's checkpoint is never written
        return out

    monkeypatch.setattr(nodes, "run_round", then_killed)
    with scripted_orchestrator(sqlite_db, tmp_path, harness_critic=SMALL_ROUND) as orchestrator:
        run_id = orchestrator.start(
            small_config(generations=2, batch_size=2, samples_per_task=1, harness_critic_every=2)
        )
        with pytest.raises(KeyboardInterrupt):
            orchestrator.run(run_id)
        outcome = orchestrator.resume(run_id)
    assert outcome.status == "finished" and calls == [0]
    with sqlite_db.session() as session:
        entries = [
            entry
            for record in session.scalars(select(Harness))
            for entry in (record.eval_scores or {}).get("rounds", [])
            if entry.get("run") == run_id
        ]
    assert Counter(entry["round"] for entry in entries) == {0: 1}


def test_episodes_follow_the_promoted_harness_unless_the_run_pins_one(sqlite_db: Database, tmp_path: Path) -> None:
    default = default_harness_for(get_environment("arithmetic"))
    with sqlite_db.session() as session:
        root = save_harness(session, default, status="promoted")
        better = save_harness(session, default.derive(step_budget=default.step_budget + 1), parent_id=root)
        pinned = save_harness(session, default.derive(step_budget=default.step_budget + 2), parent_id=root)
        promote_harness(session, harness_id=better, reason="test")
    with scripted_orchestrator(sqlite_db, tmp_path) as orchestrator:
        follows = orchestrator.start(small_config(generations=1, batch_size=2, samples_per_task=1))
        orchestrator.run(follows)
        pins = orchestrator.start(
            small_config(generations=1, batch_size=2, samples_per_task=1, harnesses={"arithmetic": pinned})
        )
        orchestrator.run(pins)
    assert _harness_of_episodes(sqlite_db, follows) == {0: {better}}
    assert _harness_of_episodes(sqlite_db, pins) == {0: {pinned}}

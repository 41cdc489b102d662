"""The judge's agreement with the verifier over stored verdicts (SQLite and PostgreSQL), and the command that shows
it (``lamarck critic stats``)."""

from __future__ import annotations

import json
import re

from typer.testing import CliRunner

from lamarck.agents.critic import judge_agreement
from lamarck.agents.critic_stats import CriticStats, critic_stats
from lamarck.cli import app
from lamarck.platform.container import Container
from lamarck.platform.storage import repositories as repo
from lamarck.platform.storage.database import Database
from lamarck.platform.storage.trajectory import Trajectory

runner = CliRunner()


def _verdicts(db: Database) -> None:
    """Under h1 with model A: 3 both-pass, 2 fooled, 1 missed, 4 both-fail, and 2 verdicts from before the judge was
    blind; under h2 with model B: 1 both-pass. Verdicts without a judge verdict, or without a verifier, do not count."""
    with db.session() as session:
        task = repo.add_task(session, environment="arithmetic", difficulty=2, prompt="1 + 1")

        def judged(
            model: str, harness: str, judge: bool | None, verifier: bool, *, blind: bool = True, source: str = "both"
        ) -> None:
            episode = repo.record_episode(
                session, task_id=task.id, model_version="m", harness_version=harness, trajectory=Trajectory()
            )
            details = {"judge_blind": True, "verifier_passed": verifier, "agree": judge == verifier} if blind else {}
            repo.add_verdict(
                session,
                episode_id=episode.id,
                reward=float(verifier),
                passed=verifier,
                source=source,
                judge_passed=judge,
                critic_model=model,
                details=details,
            )

        for judge, verifier, count in [(True, True, 3), (True, False, 2), (False, True, 1), (False, False, 4)]:
            for _ in range(count):
                judged("A", "h1", judge, verifier)
        judged("A", "h1", True, True, blind=False)
        judged("A", "h1", True, False, blind=False)
        judged("B", "h2", True, True)
        judged("A", "h1", None, True, source="verifier")
        judged("A", "h1", True, True, source="judge")


def test_agreement_precision_and_recall_per_model_and_harness(db: Database) -> None:
    with db.session() as session:
        assert critic_stats(session) == CriticStats.model_validate({"groups": [], "total": {**_zero(None, None)}})
    _verdicts(db)
    with db.session() as session:
        stats = critic_stats(session)
        everything = critic_stats(session, include_unblinded=True)
        older = judge_agreement(session)
    a, b = stats.groups
    assert (a.critic_model, a.harness_version, b.critic_model, b.harness_version) == ("A", "h1", "B", "h2")
    counts = (a.judged, a.true_pass, a.false_pass, a.false_fail, a.true_fail, a.unblinded)
    assert counts == (10, 3, 2, 1, 4, 2)
    assert (a.agreement, a.precision, a.recall) == (0.7, 0.6, 0.75)
    assert (b.judged, b.agreement, b.precision, b.recall) == (1, 1.0, 1.0, 1.0)
    total = stats.total
    assert (total.critic_model, total.judged, total.true_pass, total.unblinded) == (None, 11, 4, 2)
    assert (total.precision, total.recall) == (4 / 6, 0.8)
    # every judged verdict, those from before the judge was blind too: the older reading judge_flags keeps
    assert (everything.groups[0].judged, everything.groups[0].unblinded, everything.groups[0].agreement) == (
        12,
        0,
        8 / 12,
    )
    assert older == [
        {"critic_model": "A", "harness_version": "h1", "n": 12, "agreement": 8 / 12},
        {"critic_model": "B", "harness_version": "h2", "n": 1, "agreement": 1.0},
    ]


def _zero(model: str | None, harness: str | None) -> dict[str, object]:
    return {
        "critic_model": model,
        "harness_version": harness,
        "judged": 0,
        "true_pass": 0,
        "false_pass": 0,
        "false_fail": 0,
        "true_fail": 0,
        "unblinded": 0,
        "agreement": None,
        "precision": None,
        "recall": None,
    }


def test_critic_stats_command() -> None:
    assert runner.invoke(app, ["init"]).exit_code == 0
    empty = runner.invoke(app, ["critic", "stats"])
    assert empty.exit_code == 0 and "no judged verdicts yet" in empty.output
    container = Container()
    try:
        _verdicts(container.db)
    finally:
        container.close()
    shown = runner.invoke(app, ["critic", "stats"], env={"COLUMNS": "200"})
    assert shown.exit_code == 0, shown.output
    rows = [line for line in shown.output.splitlines() if " h1 " in line or " h2 " in line or " all " in line]
    assert len(rows) == 3, shown.output
    assert re.findall(r"[A-Za-z0-9%.-]+", rows[0]) == ["A", "h1", "10", "70%", "60%", "75%", "3", "2", "1", "4", "2"]
    as_json = runner.invoke(app, ["critic", "stats", "--json"])
    assert as_json.exit_code == 0
    stats = CriticStats.model_validate(json.loads(as_json.output))
    assert [g.judged for g in stats.groups] == [10, 1] and stats.total.judged == 11

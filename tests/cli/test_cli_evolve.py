"""``lamarck evolve``, ``runs`` and ``eval`` end to end through Typer, with scripted models on every role."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer
from sqlalchemy import func, select
from typer.testing import CliRunner

from lamarck.commands.evolve import eval_command, evolve, runs_app
from lamarck.platform.settings import ROLES
from lamarck.platform.storage.database import Database
from lamarck.platform.storage.records import Evaluation, Run
from lamarck.testing import ScriptedLLM, scripted_provider

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "agents"))
from test_orchestrator_support import responder  # noqa: E402

app = typer.Typer()
app.command("evolve")(evolve)
app.command("eval")(eval_command)
app.add_typer(runs_app, name="runs")
runner = CliRunner()


@pytest.fixture
def scripted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("LAMARCK_DATA_DIR", str(tmp_path / "data"))
    for role in ROLES:
        monkeypatch.setenv(f"LAMARCK_MODELS__{role.upper()}__MODEL", f"scripted/{role}")
    with scripted_provider(ScriptedLLM(responder())):
        yield tmp_path / "data"


def _one_line_error(args: list[str], expected: str) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert expected in result.output, result.output
    assert result.output.strip().count("\n") == 0, result.output


def _runs(data_dir: Path) -> int:
    db = Database(f"sqlite:///{data_dir / 'lamarck.db'}")
    try:
        with db.session() as session:
            return session.scalar(select(func.count()).select_from(Run)) or 0
    finally:
        db.dispose()


def test_evolve_then_runs_list_show_events_and_resume_refused(scripted: Path) -> None:
    result = runner.invoke(
        app,
        [
            "evolve",
            "--env",
            "arithmetic",
            "--generations",
            "1",
            "--batch",
            "3",
            "--samples",
            "1",
            "--llm-share",
            "0",
            "--name",
            "smoke",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "finished after 1 generation" in result.output and "generation 1" in result.output
    run_id = re.search(r"run ([0-9a-f]{32})", result.output).group(1)

    listed = runner.invoke(app, ["runs", "list"])
    assert (
        listed.exit_code == 0 and run_id in listed.output and "finished" in listed.output and "smoke" in listed.output
    )
    shown = runner.invoke(app, ["runs", "show", run_id])
    assert shown.exit_code == 0 and "arithmetic" in shown.output and "LLM usage" in shown.output

    events = runner.invoke(app, ["runs", "events", run_id])
    lines = [json.loads(line) for line in events.output.splitlines()]
    assert lines[0]["type"] == "run_started" and lines[-1]["type"] == "run_finished"
    after = runner.invoke(app, ["runs", "events", run_id, "--after", str(lines[2]["id"])])
    assert [json.loads(line)["id"] for line in after.output.splitlines()] == [e["id"] for e in lines[3:]]

    _one_line_error(["runs", "resume", run_id], "is finished: there is nothing to resume")
    _one_line_error(["runs", "stop", run_id], "only a pending or running run can be stopped")
    assert _runs(scripted) == 1


def test_evolve_holds_harness_critic_rounds_when_asked(scripted: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in {
        "DEV_PER_LEVEL": "1",
        "KNOB_PROPOSALS": "1",
        "DEMONSTRATION_PROPOSALS": "0",
        "REWRITE_PROPOSALS": "0",
        "EARLY_TASKS": "2",
        "BUDGET_TASKS": "30",
    }.items():
        monkeypatch.setenv(f"LAMARCK_HARNESS_CRITIC__{key}", value)
    result = runner.invoke(
        app,
        [
            "evolve",
            "--env",
            "arithmetic",
            "--generations",
            "2",
            "--batch",
            "3",
            "--samples",
            "1",
            "--llm-share",
            "0",
            "--harness-every",
            "3",
        ],
    )
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert "harness-critic round 0 on arithmetic: 1 challengers" in said, said
    assert "finished after 2 generation(s)" in said, said


def test_bad_input_is_one_line_and_changes_nothing(scripted: Path) -> None:
    _one_line_error(["evolve", "--env", "chess"], "unknown environment 'chess'")
    _one_line_error(["evolve", "--env", "humaneval"], "evaluation-only")
    _one_line_error(["evolve", "--max-tokens", "-5"], "budget.max_tokens")
    _one_line_error(["evolve", "--max-seconds", "-1"], "budget.max_seconds")
    _one_line_error(["evolve", "--batch", "0"], "batch_size")
    _one_line_error(["evolve", "--harness-every", "-1"], "harness_critic_every")
    _one_line_error(["evolve", "--harness", "arithmetic"], "ENV=HARNESS_VERSION")
    _one_line_error(["runs", "resume", "0" * 32], "no run")
    _one_line_error(["runs", "stop", "0" * 32], "no run")
    _one_line_error(["runs", "show", "nope"], "no run")
    _one_line_error(["eval", "--env", "chess"], "unknown environment")
    _one_line_error(["eval", "--harness", "nope"], "no harness")
    _one_line_error(["eval", "--per-level", "99"], "per_level must be 1..50")
    assert _runs(scripted) == 0


def test_unknown_model_version_on_the_local_route(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAMARCK_DATA_DIR", str(tmp_path / "data"))
    _one_line_error(["evolve", "--model", "nope"], "no model version 'nope'")
    _one_line_error(["eval", "--model", "nope"], "no model version 'nope'")
    assert _runs(tmp_path / "data") == 0


def test_eval_is_repeatable_and_stored(scripted: Path) -> None:
    first = runner.invoke(app, ["eval", "--env", "arithmetic", "--per-level", "1"])
    assert first.exit_code == 0, first.output
    second = runner.invoke(app, ["eval", "--env", "arithmetic", "--per-level", "1"])
    assert second.exit_code == 0, second.output
    humaneval = runner.invoke(app, ["eval", "--env", "humaneval", "--limit", "2"])
    assert humaneval.exit_code == 0, humaneval.output
    db = Database(f"sqlite:///{scripted / 'lamarck.db'}")
    with db.session() as session:
        evaluations = list(session.scalars(select(Evaluation).order_by(Evaluation.created_at)))
    db.dispose()
    assert len(evaluations) == 3
    a, b, h = evaluations
    assert a.eval_set == b.eval_set and a.eval_set.startswith("arithmetic-heldout-v2/pl1@")
    assert a.per_task == b.per_task and a.score == b.score and a.n_tasks == 9
    assert h.environment == "humaneval" and h.n_tasks == 2 and h.score == 0.0
    assert f"score {a.score:.3f}" in first.output


def test_eval_judges_the_release_harness_unless_told_otherwise(scripted: Path) -> None:
    from lamarck.agents.evaluation import default_harness_for
    from lamarck.agents.harness import save_harness
    from lamarck.agents.harness_archive import promote_harness
    from lamarck.curriculum.registry import get_environment

    assert runner.invoke(app, ["eval", "--env", "arithmetic", "--per-level", "1"]).exit_code == 0  # makes the db
    default = default_harness_for(get_environment("arithmetic"))
    served = default.derive(step_budget=default.step_budget + 1)
    db = Database(f"sqlite:///{scripted / 'lamarck.db'}")
    try:
        with db.session() as session:
            save_harness(session, served, parent_id=save_harness(session, default, status="promoted"))
            promote_harness(session, harness_id=served.version_id, reason="test")
    finally:
        db.dispose()
    release = runner.invoke(app, ["eval", "--env", "arithmetic", "--per-level", "1"])
    assert release.exit_code == 0 and f"harness{served.version_id}" in "".join(release.output.split())
    root = runner.invoke(app, ["eval", "--env", "arithmetic", "--per-level", "1", "--harness", "default"])
    assert root.exit_code == 0 and f"harness{default.version_id}" in "".join(root.output.split())

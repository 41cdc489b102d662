"""``lamarck models promote|rollback|show|gate`` and ``lamarck train`` through Typer, on a real SQLite database."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from lamarck.commands.training import register_model_commands, train_command
from lamarck.platform.storage.database import Database
from lamarck.platform.storage.records import ModelVersion
from lamarck.testing import ScriptedLLM, scripted_provider
from lamarck.training import registry


@pytest.fixture
def cli(tmp_path: Path, sqlite_db: Database, monkeypatch: pytest.MonkeyPatch) -> typer.Typer:
    monkeypatch.setenv("LAMARCK_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("LAMARCK_DATABASE_URL", sqlite_db.url)
    app = typer.Typer()
    models = typer.Typer()
    register_model_commands(models)
    app.add_typer(models, name="models")
    app.command("train")(train_command)
    with sqlite_db.session() as session:
        registry.ensure_base_registered(session)
        registry.register_candidate(
            session,
            version_id="gen1",
            base="smollm2-135m",
            adapter_path=None,
            parent_id="smollm2-135m",
            dataset_digest="d" * 64,
            training_metrics={},
        )
    return app


def test_promote_show_rollback(cli: typer.Typer) -> None:
    runner = CliRunner()
    result = runner.invoke(cli, ["models", "promote", "gen1"])
    assert result.exit_code == 0, result.output
    assert "promoted gen1" in result.output and "smollm2-135m" in result.output
    shown = runner.invoke(cli, ["models", "show", "gen1"])
    assert shown.exit_code == 0 and '"status": "promoted"' in shown.output
    back = runner.invoke(cli, ["models", "rollback"])
    assert back.exit_code == 0 and "champion is now smollm2-135m" in back.output
    missing = runner.invoke(cli, ["models", "show", "nope"])
    assert missing.exit_code == 2 and "no model version 'nope'" in missing.output


def test_train_with_no_new_episodes_is_a_one_line_outcome(cli: typer.Typer) -> None:
    result = CliRunner().invoke(cli, ["train", "--now"])
    assert result.exit_code == 2
    assert "no new verified episodes since smollm2-135m" in result.output
    queued = CliRunner().invoke(cli, ["train"])
    assert queued.exit_code == 0 and "not queued: 0 new verified episodes" in queued.output


def test_models_gate_judges_a_candidate_once_and_refuses_what_is_not_one(
    cli: typer.Typer, sqlite_db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LAMARCK_MODELS__EXECUTOR__MODEL", "scripted/executor")
    monkeypatch.setenv("LAMARCK_TRAINING__GATE_PER_LEVEL", "1")
    monkeypatch.setenv("LAMARCK_TRAINING__GATE_ENVIRONMENTS", "[]")
    runner = CliRunner()
    refused = runner.invoke(cli, ["models", "gate", "smollm2-135m"])
    assert refused.exit_code == 2 and "is promoted, not a candidate" in refused.output
    assert refused.output.strip().count("\n") == 0

    with sqlite_db.session() as session:
        session.get(ModelVersion, "gen1").training_metrics = {"environments": ["arithmetic"]}
    with scripted_provider(ScriptedLLM(lambda messages, n: ["ANSWER: -1"] * n)):  # as wrong as the champion
        judged = runner.invoke(cli, ["models", "gate"])
        assert judged.exit_code == 0, judged.output
        assert "gen1 kept as candidate" in judged.output and "not better on its environments" in judged.output
        again = runner.invoke(cli, ["models", "gate"])
    assert again.exit_code == 0 and "no undecided candidates" in again.output
    with sqlite_db.session() as session:
        assert registry.champion(session) == "smollm2-135m"
        assert session.get(ModelVersion, "gen1").eval_scores["gate"]["arithmetic"]["n"] == 9

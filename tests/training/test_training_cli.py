"""``lamarck models promote|rollback|show`` and ``lamarck train`` through Typer, on a real SQLite database."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from lamarck.commands.training import register_model_commands, train_command
from lamarck.platform.storage.database import Database
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
        registry.register_candidate(session, version_id="gen1", base="smollm2-135m", adapter_path=None,
                                    parent_id="smollm2-135m", dataset_digest="d" * 64, training_metrics={})
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

"""The command line: set-up and bad input (one line, non-zero exit, nothing written)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from lamarck.cli import app

runner = CliRunner()


def _one_error_line(output: str) -> str:
    lines = [line for line in output.strip().splitlines() if line.strip()]
    assert len(lines) == 1, output
    assert lines[0].startswith("error:")
    return lines[0]


def test_init_creates_config_data_dir_and_schema(tmp_path: Path) -> None:
    result = runner.invoke(app, ["init"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "lamarck.toml").is_file()
    assert (tmp_path / ".lamarck" / "lamarck.db").is_file()
    again = runner.invoke(app, ["init"])
    assert again.exit_code == 0 and "wrote" not in again.output


def test_models_list_on_an_empty_store_says_what_to_do() -> None:
    result = runner.invoke(app, ["models", "list"])
    assert result.exit_code == 0
    assert "lamarck models import-default" in result.output


def test_unknown_role_is_one_line(tmp_path: Path) -> None:
    result = runner.invoke(app, ["chat", "--role", "planner", "hello"])
    assert result.exit_code == 2
    assert "unknown role 'planner'" in _one_error_line(result.output)
    assert not (tmp_path / ".lamarck").exists()


def test_malformed_settings_are_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("LAMARCK_ENGINE__MAX_BATCH_SIZE", "zero")
    result = runner.invoke(app, ["models", "list"])
    assert result.exit_code == 2
    assert "LAMARCK_ENGINE__MAX_BATCH_SIZE" in _one_error_line(result.output)
    assert not (tmp_path / ".lamarck").exists()


def test_unreachable_database_is_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("LAMARCK_DATABASE_URL", "postgresql://nobody@127.0.0.1:1/lamarck")
    result = runner.invoke(app, ["models", "list"])
    assert result.exit_code == 2
    assert "LAMARCK_DATABASE_URL" in _one_error_line(result.output)
    assert not (tmp_path / ".lamarck").exists()


def test_serve_refuses_an_unreachable_rate_limit_redis_before_saying_it_serves(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("LAMARCK_API__RATE_LIMIT_PER_SECOND", "1")
    monkeypatch.setenv("LAMARCK_API__RATE_LIMIT_REDIS_URL", "redis://127.0.0.1:1/0")  # nothing listens on port 1
    result = runner.invoke(app, ["serve", "--port", "1"])
    assert result.exit_code != 0
    assert "LAMARCK_API__RATE_LIMIT_REDIS_URL" in _one_error_line(result.output)
    assert "serving" not in result.output

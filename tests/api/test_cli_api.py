"""``lamarck keys``, ``lamarck solve`` and ``lamarck serve`` against the test databases, with the scripted model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from lamarck.api.keys import authenticate
from lamarck.cli import app
from lamarck.platform.storage import api_repositories as api_repo
from lamarck.platform.storage import repositories as repo
from lamarck.platform.storage.database import Database
from lamarck.testing import ScriptedLLM, scripted_provider

from .conftest import Model

runner = CliRunner()


@pytest.fixture
def cli_db(db: Database, model: Model, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Database:
    monkeypatch.setenv("LAMARCK_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("LAMARCK_DATABASE_URL", db.url)
    monkeypatch.setenv("LAMARCK_MODELS__EXECUTOR__MODEL", "scripted/executor")
    with db.session() as session:
        repo.register_model_version(session, version_id="smollm2-135m", base="smollm2-135m", status="promoted")
    return db


def _one_error_line(output: str, expected: str) -> None:
    lines = [line for line in output.strip().splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and expected in lines[0], output


def test_keys_create_shows_the_key_once_list_never_and_revoke_ends_it(cli_db: Database) -> None:
    created = runner.invoke(app, ["keys", "create", "--scope", "read,tasks", "--name", "ci"])
    assert created.exit_code == 0, created.output
    key = next(line for line in created.output.splitlines() if line.startswith("lmk_"))
    principal = authenticate(cli_db, key)
    assert principal is not None and {s.value for s in principal.scopes} == {"read", "tasks"}
    listed = runner.invoke(app, ["keys", "list"])
    assert principal.key_id in listed.output and "ci" in listed.output and key not in listed.output
    with cli_db.session() as session:
        assert key not in json.dumps([k.key_hash for k in api_repo.list_api_keys(session)])
    assert runner.invoke(app, ["keys", "revoke", principal.key_id]).exit_code == 0
    assert authenticate(cli_db, key) is None


def test_keys_bad_input_is_one_line(cli_db: Database) -> None:
    bad_scope = runner.invoke(app, ["keys", "create", "--scope", "root"])
    assert bad_scope.exit_code == 2
    _one_error_line(bad_scope.output, "unknown scope 'root'")
    unknown = runner.invoke(app, ["keys", "revoke", "nope"])
    assert unknown.exit_code == 2
    _one_error_line(unknown.output, "no API key 'nope'")
    with cli_db.session() as session:
        assert api_repo.list_api_keys(session) == []


def test_solve_one_task(cli_db: Database, model: Model) -> None:
    result = runner.invoke(app, ["solve", "What is 6 * 7?", "--env", "arithmetic", "--expected", "42", "--json"])
    assert result.exit_code == 0, result.output
    solved = json.loads(result.output)
    assert solved["answer"] == "42" and solved["outcome"] == "passed" and len(solved["episode_ids"]) == 1
    model.answer = "Paris"
    plain = runner.invoke(app, ["solve", "Capital of France?"])
    assert plain.exit_code == 0 and plain.output.splitlines()[0] == "Paris"


def test_solve_a_jsonl_file_writes_results_in_order(cli_db: Database, model: Model, tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    rows: list[dict[str, Any]] = [
        {"prompt": "What is 6 * 7?", "environment": "arithmetic", "expected": "42"},
        {"prompt": "What is 40 + 1?", "environment": "arithmetic", "expected": "41"},
        {"prompt": "Say 42."},
    ]
    tasks.write_text("\n".join(json.dumps(row) for row in rows) + "\n\n")
    out = tmp_path / "results.jsonl"
    result = runner.invoke(app, ["solve", "--file", str(tasks), "--out", str(out)])
    assert result.exit_code == 0, result.output
    results = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["outcome"] for r in results] == ["passed", "failed", "answered"]


def test_solve_bad_input_is_one_line_and_solves_nothing(cli_db: Database, model: Model, tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text('{"prompt": "fine"}\n{"prompt": "x", "environment": "chemistry"}\n')
    cases = [
        (["solve", "--file", str(tasks)], "task 2: unknown environment 'chemistry'"),
        (["solve"], "give either a prompt or --file"),
        (["solve", "x", "--expected", "4"], "needs an environment"),
        (["solve", "x", "--samples", "0"], "samples"),
        (["solve", "--file", str(tmp_path / "missing.jsonl")], "no file"),
    ]
    for args, expected in cases:
        result = runner.invoke(app, args)
        assert result.exit_code == 2, (args, result.output)
        _one_error_line(result.output, expected)
    tasks.write_text('{"prompt": "fine"}\n{"prompt": \n')
    _one_error_line(runner.invoke(app, ["solve", "--file", str(tasks)]).output, "line 2 is not JSON")
    assert model.calls == 0


def test_serve_binds_the_configured_loopback_by_default(cli_db: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    import uvicorn

    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kwargs: calls.append(kwargs))
    result = runner.invoke(app, ["serve"])
    assert result.exit_code == 0, result.output
    assert calls[0]["host"] == "127.0.0.1" and calls[0]["port"] == 8000
    monkeypatch.setenv("LAMARCK_API__PORT", "9123")
    runner.invoke(app, ["serve"])
    assert calls[1]["port"] == 9123


def test_runs_start_drives_a_pending_run_and_refuses_any_other(
    cli_db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    from lamarck.agents.runs import RunConfig, create_run
    from lamarck.platform.settings import ROLES

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "agents"))
    from test_orchestrator_support import responder

    for role in ROLES:
        monkeypatch.setenv(f"LAMARCK_MODELS__{role.upper()}__MODEL", f"scripted/{role}")
    config = RunConfig(environments=["arithmetic"], generations=1, batch_size=2, samples_per_task=1, llm_share=0.0)
    run_id = create_run(cli_db, config, name="api")
    with scripted_provider(ScriptedLLM(responder())):
        result = runner.invoke(app, ["runs", "start", run_id, "--no-distill"])
    assert result.exit_code == 0, result.output
    assert f"run {run_id} finished" in result.output
    with cli_db.session() as session:
        run = repo.get_run(session, run_id=run_id)
        assert run.status == "finished" and run.generations_done == 1
    again = runner.invoke(app, ["runs", "start", run_id, "--no-distill"])
    assert again.exit_code == 2
    _one_error_line(again.output, "use `lamarck runs resume")

from __future__ import annotations

from typer.testing import CliRunner

from lamarck.cli import app

runner = CliRunner()


def test_envs_list_shows_every_builtin() -> None:
    result = runner.invoke(app, ["envs", "list"])
    assert result.exit_code == 0, result.output
    for name in ("arithmetic", "python_functions", "string_ops", "humaneval"):
        assert name in result.output


def test_envs_sample_prints_tasks() -> None:
    result = runner.invoke(app, ["envs", "sample", "string_ops", "--difficulty", "2", "-n", "2"])
    assert result.exit_code == 0, result.output
    assert result.output.count("string_ops · difficulty 2 · task") == 2 and result.output.count('"') >= 4


def test_envs_sample_bad_input_is_one_line() -> None:
    for args, expected in [
        (["envs", "sample", "chess"], "unknown environment 'chess'"),
        (["envs", "sample", "arithmetic", "-d", "42"], "arithmetic has no difficulty 42: use 1..9"),
        (["envs", "sample", "humaneval"], "evaluation-only"),
    ]:
        result = runner.invoke(app, args)
        assert result.exit_code == 2, result.output
        assert expected in result.output and result.output.strip().count("\n") == 0


def test_curriculum_propose_without_the_model_and_profile() -> None:
    result = runner.invoke(app, ["curriculum", "propose", "--env", "arithmetic", "-n", "4", "--llm-share", "0"])
    assert result.exit_code == 0, result.output
    assert "procedural" in result.output and "0 accepted of 0" in result.output
    profile = runner.invoke(app, ["curriculum", "profile"])
    assert profile.exit_code == 0 and "no verified attempts yet" in profile.output


def test_curriculum_propose_refuses_eval_only_environments() -> None:
    result = runner.invoke(app, ["curriculum", "propose", "--env", "humaneval", "--llm-share", "0"])
    assert result.exit_code == 2 and "evaluation-only" in result.output

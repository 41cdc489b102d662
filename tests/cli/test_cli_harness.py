"""``lamarck harness``: the archive from the command line, and bad input as one line that changes nothing."""

from __future__ import annotations

from typer.testing import CliRunner

from lamarck.agents.harness import default_harness, save_harness
from lamarck.cli import app
from lamarck.platform.container import Container
from lamarck.platform.storage import repositories as repo

runner = CliRunner()
ROOT = default_harness("arithmetic")
CHILD = ROOT.derive(sampling={"temperature": 0.3})


def _archive() -> None:
    assert runner.invoke(app, ["init"]).exit_code == 0
    container = Container()
    try:
        with container.db.session() as session:
            save_harness(session, ROOT, status="promoted", rationale="root")
            save_harness(session, CHILD, parent_id=ROOT.version_id, status="rejected", rationale="knobs: cooler")
            repo.get_harness(session, harness_id=CHILD.version_id).eval_scores = {
                "games": [{"round": 0, "run": None, "vs": ROOT.version_id, "wins": 1, "losses": 6, "tasks": 20}]
            }
    finally:
        container.close()


def _status(harness_id: str) -> str:
    container = Container()
    try:
        with container.db.session() as session:
            return repo.get_harness(session, harness_id=harness_id).status
    finally:
        container.close()


def test_list_show_diff_promote_and_rollback() -> None:
    _archive()
    listed = runner.invoke(app, ["harness", "list", "--env", "arithmetic"])
    assert listed.exit_code == 0 and ROOT.version_id in listed.output and CHILD.version_id in listed.output
    shown = runner.invoke(app, ["harness", "show", CHILD.version_id])
    assert shown.exit_code == 0 and '"temperature": 0.3' in shown.output
    changed = runner.invoke(app, ["harness", "diff", ROOT.version_id, CHILD.version_id])
    assert changed.exit_code == 0 and "sampling.temperature: 0.7 -> 0.3" in changed.output
    odds = [line for line in changed.output.splitlines() if line.startswith("rating ")]
    assert len(odds) == 1 and "B wins 19%" in odds[0], changed.output  # 1-6, shrunk toward even by the prior
    assert runner.invoke(app, ["harness", "promote", CHILD.version_id]).exit_code == 0
    assert (_status(CHILD.version_id), _status(ROOT.version_id)) == ("promoted", "retired")
    back = runner.invoke(app, ["harness", "rollback", "--env", "arithmetic"])
    assert back.exit_code == 0 and ROOT.version_id in back.output
    assert (_status(CHILD.version_id), _status(ROOT.version_id)) == ("retired", "promoted")


def test_bad_input_is_one_line_and_changes_nothing() -> None:
    _archive()
    for args, expected in [
        (["harness", "show", "nope"], "no harness 'nope'"),
        (["harness", "promote", "nope"], "no harness 'nope'"),
        (["harness", "round", "--env", "humaneval"], "evaluation only"),
        (["harness", "round", "--env", "nope"], "nope"),
        (["harness", "rollback", "--env", "string_ops"], "no promoted harness for string_ops"),
        (["harness", "rollback", "--env", "arithmetic"], "no previous harness"),
    ]:
        result = runner.invoke(app, args)
        lines = [line for line in result.output.strip().splitlines() if line.strip()]
        assert result.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error:"), (args, result.output)
        assert expected in lines[0], (args, lines[0])
    assert (_status(ROOT.version_id), _status(CHILD.version_id)) == ("promoted", "rejected")

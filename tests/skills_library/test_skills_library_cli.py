"""``lamarck skills``: add, list, show, errors (one line, exit 2), and a failing install."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from lamarck.commands.skills import app

SKILL = '''import math


def hypotenuse(a: float, b: float) -> float:
    """Length of the hypotenuse of a right triangle."""
    return math.sqrt(a * a + b * b)


def test_hypotenuse():
    assert hypotenuse(3, 4) == 5
'''


def test_add_list_show(tmp_path: Path) -> None:
    runner = CliRunner()
    path = tmp_path / "hyp.py"
    path.write_text(SKILL)
    added = runner.invoke(app, ["add", str(path)])
    assert added.exit_code == 0, added.output
    assert "added" in added.output and "hypotenuse v1" in added.output
    assert "unchanged" in runner.invoke(app, ["add", str(path)]).output
    listed = runner.invoke(app, ["list"])
    assert listed.exit_code == 0 and "hypotenuse" in listed.output and "reverse_words" in listed.output
    assert "builtin" in listed.output and "user" in listed.output
    shown = runner.invoke(app, ["show", "hypotenuse"])
    assert shown.exit_code == 0 and "math.sqrt" in shown.output and "test_hypotenuse()" in shown.output


def test_errors_are_one_line_with_status_2(tmp_path: Path) -> None:
    runner = CliRunner()
    missing = runner.invoke(app, ["show", "nope"])
    assert missing.exit_code == 2 and missing.stderr.strip() == (
        "error: no skill 'nope': list them with `lamarck skills list`"
    )
    bad = tmp_path / "bad.py"
    bad.write_text("def broken(x):\n    return x\n\ntests = 'assert broken(1) == 2'\n")
    rejected = runner.invoke(app, ["add", str(bad)])
    assert rejected.exit_code == 2
    assert rejected.stderr.strip() == "error: broken rejected: tests failed: AssertionError at `assert broken(1) == 2`"
    assert runner.invoke(app, ["add", str(tmp_path / "absent.py")]).exit_code == 2
    failed = runner.invoke(app, ["install", str(tmp_path / "no-such-package")])
    assert failed.exit_code == 2 and failed.stderr.startswith("error: pip install") and failed.stderr.count("\n") == 1

"""The sandbox programs of the skill library: run a skill's tests, call a skill, compare behaviour with others."""

from __future__ import annotations

import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from lamarck.platform.python_ast import literal_value
from lamarck.platform.sandbox import Sandbox, SandboxResult
from lamarck.skills_library.skill import format_result

_LINE = re.compile(r'File "main\.py", line (\d+)')


@dataclass(frozen=True)
class TestRun:
    passed: bool
    summary: str  # one line
    wall_seconds: float


def run_tests(sandbox: Sandbox, code: str, tests: str, *, wall_seconds: float | None = None) -> TestRun:
    """Run ``code`` then ``tests`` in one fresh sandbox; passing means no exception and the end was reached."""
    marker = f"__tests_passed_{secrets.token_hex(6)}__"
    program = f"{code.rstrip()}\n\n{tests.rstrip()}\nprint({marker!r})\n"
    result = sandbox.run_python(program, wall_seconds=wall_seconds)
    if result.ok and marker in result.stdout:
        return TestRun(True, "tests passed", result.wall_seconds)
    return TestRun(False, "tests failed: " + failure_summary(result, program), result.wall_seconds)


def failure_summary(result: SandboxResult, program: str = "") -> str:
    """One line: the limit hit, or the exception and the line of code it came from."""
    if result.limit_hit is not None:
        return f"stopped by the sandbox ({result.limit_hit} limit)"
    lines = [line.strip() for line in result.stderr.strip().splitlines() if line.strip()]
    if not lines:
        return f"exited with status {result.exit_code} before the end" if result.exit_code else "ended early"
    error = lines[-1]
    numbers = _LINE.findall(result.stderr)
    source = program.splitlines()
    if numbers and 0 < int(numbers[-1]) <= len(source):
        where = source[int(numbers[-1]) - 1].strip()
        return _clip(f"{error} at `{where}`")
    return _clip(error)


def call_in_sandbox(sandbox: Sandbox, code: str, expression: str, *, wall_seconds: float | None = None) -> str:
    """Run ``code``, evaluate ``expression`` and return its value as text (``error: ...`` when it fails)."""
    marker = f"__result_{secrets.token_hex(6)}__"
    program = f"{code.rstrip()}\n\n_result = {expression}\nprint({marker!r} + repr(_result))\n"
    result = sandbox.run_python(program, wall_seconds=wall_seconds)
    if not result.ok or marker not in result.stdout:
        return "error: " + failure_summary(result, program)
    text = result.stdout.split(marker, 1)[1].rstrip("\n")
    try:
        value: Any = literal_value(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return text
    return format_result(value)


_SAME_BEHAVIOUR = """\
import sys
_candidates = {candidates!r}
_tests = {tests!r}
for _name, _code in _candidates:
    _ns = {{"__name__": "skill"}}
    try:
        exec(compile(_code, "skill", "exec"), _ns)
        _ns[{target!r}] = _ns[_name]
        exec(compile(_tests, "tests", "exec"), _ns)
    except BaseException:
        continue
    print({marker!r} + _name)
    sys.stdout.flush()
"""


def same_behaviour(
    sandbox: Sandbox, name: str, tests: str, others: Sequence[tuple[str, str]], *, wall_seconds: float | None = None
) -> list[str]:
    """The names among ``others`` ((name, code) pairs) that pass the tests written for ``name``."""
    if not others:
        return []
    marker = f"__same_{secrets.token_hex(6)}__"
    program = _SAME_BEHAVIOUR.format(candidates=list(others), tests=tests, target=name, marker=marker)
    result = sandbox.run_python(program, wall_seconds=wall_seconds)
    return [line[len(marker) :] for line in result.stdout.splitlines() if line.startswith(marker)]


def _clip(text: str, limit: int = 240) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."

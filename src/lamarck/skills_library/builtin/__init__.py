"""The built-in skills, seeded by ``SkillLibrary.ensure_builtins()``.

Each has stored code and tests like any skill (verified in the sandbox when seeded). ``host`` is how the executor
runs it instead of the generic sandboxed call: the pure, trusted built-ins (``safe``) run in-process, and
``run_python`` sends its argument to the sandbox as a program of its own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from lamarck.platform.sandbox import Sandbox
from lamarck.skills_library.builtin import calculator, python_runner, strings
from lamarck.skills_library.plugins import candidate_from_function
from lamarck.skills_library.skill import SkillCandidate


@dataclass(frozen=True)
class BuiltinSkill:
    candidate: SkillCandidate
    safe: bool  # pure and trusted: may run in-process
    host: Callable[[Sandbox], Callable[..., Any]]  # builds the in-process callable


def builtin_skills() -> list[BuiltinSkill]:
    skills = [
        BuiltinSkill(
            SkillCandidate(
                name="calculate",
                code=calculator.code(),
                tests=calculator.TESTS,
                provenance="builtin",
                description=calculator.DESCRIPTION,
            ),
            safe=True,
            host=lambda _sandbox: calculator.host,
        ),
        BuiltinSkill(
            SkillCandidate(name="run_python", code=python_runner.CODE, tests=python_runner.TESTS, provenance="builtin"),
            safe=False,
            host=lambda sandbox: partial(python_runner.run_python_host, sandbox),
        ),
    ]
    for fn in strings.SKILLS:
        skills.append(BuiltinSkill(candidate_from_function(fn, provenance="builtin"), safe=True, host=_pure(fn)))
    return skills


def _pure(fn: Callable[..., Any]) -> Callable[[Sandbox], Callable[..., Any]]:
    """The host of a skill that needs no sandbox: the function itself."""
    return lambda _sandbox: fn


__all__ = ["BuiltinSkill", "builtin_skills"]

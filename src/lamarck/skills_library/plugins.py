"""Plug-in skills: packages that expose skills through the ``lamarck.skills`` entry-point group.

The format (a plug-in needs no import of lamarck): each entry point names one of

* a function: its source (``inspect.getsource``, decorators dropped) is the skill's code, its name the skill's
  name, its docstring the description, and its ``tests`` attribute (a string of assert statements) the tests. The
  function must be self-contained: imports go inside its body, since only its own source is stored and run;
* a mapping (or any object with these attributes) ``{"name", "code", "tests", "description"?}``, for code with
  helpers around the function;
* a list or tuple of the above.

In ``pyproject.toml``::

    [project.entry-points."lamarck.skills"]
    km_to_miles = "lamarck_skill_units:km_to_miles"

Every plug-in skill goes through ``SkillLibrary.add`` like any other (provenance ``plugin:<distribution>``).
"""

from __future__ import annotations

import ast
import inspect
import logging
import textwrap
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from lamarck.platform.python_ast import parse_module
from lamarck.skills_library.skill import ProvenanceKind, SkillCandidate, SkillError

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "lamarck.skills"


@dataclass(frozen=True)
class PluginProblem:
    """An entry point that could not be turned into skills; ``reason`` is one line."""

    entry_point: str
    package: str
    reason: str


def candidate_from_function(
    fn: Callable[..., Any], *, provenance: ProvenanceKind = "plugin", package: str | None = None
) -> SkillCandidate:
    try:
        source = textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError) as exc:
        raise SkillError(f"cannot read the source of {getattr(fn, '__name__', fn)!r}: {exc}") from None
    tests = getattr(fn, "tests", None)
    if not isinstance(tests, str):
        raise SkillError(f"{fn.__name__} has no `tests` string attribute")
    return SkillCandidate(
        name=fn.__name__,
        code=_without_decorators(source),
        tests=textwrap.dedent(tests).strip() + "\n",
        provenance=provenance,
        package=package,
    )


def candidates_from_object(
    obj: Any, *, provenance: ProvenanceKind = "plugin", package: str | None = None
) -> list[SkillCandidate]:
    """The skills an entry point's object defines (see the module docstring for the accepted shapes)."""
    if isinstance(obj, list | tuple):
        return [c for item in obj for c in candidates_from_object(item, provenance=provenance, package=package)]
    if inspect.isfunction(obj):
        return [candidate_from_function(obj, provenance=provenance, package=package)]
    fields = (
        obj
        if isinstance(obj, Mapping)
        else {k: getattr(obj, k) for k in ("name", "code", "tests", "description") if hasattr(obj, k)}
    )
    if not {"name", "code"} <= set(fields):
        raise SkillError(
            f"{type(obj).__name__} is not a skill: expected a function, a mapping with name/code/tests, "
            "or a list of them"
        )
    return [
        SkillCandidate(
            name=str(fields["name"]),
            code=str(fields["code"]),
            tests=str(fields.get("tests") or ""),
            description=str(fields.get("description") or ""),
            provenance=provenance,
            package=package,
        )
    ]


def discover(entries: Iterable[EntryPoint] | None = None) -> tuple[list[SkillCandidate], list[PluginProblem]]:
    """The skills of every installed plug-in, and the entry points that failed to load (logged, not raised)."""
    found: list[SkillCandidate] = []
    problems: list[PluginProblem] = []
    for entry in entries if entries is not None else entry_points(group=ENTRY_POINT_GROUP):
        package = entry.dist.name if entry.dist is not None else entry.module.split(".")[0]
        try:
            found.extend(candidates_from_object(entry.load(), package=package))
        except Exception as exc:  # a broken plug-in must not stop the others
            reason = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}".rstrip(": ")
            log.warning("plug-in skill %s from %s not loaded: %s", entry.name, package, reason)
            problems.append(PluginProblem(entry.name, package, reason))
    return found, problems


def _without_decorators(source: str) -> str:
    tree = parse_module(source)
    node = tree.body[0]
    if isinstance(node, ast.FunctionDef) and node.decorator_list:
        lines = source.splitlines(keepends=True)
        return "".join(lines[node.lineno - 1 :])
    return source

"""Reading a skill from a ``.py`` file (``lamarck skills add FILE``).

The file holds one skill function (any other top-level functions are its helpers; pick with ``name`` when there is
more than one candidate) and its tests, written either way:

* a module-level string ``tests = '''assert f(1) == 2'''``, or
* ``test_*`` functions with asserts (each is called in turn).

Everything except the tests is the skill's code.
"""

from __future__ import annotations

import ast
from pathlib import Path

from lamarck.platform.python_ast import parse_module
from lamarck.skills_library.skill import ProvenanceKind, SkillCandidate, SkillError


def candidate_from_file(path: Path, *, name: str | None = None, provenance: ProvenanceKind = "user") -> SkillCandidate:
    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SkillError(f"cannot read {path}: {exc}") from None
    return candidate_from_source(source, name=name, provenance=provenance, origin=str(path))


def candidate_from_source(
    source: str, *, name: str | None = None, provenance: ProvenanceKind = "user", origin: str = "the file"
) -> SkillCandidate:
    try:
        tree = parse_module(source)
    except SyntaxError as exc:
        raise SkillError(f"syntax error in {origin} at line {exc.lineno}: {exc.msg}") from None
    lines = source.splitlines(keepends=True)
    test_parts: list[str] = []
    test_functions: list[str] = []
    drop: list[tuple[int, int]] = []
    functions: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["tests"]:
            if not (isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)):
                raise SkillError(f"`tests` in {origin} must be a string of assert statements")
            test_parts.append(node.value.value)
            drop.append(_span(node))
        elif isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
            test_parts.append(ast.get_source_segment(source, node) or "")
            test_functions.append(node.name)
            drop.append(_span(node))
        elif isinstance(node, ast.FunctionDef):
            functions.append(node.name)
    if name is None:
        if len(functions) != 1:
            found = ", ".join(functions) or "none"
            raise SkillError(f"{origin} must define exactly one skill function (found: {found}); choose with --name")
        name = functions[0]
    elif name not in functions:
        raise SkillError(f"{origin} does not define a function {name!r}")
    test_parts += [f"{fn}()" for fn in test_functions]
    kept = [line for number, line in enumerate(lines, start=1) if not any(a <= number <= b for a, b in drop)]
    code = "".join(kept).strip() + "\n"
    tests = "\n".join(part.strip("\n") for part in test_parts if part.strip()) + "\n"
    return SkillCandidate(name=name, code=code, tests=tests, provenance=provenance)


def _span(node: ast.stmt) -> tuple[int, int]:
    start = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
    return start, node.end_lineno or node.lineno

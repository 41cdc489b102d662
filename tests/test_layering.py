"""Imports point one way, toward platform/ (ARCHITECTURE.md)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "lamarck"
LAYERS = {
    "platform": set(),
    "curriculum": {"platform"},
    "memory": {"platform"},
    "skills_library": {"platform", "memory", "curriculum"},
    "training": {"platform", "memory", "curriculum", "skills_library"},
    "agents": {"platform", "memory", "curriculum", "skills_library", "training"},
    "api": {"platform", "memory", "curriculum", "skills_library", "training", "agents"},
    "testing": {"platform"},  # test doubles: imported by tests and benchmarks, never by the parts above
}


def _imports(path: Path) -> set[str]:
    parts = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        for name in names:
            if name.startswith("lamarck."):
                parts.add(name.split(".")[1])
    return parts


COMPOSITION_ROOT = PACKAGE / "platform" / "container.py"


def _module_level_imports(path: Path) -> set[str]:
    """The parts a module imports when it is loaded: its top-level imports, not those inside functions or under
    ``if TYPE_CHECKING``."""
    parts = set()
    for node in ast.parse(path.read_text()).body:
        names = []
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        parts |= {name.split(".")[1] for name in names if name.startswith("lamarck.")}
    return parts


@pytest.mark.parametrize("part", sorted(LAYERS))
def test_part_imports_only_lower_parts(part: str) -> None:
    """The composition root is the one exception: it builds every part, so it may import any of them, but only
    where it builds them (loading it loads nothing above platform/)."""
    allowed = LAYERS[part] | {part}
    offenders = {
        str(path.relative_to(PACKAGE)): sorted(
            (_module_level_imports(path) if path == COMPOSITION_ROOT else _imports(path)) & set(LAYERS) - allowed
        )
        for path in (PACKAGE / part).rglob("*.py")
    }
    assert {path: bad for path, bad in offenders.items() if bad} == {}

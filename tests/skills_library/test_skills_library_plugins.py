"""Plug-in round trip: pip-install the example package, discover, verify and add its skills, use one from the executor.

The package is installed with pip into a temporary ``--target`` directory put on ``sys.path`` (offline, about 1.5 s),
not into the shared virtual environment: entry-point discovery sees it exactly as an installed distribution, and
teardown removes it without touching the environment other tests run in.
"""

from __future__ import annotations

import importlib
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from lamarck.agents.executor import Executor, ExecutorInput
from lamarck.curriculum.environment import TaskSpec
from lamarck.curriculum.environments.arithmetic import ArithmeticEnv
from lamarck.platform.llm.gateway import LLMGateway
from lamarck.platform.settings import GatewaySettings, ModelRoute, ModelRoutes
from lamarck.skills_library.library import SkillLibrary
from lamarck.skills_library.plugins import ENTRY_POINT_GROUP, candidates_from_object, discover
from lamarck.testing import ScriptedLLM, scripted_provider

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "lamarck-skill-units"
UNITS = {"km_to_miles", "miles_to_km", "celsius_to_fahrenheit", "fahrenheit_to_celsius", "kg_to_lb", "lb_to_kg"}


@pytest.fixture
def units_installed(tmp_path: Path) -> Iterator[Path]:
    source = tmp_path / "src"
    shutil.copytree(EXAMPLE, source, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--quiet",
            "--target",
            str(target),
            str(source),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    sys.path.insert(0, str(target))
    importlib.invalidate_caches()
    yield target
    sys.path.remove(str(target))
    sys.modules.pop("lamarck_skill_units", None)
    importlib.invalidate_caches()


def test_plugin_round_trip_through_the_executor(units_installed: Path, memory_library: SkillLibrary) -> None:
    library = memory_library
    library.ensure_builtins()
    found, problems = discover()
    assert problems == [] and {c.name for c in found} >= UNITS
    results, problems = library.install_plugins()
    assert problems == [] and {r.name for r in results if r.status == "added"} == UNITS
    view = library.get("km_to_miles")
    assert view is not None and view.provenance == "plugin:lamarck-skill-units" and "assert km_to_miles" in view.tests
    assert {r.status for r in library.install_plugins()[0]} == {"unchanged"}

    handler = ScriptedLLM()
    handler.script = ["CALL km_to_miles: 10", "ANSWER: 6.213712"]
    gateway = LLMGateway(ModelRoutes(executor=ModelRoute(model="scripted/exec")), GatewaySettings(retries=0))
    task = TaskSpec(
        environment="arithmetic", difficulty=1, prompt="How many miles is a 10 km run?", reference={"answer": 6}
    )
    with scripted_provider(handler):
        out = Executor(gateway, {"arithmetic": ArithmeticEnv()}, skills=library).run(
            ExecutorInput(tasks=[task], model_version="m", samples_per_task=1)
        )
    attempt = out.attempts[0]
    observation = next(m for m in attempt.trajectory.messages if m.role == "tool")
    assert observation.name == "km_to_miles" and observation.content == "6.213712"
    assert attempt.skills_used == ["km_to_miles"] and attempt.answer == "6.213712"
    assert "km_to_miles(km: float) -> float" in attempt.trajectory.messages[0].content  # offered in the prompt


def test_entry_point_shapes_and_a_broken_plugin() -> None:
    def shout(text: str) -> str:
        """Upper-case a text."""
        return text.upper()

    shout.tests = "assert shout('a') == 'A'"  # type: ignore[attr-defined]
    mapping = {"name": "half", "code": "def half(x):\n    return x / 2\n", "tests": "assert half(4) == 2"}
    candidates = candidates_from_object([shout, mapping], package="demo")
    assert [c.name for c in candidates] == ["shout", "half"]
    assert (
        candidates[0].code.startswith("def shout(text: str) -> str:")
        and candidates[0].provenance_label == "plugin:demo"
    )

    from importlib.metadata import EntryPoint

    broken = EntryPoint(name="nothing", value="lamarck_no_such_module:skill", group=ENTRY_POINT_GROUP)
    found, problems = discover([broken])
    assert found == [] and problems[0].entry_point == "nothing" and "ModuleNotFoundError" in problems[0].reason

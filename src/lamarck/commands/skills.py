"""``lamarck skills``: list, show, add and install skills.

``add FILE`` reads a ``.py`` file with one function and its tests (a ``tests = '''...'''`` string of asserts, or
``test_*`` functions; see ``lamarck.skills_library.source_file``). ``install PACKAGE`` runs
``python -m pip install PACKAGE`` in the current environment, then verifies and adds every installed plug-in's skills.
Errors print one line on stderr and exit with status 2.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.syntax import Syntax
from rich.table import Table

from lamarck.commands.common import UserError, console, container_from_settings, err, run_guarded

if TYPE_CHECKING:
    from lamarck.skills_library.library import SkillLibrary
    from lamarck.skills_library.skill import AddResult

app = typer.Typer(help="Skills: verified Python functions agents can call.", no_args_is_help=True)


def _guarded(action: Callable[[], None]) -> None:
    from lamarck.memory.base import MemoryStoreError
    from lamarck.skills_library.library import UnknownSkill
    from lamarck.skills_library.skill import SkillError

    run_guarded(action, extra=(SkillError, UnknownSkill, MemoryStoreError))


@contextmanager
def _library(*, with_memory: bool) -> Iterator[SkillLibrary]:
    """The library from the composition root; the vector memory (slow to load) only where a command indexes."""
    from lamarck.skills_library.library import SkillLibrary

    with container_from_settings() as container:
        if with_memory:
            library = container.library
            library.ensure_builtins()  # before anything is added, so a built-in's name cannot be taken
        else:
            library = SkillLibrary(container.db, container.sandbox)
        yield library


@app.command("list")
def list_skills(
    all_: Annotated[bool, typer.Option("--all", "-a", help="Include deprecated skills.")] = False,
) -> None:
    """List skills: name, version, provenance, uses, success rate, status."""

    def body() -> None:
        with _library(with_memory=False) as library:
            views = library.list(include_deprecated=all_)
        table = Table()
        for column in ("name", "version", "provenance", "uses", "success", "status"):
            table.add_column(column, no_wrap=column in ("name", "provenance"))
        for view in views:
            rate = "-" if view.success_rate is None else f"{view.success_rate:.0%}"
            table.add_row(view.name, str(view.version), view.provenance, str(view.times_used), rate, view.status)
        console.print(table if views else "no skills yet: `lamarck skills add FILE` or `lamarck skills install PKG`")

    _guarded(body)


@app.command()
def show(name: Annotated[str, typer.Argument(help="The skill's name.")]) -> None:
    """Show a skill's code, tests and versions."""

    def body() -> None:
        with _library(with_memory=False) as library:
            view = library.get(name)
        if view is None:
            raise UserError(f"no skill {name!r}: list them with `lamarck skills list`")
        rate = "-" if view.success_rate is None else f"{view.success_rate:.0%}"
        console.print(f"[bold]{view.name}[/] {view.signature}", highlight=False)
        console.print(
            f"{view.description}\nprovenance {view.provenance}, version {view.version}, {view.status}, "
            f"used {view.times_used} times, success {rate}",
            highlight=False,
        )
        if view.source_episode_ids:
            console.print("from episodes: " + ", ".join(view.source_episode_ids), highlight=False)
        console.print("\n[bold]code[/]")
        console.print(Syntax(view.code, "python"))
        console.print("[bold]tests[/]")
        console.print(Syntax(view.tests, "python"))
        console.print("[bold]versions[/]")
        for version in view.versions:
            console.print(f"  {version.version}  {version.signature}  {version.code_digest[:12]}", highlight=False)

    _guarded(body)


@app.command()
def add(
    file: Annotated[Path, typer.Argument(help="A .py file with one function and its tests.")],
    name: Annotated[str | None, typer.Option(help="The skill function, when the file has several.")] = None,
) -> None:
    """Verify a skill from a file in the sandbox and add it (a new version if its code changed)."""
    from lamarck.skills_library.source_file import candidate_from_file

    def body() -> None:
        candidate = candidate_from_file(file, name=name)
        with _library(with_memory=True) as library:
            result = library.add(candidate)
        _report([result])
        if not result.accepted:
            raise UserError(f"{result.name} rejected: {result.reason}")

    _guarded(body)


@app.command()
def install(package: Annotated[str, typer.Argument(help="What pip installs: a name, a path, a wheel.")]) -> None:
    """pip-install a plug-in package into this environment, then verify and add its skills."""

    def body() -> None:
        command = [sys.executable, "-m", "pip", "install", package]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            lines = [line for line in (done.stderr or done.stdout).splitlines() if line.strip()]
            raise UserError(f"pip install {package} failed: {lines[-1].strip() if lines else done.returncode}")
        importlib.invalidate_caches()
        with _library(with_memory=True) as library:
            results, problems = library.install_plugins()
        _report(results)
        for problem in problems:
            err.print(f"plug-in {problem.package}:{problem.entry_point} not loaded: {problem.reason}", markup=False)
        rejected = [r for r in results if not r.accepted]
        if problems or rejected:
            raise UserError(f"{len(rejected)} skills rejected, {len(problems)} entry points failed to load")
        if not results:
            raise UserError(f"{package} installed, but no package exposes skills (entry-point group lamarck.skills)")

    _guarded(body)


def _report(results: list[AddResult]) -> None:
    for result in results:
        version = f" v{result.version}" if result.version else ""
        reason = f": {result.reason}" if result.reason else ""
        console.print(f"{result.status:12} {result.name}{version}{reason}", markup=False, highlight=False)

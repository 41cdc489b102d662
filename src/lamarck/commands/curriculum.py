"""``lamarck envs`` (list, sample) and ``lamarck curriculum`` (profile, propose)."""

from __future__ import annotations

import random
from typing import Annotated

import typer
from rich.table import Table

from lamarck.commands.common import UserError, console, container_from_settings, run_guarded

envs_app = typer.Typer(help="Environments: task generators with verifiers.", no_args_is_help=True)
curriculum_app = typer.Typer(help="The curriculum: capability profile and task proposals.", no_args_is_help=True)


@envs_app.command("list")
def envs_list() -> None:
    """Every environment, built-in or from a plug-in package, with its difficulty ladder."""

    def body() -> None:
        from lamarck.curriculum.registry import get_environment, list_environments

        table = Table("environment", "levels", "training", "tools", "description")
        for name in list_environments():
            env = get_environment(name)
            levels = f"{min(env.difficulties)}..{max(env.difficulties)}"
            tools = ", ".join(tool.name for tool in env.tools()) or "-"
            table.add_row(name, levels, "yes" if env.training_allowed else "eval only", tools, env.description)
        console.print(table)

    run_guarded(body)


@envs_app.command("sample")
def envs_sample(
    environment: Annotated[str, typer.Argument(help="Environment name (see `lamarck envs list`).")],
    difficulty: Annotated[int, typer.Option("--difficulty", "-d", help="Difficulty level.")] = 1,
    n: Annotated[int, typer.Option("--n", "-n", help="How many tasks.", min=1, max=100)] = 3,
    seed: Annotated[int, typer.Option(help="Random seed.")] = 0,
    show_reference: Annotated[bool, typer.Option(help="Also print the hidden reference.")] = False,
) -> None:
    """Generate a few training tasks of one environment at one difficulty."""

    def body() -> None:
        from lamarck.curriculum.heldout import training_task
        from lamarck.curriculum.registry import get_environment

        env = get_environment(environment)
        if difficulty not in env.difficulties:
            raise UserError(
                f"{environment} has no difficulty {difficulty}: use {min(env.difficulties)}..{max(env.difficulties)}"
            )
        if not env.training_allowed:
            raise UserError(f"{environment} is evaluation-only: it gives no training tasks")
        rng = random.Random(seed)
        for index in range(n):
            task = training_task(env, difficulty, rng)
            console.rule(f"{environment} · difficulty {difficulty} · task {index + 1}")
            console.print(task.prompt, markup=False, highlight=False)
            if show_reference:
                console.print(task.reference, markup=False)

    run_guarded(body)


@curriculum_app.command("profile")
def curriculum_profile() -> None:
    """Success estimates per environment and difficulty (Beta posterior mean and 90% interval)."""

    def body() -> None:
        from lamarck.curriculum.profile import CapabilityProfile

        with container_from_settings() as container, container.db.session() as session:
            snapshot = CapabilityProfile.load(session).snapshot()
        if not snapshot.cells:
            console.print("no verified attempts yet: run `lamarck evolve` to start learning")
            return
        table = Table("environment", "difficulty", "attempts", "success", "mean", "interval")
        for cell in snapshot.cells:
            table.add_row(
                cell.environment,
                str(cell.difficulty),
                str(cell.attempts),
                str(cell.successes),
                f"{cell.mean:.2f}",
                f"{cell.lower:.2f}-{cell.upper:.2f}",
            )
        console.print(table)

    run_guarded(body)


@curriculum_app.command("propose")
def curriculum_propose(
    env: Annotated[list[str], typer.Option("--env", help="Environment(s) to propose for; repeat for several.")],
    n: Annotated[int, typer.Option("--n", "-n", help="Batch size.", min=1, max=1000)] = 8,
    seed: Annotated[int, typer.Option(help="Random seed.")] = 0,
    llm_share: Annotated[float, typer.Option(help="Share of tasks the curriculum model is asked to write.")] = 0.25,
) -> None:
    """Propose a batch of frontier tasks from the stored capability profile."""

    def body() -> None:
        from lamarck.agents.curriculum_proposer import CurriculumProposer, ProposerInput
        from lamarck.curriculum.profile import CapabilityProfile
        from lamarck.curriculum.registry import get_environment

        if not 0.0 <= llm_share <= 1.0:
            raise UserError(f"--llm-share must be between 0 and 1, got {llm_share}")
        with container_from_settings() as container:
            environments = {name: get_environment(name, sandbox=container.sandbox) for name in env}
            for name, environment in environments.items():
                if not environment.training_allowed:
                    raise UserError(f"{name} is evaluation-only: the curriculum cannot propose its tasks")
            with container.db.session() as session:
                profile = CapabilityProfile.load(session)
            gateway = container.gateway if llm_share > 0 else None
            proposer = CurriculumProposer(gateway, environments, sandbox=container.sandbox)
            out = proposer.run(ProposerInput(profile=profile, batch_size=n, seed=seed, llm_share=llm_share))
        table = Table("#", "environment", "difficulty", "source", "why", "prompt")
        for index, proposed in enumerate(out.tasks, start=1):
            task = proposed.task
            first_line = task.prompt.splitlines()[0][:70]
            why = proposed.reason.split(":")[0]
            table.add_row(str(index), task.environment, str(task.difficulty), proposed.source, why, first_line)
        console.print(table)
        console.print(
            f"LLM proposals: {out.llm_accepted} accepted of {out.llm_attempted}; "
            f"fallbacks to procedural tasks: {out.fallbacks}; rejections: {out.rejection_counts or 'none'}"
        )

    run_guarded(body)

"""``lamarck runs start``: drive a run that was created but not started (as ``POST /v1/runs`` creates one), in the
process the API spawns for it, so a run outlives the request and is stopped and resumed like any other."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

import typer

from lamarck.commands.common import UserError, console, container_from_settings, run_guarded


def runs_start(
    run_id: Annotated[str, typer.Argument(help="A pending run's id.")],
    distill: Annotated[
        bool | None, typer.Option(help="Queue distillation and gate candidates between generations.")
    ] = None,
) -> None:
    """Drive a pending run from its first generation (the API's POST /v1/runs starts one this way)."""

    def body() -> None:
        from lamarck.agents.distillation import open_distillation
        from lamarck.agents.orchestrator import Orchestrator
        from lamarck.agents.runs import RunError

        with container_from_settings() as container:
            scheduling = container.settings.training.schedule if distill is None else distill
            with open_distillation(container, container.bus, scheduling) as driver:
                hooks: list[Callable[[str], None]] = [driver.between_generations] if driver is not None else []
                try:
                    outcome = Orchestrator(container, between_generations=hooks).run(run_id)
                except RunError as exc:
                    raise UserError(str(exc)) from None
        console.print(f"run {run_id} {outcome.status.replace('_', ' ')}")

    run_guarded(body)

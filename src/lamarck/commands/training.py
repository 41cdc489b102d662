"""Commands: ``lamarck worker``, ``lamarck train``, ``lamarck models promote|rollback|show``.

Mount in cli.py::

    from lamarck.commands.training import register_model_commands, train_command, worker_command
    register_model_commands(models_app)
    app.command("worker")(worker_command)
    app.command("train")(train_command)
"""

from __future__ import annotations

import json
from typing import Annotated

import typer

from lamarck.commands.common import console, container_from_settings, run_guarded


def _extra_errors() -> tuple[type[BaseException], ...]:
    from lamarck.training.registry import RegistryError
    from lamarck.training.traces_to_rows import HeldoutLeak, NoNewEpisodes

    return (RegistryError, HeldoutLeak, NoNewEpisodes)


def worker_command(
    queues: Annotated[
        str, typer.Option("--queues", "-Q", help="Comma-separated queues: rollout, train.")
    ] = "rollout,train",
    concurrency: Annotated[int | None, typer.Option(help="Worker processes (default: workers.concurrency).")] = None,
    loglevel: Annotated[str, typer.Option(help="Celery log level.")] = "INFO",
) -> None:
    """Run a Celery worker on this host (Redis broker_url in distributed mode, the SQLite broker otherwise)."""

    def body() -> None:
        from lamarck.platform.settings import load_settings
        from lamarck.platform.workers import QUEUES, app, configure

        settings = load_settings()
        names = [q.strip() for q in queues.split(",") if q.strip()]
        unknown = [q for q in names if q not in QUEUES]
        if unknown or not names:
            from lamarck.commands.common import UserError

            raise UserError(f"unknown queue(s) {', '.join(unknown) or '(none)'}: use {', '.join(QUEUES)}")
        configure(app, settings)
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        app.worker_main(
            [
                "worker",
                "--queues",
                ",".join(names),
                "--concurrency",
                str(concurrency or settings.workers.concurrency),
                "--loglevel",
                loglevel,
                "--pool",
                "prefork",
            ]
        )

    run_guarded(body, extra=_extra_errors())


def train_command(
    now: Annotated[bool, typer.Option("--now", help="Train in this process instead of queueing a job.")] = False,
    steps: Annotated[int | None, typer.Option(help="Override training.max_steps.")] = None,
) -> None:
    """Build a dataset from new verified episodes since the champion and train a candidate (queued or --now)."""

    def body() -> None:
        from lamarck.platform.events import EventBus
        from lamarck.training import pipeline, registry

        with container_from_settings() as container:
            bus = EventBus(container.db)
            if not now:
                from lamarck.platform.workers import app, configure
                from lamarck.training.tasks import send

                configure(app, container.settings)
                result = pipeline.maybe_schedule_distillation(container, send, bus=bus)
                console.print(("queued: " if result.scheduled else "not queued: ") + result.reason)
                return
            with container.db.session() as session:
                parent = registry.champion(session)
            dataset = pipeline.prepare_dataset(container, parent)
            console.print(f"dataset {dataset.digest[:12]}: {len(dataset.rows)} rows, {len(dataset.pairs)} pairs")
            made = pipeline.train_candidate(
                container, parent_version=parent, dataset_digest=dataset.digest, bus=bus, max_steps=steps
            )
            console.print(f"candidate [bold]{made.version_id}[/] ({'new' if made.created else 'already trained'})")

    run_guarded(body, extra=_extra_errors())


def register_model_commands(models_app: typer.Typer) -> None:
    @models_app.command("promote")
    def promote(
        version: str, reason: Annotated[str, typer.Option(help="Why (recorded).")] = "manual promotion"
    ) -> None:
        """Make VERSION the champion (the previous one is retired and kept for rollback)."""

        def body() -> None:
            from lamarck.training import registry

            with container_from_settings() as container, container.db.session() as session:
                view = registry.promote(session, version_id=version, reason=reason)
            console.print(f"promoted [bold]{view.id}[/] (previous champion: {view.eval_scores.get('previous')})")

        run_guarded(body, extra=_extra_errors())

    @models_app.command("rollback")
    def rollback() -> None:
        """Restore the champion the current one replaced."""

        def body() -> None:
            from lamarck.training import registry

            with container_from_settings() as container, container.db.session() as session:
                view = registry.rollback(session)
            console.print(f"champion is now [bold]{view.id}[/]")

        run_guarded(body, extra=_extra_errors())

    @models_app.command("gate")
    def gate(
        version: Annotated[str | None, typer.Argument(help="A candidate (default: every undecided one).")] = None,
    ) -> None:
        """Run the evaluation gate now: held-out sets, paired test against the champion, promote on a pass."""

        def body() -> None:
            from lamarck.agents.distillation import Distillation
            from lamarck.platform.events import EventBus
            from lamarck.training import registry

            with container_from_settings() as container:
                with container.db.session() as session:
                    pending = [v.id for v in registry.undecided_candidates(session)]
                    if version is not None:
                        view = registry.show(session, version_id=version)
                        if view.status != "candidate":
                            raise registry.RegistryError(
                                f"{version} is {view.status}, not a candidate: only candidates go through the gate"
                            )
                        pending = [version]
                if not pending:
                    console.print("no undecided candidates: `lamarck train` makes one from new verified episodes")
                    return
                driver = Distillation(
                    container,
                    send=lambda name, kwargs: None,
                    bus=EventBus(container.db),
                    notify=lambda message: console.print(message, highlight=False),
                )
                for candidate in pending:
                    driver.gate(candidate)

        run_guarded(body, extra=_extra_errors())

    @models_app.command("show")
    def show(version: str) -> None:
        """A model version's record: parent, dataset digest, metrics, gate scores, status and reason."""

        def body() -> None:
            from lamarck.training import registry

            with container_from_settings() as container, container.db.session() as session:
                view = registry.show(session, version_id=version)
            console.print_json(json.dumps(view.model_dump(mode="json"), default=str))

        run_guarded(body, extra=_extra_errors())

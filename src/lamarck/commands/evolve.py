"""``lamarck evolve``, ``lamarck runs`` (list, show, resume, stop, events) and ``lamarck eval``.

Mounted by ``lamarck.cli``::

    app.command("evolve")(evolve)
    app.command("eval")(eval_command)
    app.add_typer(runs_app, name="runs")
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from lamarck.commands.common import UserError, console, container_from_settings, run_guarded

if TYPE_CHECKING:
    from lamarck.agents.distillation import Distillation
    from lamarck.agents.orchestrator import RunOutcome
    from lamarck.agents.summary import GenerationSummary
    from lamarck.platform.container import Container
    from lamarck.platform.events import BusEvent

runs_app = typer.Typer(help="Evolution runs: list, show, resume, stop, events.", no_args_is_help=True)


def _guarded(action: Any) -> None:
    from lamarck.agents.runs import RunError

    run_guarded(action, extra=(RunError,))


# lamarck evolve


def evolve(
    env: Annotated[list[str], typer.Option("--env", help="Environment(s); repeat for several.")] = ["arithmetic"],  # noqa: B006
    generations: Annotated[int, typer.Option(help="How many generations.")] = 3,
    batch: Annotated[int, typer.Option(help="Tasks proposed per generation.")] = 16,
    samples: Annotated[int | None, typer.Option(help="Attempts per task (default: the harness's).")] = None,
    seed: Annotated[int, typer.Option(help="Random seed for proposals and sampling.")] = 0,
    model: Annotated[str | None, typer.Option(help="Model version for the executor (default: the champion).")] = None,
    harness: Annotated[list[str], typer.Option(help="ENV=HARNESS_VERSION; repeat per environment.")] = [],  # noqa: B006
    llm_share: Annotated[float, typer.Option(help="Share of tasks the curriculum model is asked to write.")] = 0.25,
    max_tokens: Annotated[int | None, typer.Option(help="Token budget (all roles).")] = None,
    max_seconds: Annotated[float | None, typer.Option(help="Time budget in seconds of work.")] = None,
    max_cost: Annotated[float | None, typer.Option(help="Cost budget in USD.")] = None,
    judge: Annotated[bool, typer.Option(help="Ask the critic model for critiques and lessons.")] = True,
    repair: Annotated[bool, typer.Option(help="Ask the critic model to repair failed attempts.")] = True,
    induce: Annotated[bool, typer.Option(help="Induce skills from verified successes.")] = True,
    concurrency: Annotated[int | None, typer.Option(help="Executor threads (default: one per engine slot).")] = None,
    hints: Annotated[
        list[str],
        typer.Option(
            "--hint",
            help="A rung of the teacher's hint ladder (repeat; default: none, glossary, demonstrations, "
            "partial, full; --hint none: no help).",
        ),
    ] = [],  # noqa: B006
    frontier: Annotated[str, typer.Option(help="How tasks are picked: learnable or thompson.")] = "learnable",
    sampler: Annotated[
        str,
        typer.Option(
            help="Who rolls out while following the champion: better_candidate (a refused candidate that beat it "
            "on the development slice) or champion."
        ),
    ] = "better_candidate",
    harness_every: Annotated[
        int,
        typer.Option(
            help="Hold a harness-critic round every N episodes (0: never); its winner runs the next episodes."
        ),
    ] = 0,
    name: Annotated[str, typer.Option(help="A name for the run.")] = "",
    distill: Annotated[
        bool | None,
        typer.Option(
            help="Queue distillation between generations and gate its candidates (default: training.schedule)."
        ),
    ] = None,
    wait_training: Annotated[
        bool,
        typer.Option(help="At the end, wait for queued training and gate its candidate (Ctrl-C leaves it queued)."),
    ] = True,
) -> None:
    """Start an evolution run: propose -> execute -> critique -> record, generation after generation.

    Between generations, enough new verified episodes queue a training job (an embedded worker runs it in
    embedded mode); its candidate is gated on held-out sets and, if promoted, the run follows it.
    """

    def body() -> None:
        from lamarck.agents.distillation import open_distillation
        from lamarck.agents.orchestrator import Orchestrator
        from lamarck.agents.runs import RunError, parse_config, validate_config
        from lamarck.platform.settings import DEFAULT_MODEL_VERSION
        from lamarck.platform.storage import repositories as repo

        harnesses = {}
        for item in harness:
            key, sep, value = item.partition("=")
            if not sep or not key.strip() or not value.strip():
                raise RunError(f"--harness takes ENV=HARNESS_VERSION, got {item!r}")
            harnesses[key.strip()] = value.strip()
        with container_from_settings() as container:
            version = model
            if version is None:
                with container.db.session() as session:
                    champion = repo.promoted_model_version(session)
                version = champion.id if champion is not None else DEFAULT_MODEL_VERSION
            config = parse_config(
                {
                    "environments": env,
                    "generations": generations,
                    "batch_size": batch,
                    "samples_per_task": samples,
                    "seed": seed,
                    "model_version": version,
                    "follow_champion": model is None,
                    "harnesses": harnesses,
                    "llm_share": llm_share,
                    "budget": {"max_tokens": max_tokens, "max_seconds": max_seconds, "max_cost_usd": max_cost},
                    "judge": judge,
                    "repair": repair,
                    "induce_skills": induce,
                    "concurrency": concurrency,
                    "frontier": frontier,
                    "rollout_sampler": sampler,
                    "harness_critic_every": harness_every,
                    **({"hints": hints} if hints else {}),
                }
            )
            validate_config(config, container.db, container.gateway)  # before a worker starts or a run is written
            scheduling = container.settings.training.schedule if distill is None else distill
            progress = LiveProgress(config.generations)
            with open_distillation(container, container.bus, scheduling, notify=progress.note) as driver:
                hooks = [driver.between_generations] if driver is not None else []
                orchestrator = Orchestrator(container, listener=progress, between_generations=hooks)
                run_id = orchestrator.start(config, name=name)
                console.print(
                    f"run [bold]{run_id}[/] · {', '.join(config.environments)} · "
                    f"{config.generations} generations × {config.batch_size} tasks · model {version}"
                )
                with progress:
                    outcome = orchestrator.run(run_id)
                if driver is not None and wait_training:
                    finish_training(driver)
        _print_outcome(outcome)

    _guarded(body)


def finish_training(driver: Distillation) -> None:
    """Wait for the run's queued training and gate its candidate; Ctrl-C leaves the job queued for a later worker."""
    driver.notify = lambda message: console.print(message, highlight=False)
    if not driver.in_flight():
        driver.gate_pending()
        return
    try:
        with console.status("waiting for training (Ctrl-C leaves it queued)") as status:
            driver.drain(
                on_wait=lambda jobs: status.update(f"waiting for training: {', '.join(jobs)} (Ctrl-C leaves it queued)")
            )
    except KeyboardInterrupt:
        console.print("left the training job queued: `lamarck worker --queues train` or the next run picks it up")


class LiveProgress:
    """The loop's listener for the terminal: a generation bar, the current node, and each generation's table."""

    def __init__(self, generations: int, done: int = 0) -> None:
        self.generations = generations
        self.progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        )
        self.task = self.progress.add_task("starting", total=generations, completed=done)

    def __enter__(self) -> LiveProgress:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def note(self, message: str) -> None:
        self.progress.console.print(message, highlight=False)

    def on_node(self, node: str, generation: int, finished: bool) -> None:
        if not finished:
            self.progress.update(self.task, description=f"generation {generation + 1}/{self.generations} · {node}")

    def on_event(self, event: BusEvent) -> None:
        from lamarck.platform import event_types as events

        console = self.progress.console
        match event.parsed():
            case events.TasksProposed(generation=generation, count=count, sources=sources):
                listed = ", ".join(f"{n} {source}" for source, n in sorted(sources.items()))
                console.print(f"generation {generation + 1}: {count} tasks ({listed})")
            case events.SkillAdded(name=name, reason=reason):
                console.print(f"  new skill [bold]{name}[/] ({reason})")
            case events.GenerationSummarized():
                from lamarck.agents.summary import GenerationSummary

                self.progress.advance(self.task)
                console.print(summary_table(GenerationSummary.model_validate(event.payload)))
            case events.HarnessRoundHeld() as held:
                winner = held.promoted or "none, the champion harness stays"
                console.print(
                    f"  harness-critic round {held.round} on {held.environment}: {held.challengers} challengers, "
                    f"{held.invalid} invalid, {held.tasks_evaluated} task evaluations · promoted: {winner}",
                    highlight=False,
                    markup=False,
                )
            case (
                events.BudgetExhausted(reason=str(reason))
                | events.RunStopped(reason=str(reason))
                | events.RunFailed(reason=str(reason))
            ):
                console.print(f"{event.type.replace('_', ' ')}: {reason}")


def summary_table(summary: GenerationSummary) -> Table:
    table = Table(
        title=f"generation {summary.generation + 1}", title_justify="left", box=None, padding=(0, 1), pad_edge=False
    )
    for column in ("environment", "level", "tries", "passed", "reward", "tokens", "s/try", "skills", "lessons"):
        table.add_column(column, no_wrap=True)
    for cell in summary.cells:
        table.add_row(
            cell.environment,
            str(cell.difficulty),
            str(cell.attempts),
            f"{cell.successes} ({cell.success_rate:.0%})",
            f"{cell.mean_reward:.2f}",
            str(cell.tokens),
            f"{cell.mean_attempt_seconds:.1f}",
            str(cell.new_skills),
            str(cell.new_lessons),
        )
    table.caption = (
        f"{summary.attempts} attempts, {summary.success_rate:.0%} passed, mean reward "
        f"{summary.mean_reward:.2f}, {summary.tokens} tokens (all roles), {summary.wall_seconds:.1f}s, "
        f"{summary.repaired} repaired, {len(summary.new_skills)} new skills, {summary.new_lessons} new lessons"
    )
    table.caption_justify = "left"
    return table


def _print_outcome(outcome: RunOutcome) -> None:
    colour = {"finished": "green", "budget_exhausted": "yellow", "stopped": "yellow"}.get(outcome.status, "red")
    console.print(
        f"run {outcome.run_id}: [{colour}]{outcome.status.replace('_', ' ')}[/] after "
        f"{outcome.generations_done} generation(s)" + (f" — {outcome.error}" if outcome.error else "")
    )
    console.print(
        f"next: lamarck runs show {outcome.run_id} · lamarck runs events {outcome.run_id} · "
        "lamarck eval --env arithmetic · lamarck curriculum profile",
        highlight=False,
    )


# lamarck runs ...


@runs_app.command("list")
def runs_list(limit: Annotated[int, typer.Option(help="How many, newest first.")] = 20) -> None:
    """The newest runs with their status and progress."""

    def body() -> None:
        from lamarck.platform.storage import repositories as repo

        with container_from_settings() as container, container.db.session() as session:
            runs = repo.list_runs(session, limit=limit)
            table = Table()
            for column in ("id", "name", "status", "generations", "environments", "created"):
                table.add_column(column, no_wrap=column in ("id", "status"))
            for run in runs:
                config = run.config or {}
                table.add_row(
                    run.id,
                    run.name or "-",
                    run.status,
                    f"{run.generations_done}/{config.get('generations', '?')}",
                    ", ".join(config.get("environments", [])),
                    run.created_at.strftime("%Y-%m-%d %H:%M"),
                )
        console.print(table if runs else "no runs yet: start one with `lamarck evolve --env arithmetic`")

    _guarded(body)


@runs_app.command("show")
def runs_show(run_id: Annotated[str, typer.Argument(help="The run's id.")]) -> None:
    """A run's config, status, per-generation summaries and LLM usage."""

    def body() -> None:
        from lamarck.agents.summary import GenerationSummary
        from lamarck.platform.storage import repositories as repo

        with container_from_settings() as container, container.db.session() as session:
            run = repo.get_run(session, run_id=run_id)
            usage = repo.llm_usage(session, run_id=run_id)
            config, status, error, summary = run.config, run.status, run.error, run.summary or {}
        console.print(f"run [bold]{run_id}[/] {status.replace('_', ' ')}" + (f": {error}" if error else ""))
        console.print(json.dumps(config, sort_keys=True), highlight=False, markup=False)
        generations = summary.get("generations", {})
        for key in sorted(generations, key=int):
            console.print(summary_table(GenerationSummary.model_validate(generations[key])))
        console.print(
            f"LLM usage: {int(usage['calls'])} calls, {int(usage['prompt_tokens'])}+"
            f"{int(usage['completion_tokens'])} tokens, ${usage['cost_usd']:.4f}"
        )

    _guarded(body)


@runs_app.command("resume")
def runs_resume(
    run_id: Annotated[str, typer.Argument(help="The run's id.")],
    distill: Annotated[
        bool | None, typer.Option(help="Queue distillation and gate candidates between generations.")
    ] = None,
    wait_training: Annotated[bool, typer.Option(help="At the end, wait for queued training and gate it.")] = True,
) -> None:
    """Continue a stopped, failed or killed run from its last checkpoint."""

    def body() -> None:
        from lamarck.agents.distillation import open_distillation
        from lamarck.agents.orchestrator import Orchestrator
        from lamarck.agents.runs import check_resumable, load_config

        with container_from_settings() as container:
            with container.db.session() as session:
                run = check_resumable(session, run_id)
                config, done = load_config(run), run.generations_done
            scheduling = container.settings.training.schedule if distill is None else distill
            progress = LiveProgress(config.generations, done)
            with open_distillation(container, container.bus, scheduling, notify=progress.note) as driver:
                hooks = [driver.between_generations] if driver is not None else []
                with progress:
                    outcome = Orchestrator(container, listener=progress, between_generations=hooks).resume(run_id)
                if driver is not None and wait_training:
                    finish_training(driver)
        _print_outcome(outcome)

    _guarded(body)


@runs_app.command("stop")
def runs_stop(run_id: Annotated[str, typer.Argument(help="The run's id.")]) -> None:
    """Ask a run to stop after its current step (resume it later with `lamarck runs resume`)."""

    def body() -> None:
        from lamarck.agents.runs import request_stop

        with container_from_settings() as container:
            status = request_stop(container.db, run_id)
        if status == "stopping":
            console.print(f"stop requested: run {run_id} stops after its current step")
        else:
            console.print(f"run {run_id} stopped (no live process was driving it)")

    _guarded(body)


@runs_app.command("events")
def runs_events(
    run_id: Annotated[str, typer.Argument(help="The run's id.")],
    after: Annotated[int, typer.Option(help="Only events after this id.")] = 0,
    limit: Annotated[int, typer.Option(help="At most this many.")] = 1000,
) -> None:
    """Replay a run's events (one JSON object per line), from an event id on."""

    def body() -> None:
        from lamarck.platform.events import EventBus
        from lamarck.platform.storage import repositories as repo

        if after < 0 or limit < 1:
            raise UserError("--after must be 0 or more and --limit at least 1")
        with container_from_settings() as container:
            with container.db.session() as session:
                repo.get_run(session, run_id=run_id)
            for event in EventBus(container.db).replay(after_id=after, run_id=run_id, limit=limit):
                line = {"id": event.id, "type": event.type, "at": event.created_at.isoformat(), **event.payload}
                console.print(json.dumps(line, default=str), highlight=False, markup=False, soft_wrap=True)

    _guarded(body)


# lamarck eval


def eval_command(
    env: Annotated[
        str, typer.Option("--env", help="Environment whose held-out set to run (or humaneval).")
    ] = "arithmetic",
    model: Annotated[str | None, typer.Option(help="Model version (default: the champion).")] = None,
    harness: Annotated[
        str,
        typer.Option(
            help="Harness version id, 'release' (the environment's promoted harness, as served) or 'default'."
        ),
    ] = "release",
    per_level: Annotated[int, typer.Option(help="Held-out tasks per difficulty level (1..50).")] = 5,
    samples: Annotated[int, typer.Option(help="Greedy attempts per task.")] = 1,
    limit: Annotated[int | None, typer.Option(help="Only the first N tasks of the set (e.g. for humaneval).")] = None,
    version: Annotated[
        str | None, typer.Option(help="Held-out set version (default: the environment's current).")
    ] = None,
) -> None:
    """Evaluate a release (by default the champion under its served harness), or any model and harness version, on a
    fixed held-out set; stores an Evaluation."""

    def body() -> None:
        from lamarck.agents.evaluation import evaluate, heldout_tasks, store_evaluation

        if not 1 <= samples <= 64:
            raise UserError(f"--samples must be 1..64, got {samples}")
        if limit is not None and limit < 1:
            raise UserError(f"--limit must be at least 1, got {limit}")
        with container_from_settings() as container:
            environment, version_id, spec = _eval_inputs(container, env, model, harness)
            try:
                tasks, eval_set = heldout_tasks(environment, version=version, per_level=per_level, limit=limit)
            except ValueError as exc:
                raise UserError(str(exc)) from None
            with console.status(f"evaluating {version_id} on {len(tasks)} {env} tasks"):
                result = evaluate(
                    container.gateway,
                    environment,
                    tasks,
                    version_id,
                    spec,
                    samples=samples,
                    eval_set=eval_set,
                    max_concurrency=container.settings.engine.rollout_concurrency,
                )
            result.evaluation_id = store_evaluation(container.db, result)
        table = Table(
            "difficulty",
            "score",
            title=f"{result.eval_set} · model {result.model_version} · harness {result.harness_version}",
            title_justify="left",
        )
        for level, score in result.per_level.items():
            table.add_row(level, f"{score:.2f}")
        console.print(table)
        passed = sum(1 for share in result.per_task.values() if share > 0)
        console.print(
            f"score [bold]{result.score:.3f}[/] on {result.n_tasks} tasks ({passed} passed at least once), "
            f"{result.seconds:.1f}s · evaluation {result.evaluation_id}"
        )

    _guarded(body)


def _eval_inputs(container: Container, env: str, model: str | None, harness: str) -> tuple[Any, str, Any]:
    from lamarck.agents.evaluation import default_harness_for, release_harness
    from lamarck.agents.harness import load_harness
    from lamarck.curriculum.registry import get_environment
    from lamarck.platform.llm.version_names import version_call
    from lamarck.platform.settings import DEFAULT_MODEL_VERSION
    from lamarck.platform.storage import repositories as repo

    environment = get_environment(env, sandbox=container.sandbox)
    route = container.gateway.route("executor")
    with container.db.session() as session:
        if model is None:
            champion = repo.promoted_model_version(session)
            model = champion.id if champion is not None else DEFAULT_MODEL_VERSION
        if version_call(route, model) is not None:
            repo.get_model_version(session, version_id=model)
        if harness not in ("default", "release"):
            spec = load_harness(session, harness_id=harness)
    if harness == "default":
        spec = default_harness_for(environment)
    elif harness == "release":
        spec = release_harness(container.db, environment)
    if spec.environment not in (None, environment.name):
        raise UserError(f"harness {harness} is for {spec.environment}, not {environment.name}")
    return environment, model, spec

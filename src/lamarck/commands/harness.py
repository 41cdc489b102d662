"""``lamarck harness``: the archive of harness versions — list, show, diff, promote, rollback — and one
harness-critic round on an environment (``round``). Errors print one line on stderr and exit with status 2."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.table import Column, Table

from lamarck.commands.common import UserError, console, container_from_settings, run_guarded

app = typer.Typer(
    help="Harness versions: the archive, diffs, promotion, and harness-critic rounds.", no_args_is_help=True
)


@app.command("list")
def harness_list(env: Annotated[str | None, typer.Option(help="Only this environment.")] = None) -> None:
    """Every archived harness, oldest first: parent, status, source, its dev-slice result, and its rating over all
    rounds (Bradley-Terry on the Elo scale; 1500 is a harness that never met another)."""

    def body() -> None:
        from lamarck.agents.harness_archive import lineage_rows

        with container_from_settings() as container, container.db.session() as session:
            rows = lineage_rows(session, env)
        if not rows:
            console.print("no harnesses archived yet: run `lamarck harness round --env NAME`")
            return
        table = Table(
            Column("id", no_wrap=True),
            Column("parent", no_wrap=True),
            "status",
            "source",
            "dev wins-losses",
            "rating",
            "decision",
        )
        for row in rows:
            record = "" if row["wins"] is None else f"{row['wins']}-{row['losses']}"
            decision = f"FLAGGED: {row['flag']}. {row['decision']}" if row["flag"] else str(row["decision"])
            table.add_row(
                row["id"],
                row["parent"] or "",
                row["status"],
                row["source"],
                record,
                f"{row['rating']:.0f}",
                decision[:120],
            )
        console.print(table)

    run_guarded(body)


@app.command("show")
def harness_show(harness_id: str) -> None:
    """One harness: its spec and scores, as JSON."""

    def body() -> None:
        from lamarck.platform.storage import repositories as repo

        with container_from_settings() as container, container.db.session() as session:
            record = repo.get_harness(session, harness_id=harness_id)
            data = {
                "id": record.id,
                "environment": record.environment,
                "parent": record.parent_id,
                "status": record.status,
                "rationale": record.rationale,
                "scores": record.eval_scores,
                "spec": record.spec,
            }
        console.print_json(json.dumps(data, default=str))

    run_guarded(body)


@app.command("diff")
def harness_diff(a: str, b: str) -> None:
    """What changed from A to B: knobs, worked examples, the system prompt as a unified diff, and how the archive's
    ratings compare them (the chance B beats A on a task where they disagree)."""

    def body() -> None:
        from lamarck.agents.harness_archive import archive_ratings, diff, load_pair
        from lamarck.agents.harness_rating import REFERENCE_RATING, win_probability

        with container_from_settings() as container, container.db.session() as session:
            pair = load_pair(session, a, b)
            change = diff(*pair)
            rated = archive_ratings(session, pair[0].environment)
        rating_a, rating_b = rated.get(a, REFERENCE_RATING), rated.get(b, REFERENCE_RATING)
        console.print(
            f"rating {rating_a:.0f} -> {rating_b:.0f}: B wins {win_probability(rating_b, rating_a):.0%} "
            "of the tasks where they disagree (fitted over every archived round)",
            highlight=False,
        )
        for knob, (left, right) in change.knobs.items():
            console.print(f"{knob}: {left!r} -> {right!r}", markup=False, highlight=False)
        console.print(f"worked examples shown: {change.examples[0]} -> {change.examples[1]}")
        for line in change.prompt:
            console.print(line, markup=False, highlight=False)
        if not change.knobs and not change.prompt and change.examples[0] == change.examples[1]:
            console.print("no differences")

    run_guarded(body)


@app.command("promote")
def harness_promote(harness_id: str) -> None:
    """Make HARNESS_ID its environment's promoted harness (the one it replaces is kept, retired)."""

    def body() -> None:
        from lamarck.agents.harness_archive import promote_harness
        from lamarck.platform.storage import repositories as repo

        with container_from_settings() as container, container.db.session() as session:
            if repo.get_harness(session, harness_id=harness_id).environment is None:
                raise UserError(f"{harness_id} belongs to no environment: promote an environment's harness")
            promote_harness(session, harness_id=harness_id, reason="promoted by hand")
        console.print(f"promoted {harness_id}")

    run_guarded(body)


@app.command("rollback")
def harness_rollback(env: Annotated[str, typer.Option(help="The environment whose harness to roll back.")]) -> None:
    """Restore the harness the current one replaced."""

    def body() -> None:
        from lamarck.agents.harness_archive import rollback_harness

        with container_from_settings() as container, container.db.session() as session:
            restored = rollback_harness(session, env)
        console.print(f"{env}: promoted {restored} again")

    run_guarded(body)


@app.command("round")
def harness_round(
    env: Annotated[str, typer.Option(help="The environment whose harness to improve.")],
    model: Annotated[str | None, typer.Option(help="Model version (default: the champion).")] = None,
    number: Annotated[int, typer.Option("--round", help="The round's number (its seed and archive key).")] = 0,
) -> None:
    """One harness-critic round: challengers from demonstrations, the knob search and the harness_critic model,
    champion/challenger on the development slice, the winner promoted only if a paired test says it is better."""

    def body() -> None:
        from lamarck.agents.evaluation import default_harness_for
        from lamarck.agents.harness_round import run_round
        from lamarck.curriculum.registry import get_environment
        from lamarck.training import registry

        with container_from_settings() as container:
            environment = get_environment(env, sandbox=container.sandbox)
            if not environment.training_allowed:
                raise UserError(f"{env} is for evaluation only: its tasks may not tune a harness")
            with container.db.session() as session:
                version = model or registry.champion(session)
            out = run_round(
                container.db,
                container.gateway,
                environment,
                model_version=version,
                settings=container.settings.harness_critic,
                default=default_harness_for(environment),
                round_=number,
                hold_for_approval=container.settings.approvals.required,
            )
        table = Table("challenger", "source", "status", "dev wins-losses", "p", "reason")
        for result in out.challengers:
            table.add_row(
                result.harness_id,
                result.source,
                result.status,
                f"{result.wins}-{result.losses}",
                "" if result.p_value is None else f"{result.p_value:.3g}",
                result.reason[:70],
            )
        console.print(table)
        for rejected in out.invalid:
            console.print(f"invalid {rejected.source} proposal: {rejected.reason}", markup=False, highlight=False)
        console.print(f"{out.tasks_evaluated} task evaluations · promoted: {out.promoted or 'none, champion stays'}")

    run_guarded(body)

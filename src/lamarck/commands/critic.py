"""``lamarck critic``: how far the critic's judge can be trusted (``stats``). Errors print one line on stderr and
exit with status 2."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Column, Table

from lamarck.commands.common import console, container_from_settings, run_guarded

app = typer.Typer(help="The critic: its judge's agreement with the verifiers.", no_args_is_help=True)


@app.command("stats")
def critic_stats_command(
    as_json: Annotated[bool, typer.Option("--json", help="Print the statistics as JSON.")] = False,
) -> None:
    """The judge's blind verdicts against the verifier's, per critic model and harness version: agreement, and
    precision and recall of its "pass", with the counts (fooled = it passed an attempt the verifier failed)."""

    def body() -> None:
        from lamarck.agents.critic_stats import critic_stats

        with container_from_settings() as container, container.db.session() as session:
            stats = critic_stats(session)
        if as_json:
            console.print_json(stats.model_dump_json())
            return
        if not stats.groups:
            console.print("no judged verdicts yet: the critic's judge rules on episodes during `lamarck run`")
            return
        table = Table(
            Column("critic model", no_wrap=True),
            Column("harness", no_wrap=True),
            Column("judged", justify="right"),
            Column("agreement", justify="right"),
            Column("precision", justify="right"),
            Column("recall", justify="right"),
            Column("pass/pass", justify="right"),
            Column("fooled", justify="right"),
            Column("missed", justify="right"),
            Column("fail/fail", justify="right"),
            Column("unblinded", justify="right"),
        )
        for row in [*stats.groups, stats.total] if len(stats.groups) > 1 else stats.groups:
            table.add_row(
                row.critic_model or ("all" if row is stats.total else "-"),
                row.harness_version or ("all" if row is stats.total else "-"),
                str(row.judged),
                _rate(row.agreement),
                _rate(row.precision),
                _rate(row.recall),
                str(row.true_pass),
                str(row.false_pass),
                str(row.false_fail),
                str(row.true_fail),
                str(row.unblinded),
            )
        console.print(table)
        console.print(
            "fooled: the judge passed an attempt the verifier failed; missed: it failed one the verifier passed. "
            "Unblinded verdicts (judged before the judge was blind) are left out of the rates.",
            highlight=False,
        )

    run_guarded(body)


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"

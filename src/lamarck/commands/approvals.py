"""``lamarck approvals``: what the loop proposed while ``approvals.required`` is on (model promotions, harness
promotions, skill additions) — list them, approve or reject each with a reason. Decisions are recorded as made by
``cli`` and published as ``approval.decided`` events. Errors print one line on stderr and exit with status 2."""

from __future__ import annotations

from typing import Annotated, Literal

import typer
from rich.table import Column, Table

from lamarck.commands.common import UserError, console, container_from_settings, run_guarded

app = typer.Typer(help="Human in the loop: pending promotions and skill additions.", no_args_is_help=True)

DECIDED_BY = "cli"
Reason = Annotated[str, typer.Option("--reason", "-r", help="Why: kept with the decision and its audit event.")]


@app.command("list")
def approvals_list(
    status: Annotated[str, typer.Option(help="pending, approved, rejected or all.")] = "pending",
    limit: Annotated[int, typer.Option(min=1, max=200, help="At most this many, newest first.")] = 50,
) -> None:
    """Approvals, newest first (by default the pending ones)."""

    def body() -> None:
        from lamarck.platform.storage import approvals

        statuses: dict[str, approvals.ApprovalStatus | None] = {
            "pending": "pending",
            "approved": "approved",
            "rejected": "rejected",
            "all": None,
        }
        if status not in statuses:
            raise UserError(f"status {status!r} is not one of {', '.join(statuses)}")
        wanted = statuses[status]
        with container_from_settings() as container, container.db.session() as session:
            rows = [
                (a.id, a.kind, a.subject, a.status, a.decision_reason or a.reason)
                for a in approvals.page(session, status=wanted, limit=limit)
            ]
        if not rows:
            console.print(f"no {'' if wanted is None else wanted + ' '}approvals")
            return
        table = Table(Column("id", no_wrap=True), "kind", Column("subject", no_wrap=True), "status", "reason")
        for row in rows:
            table.add_row(*row)
        console.print(table)

    run_guarded(body)


def _decide(approval_id: str, reason: str, decision: Literal["approve", "reject"]) -> None:
    def body() -> None:
        from lamarck.agents import approvals as decisions
        from lamarck.platform.storage.approvals import AlreadyDecided

        if not reason.strip():
            raise UserError("give a reason with --reason: it is kept with the decision")
        with container_from_settings() as container:
            try:
                act = decisions.approve if decision == "approve" else decisions.reject
                view = act(container, approval_id, reason=reason.strip(), decided_by=DECIDED_BY)
            except (AlreadyDecided, decisions.NotApplicable) as exc:
                raise UserError(str(exc)) from None
        console.print(f"{view.status}: {view.kind} {view.subject}", markup=False, highlight=False)

    run_guarded(body)


@app.command("approve")
def approvals_approve(approval_id: str, reason: Reason) -> None:
    """Approve APPROVAL_ID: the promotion or skill addition is applied as the loop would have."""
    _decide(approval_id, reason, "approve")


@app.command("reject")
def approvals_reject(approval_id: str, reason: Reason) -> None:
    """Reject APPROVAL_ID: the change stays refused, with the reason on its record."""
    _decide(approval_id, reason, "reject")

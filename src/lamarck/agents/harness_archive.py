"""The harness archive: every challenger a round judged, with its parent, source, rationale and scores; the
promoted harness per environment; and the diff between any two versions (prompt text and changed knobs).

Rejected challengers stay in the archive (status ``rejected``) so lineage shows what was tried and why it lost.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel
from sqlalchemy import select
from sqlalchemy.orm import Session

from lamarck.agents.critic import judge_agreement
from lamarck.agents.harness import HarnessSpec, load_harness, promoted_harness, save_harness
from lamarck.agents.harness_critic import HarnessCriticOutput
from lamarck.agents.harness_rating import REFERENCE_RATING, Comparison, ratings
from lamarck.platform.storage import approvals
from lamarck.platform.storage import repositories as repo
from lamarck.platform.storage.database import Database
from lamarck.platform.storage.records import Harness


class HarnessDiff(BaseModel):
    a: str
    b: str
    knobs: dict[str, tuple[Any, Any]]  # dotted field -> (value in a, value in b), prompt and examples apart
    prompt: list[str]  # unified diff of the system prompts
    examples: tuple[int, int]  # worked examples shown by a and by b


def _flat(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_flat(value, f"{name}."))
        else:
            out[name] = value
    return out


def diff(a: HarnessSpec, b: HarnessSpec) -> HarnessDiff:
    left, right = _flat(a.model_dump(mode="json")), _flat(b.model_dump(mode="json"))
    skipped = {"system_prompt", "few_shot.examples"}
    knobs = {
        key: (left.get(key), right.get(key))
        for key in sorted(set(left) | set(right))
        if key not in skipped and left.get(key) != right.get(key)
    }
    prompt = list(
        difflib.unified_diff(
            a.system_prompt.splitlines(),
            b.system_prompt.splitlines(),
            fromfile=a.version_id,
            tofile=b.version_id,
            lineterm="",
        )
    )
    return HarnessDiff(
        a=a.version_id,
        b=b.version_id,
        knobs=knobs,
        prompt=prompt,
        examples=(min(a.few_shot.count, len(a.few_shot.examples)), min(b.few_shot.count, len(b.few_shot.examples))),
    )


def promote_harness(session: Session, *, harness_id: str, reason: str) -> None:
    """Make ``harness_id`` its environment's promoted harness; the one it replaces is retired, kept, and its id
    written into the new one's scores (``previous``) so a rollback is one call."""
    target = repo.get_harness(session, harness_id=harness_id)
    previous = promoted_harness(session, target.environment) if target.environment else None
    if previous == harness_id:
        return
    if previous is not None:
        old = repo.get_harness(session, harness_id=previous)
        old.status = "retired"
    target.status = "promoted"
    target.eval_scores = {**(target.eval_scores or {}), "previous": previous, "promoted_because": reason}
    session.flush()


def rollback_harness(session: Session, environment: str) -> str:
    current = promoted_harness(session, environment)
    if current is None:
        raise repo.NotFound(f"no promoted harness for {environment}")
    previous = (repo.get_harness(session, harness_id=current).eval_scores or {}).get("previous")
    if previous is None:
        raise repo.NotFound(f"{current} has no previous harness to roll back to")
    repo.get_harness(session, harness_id=current).status = "retired"
    repo.get_harness(session, harness_id=previous).status = "promoted"
    session.flush()
    return str(previous)


def record_round(
    db: Database,
    output: HarnessCriticOutput,
    *,
    round_: int,
    run_id: str | None = None,
    hold_for_approval: bool = False,
    model_version: str | None = None,
) -> None:
    """Archive every challenger under its parent (idempotent: a harness is its digest), promote the winner (or,
    with ``hold_for_approval``, ask a person to approve its promotion), and note the round on the parent: what was
    invalid and how many task evaluations it spent (``run_id``: the run that held it, so ``round_done`` can tell a
    resumed run that it already has)."""
    with db.session() as session:
        parent = repo.get_harness(session, harness_id=output.champion_id)
        for result in output.challengers:
            save_harness(
                session,
                result.spec,
                parent_id=output.champion_id,
                status="rejected",
                rationale=f"{result.source}: {result.rationale}",
            )
            record = repo.get_harness(session, harness_id=result.harness_id)
            games = [
                game
                for game in (record.eval_scores or {}).get("games", [])
                if (game.get("round"), game.get("run")) != (round_, run_id)
            ]
            games.append(
                {
                    "round": round_,
                    "run": run_id,
                    "vs": output.champion_id,
                    "model": model_version,
                    "raced": result.raced,
                    "wins": result.wins,
                    "losses": result.losses,
                    "tasks": result.tasks,
                }
            )
            record.eval_scores = {
                **(record.eval_scores or {}),
                "games": games,
                "source": result.source,
                "changed": result.changed,
                "round": round_,
                "run": run_id,
                "rung": result.rung,
                "dev": {
                    "tasks": result.tasks,
                    "wins": result.wins,
                    "losses": result.losses,
                    "p_value": result.p_value,
                    "tokens_per_task": result.tokens_per_task,
                    "champion_tokens_per_task": result.champion_tokens_per_task,
                },
                "decision": result.reason,
            }
        rounds = list((parent.eval_scores or {}).get("rounds", []))
        if not any(entry.get("round") == round_ and entry.get("run") == run_id for entry in rounds):
            rounds.append(
                {
                    "round": round_,
                    "run": run_id,
                    "challengers": len(output.challengers),
                    "promoted": output.promoted,
                    "tasks_evaluated": output.tasks_evaluated,
                    "groups": [g.model_dump(mode="json", exclude={"episode_ids"}) for g in output.groups],
                    "invalid": [r.model_dump(mode="json") for r in output.invalid],
                }
            )
        parent.eval_scores = {**(parent.eval_scores or {}), "rounds": rounds}
        if output.promoted is not None:
            winner = next(r for r in output.challengers if r.harness_id == output.promoted)
            if hold_for_approval:
                hold_harness(session, harness_id=output.promoted, reason=winner.reason, run_id=run_id)
            else:
                promote_harness(session, harness_id=output.promoted, reason=winner.reason)


def raced_against(session: Session, champion_id: str, model_version: str) -> set[str]:
    """The digests of ``champion_id``'s challengers that already played it under ``model_version``. A round leaves
    them out: with a few knob moves drawn at random per round, the same moves came back while others (greedy
    decoding on arithmetic) were never tried. Under a new model version every move may be tried again."""
    children = session.scalars(select(Harness).where(Harness.parent_id == champion_id)).all()
    return {
        child.digest
        for child in children
        if any(
            game.get("vs") == champion_id and game.get("model") == model_version and game.get("raced", True)
            for game in (child.eval_scores or {}).get("games", [])
        )
    }


def hold_harness(session: Session, *, harness_id: str, reason: str, run_id: str | None = None) -> None:
    """A round's winner waits, as a candidate, for a person to approve its promotion."""
    approval = approvals.request(session, kind="harness", subject=harness_id, reason=reason, run_id=run_id)
    record = repo.get_harness(session, harness_id=harness_id)
    record.status = "candidate"
    record.eval_scores = {**(record.eval_scores or {}), "approval": approval.id}


def round_done(session: Session, environment: str, *, run_id: str, round_: int) -> bool:
    """Whether ``run_id`` already recorded its round ``round_`` on ``environment`` (on whichever harness it judged)."""
    for record in session.scalars(select(Harness).where(Harness.environment == environment)):
        if any(
            entry.get("round") == round_ and entry.get("run") == run_id
            for entry in (record.eval_scores or {}).get("rounds", [])
        ):
            return True
    return False


def comparisons(records: Iterable[Harness]) -> list[Comparison]:
    """Every paired result the archive holds: each challenger against the champion it met, once per round."""
    found = []
    for record in records:
        for game in (record.eval_scores or {}).get("games", []):
            found.append(Comparison(a=record.id, b=game["vs"], wins=game["wins"], losses=game["losses"]))
    return found


def archive_ratings(session: Session, environment: str | None = None) -> dict[str, float]:
    """Bradley-Terry ratings (Elo scale) of every archived harness, fitted per environment."""
    query = select(Harness)
    if environment is not None:
        query = query.where(Harness.environment == environment)
    by_environment: dict[str | None, list[Harness]] = {}
    for record in session.scalars(query):
        by_environment.setdefault(record.environment, []).append(record)
    rated: dict[str, float] = {}
    for records in by_environment.values():
        rated.update(ratings(comparisons(records), players=[record.id for record in records]))
    return rated


MIN_JUDGED = 20  # judged episodes a harness (and its parent) needs before their agreement is compared
MAX_AGREEMENT_DROP = 0.1


def judge_flags(session: Session) -> dict[str, str]:
    """Harnesses under which the critic's judge and the verifier disagree markedly more often than under the parent:
    a sign that the harness shapes answers the verifier passes for the wrong reasons (or the judge misreads)."""
    agreement: dict[str, tuple[float, int]] = {}
    for entry in judge_agreement(session):
        harness, n, share = entry["harness_version"], entry["n"], entry["agreement"]
        if isinstance(harness, str) and isinstance(n, int) and isinstance(share, float):
            before = agreement.get(harness, (0.0, 0))  # several critic models: pooled
            agreement[harness] = ((before[0] * before[1] + share * n) / (before[1] + n), before[1] + n)
    flags = {}
    for record in session.scalars(select(Harness).where(Harness.id.in_(list(agreement)))):
        ours, parents = agreement[record.id], agreement.get(record.parent_id or "")
        if parents is None or ours[1] < MIN_JUDGED or parents[1] < MIN_JUDGED:
            continue
        if ours[0] < parents[0] - MAX_AGREEMENT_DROP:
            flags[record.id] = (
                f"judge and verifier agree on {ours[0]:.0%} of {ours[1]} episodes, against "
                f"{parents[0]:.0%} under its parent"
            )
    return flags


def lineage_rows(session: Session, environment: str | None = None) -> list[dict[str, Any]]:
    """Every archived harness, oldest first, with its parent, status, source, dev-slice result, rating and any
    flag (``judge_flags``)."""
    query = select(Harness).order_by(Harness.created_at, Harness.id)
    if environment is not None:
        query = query.where(Harness.environment == environment)
    rated = archive_ratings(session, environment)
    flags = judge_flags(session)
    rows = []
    for record in session.scalars(query):
        scores = record.eval_scores or {}
        dev = scores.get("dev") or {}
        rows.append(
            {
                "id": record.id,
                "environment": record.environment,
                "parent": record.parent_id,
                "status": record.status,
                "source": scores.get("source", "root" if not record.parent_id else ""),
                "wins": dev.get("wins"),
                "losses": dev.get("losses"),
                "p_value": dev.get("p_value"),
                "rating": rated.get(record.id, REFERENCE_RATING),
                "flag": flags.get(record.id, ""),
                "decision": scores.get("decision", record.rationale or ""),
            }
        )
    return rows


def load_pair(session: Session, a: str, b: str) -> tuple[HarnessSpec, HarnessSpec]:
    return load_harness(session, harness_id=a), load_harness(session, harness_id=b)

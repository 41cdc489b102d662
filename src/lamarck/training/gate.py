"""The evaluation gate: a candidate replaces the champion only if it is measurably better where it trained.

Both models run the same held-out tasks (same prompts, same seeds). On the environments the candidate trained on,
the per-task pass/fail pairs are pooled and tested with an exact one-sided McNemar (sign) test on the discordant
pairs: promote only if the candidate wins significantly more tasks than it loses (p < alpha). Every other
environment is guarded by the mirror test: the candidate is refused where it loses significantly more tasks than
it wins (p < ``harm_alpha``) and its pass rate fell by more than ``tolerance``. A raw difference would not do: on
the 33 tasks a guarded environment typically has, two tasks are six points, so a guard on the difference alone
refuses a candidate over noise (the arithmetic-only reference lost two significant gains that way). The guard's
power to see a drop of ``effect`` is recorded with each decision, so a guard too small to protect anything shows.
Each decision is stored as Evaluation records (one per environment, with the decision JSON) and published as a
``model.gate`` event.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from math import comb

from pydantic import BaseModel

from lamarck.curriculum.environment import TaskSpec
from lamarck.curriculum.heldout import heldout_digest, heldout_set, set_name
from lamarck.platform.event_types import GateDecided
from lamarck.platform.events import EventBus
from lamarck.platform.storage import approvals
from lamarck.platform.storage import repositories as repo
from lamarck.platform.storage.database import Database
from lamarck.training import registry

log = logging.getLogger(__name__)

Evaluator = Callable[[str, str, Sequence[TaskSpec]], list[bool]]
"""(model_version, environment, tasks) -> pass/fail per task, in order."""


class EnvComparison(BaseModel):
    environment: str
    trained: bool
    n: int
    candidate_passes: int
    champion_passes: int
    wins: int  # candidate passed, champion failed
    losses: int  # champion passed, candidate failed
    delta: float  # candidate pass rate - champion pass rate
    ok: bool
    note: str = ""
    harm_p: float | None = None  # guarded environments: one-sided p of at least this many losses among discordant
    harm_power: float | None = None  # guarded environments: chance the harm test sees a drop of ``effect``


class GateDecision(BaseModel):
    candidate: str
    champion: str
    promote: bool
    reason: str
    p_value: float | None
    alpha: float
    tolerance: float
    environments: list[EnvComparison]
    harm_alpha: float = 0.1  # significance of the harm test on the environments it did not train on
    look: int = 1  # which gate decision this is under the pre-registered plan
    power: float | None = None  # chance these tasks detect the planned effect at this look's alpha


def sign_test_p(wins: int, losses: int) -> float:
    """One-sided exact p-value of at least ``wins`` successes among ``wins + losses`` fair coin flips."""
    n = wins + losses
    if n == 0:
        return 1.0
    return sum(comb(n, k) for k in range(wins, n + 1)) / (1 << n)


def sign_test_power(n: int, p_win: float, p_loss: float, alpha: float) -> float:
    """Probability that ``n`` paired tasks give a significant sign test at ``alpha`` when each task is a candidate
    win with probability ``p_win`` and a loss with ``p_loss`` (exact, summed over the discordant count)."""
    if n <= 0 or p_win + p_loss <= 0:
        return 0.0
    discordant = p_win + p_loss
    share = p_win / discordant
    power = 0.0
    for d in range(1, n + 1):
        p_d = comb(n, d) * discordant**d * (1 - discordant) ** (n - d)
        critical = next((w for w in range(d + 1) if sign_test_p(w, d - w) < alpha), None)
        if critical is None:
            continue
        power += p_d * sum(comb(d, w) * share**w * (1 - share) ** (d - w) for w in range(critical, d + 1))
    return power


def harm_power(n: int, champion_rate: float, effect: float, harm_alpha: float) -> float:
    """The chance the harm test refuses a candidate that really loses ``effect`` of the pass rate on ``n`` tasks (as
    many as the champion passes allow), winning back a tenth of that by chance: the promotion test's power mirrored."""
    p_loss = min(champion_rate, effect)
    return sign_test_power(n, p_loss, 0.1 * p_loss, harm_alpha)


def look_alpha(alpha: float, look: int, planned_looks: int) -> float:
    """The significance level of the ``look``-th gate decision under a pre-registered plan: the total ``alpha`` is
    spent evenly over ``planned_looks`` decisions (Bonferroni), so consulting the gate again and again on the same
    tasks cannot promote a candidate by luck more often than ``alpha`` overall; beyond the plan nothing is left."""
    if look < 1:
        raise ValueError(f"looks count from 1, got {look}")
    return alpha / planned_looks if look <= planned_looks else 0.0


def paired_counts(new: Sequence[bool], old: Sequence[bool]) -> tuple[int, int]:
    """(wins, losses) of ``new`` against ``old`` over the same tasks: tasks only one of them passed."""
    wins = sum(n and not o for n, o in zip(new, old, strict=True))
    losses = sum(o and not n for n, o in zip(new, old, strict=True))
    return wins, losses


def compare_env(environment: str, candidate: list[bool], champion: list[bool], *, trained: bool) -> EnvComparison:
    if len(candidate) != len(champion):
        raise ValueError(f"{environment}: {len(candidate)} candidate results vs {len(champion)} champion results")
    n = len(candidate)
    wins, losses = paired_counts(candidate, champion)
    delta = (sum(candidate) - sum(champion)) / n if n else 0.0
    return EnvComparison(
        environment=environment,
        trained=trained,
        n=n,
        candidate_passes=sum(candidate),
        champion_passes=sum(champion),
        wins=wins,
        losses=losses,
        delta=delta,
        ok=True,
    )


def decide(
    candidate: str,
    champion: str,
    results: dict[str, tuple[list[bool], list[bool]]],
    trained_environments: Sequence[str],
    *,
    alpha: float = 0.05,
    tolerance: float = 0.05,
    harm_alpha: float = 0.1,
    effect: float = 0.15,
) -> GateDecision:
    """The pure decision from per-task results ``{environment: (candidate, champion)}``."""
    comparisons = [
        compare_env(env, cand, champ, trained=env in trained_environments)
        for env, (cand, champ) in sorted(results.items())
    ]
    trained = [c for c in comparisons if c.trained]
    reasons: list[str] = []
    p_value: float | None = None
    if not trained:
        reasons.append("no held-out results on the environments it trained on")
    else:
        wins, losses = sum(c.wins for c in trained), sum(c.losses for c in trained)
        p_value = sign_test_p(wins, losses)
        if alpha <= 0.0:
            reasons.append(
                "the pre-registered gate looks are used up (alpha spent): raise training.gate_looks to plan more"
            )
        elif wins <= losses or p_value >= alpha:
            reasons.append(
                f"not significantly better on its environments ({wins} wins, {losses} losses, "
                f"p={p_value:.3g} >= {alpha:.3g})"
                if wins > losses
                else f"not better on its environments ({wins} wins, {losses} losses)"
            )
            for c in trained:
                c.ok = False
                c.note = "no significant improvement"
    for c in comparisons:
        if c.trained:
            continue
        c.harm_p = sign_test_p(c.losses, c.wins)
        c.harm_power = harm_power(c.n, c.champion_passes / c.n if c.n else 0.0, effect, harm_alpha)
        counts = f"{c.losses} losses, {c.wins} wins, p={c.harm_p:.3g}"
        if c.delta < -tolerance and c.harm_p < harm_alpha:
            c.ok = False
            c.note = f"pass rate dropped {-c.delta:.2f}, significantly ({counts} < {harm_alpha:.3g})"
            reasons.append(f"worse on {c.environment} by {-c.delta:.2f} ({counts})")
        elif c.delta < -tolerance:
            c.note = f"pass rate dropped {-c.delta:.2f}, within noise ({counts} >= {harm_alpha:.3g})"
    promote = not reasons
    reason = (
        f"better on {', '.join(c.environment for c in trained)} (p={p_value:.3g}) and not significantly worse elsewhere"
        if promote
        else "; ".join(reasons)
    )
    return GateDecision(
        candidate=candidate,
        champion=champion,
        promote=promote,
        reason=reason,
        p_value=p_value,
        alpha=alpha,
        tolerance=tolerance,
        environments=comparisons,
        harm_alpha=harm_alpha,
    )


def run_gate(
    db: Database,
    *,
    candidate: str,
    champion: str,
    evaluator: Evaluator,
    environments: Sequence[str],
    trained_environments: Sequence[str],
    per_level: int = 5,
    alpha: float = 0.05,
    tolerance: float = 0.05,
    harm_alpha: float = 0.1,
    effect: float = 0.15,
    bus: EventBus | None = None,
    tasks: dict[str, list[TaskSpec]] | None = None,
    look: int = 1,
    power: float | None = None,
    hold_for_approval: bool = False,
) -> GateDecision:
    """Evaluate both models on the same held-out tasks, decide, record, and promote if the gate passes (or, with
    ``hold_for_approval``, ask a person to approve the promotion)."""
    task_sets = tasks or {env: heldout_set(env, per_level=per_level) for env in environments}
    results = {
        env: (evaluator(candidate, env, task_sets[env]), evaluator(champion, env, task_sets[env]))
        for env in environments
    }
    decision = decide(
        candidate,
        champion,
        results,
        trained_environments,
        alpha=alpha,
        tolerance=tolerance,
        harm_alpha=harm_alpha,
        effect=effect,
    )
    decision.look, decision.power = look, power
    record_decision(db, decision, results, task_sets, per_level=per_level, bus=bus, hold_for_approval=hold_for_approval)
    return decision


def record_decision(
    db: Database,
    decision: GateDecision,
    results: dict[str, tuple[list[bool], list[bool]]],
    task_sets: dict[str, list[TaskSpec]],
    *,
    per_level: int,
    bus: EventBus | None = None,
    hold_for_approval: bool = False,
) -> None:
    payload = decision.model_dump(mode="json")
    with db.session() as session:
        for comparison in decision.environments:
            env = comparison.environment
            cand, champ = results[env]
            ids = [t.source_id or t.fingerprint[:16] for t in task_sets[env]]
            try:
                digest = heldout_digest(env, per_level=per_level)
            except Exception:  # an environment without the registry (tests, plug-ins not installed)
                digest = None
            repo.add_evaluation(
                session,
                kind="gate",
                model_version=decision.candidate,
                environment=env,
                eval_set=set_name(env),
                n_tasks=comparison.n,
                score=comparison.candidate_passes / comparison.n if comparison.n else 0.0,
                per_task={
                    "candidate": dict(zip(ids, cand, strict=True)),
                    "champion": dict(zip(ids, champ, strict=True)),
                },
                decision={**payload, "environment": env, "heldout_digest": digest},
            )
        scores = {
            "gate": {
                c.environment: {"candidate": c.candidate_passes, "champion": c.champion_passes, "n": c.n}
                for c in decision.environments
            },
            "gate_p_value": decision.p_value,
            "gate_look": decision.look,
        }
        registry.record_decision(session, version_id=decision.candidate, scores=scores, reason=decision.reason)
        if decision.promote and hold_for_approval:
            approvals.request(session, kind="model", subject=decision.candidate, reason=f"gate: {decision.reason}")
        elif decision.promote:
            registry.promote(session, version_id=decision.candidate, reason=f"gate: {decision.reason}")
    log.info(
        "gate: %s vs %s -> %s (%s)",
        decision.candidate,
        decision.champion,
        ("waits for approval" if hold_for_approval else "promoted") if decision.promote else "kept as candidate",
        decision.reason,
    )
    if bus is not None:
        bus.publish(GateDecided.model_validate(payload))

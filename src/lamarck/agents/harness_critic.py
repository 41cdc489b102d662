"""The harness-critic: the fourth agent, which improves the harness itself instead of the weights.

One round reads the recent failures grouped by cause, proposes challengers to the champion harness from three
sources (``harness_proposals``), refuses those that break a guard rail, and runs champion/challenger on the
development slice (training seeds, never held-out): every harness meets the same tasks and seeds; the champion runs
the whole slice first, a small batch from its edge (the levels where it sometimes fails) then rejects the weak
challengers early (successive halving), only survivors see the whole slice, and a challenger is
promoted only when an exact paired sign test says it wins more tasks than it loses (alpha split over the
survivors) while it spends at most ``max_token_increase`` more tokens per task. Every evaluation counts against
the round's budget of task evaluations; what the budget does not reach is rejected with that reason.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from lamarck.agents.evaluation import evaluate
from lamarck.agents.harness import FewShotExample, HarnessSpec
from lamarck.agents.harness_proposals import (
    FailureCase,
    FailureGroup,
    KnobSpace,
    Proposal,
    Rejected,
    Source,
    demonstration_proposals,
    group_failures,
    guard,
    knob_proposals,
    parse_rewrite,
    rewrite_request,
)
from lamarck.curriculum.environment import Environment, TaskSpec
from lamarck.platform.llm.gateway import GatewayError, LLMGateway
from lamarck.platform.settings import HarnessCriticSettings
from lamarck.training.gate import paired_counts, sign_test_p

log = logging.getLogger(__name__)


class DevResult(BaseModel):
    """Per task, in order: passed or not, the tokens the harness spent on it (all its samples), and the share of its
    samples whose output parsed to an answer (empty when the evaluator does not say)."""

    passed: list[bool]
    tokens: list[int]
    answered: list[float] = Field(default_factory=list)

    def answer_rate(self, n: int | None = None) -> float | None:
        shares = self.answered[:n] if n is not None else self.answered
        return sum(shares) / len(shares) if shares else None


HarnessEvaluator = Callable[[HarnessSpec, Sequence[TaskSpec]], DevResult]


class HarnessCriticInput(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    champion: HarnessSpec
    dev_tasks: list[TaskSpec]  # the development slice: training seeds only
    # more dev-slice tasks; those at the champion's edge levels join the slice (the rest decide nothing)
    reserve_tasks: list[TaskSpec] = Field(default_factory=list)
    failures: list[FailureCase] = Field(default_factory=list)
    failed_replies: list[str] = Field(default_factory=list)  # a few of the model's failed replies, for the rewrite
    demonstrations: list[tuple[int, FewShotExample]] = Field(default_factory=list)  # (difficulty, verified success)
    registered_tools: list[str] = Field(default_factory=list)
    round: int = 0
    # digests of challengers that already raced this champion under the same model: not proposed again, so rounds
    # go on to moves not yet tried (``harness_archive.raced_against``)
    tried: set[str] = Field(default_factory=set)


class ChallengerResult(BaseModel):
    harness_id: str
    spec: HarnessSpec
    source: Source
    rationale: str
    changed: dict[str, object] = Field(default_factory=dict)
    status: Literal["promoted", "rejected"]
    reason: str
    rung: int  # 0: rejected on the small batch (or before it); 1: judged on the whole slice
    raced: bool = True  # False: the budget ran out before it played the champion, so a later round may try it
    tasks: int = 0
    wins: int = 0
    losses: int = 0
    p_value: float | None = None
    tokens_per_task: float | None = None
    champion_tokens_per_task: float | None = None


class HarnessCriticOutput(BaseModel):
    champion_id: str  # before the round
    promoted: str | None = None
    groups: list[FailureGroup]
    challengers: list[ChallengerResult]
    invalid: list[Rejected] = Field(default_factory=list)  # proposals that never became challengers
    tasks_evaluated: int = 0


class _Budget:
    def __init__(self, tasks: int) -> None:
        self.left = tasks
        self.used = 0

    def take(self, n: int) -> bool:
        if n > self.left:
            return False
        self.left -= n
        self.used += n
        return True


class _Champion:
    """The champion's results, evaluated once per task and shared by every challenger."""

    def __init__(self, spec: HarnessSpec, tasks: Sequence[TaskSpec], evaluate: HarnessEvaluator) -> None:
        self.spec, self.tasks, self.evaluate = spec, list(tasks), evaluate
        self.passed: list[bool] = []
        self.tokens: list[int] = []
        self.answered: list[float] = []

    def first(self, n: int, budget: _Budget) -> bool:
        missing = self.tasks[len(self.passed) : n]
        if not missing:
            return True
        if not budget.take(len(missing)):
            return False
        self._record(self.evaluate(self.spec, missing))
        return True

    def extend(self, tasks: Sequence[TaskSpec], budget: _Budget) -> None:
        """Add ``tasks`` to the slice, evaluated, if the budget has room for them (after ``first`` ran on it all)."""
        if tasks and budget.take(len(tasks)):
            self.tasks += tasks
            self._record(self.evaluate(self.spec, tasks))

    def _record(self, result: DevResult) -> None:
        self.passed += result.passed
        self.tokens += result.tokens
        self.answered += result.answered

    def answer_rate(self, n: int) -> float | None:
        return DevResult(passed=self.passed, tokens=self.tokens, answered=self.answered).answer_rate(n)

    def reordered(self, order: Sequence[int]) -> _Champion:
        """The same results with the tasks in ``order`` (a permutation of the evaluated tasks)."""
        moved = _Champion(self.spec, [self.tasks[i] for i in order], self.evaluate)
        moved.passed = [self.passed[i] for i in order]
        moved.tokens = [self.tokens[i] for i in order]
        moved.answered = [self.answered[i] for i in order] if self.answered else []
        return moved


def edge_levels(tasks: Sequence[TaskSpec], passed: Sequence[bool]) -> list[int]:
    """The champion's edge, where a challenger can differ from it: the levels it passes some but not all of, and
    the lowest level above everything it passes, which it fails outright (where a better harness first shows); when
    it passes no level only partly, the highest level it fully passes as well."""
    by_level: dict[int, list[int]] = {}
    for i, task in enumerate(tasks):
        by_level.setdefault(task.difficulty, []).append(i)
    rate = {level: sum(passed[i] for i in items) / len(items) for level, items in by_level.items()}
    edge = {level for level, r in rate.items() if 0 < r < 1}
    solved = [level for level, r in rate.items() if r == 1]
    if not edge and solved:
        edge.add(max(solved))
    top = max((level for level, r in rate.items() if r > 0), default=None)
    above = [level for level, r in rate.items() if r == 0 and (top is None or level > top)]
    if above:
        edge.add(min(above))
    return sorted(edge)


def edge_first(tasks: Sequence[TaskSpec], passed: Sequence[bool]) -> list[int]:
    """Task indices with the champion's edge (``edge_levels``) first, its levels taken in turn; then the other
    levels in slice order.

    A challenger's first batch decides whether it goes on, and only tasks where the two harnesses can disagree decide
    anything: on levels the champion always passes or always fails both usually agree, so a first batch of the
    slice's easiest tasks ended 0-0 for every challenger of a reference run."""
    by_level: dict[int, list[int]] = {}
    for i, task in enumerate(tasks):
        by_level.setdefault(task.difficulty, []).append(i)
    edge = edge_levels(tasks, passed)
    order: list[int] = []
    queues = [list(by_level[level]) for level in edge]
    while any(queues):
        order += [queue.pop(0) for queue in queues if queue]
    return order + [i for level in sorted(by_level) if level not in edge for i in by_level[level]]


class HarnessCritic:
    def __init__(
        self,
        evaluate: HarnessEvaluator,
        settings: HarnessCriticSettings,
        gateway: LLMGateway | None = None,
        knobs: KnobSpace | None = None,
    ) -> None:
        self.evaluate = evaluate
        self.settings = settings
        self.gateway = gateway
        self.knobs = knobs or KnobSpace()

    def run(self, request: HarnessCriticInput) -> HarnessCriticOutput:
        settings = self.settings
        groups = group_failures(request.failures)
        rng = random.Random(f"{settings.seed}:{request.round}:{request.champion.version_id}")
        proposals, invalid = self.propose(request, groups, rng)
        budget = _Budget(settings.budget_tasks)
        early = min(settings.early_tasks, len(request.dev_tasks))
        results: list[ChallengerResult] = []
        survivors: list[tuple[Proposal, DevResult]] = []
        scout = _Champion(request.champion, request.dev_tasks, self.evaluate)
        if not scout.first(len(request.dev_tasks), budget):
            results = [
                self._rejected(p, "budget exhausted before the champion's slice", 0, raced=False) for p in proposals
            ]
            return HarnessCriticOutput(
                champion_id=request.champion.version_id,
                groups=groups,
                challengers=results,
                invalid=invalid,
                tasks_evaluated=budget.used,
            )
        edge = set(edge_levels(scout.tasks, scout.passed))
        scout.extend([task for task in request.reserve_tasks if task.difficulty in edge], budget)
        champion = scout.reordered(edge_first(scout.tasks, scout.passed))
        dev_tasks = champion.tasks
        for proposal in proposals:
            if not budget.take(early):
                results.append(self._rejected(proposal, "budget exhausted before its first batch", 0, raced=False))
                continue
            batch = self.evaluate(proposal.spec, dev_tasks[:early])
            wins, losses = paired_counts(batch.passed, champion.passed[:early])
            if (broken := self._stops_parsing(batch, champion, early)) is not None:
                results.append(self._rejected(proposal, broken, 0, tasks=early, wins=wins, losses=losses))
                continue
            if wins < losses or (wins == losses == 0 and settings.early_needs_a_win):
                results.append(
                    self._rejected(
                        proposal,
                        f"early rejection on {early} tasks: {wins} wins, {losses} losses",
                        0,
                        tasks=early,
                        wins=wins,
                        losses=losses,
                    )
                )
                continue
            survivors.append((proposal, batch))
        survivors.sort(key=lambda item: -sum(item[1].passed))
        keep = survivors[: max(1, settings.keep)]
        for proposal, _ in survivors[len(keep) :]:
            results.append(
                self._rejected(proposal, f"not among the best {len(keep)} on the first batch", 0, tasks=early)
            )
        alpha = settings.alpha / max(1, len(keep))
        judged: list[ChallengerResult] = []
        for proposal, batch in keep:
            rest = dev_tasks[early:]
            if rest and not budget.take(len(rest)):
                results.append(
                    self._rejected(proposal, "budget exhausted before its whole slice", 0, tasks=early, raced=False)
                )
                continue
            full = batch if not rest else _concat(batch, self.evaluate(proposal.spec, rest))
            judged.append(self._judge(proposal, full, champion, alpha))
        winners = sorted((r for r in judged if r.status == "promoted"), key=lambda r: (r.p_value or 1.0, -r.wins))
        for extra in winners[1:]:
            extra.status, extra.reason = "rejected", f"passed, but {winners[0].harness_id} was better ({extra.reason})"
        results += judged
        return HarnessCriticOutput(
            champion_id=request.champion.version_id,
            promoted=winners[0].harness_id if winners else None,
            groups=groups,
            challengers=results,
            invalid=invalid,
            tasks_evaluated=budget.used,
        )

    # proposals

    def propose(
        self, request: HarnessCriticInput, groups: Sequence[FailureGroup], rng: random.Random
    ) -> tuple[list[Proposal], list[Rejected]]:
        settings = self.settings
        parent = request.champion
        proposals = [
            *demonstration_proposals(parent, request.demonstrations, groups, rng, settings.demonstration_proposals),
            *knob_proposals(parent, self.knobs, rng, settings.knob_proposals, tried=request.tried),
        ]
        invalid: list[Rejected] = []
        if settings.rewrite_proposals > 0:
            for _ in range(settings.rewrite_proposals):
                rewritten = self.rewrite(parent, groups, request.failed_replies)
                if isinstance(rewritten, Rejected):
                    invalid.append(rewritten)
                else:
                    proposals.append(rewritten)
        valid: list[Proposal] = []
        seen = {parent.digest(), *request.tried}
        for proposal in proposals:
            problem = guard(parent, proposal.spec, request.registered_tools)
            if problem is not None:
                invalid.append(Rejected(source=proposal.source, reason=problem, rationale=proposal.rationale))
            elif proposal.spec.digest() not in seen:
                seen.add(proposal.spec.digest())
                valid.append(proposal)
        return valid, invalid

    def rewrite(
        self, parent: HarnessSpec, groups: Sequence[FailureGroup], replies: Sequence[str]
    ) -> Proposal | Rejected:
        if self.gateway is None:
            return Rejected(source="rewrite", reason="no harness_critic model route")
        prompt = rewrite_request(parent, groups, replies)
        try:
            result = self.gateway.complete(
                "harness_critic", [{"role": "user", "content": prompt}], max_tokens=self.settings.rewrite_max_tokens
            )
        except GatewayError as exc:
            return Rejected(source="rewrite", reason=f"the harness_critic model could not be reached: {exc}")
        return parse_rewrite(parent, result.choices[0] if result.choices else "")

    # judging

    def _judge(self, proposal: Proposal, result: DevResult, champion: _Champion, alpha: float) -> ChallengerResult:
        wins, losses = paired_counts(result.passed, champion.passed)
        p_value = sign_test_p(wins, losses)
        n = len(result.passed)
        tokens, champion_tokens = sum(result.tokens) / n, sum(champion.tokens) / n
        limit = champion_tokens * (1 + self.settings.max_token_increase)
        status: Literal["promoted", "rejected"] = "rejected"
        if (broken := self._stops_parsing(result, champion, n)) is not None:
            reason = broken
        elif wins <= losses:
            reason = f"not better: {wins} wins, {losses} losses"
        elif p_value >= alpha:
            reason = f"not significantly better: {wins} wins, {losses} losses, p={p_value:.3g} >= {alpha:.3g}"
        elif tokens > limit:
            reason = (
                f"better ({wins}-{losses}, p={p_value:.3g}) but {tokens:.0f} tokens per task against the "
                f"champion's {champion_tokens:.0f} (limit {limit:.0f})"
            )
        else:
            status, reason = "promoted", f"better on {n} dev tasks: {wins} wins, {losses} losses, p={p_value:.3g}"
        return ChallengerResult(
            harness_id=proposal.spec.version_id,
            spec=proposal.spec,
            source=proposal.source,
            rationale=proposal.rationale,
            changed=proposal.changed,
            status=status,
            reason=reason,
            rung=1,
            tasks=n,
            wins=wins,
            losses=losses,
            p_value=p_value,
            tokens_per_task=tokens,
            champion_tokens_per_task=champion_tokens,
        )

    def _stops_parsing(self, result: DevResult, champion: _Champion, n: int) -> str | None:
        """Why the challenger's outputs parse too much less often than the champion's, or None."""
        ours, theirs = result.answer_rate(n), champion.answer_rate(n)
        if ours is None or theirs is None or ours >= theirs - self.settings.max_answer_drop:
            return None
        return (
            f"its outputs stop parsing: {ours:.0%} of samples gave an answer against the champion's {theirs:.0%} "
            f"(at most {self.settings.max_answer_drop:.0%} less)"
        )

    @staticmethod
    def _rejected(
        proposal: Proposal,
        reason: str,
        rung: int,
        *,
        tasks: int = 0,
        wins: int = 0,
        losses: int = 0,
        raced: bool = True,
    ) -> ChallengerResult:
        return ChallengerResult(
            harness_id=proposal.spec.version_id,
            spec=proposal.spec,
            source=proposal.source,
            rationale=proposal.rationale,
            changed=proposal.changed,
            status="rejected",
            reason=reason,
            rung=rung,
            tasks=tasks,
            wins=wins,
            losses=losses,
            raced=raced,
        )


def _concat(first: DevResult, second: DevResult) -> DevResult:
    return DevResult(
        passed=first.passed + second.passed,
        tokens=first.tokens + second.tokens,
        answered=first.answered + second.answered,
    )


def dev_evaluator(
    gateway: LLMGateway, env: Environment, model_version: str, *, seed: int = 0, max_concurrency: int = 32
) -> HarnessEvaluator:
    """Runs the harness as it is (its own sampling and samples per task, no skills or lessons) on dev tasks; a task
    passes when at least half its samples pass. Every harness meets the same seeds, so results pair up."""

    def evaluate_harness(harness: HarnessSpec, tasks: Sequence[TaskSpec]) -> DevResult:
        result = evaluate(
            gateway, env, tasks, model_version, harness, seed=seed, max_concurrency=max_concurrency, as_sampled=True
        )
        return DevResult(
            passed=[share >= 0.5 for share in result.per_task.values()], tokens=result.tokens, answered=result.answered
        )

    return evaluate_harness


__all__ = [
    "ChallengerResult",
    "DevResult",
    "HarnessCritic",
    "HarnessCriticInput",
    "HarnessCriticOutput",
    "KnobSpace",
    "dev_evaluator",
]

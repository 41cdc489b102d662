"""The run's side of distillation: queue train jobs, gate the candidates they produce, and hand over the champion.

Between generations (never inside the graph) a run asks for two things:
- ``gate_pending``: every candidate the gate has not judged is evaluated against the champion on the same held-out
  tasks (the champion's greedy results are reused from earlier gates), and promoted only if the gate passes;
- ``schedule``: when no job of this run is in flight and enough new verified episodes exist, one train job is queued.

Training runs in a Celery worker, so rollouts go on with the current champion meanwhile; a run that follows the
champion picks up a promotion at its next generation. The gate runs here, in the serving process, because it
needs the engine that is already warm.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from lamarck.agents.evaluation import gate_evaluator, release_harness
from lamarck.agents.student_check import student_view_check
from lamarck.curriculum.environment import Environment, TaskSpec
from lamarck.curriculum.heldout import dev_set, heldout_set
from lamarck.curriculum.registry import get_environment, list_environments
from lamarck.platform.container import Container
from lamarck.platform.event_types import DistillationError, GateDecided, JobFailed, JobSucceeded
from lamarck.platform.events import EventBus
from lamarck.platform.storage import repositories as repo
from lamarck.training import registry
from lamarck.training.gate import GateDecision, look_alpha, paired_counts, run_gate, sign_test_power
from lamarck.training.pipeline import ScheduleResult, Sender, maybe_schedule_distillation

log = logging.getLogger(__name__)

TERMINAL_JOB_EVENTS = (JobSucceeded.TYPE, JobFailed.TYPE)


@dataclass
class Distillation:
    container: Container
    send: Sender
    bus: EventBus
    notify: Callable[[str], None] = lambda message: None
    jobs: list[str] = field(default_factory=list)  # job keys this run queued, oldest first
    failed: set[str] = field(default_factory=set)
    phases: bool = False

    def wait_for_jobs(self) -> None:
        if self.in_flight():
            self.notify("training phase: rollouts wait for the job, then its candidate is gated")
            self.drain()

    def between_generations(self, run_id: str) -> None:
        """Gate, then schedule; a failure here is reported and the run goes on with the current champion. With
        phases on (embedded mode), a queued job is waited for and gated before rollouts resume: training and
        rollouts would otherwise share the same cores and starve each other."""
        steps = [self.gate_pending, self.schedule]
        if self.phases:
            steps.append(self.wait_for_jobs)
        for step in steps:
            try:
                step()
            except Exception as exc:
                message = one_line(exc)
                log.exception("distillation step %s failed", step.__name__)
                self.bus.publish(DistillationError(step=step.__name__, error=message), run_id=run_id)
                self.notify(f"distillation {step.__name__} failed: {message}")

    # scheduling

    def schedule(self) -> ScheduleResult | None:
        """Queue one train job if none of ours is in flight and enough new data exists; None while one runs."""
        if self.in_flight():
            return None
        built = {name: get_environment(name, sandbox=self.container.sandbox) for name in list_environments()}
        environments = {name: env for name, env in built.items() if env.training_allowed}
        served = {name: release_harness(self.container.db, env) for name, env in environments.items()}
        check = student_view_check(self.container.db, environments, served.__getitem__)
        result = maybe_schedule_distillation(self.container, self.send, bus=self.bus, check=check)
        if result.scheduled and result.job is not None:
            self.jobs.append(result.job)
            self.notify(f"distillation queued from {result.parent_version}: {result.reason}")
        return result

    def in_flight(self) -> list[str]:
        """Our queued jobs that have not ended (succeeded or failed) in the job log."""
        pending = []
        with self.container.db.session() as session:
            for job in self.jobs:
                event = repo.latest_job_event(session, job=job)
                if event is None or event.type not in TERMINAL_JOB_EVENTS:
                    pending.append(job)
                elif event.type == JobFailed.TYPE and job not in self.failed:
                    self.failed.add(job)
                    self.notify(f"distillation {job} failed: {event.payload.get('error', 'see the worker log')}")
        return pending

    def drain(
        self,
        *,
        timeout: float | None = None,
        poll_seconds: float = 2.0,
        on_wait: Callable[[list[str]], None] | None = None,
    ) -> bool:
        """Wait for our in-flight jobs, then gate what they made; False if the timeout came first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while pending := self.in_flight():
            if deadline is not None and time.monotonic() >= deadline:
                return False
            if on_wait is not None:
                on_wait(pending)
            time.sleep(poll_seconds)
        self.gate_pending()
        return True

    # the gate

    def gate_pending(self) -> list[GateDecision]:
        """Judge every undecided candidate; one whose evaluation fails (say, an adapter that will not load) is
        recorded as refused with the error, so it is not retried forever and the champion keeps serving."""
        with self.container.db.session() as session:
            candidates = registry.undecided_candidates(session)
        decisions = []
        for candidate in candidates:
            try:
                decisions.append(self.gate(candidate.id))
            except Exception as exc:
                message = one_line(exc)
                log.exception("gate of %s failed", candidate.id)
                with self.container.db.session() as session:
                    registry.record_decision(
                        session,
                        version_id=candidate.id,
                        scores={"gate": {"error": message}},
                        reason=f"gate could not evaluate it: {message}",
                    )
                self.bus.publish(GateDecided(candidate=candidate.id, promote=False, error=message))
                self.notify(f"gate: {candidate.id} refused — could not evaluate it: {message}")
        return decisions

    def gate(self, candidate: str) -> GateDecision:
        settings = self.container.settings.training
        with self.container.db.session() as session:
            version = registry.show(session, version_id=candidate)
            champion = registry.champion(session)
            look = registry.gate_looks(session) + 1
            inherited = registry.lineage_environments(session, version_id=champion)
        trained = list(version.training_metrics.get("environments") or [])
        guarded = settings.gate_environments
        environments = gate_environments(trained, None if guarded is None else [*inherited, *guarded])
        envs = {name: get_environment(name, sandbox=self.container.sandbox) for name in environments}
        counts = version.training_metrics.get("counts") or {}
        tasks = {
            name: gate_tasks(
                envs[name],
                settings.gate_per_level,
                settings.gate_focus_per_level,
                focus=focus_levels(counts.get(name, {}), settings.gate_focus_min_share),
            )
            for name in environments
        }
        alpha = look_alpha(settings.gate_alpha, look, settings.gate_looks)
        if alpha <= 0.0:
            return self._refuse_unplanned(candidate, champion, trained, look)
        evaluator = gate_evaluator(self.container.gateway, envs, self.container.db)
        power = self._power(evaluator, champion, trained, tasks, alpha)
        sizes = ", ".join(f"{name} ({len(tasks[name])} tasks)" for name in environments)
        self.notify(
            f"gate look {look}/{settings.gate_looks}: {candidate} vs {champion} on {sizes}, alpha {alpha:.3g}, "
            f"power {power:.2f} for +{settings.gate_effect:.2f}"
        )
        decision = run_gate(
            self.container.db,
            candidate=candidate,
            champion=champion,
            evaluator=evaluator,
            environments=environments,
            trained_environments=trained,
            per_level=settings.gate_per_level,
            alpha=alpha,
            tolerance=settings.gate_tolerance,
            harm_alpha=settings.gate_harm_alpha,
            effect=settings.gate_effect,
            bus=self.bus,
            tasks=tasks,
            look=look,
            power=power,
            hold_for_approval=self.container.settings.approvals.required,
        )
        gated_under = {name: release_harness(self.container.db, env).version_id for name, env in envs.items()}
        with self.container.db.session() as session:  # a release is the model with the harnesses it was gated under
            registry.record_decision(
                session, version_id=candidate, reason=decision.reason, scores={"gate_harnesses": gated_under}
            )
        verdict = "kept as candidate"
        if decision.promote:
            verdict = "waits for approval" if self.container.settings.approvals.required else "promoted"
        self.notify(f"gate: {candidate} {verdict} — {decision.reason}")
        for c in decision.environments:
            if not c.trained and c.harm_p is not None:
                self.notify(
                    f"guard {c.environment}: {c.champion_passes} -> {c.candidate_passes} of {c.n} ({c.losses} losses, "
                    f"{c.wins} wins, p={c.harm_p:.3g}); power {c.harm_power or 0.0:.2f} to see "
                    f"-{settings.gate_effect:.2f} at {decision.harm_alpha:.3g}"
                )
        if not decision.promote and trained:
            self.compare_on_dev(candidate, champion, trained, decision.reason)
        return decision

    def _refuse_unplanned(self, candidate: str, champion: str, trained: Sequence[str], look: int) -> GateDecision:
        """A look beyond the pre-registered plan can promote nothing, so the gate's tasks are not run at all."""
        settings = self.container.settings.training
        reason = (
            f"the pre-registered gate looks are used up (look {look} of {settings.gate_looks}, alpha spent): "
            "raise training.gate_looks to plan more"
        )
        decision = GateDecision(
            candidate=candidate,
            champion=champion,
            promote=False,
            reason=reason,
            p_value=None,
            alpha=0.0,
            tolerance=settings.gate_tolerance,
            harm_alpha=settings.gate_harm_alpha,
            environments=[],
            look=look,
            power=0.0,
        )
        with self.container.db.session() as session:
            registry.record_decision(
                session,
                version_id=candidate,
                reason=reason,
                scores={"gate": {}, "gate_p_value": None, "gate_look": look},
            )
        self.bus.publish(GateDecided.model_validate(decision.model_dump(mode="json")))
        self.notify(f"gate: {candidate} kept as candidate — {reason}")
        if trained:
            self.compare_on_dev(candidate, champion, trained, reason)
        return decision

    def compare_on_dev(self, candidate: str, champion: str, trained: Sequence[str], reason: str) -> bool:
        """Greedy candidate against champion on the development slice of its environments; a refused candidate
        that wins more of those tasks than it loses is marked ``dev_better`` and may roll out for the teacher
        (``registry.rollout_sampler``). The gate's tasks are not consulted: they decide promotion only."""
        per_level = self.container.settings.training.sampler_dev_per_level
        envs = {name: get_environment(name, sandbox=self.container.sandbox) for name in trained}
        evaluator = gate_evaluator(self.container.gateway, envs, self.container.db, slice_="dev")
        wins = losses = tasks = 0
        for name, env in envs.items():
            dev = dev_set(name, per_level=per_level, env=env)
            won, lost = paired_counts(evaluator(candidate, name, dev), evaluator(champion, name, dev))
            wins, losses, tasks = wins + won, losses + lost, tasks + len(dev)
        better = wins > losses
        with self.container.db.session() as session:
            registry.record_decision(
                session,
                version_id=candidate,
                reason=reason,
                scores={"dev": {"tasks": tasks, "wins": wins, "losses": losses}, "dev_better": better},
            )
        if better:
            self.notify(f"{candidate} won {wins} and lost {losses} of {tasks} dev tasks: it rolls out for the teacher")
        return better

    def _power(
        self,
        evaluator: Callable[[str, str, Sequence[TaskSpec]], list[bool]],
        champion: str,
        trained: Sequence[str],
        tasks: dict[str, list[TaskSpec]],
        alpha: float,
    ) -> float:
        """The chance the trained environments' tasks detect a gain of ``gate_effect`` at this look: the champion's
        failures are where a candidate can win; losses are assumed at a tenth of the wins."""
        effect = self.container.settings.training.gate_effect
        n = sum(len(tasks[name]) for name in trained)
        if n == 0 or alpha <= 0.0:
            return 0.0
        failed = sum(not passed for name in trained for passed in evaluator(champion, name, tasks[name])) / n
        p_win = min(failed, effect * 1.1)
        return sign_test_power(n, p_win, 0.1 * p_win, alpha)


def gate_tasks(env: Environment, per_level: int, focus_per_level: int, *, focus: Sequence[int]) -> list[TaskSpec]:
    """Held-out tasks for the gate: ``per_level`` at every level, ``focus_per_level`` at the levels the candidate
    trained on, where a change is expected and the paired test needs the tasks to see it."""
    deepest = max(per_level, focus_per_level) if focus else per_level
    taken: dict[int, int] = {}
    chosen = []
    for task in heldout_set(env.name, per_level=deepest, env=env):
        limit = focus_per_level if task.difficulty in focus else per_level
        if taken.get(task.difficulty, 0) < limit:
            taken[task.difficulty] = taken.get(task.difficulty, 0) + 1
            chosen.append(task)
    return chosen


def focus_levels(rows_per_level: Mapping[str, int], min_share: float) -> list[int]:
    """The levels the gate looks closely at: those holding at least ``min_share`` of the candidate's rows in the
    environment. A level with a row or two is unlikely to move, and at 50 tasks a level it costs as much to gate
    as one the job mostly trained on."""
    total = sum(rows_per_level.values())
    return sorted(int(level) for level, rows in rows_per_level.items() if rows > 0 and rows >= min_share * total)


def one_line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {' '.join(str(exc).split())}"[:500]


def gate_environments(trained: Sequence[str], configured: Sequence[str] | None) -> list[str]:
    """The held-out sets a candidate is judged on: its own environments, then the configured (or all) others. The
    gate adds every environment the champion's lineage was trained on to the configured ones: a reference run
    promoted two python_functions candidates judged on python_functions and string_ops only, and the champion's
    report-slice arithmetic fell from 30.0% to 21.1% unseen."""
    others = (
        configured
        if configured is not None
        else [name for name in list_environments() if get_environment(name).training_allowed]
    )
    return list(dict.fromkeys([*trained, *others]))


@contextmanager
def open_distillation(
    container: Container, bus: EventBus, enabled: bool = True, notify: Callable[[str], None] | None = None
) -> Iterator[Distillation | None]:
    """A run's distillation driver (None when disabled), with an embedded worker in embedded mode that is
    stopped when the block ends; in distributed mode jobs go to the broker for ``lamarck worker`` hosts."""
    if not enabled:
        yield None
        return
    from lamarck.platform.workers import app, configure, start_embedded_worker
    from lamarck.training.tasks import send

    configure(app, container.settings)
    worker = start_embedded_worker(container.settings)
    try:
        yield Distillation(
            container,
            send=send,
            bus=bus,
            notify=notify or (lambda message: log.info(message)),
            phases=container.settings.training.phases and worker is not None,
        )
    finally:
        if worker is not None:
            worker.stop()

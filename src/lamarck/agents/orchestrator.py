"""The evolution loop as a LangGraph graph, checkpointed after every node so a killed run resumes where it stopped.

    propose -> execute -> critique -> (induce skills | assess: profile, skill credit) -> record
       ^                                                                                   |
       |                       every K episodes: improve_harness (the harness-critic) <----+
       |                                            |                                      |
       +--------------------------------------------+---- next generation, within budget --+

The graph's thread id is the run id. ``Orchestrator.run`` drives a run from its checkpoint (or
from the start), checks between nodes whether a stop was requested, and records the run's
status; ``resume`` does the same for a run that was stopped, failed or killed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from lamarck.agents.checkpoints import open_checkpointer
from lamarck.agents.critic import Critic
from lamarck.agents.curriculum_proposer import CurriculumProposer
from lamarck.agents.evaluation import release_harness
from lamarck.agents.executor import Executor
from lamarck.agents.harness import HarnessSpec, load_harness
from lamarck.agents.nodes import LoopListener, LoopNodes
from lamarck.agents.rollout_queue import rollout_queue
from lamarck.agents.runs import (
    RunConfig,
    RunError,
    check_resumable,
    claim,
    create_run,
    load_config,
    stop_requested,
    validate_config,
)
from lamarck.agents.state import GATED, RunState
from lamarck.agents.summary import GenerationSummary
from lamarck.curriculum.environment import Environment
from lamarck.curriculum.frontier import FrontierSelector
from lamarck.curriculum.learnable import LearnableFrontier
from lamarck.curriculum.registry import get_environment
from lamarck.platform.container import Container
from lamarck.platform.event_types import (
    BudgetExhausted,
    Event,
    RunFailed,
    RunFinished,
    RunResumed,
    RunStarted,
    RunStopped,
)
from lamarck.platform.storage import repositories as repo

log = logging.getLogger(__name__)


RunGraph = StateGraph[RunState, None, RunState, RunState]
CompiledRunGraph = CompiledStateGraph[RunState, None, RunState, RunState]


def build_graph(nodes: LoopNodes) -> RunGraph:
    graph: RunGraph = StateGraph(RunState)
    graph.add_node("propose", nodes.propose)
    graph.add_node("execute", nodes.execute)
    graph.add_node("critique", nodes.critique)
    graph.add_node("induce", nodes.induce)
    graph.add_node("assess", nodes.assess)
    graph.add_node("record", nodes.record)
    graph.add_node("improve_harness", nodes.improve_harness)
    graph.add_node("finish", nodes.finish)
    graph.add_node("exhausted", nodes.exhausted)

    graph.add_edge(START, "propose")
    graph.add_conditional_edges("propose", nodes.after_propose, ["execute", "exhausted"])
    graph.add_edge("execute", "critique")
    graph.add_edge("critique", "induce")
    graph.add_edge("critique", "assess")
    graph.add_edge(["induce", "assess"], "record")
    graph.add_conditional_edges("record", nodes.after_record, ["propose", "improve_harness", "finish", "exhausted"])
    graph.add_conditional_edges("improve_harness", nodes.after_harness, ["propose", "exhausted"])
    graph.add_edge("finish", END)
    graph.add_edge("exhausted", END)
    return graph


def supersteps_per_generation(graph: CompiledRunGraph) -> int:
    """At most one superstep per node in a generation (parallel nodes share one), so the node count bounds it and
    the recursion limit follows the graph as nodes are added."""
    return len(graph.get_graph().nodes)


def _frontier(config: RunConfig, environments: dict[str, Environment]) -> FrontierSelector | LearnableFrontier:
    if config.frontier == "learnable":
        return LearnableFrontier.from_environments(environments.values())
    return FrontierSelector.from_environments(environments.values())


@dataclass
class RunOutcome:
    run_id: str
    status: str
    generations_done: int
    summaries: list[GenerationSummary]
    error: str | None = None


class Orchestrator:
    """Drives runs. ``between_generations`` hooks run after each generation is recorded, outside the graph
    (distillation's scheduling and gate); the checkpoint is already written, so a hook that dies loses nothing."""

    def __init__(
        self,
        container: Container,
        *,
        listener: LoopListener | None = None,
        between_generations: Sequence[Callable[[str], None]] | None = None,
        seed_builtins: bool = True,
    ) -> None:
        self.container = container
        self.listener = listener
        self.seed_builtins = seed_builtins  # add the built-in skills before a run (verified once per database)
        self.between_generations = list(between_generations or [])

    # starting and driving

    def start(self, config: RunConfig, *, name: str = "") -> str:
        """Validate the config against what exists and create the run (status pending); nothing is written on error."""
        validate_config(config, self.container.db, self.container.gateway)
        return create_run(self.container.db, config, name=name)

    def run(self, run_id: str) -> RunOutcome:
        """Drive a pending run from the start."""
        with self.container.db.session() as session:
            run = repo.get_run(session, run_id=run_id)
            if run.status != "pending":
                raise RunError(f"run {run_id} is {run.status}: use `lamarck runs resume {run_id}`")
        return self._drive(run_id, resumed=False)

    def resume(self, run_id: str) -> RunOutcome:
        """Continue a stopped, failed or killed run from its last checkpoint; finished work is not redone."""
        with self.container.db.session() as session:
            check_resumable(session, run_id)
        return self._drive(run_id, resumed=True)

    def _drive(self, run_id: str, *, resumed: bool) -> RunOutcome:
        db = self.container.db
        with db.session() as session:
            config = load_config(claim(session, run_id))
        with open_checkpointer(db, self.container.settings.data_dir) as saver:
            graph = self._compile(config, saver)
            thread: RunnableConfig = {
                "configurable": {"thread_id": run_id},
                "recursion_limit": supersteps_per_generation(graph) * (config.generations + 2) + 10,
            }
            snapshot = graph.get_state(thread)
            state_in: RunState | None = None
            if not snapshot.values:
                state_in = {
                    "run_id": run_id,
                    "generation": 0,
                    "recent_prompts": [],
                    "recent_failures": [],
                    "timings": {},
                    "agent_seconds": {},
                    "active_seconds": 0.0,
                    "episodes_done": 0,
                    "harness_rounds": 0,
                }
            opened = RunResumed if resumed else RunStarted
            self._emit(
                opened(
                    config=config.model_dump(mode="json"),
                    next=list(snapshot.next),
                    generation=snapshot.values.get("generation", 0),
                ),
                run_id,
            )
            stopped = False
            try:
                for chunk in graph.stream(state_in, thread, stream_mode="updates", durability="sync"):
                    if any(node in GATED for node in chunk) and stop_requested(db, run_id):
                        stopped = True
                        break
                    if "record" in chunk:
                        for hook in self.between_generations:
                            hook(run_id)
            except KeyboardInterrupt:
                self._mark(run_id, "stopped", RunStopped, reason="interrupted")
                raise
            except Exception as exc:
                message = " ".join(f"{type(exc).__name__}: {exc}".split())[:500]
                self._mark(run_id, "failed", RunFailed, reason=message, error=message)
                raise
            final = graph.get_state(thread)
        if stopped:
            self._mark(run_id, "stopped", RunStopped, reason="stop requested")
        elif not final.next:
            self._settle(run_id, final.values.get("outcome") or "finished")
        return self.outcome(run_id)

    def _settle(self, run_id: str, outcome: str) -> None:
        """A graph at its end whose last node's status write was lost (killed in between) gets it now."""
        with self.container.db.session() as session:
            status = repo.get_run(session, run_id=run_id).status
        if status != outcome:
            ended = RunFinished if outcome == "finished" else BudgetExhausted
            self._mark(run_id, outcome, ended, reason="settled on resume")

    def outcome(self, run_id: str) -> RunOutcome:
        with self.container.db.session() as session:
            run = repo.get_run(session, run_id=run_id)
            generations = run.summary.get("generations", {})
            summaries = [GenerationSummary.model_validate(generations[key]) for key in sorted(generations, key=int)]
            return RunOutcome(
                run_id=run.id,
                status=run.status,
                generations_done=run.generations_done,
                summaries=summaries,
                error=run.error,
            )

    # building the graph for one run

    def _compile(self, config: RunConfig, saver: BaseCheckpointSaver[str]) -> CompiledRunGraph:
        s = self.container
        environments = {name: get_environment(name, sandbox=s.sandbox) for name in config.environments}
        gateway_for_proposer = s.gateway if config.llm_share > 0 else None
        nodes = LoopNodes(
            db=s.db,
            bus=s.bus,
            environments=environments,
            proposer=CurriculumProposer(
                gateway_for_proposer, environments, sandbox=s.sandbox, frontier=_frontier(config, environments)
            ),
            executor=Executor(
                s.gateway,
                environments,
                skills=s.library,
                lessons=s.lessons,
                max_concurrency=config.concurrency or s.settings.engine.rollout_concurrency,
            ),
            critic=Critic(s.gateway, environments, s.db, lessons=s.lessons),
            gateway=s.gateway,
            library=s.library,
            lessons=s.lessons,
            config=config,
            harnesses=self._harnesses(config),
            budget_spent=lambda run_id, seconds: self.budget_spent(run_id, config, seconds),
            listener=self.listener,
            harness_critic=s.settings.harness_critic,
            approvals_required=s.settings.approvals.required,
            rollout_queue=rollout_queue(s.settings, s.db, s.bus),
        )
        if self.seed_builtins:
            s.library.ensure_builtins()
        return build_graph(nodes).compile(checkpointer=saver)

    def _harnesses(self, config: RunConfig) -> dict[str, HarnessSpec]:
        """Per environment: the harness the config pins, else the one its release is served with."""
        harnesses = {name: release_harness(self.container.db, get_environment(name)) for name in config.environments}
        with self.container.db.session() as session:
            for name, harness_id in config.harnesses.items():
                harnesses[name] = load_harness(session, harness_id=harness_id)
        return harnesses

    def budget_spent(self, run_id: str, config: RunConfig, active_seconds: float) -> str | None:
        """Why the run's budget is spent, or None while there is some left."""
        budget = config.budget
        if budget.max_tokens is None and budget.max_cost_usd is None and budget.max_seconds is None:
            return None
        with self.container.db.session() as session:
            usage = repo.llm_usage(session, run_id=run_id)
        tokens = int(usage["prompt_tokens"] + usage["completion_tokens"])
        if budget.max_tokens is not None and tokens >= budget.max_tokens:
            return f"token budget spent: {tokens} of {budget.max_tokens}"
        if budget.max_cost_usd is not None and usage["cost_usd"] >= budget.max_cost_usd:
            return f"cost budget spent: ${usage['cost_usd']:.4f} of ${budget.max_cost_usd:.4f}"
        if budget.max_seconds is not None and active_seconds >= budget.max_seconds:
            return f"time budget spent: {active_seconds:.1f}s of {budget.max_seconds:.1f}s"
        return None

    # status and events

    def _mark(
        self,
        run_id: str,
        status: str,
        event: type[RunStopped | RunFailed | RunFinished | BudgetExhausted],
        *,
        reason: str | None,
        error: str | None = None,
    ) -> None:
        with self.container.db.session() as session:
            repo.set_run_status(session, run_id=run_id, status=status, error=error)
            done = repo.get_run(session, run_id=run_id).generations_done
        self._emit(event(reason=reason, generations_done=done), run_id)

    def _emit(self, event: Event, run_id: str) -> None:
        published = self.container.bus.publish(event, run_id=run_id)
        if self.listener is not None:
            try:
                self.listener.on_event(published)
            except Exception:
                log.exception("listener failed on %s", event.TYPE)

"""The loop's nodes: thin adapters from RunState to an agent's typed input, and from its output to a partial state.

Every node is idempotent, because a resumed graph re-runs the node it was killed in, and the keys that make it so
live in the repositories: tasks have deterministic ids, episodes idempotency keys, the critic reuses verdicts it
already wrote, the profile update writes its (run, step, generation) row in the transaction that applies it, and a
skill's use is counted once per (episode, skill).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Protocol, TypeVar, cast

from lamarck.agents.critic import Critic, CriticInput, EpisodeForReview
from lamarck.agents.curriculum_proposer import CurriculumProposer, ProposedTask, ProposerInput
from lamarck.agents.demonstrations import recent_demonstrations
from lamarck.agents.episodes import record_attempts
from lamarck.agents.evaluation import default_harness_for, release_harness
from lamarck.agents.executor import Executor, ExecutorInput
from lamarck.agents.frontier_evidence import cell_evidence, ladder_entry, rung_evidence
from lamarck.agents.harness import HarnessSpec
from lamarck.agents.harness_archive import round_done
from lamarck.agents.harness_round import run_round
from lamarck.agents.hint_ladder import run_ladder, rung_index
from lamarck.agents.rollout_jobs import RolloutJob
from lamarck.agents.rollout_queue import RolloutQueue
from lamarck.agents.runs import RunConfig, derived_seed, episode_key_prefix, task_id_for
from lamarck.agents.skill_review import review_skills
from lamarck.agents.state import NewSkill, RunState, TaskItem, VerdictItem, task_spec
from lamarck.agents.summary import summarize
from lamarck.agents.teacher import HintLevel
from lamarck.curriculum.environment import Environment, TaskSpec
from lamarck.curriculum.learnable import Cell, CellEvidence
from lamarck.curriculum.profile import CapabilityProfile
from lamarck.memory.embedding_stats import EmbeddingCost, stats_of
from lamarck.memory.lessons import LessonStore
from lamarck.platform import tracing
from lamarck.platform.event_types import (
    BudgetExhausted,
    EpisodeFinished,
    Event,
    GenerationSummarized,
    HarnessRoundHeld,
    HintLadderRan,
    LessonLearned,
    RunFinished,
    SkillAdded,
    TasksProposed,
    VerdictGiven,
)
from lamarck.platform.events import BusEvent, EventBus
from lamarck.platform.llm.gateway import LLMGateway
from lamarck.platform.settings import HarnessCriticSettings
from lamarck.platform.storage import repositories as repo
from lamarck.platform.storage.database import Database
from lamarck.skills_library.induction import induce_skills
from lamarck.skills_library.library import SkillLibrary, UnknownSkill
from lamarck.training import registry

log = logging.getLogger(__name__)

RECENT_PROMPTS = 256
RECENT_FAILURES = 16


class LoopListener(Protocol):
    """Live progress for a front end; called in the loop's threads, so keep it quick."""

    def on_event(self, event: BusEvent) -> None: ...

    def on_node(self, node: str, generation: int, finished: bool) -> None: ...


def _key_order(key: str) -> tuple[int, int]:
    """(task index, sample index) from an episode key ``<prefix>:t<i>:s<j>``."""
    task, sample = key.rsplit(":", 2)[-2:]
    return int(task[1:]), int(sample[1:])


NodeMethod = TypeVar("NodeMethod", bound=Callable[["LoopNodes", RunState], RunState])


def timed(name: str, *, embeds: bool = False) -> Callable[[NodeMethod], NodeMethod]:
    """Adds the node's wall time (and, if it ``embeds``, its embedding cost) to the state, traces the node as an
    ``invoke_agent`` span and tells the listener when it starts and ends. Nodes that run side by side must not both
    embed: each would count the other's cost."""

    def wrap(fn: NodeMethod) -> NodeMethod:
        def node(self: LoopNodes, state: RunState) -> RunState:
            generation = state.get("generation", 0)
            self._notify(name, generation, finished=False)
            embedded = self._embedding_cost() if embeds else None
            started = time.perf_counter()
            with tracing.node_span(name, run_id=state.get("run_id"), generation=generation):
                update = fn(self, state)
            seconds = time.perf_counter() - started
            if embedded is not None:
                cost = self._embedding_cost() - embedded
                update["embedding_seconds"] = {name: cost.seconds}
                update["embedded_texts"] = {name: cost.texts}
            update.setdefault("agent_seconds", {}).setdefault(name, 0.0)
            update["timings"] = {name: seconds}
            update["active_seconds"] = seconds
            self._notify(name, generation, finished=True)
            return update

        node.__name__ = name
        # the wrapper keeps the method's signature; a cast is how a typed decorator says so (LangGraph matches a
        # node's parameter by its name, ``state``, which a plain Callable type would drop)
        return cast(NodeMethod, node)

    return wrap


class LoopNodes:
    """One run's nodes, holding the agents built for its environments and the stores they share."""

    def __init__(
        self,
        *,
        db: Database,
        bus: EventBus,
        environments: dict[str, Environment],
        proposer: CurriculumProposer,
        executor: Executor,
        critic: Critic,
        gateway: LLMGateway,
        library: SkillLibrary,
        lessons: LessonStore | None,
        config: RunConfig,
        harnesses: dict[str, HarnessSpec],
        budget_spent: Callable[[str, float], str | None],
        listener: LoopListener | None = None,
        harness_critic: HarnessCriticSettings | None = None,
        approvals_required: bool = False,
        rollout_queue: RolloutQueue | None = None,
    ) -> None:
        self.db = db
        self.bus = bus
        self.environments = environments
        self.proposer = proposer
        self.executor = executor
        self.critic = critic
        self.gateway = gateway
        self.library = library
        self.lessons = lessons
        self.config = config
        self.harnesses = harnesses  # the harness each environment's episodes run under now
        self.budget_spent = budget_spent  # (run id, active seconds) -> why the budget is spent, or None
        self.listener = listener
        self.harness_critic = harness_critic or HarnessCriticSettings()
        self.approvals_required = approvals_required  # promotions and skill additions wait for a person
        self.rollout_queue = rollout_queue  # set: rollouts run as jobs on the rollout queue, not in this process

    # propose -> execute -> critique -> (induce | assess) -> record [-> improve_harness]

    @timed("propose")
    def propose(self, state: RunState) -> RunState:
        run_id, generation, cfg = state["run_id"], state["generation"], self.config
        started_at = time.time()
        self._follow_promoted_harnesses()
        items = self._stored_tasks(run_id, generation)
        seconds = 0.0
        if items is None:
            clock = time.perf_counter()
            out = self.proposer.run(
                ProposerInput(
                    profile=self._frontier_view(run_id, generation),
                    batch_size=cfg.batch_size,
                    seed=derived_seed(cfg.seed, generation, "propose"),
                    llm_share=cfg.llm_share,
                    recent_failures=[task_spec(t) for t in state.get("recent_failures", [])],
                    recent_prompts=state.get("recent_prompts", []),
                    run_id=run_id,
                )
            )
            seconds = time.perf_counter() - clock
            items = self._store_tasks(run_id, generation, out.tasks)
            sources: dict[str, int] = {}
            for item in items:
                sources[item["source"]] = sources.get(item["source"], 0) + 1
            self._emit(
                TasksProposed(
                    generation=generation,
                    count=len(items),
                    sources=sources,
                    llm_attempted=out.llm_attempted,
                    llm_accepted=out.llm_accepted,
                    fallbacks=out.fallbacks,
                    rejections=out.rejection_counts,
                ),
                run_id,
            )
        return {
            "generation_started": started_at,
            "tasks": items,
            "episode_ids": [],
            "verdicts": [],
            "new_skills": [],
            "agent_seconds": {"propose": seconds},
        }

    @timed("execute", embeds=True)
    def execute(self, state: RunState) -> RunState:
        """Rollouts under the teacher: each task climbs the hint ladder only as far as it must. All of a generation's
        episodes are recorded in one transaction, so a re-run node finds them all or none. With a rollout queue,
        workers run and record them task by task instead (``_execute_on_queue``)."""
        run_id, generation, cfg = state["run_id"], state["generation"], self.config
        items = state["tasks"]
        tasks = [task_spec(item["spec"]) for item in items]
        if self.rollout_queue is not None:
            return self._execute_on_queue(state, self.rollout_queue)
        prefix = episode_key_prefix(run_id, generation)
        stored = self._episode_ids_by_prefix(prefix)
        if stored:
            return {"episode_ids": stored}
        model_version = self._model_version()
        request = ExecutorInput(
            tasks=tasks,
            model_version=model_version,
            harnesses=self.harnesses,
            samples_per_task=cfg.samples_per_task,
            seed=derived_seed(cfg.seed, generation, "execute"),
            run_id=run_id,
        )
        clock = time.perf_counter()
        if cfg.hints == [HintLevel.NONE]:
            attempts = self.executor.run(request).attempts
        else:
            environments = sorted({task.environment for task in tasks})
            ladder = run_ladder(
                self.executor,
                request,
                self.environments,
                rungs=cfg.hints,
                demonstrations=recent_demonstrations(self.db, environments),
                start=self._ladder_entry(run_id, generation, model_version, tasks),
            )
            attempts = ladder.attempts
            self._emit(
                HintLadderRan(
                    generation=generation,
                    rungs=[r.model_dump(mode="json") for r in ladder.rungs],
                    solved_at={str(k): v.value for k, v in ladder.solved_at.items()},
                ),
                run_id,
            )
        seconds = time.perf_counter() - clock
        ids = record_attempts(
            self.db,
            attempts,
            task_ids=[item["task_id"] for item in items],
            model_version=model_version,
            run_id=run_id,
            generation=generation,
            key_prefix=prefix,
        )
        for attempt, episode_id in zip(attempts, ids, strict=True):
            task = tasks[attempt.task_index]
            self._emit(
                EpisodeFinished(
                    generation=generation,
                    episode_id=episode_id,
                    task_id=items[attempt.task_index]["task_id"],
                    environment=task.environment,
                    difficulty=task.difficulty,
                    sample=attempt.sample_index,
                    hint=attempt.hint_level.value,
                    outcome="answered" if attempt.failure_reason is None else "no_answer",
                    failure_reason=attempt.failure_reason,
                    steps=attempt.steps,
                    skills_used=attempt.skills_used,
                    tokens=attempt.prompt_tokens + attempt.completion_tokens,
                ),
                run_id,
            )
        return {"episode_ids": ids, "agent_seconds": {"execute": seconds}}

    def _execute_on_queue(self, state: RunState, queue: RolloutQueue) -> RunState:
        """One job per task, each rolling out the task's samples (and climbing its ladder) on a worker that records
        them; the node waits for every task and reports episodes as they are recorded. A re-run node sends only the
        tasks not yet recorded."""
        run_id, generation, cfg = state["run_id"], state["generation"], self.config
        items = state["tasks"]
        tasks = [task_spec(item["spec"]) for item in items]
        model_version = self._model_version()
        entry = {} if cfg.hints == [HintLevel.NONE] else self._ladder_entry(run_id, generation, model_version, tasks)
        harnesses = {name: spec.version_id for name, spec in self.harnesses.items()}
        jobs = [
            RolloutJob(
                run_id=run_id,
                generation=generation,
                task_index=index,
                model_version=model_version,
                harnesses=harnesses,
                entry_rung=entry.get(index, 0),
            )
            for index in range(len(items))
        ]
        clock = time.perf_counter()
        ids = queue.collect(jobs, lambda recorded: self._report_episodes(recorded, items, generation, run_id))
        return {"episode_ids": ids, "agent_seconds": {"execute": time.perf_counter() - clock}}

    def _report_episodes(self, episode_ids: list[str], items: list[TaskItem], generation: int, run_id: str) -> None:
        """``EpisodeFinished`` for episodes a worker recorded, read back from the database."""
        specs = {item["task_id"]: task_spec(item["spec"]) for item in items}
        finished: list[EpisodeFinished] = []
        with self.db.session() as session:
            episodes = repo.episodes_by_ids(session, episode_ids)
            for episode in (episodes[episode_id] for episode_id in episode_ids):
                task = specs[episode.task_id]
                rung = rung_index(episode.sample_index)
                replies = [
                    m
                    for m in repo.episode_trajectory(episode).messages
                    if m.role == "assistant" and not m.meta.get("few_shot")
                ]
                finished.append(
                    EpisodeFinished(
                        generation=generation,
                        episode_id=episode.id,
                        task_id=episode.task_id,
                        environment=task.environment,
                        difficulty=task.difficulty,
                        sample=episode.sample_index,
                        hint=self.config.hints[rung].value if rung < len(self.config.hints) else HintLevel.NONE.value,
                        outcome="answered" if episode.failure_reason is None else "no_answer",
                        failure_reason=episode.failure_reason,
                        steps=len(replies),
                        skills_used=list(episode.skills_used or []),
                        tokens=episode.prompt_tokens + episode.completion_tokens,
                    )
                )
        for event in finished:
            self._emit(event, run_id)

    def _ladder_entry(self, run_id: str, generation: int, model_version: str, tasks: list[TaskSpec]) -> dict[int, int]:
        """Per task index, the rung above the bottom where it enters the ladder (``RunConfig.rung_skip_after``)."""
        skip_after = self.config.rung_skip_after
        if skip_after is None:
            return {}
        evidence = rung_evidence(
            self.db, run_id=run_id, model_version=model_version, harnesses=self.harnesses, generation=generation
        )
        entry = ladder_entry(evidence, len(self.config.hints), skip_after)
        return {
            index: entry[(task.environment, task.difficulty)]
            for index, task in enumerate(tasks)
            if (task.environment, task.difficulty) in entry
        }

    def _frontier_view(self, run_id: str, generation: int) -> CapabilityProfile | dict[Cell, CellEvidence]:
        """What the run's frontier reads: per-cell evidence for the current release, or the capability profile."""
        if self.config.frontier == "learnable":
            return cell_evidence(
                self.gateway,
                self.db,
                self.environments,
                self.harnesses,
                run_id=run_id,
                model_version=self._model_version(),
                generation=generation,
            )
        with self.db.session() as session:
            return CapabilityProfile.load(session)

    def _model_version(self) -> str:
        """The run's model; when the run follows promotions (distillation's hand-off), the current champion, or the
        rollout sampler that beat it on the development slice (``RunConfig.rollout_sampler``)."""
        cfg = self.config
        if not cfg.follow_champion:
            return cfg.model_version
        with self.db.session() as session:
            champion = repo.promoted_model_version(session)
            if champion is not None and cfg.rollout_sampler == "better_candidate":
                return registry.rollout_sampler(session)
        return champion.id if champion is not None else cfg.model_version

    @timed("critique", embeds=True)
    def critique(self, state: RunState) -> RunState:
        run_id, generation, cfg = state["run_id"], state["generation"], self.config
        specs = {item["task_id"]: task_spec(item["spec"]) for item in state["tasks"]}
        with self.db.session() as session:
            episodes = repo.episodes_by_ids(session, state["episode_ids"])
            reviews = [
                EpisodeForReview(
                    episode_id=e.id,
                    task=specs[e.task_id],
                    answer=e.answer,
                    failure_reason=e.failure_reason,
                    trajectory=repo.episode_trajectory(e),
                    lessons_used=list(e.lessons_used or []),
                )
                for e in (episodes[i] for i in state["episode_ids"])
            ]
        clock = time.perf_counter()
        out = self.critic.run(CriticInput(episodes=reviews, judge=cfg.judge, repair=cfg.repair, run_id=run_id))
        seconds = time.perf_counter() - clock
        with self.db.session() as session:
            lessons = repo.lessons_by_ids(session, [v.lesson_id for v in out.verdicts if v.lesson_id])
        verdicts: list[VerdictItem] = []
        for v in out.verdicts:
            lesson = lessons.get(v.lesson_id) if v.lesson_id else None
            new_lesson = lesson is not None and list(lesson.source_episode_ids or [])[:1] == [v.episode_id]
            verdicts.append(
                VerdictItem(
                    episode_id=v.episode_id,
                    task_id=episodes[v.episode_id].task_id,
                    passed=v.passed,
                    reward=v.reward,
                    lesson_id=v.lesson_id,
                    new_lesson=new_lesson,
                    repaired=v.repaired_episode_id is not None,
                )
            )
            if v.reused:
                continue
            self._emit(
                VerdictGiven(
                    generation=generation,
                    episode_id=v.episode_id,
                    passed=v.passed,
                    reward=v.reward,
                    source=v.source,
                    judge_passed=v.judge_passed,
                    repaired_episode_id=v.repaired_episode_id,
                ),
                run_id,
            )
            if lesson is not None:
                self._emit(
                    LessonLearned(
                        generation=generation,
                        lesson_id=lesson.id,
                        episode_id=v.episode_id,
                        text=lesson.text,
                        merged=not new_lesson,
                    ),
                    run_id,
                )
        return {"verdicts": verdicts, "agent_seconds": {"critique": seconds}}

    @timed("induce", embeds=True)
    def induce(self, state: RunState) -> RunState:
        """Skills from this generation's verified successes, added through the critic's review."""
        if not self.config.induce_skills:
            return {"new_skills": []}
        passed = [v["episode_id"] for v in state["verdicts"] if v["passed"]]
        if not passed:
            return {"new_skills": []}
        with self.db.session() as session:
            episodes = list(repo.episodes_by_ids(session, passed).values())
        clock = time.perf_counter()
        candidates = induce_skills(episodes, library=self.library)
        decisions = review_skills(candidates, self.library, hold_for_approval=self.approvals_required)
        seconds = time.perf_counter() - clock
        added: list[NewSkill] = []
        for candidate, decision in zip(candidates, decisions, strict=True):
            if decision.approved:
                added.append(NewSkill(name=decision.name, episode_ids=list(candidate.source_episode_ids)))
                self._emit(
                    SkillAdded(
                        generation=state["generation"],
                        name=decision.name,
                        version=decision.version,
                        reason=decision.reason,
                        episode_ids=candidate.source_episode_ids,
                    ),
                    state["run_id"],
                )
        return {"new_skills": added, "agent_seconds": {"induce": seconds}}

    @timed("assess")
    def assess(self, state: RunState) -> RunState:
        """The capability profile learns from the verdicts; skills used are credited. Once per generation."""
        run_id, generation = state["run_id"], state["generation"]
        cell = {item["task_id"]: task_spec(item["spec"]) for item in state["tasks"]}
        observations = [
            {
                "environment": cell[v["task_id"]].environment,
                "difficulty": cell[v["task_id"]].difficulty,
                "passed": v["passed"],
            }
            for v in state["verdicts"]
        ]
        with self.db.session() as session:
            if repo.mark_step_done(session, run_id=run_id, step="assess", generation=generation):
                CapabilityProfile().update_many(session, observations)
            uses = {
                e.id: list(e.skills_used or []) for e in repo.episodes_by_ids(session, state["episode_ids"]).values()
            }
        passed = {v["episode_id"]: v["passed"] for v in state["verdicts"]}
        for episode_id, skills in uses.items():
            for name in skills:
                try:
                    self.library.record_use(name, passed.get(episode_id, False), use_key=f"{episode_id}:{name}")
                except UnknownSkill:
                    log.info("skill %s used in episode %s is gone; not credited", name, episode_id)
        return {}

    @timed("record")
    def record(self, state: RunState) -> RunState:
        run_id, generation = state["run_id"], state["generation"]
        with self.db.session() as session:
            run = repo.get_run(session, run_id=run_id)
            before = (run.summary.get("generations", {}).get(str(generation - 1)) or {}).get("usage_total", {})
            after = repo.llm_usage(session, run_id=run_id)
        summary = summarize(
            self.db,
            generation=generation,
            tasks=state["tasks"],
            episode_ids=state["episode_ids"],
            verdicts=state["verdicts"],
            new_skills=state.get("new_skills", []),
            wall_seconds=time.time() - state.get("generation_started", time.time()),
            agent_seconds=sum(state.get("agent_seconds", {}).values()),
            node_seconds=state.get("timings", {}),
            usage_before=before,
            usage_after=after,
            embedding_seconds=sum(state.get("embedding_seconds", {}).values()),
            embedded_texts=sum(state.get("embedded_texts", {}).values()),
        )
        with self.db.session() as session:
            run = repo.get_run(session, run_id=run_id)
            generations = {**run.summary.get("generations", {}), str(generation): summary.model_dump(mode="json")}
            run.summary = {**run.summary, "generations": generations}
            run.generations_done = max(run.generations_done, generation + 1)
        self._emit(GenerationSummarized(**summary.model_dump(mode="json")), run_id)
        passed_tasks = {v["task_id"] for v in state["verdicts"] if v["passed"]}
        specs = [(item["task_id"], task_spec(item["spec"])) for item in state["tasks"]]
        failures = [spec for task_id, spec in specs if task_id not in passed_tasks]
        prompts = [spec.prompt for _, spec in specs]
        return {
            "generation": generation + 1,
            "episodes_done": state.get("episodes_done", 0) + len(state["episode_ids"]),
            "recent_prompts": (state.get("recent_prompts", []) + prompts)[-RECENT_PROMPTS:],
            "recent_failures": (failures + state.get("recent_failures", []))[:RECENT_FAILURES],
        }

    @timed("improve_harness")
    def improve_harness(self, state: RunState) -> RunState:
        """A harness-critic round on each environment whose harness the run does not pin, with the model the gate
        judges (the champion). A round already archived for this run (killed before its checkpoint) is not held
        again; the next generation's propose picks up whatever each round promoted."""
        run_id, cfg = state["run_id"], self.config
        round_ = state.get("harness_rounds", 0)
        model_version = self._champion_version()
        clock = time.perf_counter()
        for name, env in self.environments.items():
            if name in cfg.harnesses:
                continue
            with self.db.session() as session:
                if round_done(session, name, run_id=run_id, round_=round_):
                    continue
            out = run_round(
                self.db,
                self.gateway,
                env,
                model_version=model_version,
                settings=self.harness_critic,
                default=default_harness_for(env),
                round_=round_,
                run_id=run_id,
                hold_for_approval=self.approvals_required,
            )
            self._emit(
                HarnessRoundHeld(
                    generation=state["generation"],
                    environment=name,
                    round=round_,
                    model_version=model_version,
                    champion=out.champion_id,
                    promoted=out.promoted,
                    challengers=len(out.challengers),
                    invalid=len(out.invalid),
                    tasks_evaluated=out.tasks_evaluated,
                ),
                run_id,
            )
        seconds = time.perf_counter() - clock
        return {
            "harness_rounds": max(round_ + 1, state.get("episodes_done", 0) // cfg.harness_critic_every),
            "agent_seconds": {"improve_harness": seconds},
        }

    # the ends of a run

    def finish(self, state: RunState) -> RunState:
        self._end(state, "finished", RunFinished, reason=None)
        return {"outcome": "finished"}

    def exhausted(self, state: RunState) -> RunState:
        reason = self.budget_spent(state["run_id"], state.get("active_seconds", 0.0)) or "budget spent"
        self._end(state, "budget_exhausted", BudgetExhausted, reason=reason)
        return {"outcome": "budget_exhausted"}

    # routing

    def after_propose(self, state: RunState) -> str:
        return "exhausted" if self.budget_spent(state["run_id"], state.get("active_seconds", 0.0)) else "execute"

    def after_record(self, state: RunState) -> str:
        if state["generation"] >= self.config.generations:
            return "finish"
        if self.budget_spent(state["run_id"], state.get("active_seconds", 0.0)):
            return "exhausted"
        return "improve_harness" if self._harness_round_due(state) else "propose"

    def after_harness(self, state: RunState) -> str:
        return "exhausted" if self.budget_spent(state["run_id"], state.get("active_seconds", 0.0)) else "propose"

    def _harness_round_due(self, state: RunState) -> bool:
        every = self.config.harness_critic_every
        return every > 0 and state.get("episodes_done", 0) >= (state.get("harness_rounds", 0) + 1) * every

    # helpers

    def _champion_version(self) -> str:
        if not self.config.follow_champion:
            return self.config.model_version
        with self.db.session() as session:
            return registry.champion(session)

    def _follow_promoted_harnesses(self) -> None:
        """Each environment the run does not pin runs under its release harness (promoted by the harness-critic or
        `lamarck harness promote`), from the next episode on."""
        for name, env in self.environments.items():
            if name not in self.config.harnesses:
                self.harnesses[name] = release_harness(self.db, env)

    def _end(
        self, state: RunState, status: str, event: type[RunFinished | BudgetExhausted], reason: str | None
    ) -> None:
        run_id = state["run_id"]
        with self.db.session() as session:
            repo.set_run_status(session, run_id=run_id, status=status)
            done = repo.get_run(session, run_id=run_id).generations_done
            usage = repo.llm_usage(session, run_id=run_id)
        self._emit(
            event(
                generations_done=done,
                reason=reason,
                usage=usage,
                active_seconds=round(state.get("active_seconds", 0.0), 3),
            ),
            run_id,
        )

    def _embedding_cost(self) -> EmbeddingCost:
        """What the embedding functions of the lessons' and skills' memory have cost so far (usually one, shared)."""
        owners = [self.library.memory, self.lessons.collection if self.lessons is not None else None]
        found = {id(stats): stats for owner in owners if (stats := stats_of(owner)) is not None}
        return sum((stats.snapshot() for stats in found.values()), EmbeddingCost())

    def _stored_tasks(self, run_id: str, generation: int) -> list[TaskItem] | None:
        with self.db.session() as session:
            rows = {t.id: t for t in repo.generation_tasks(session, run_id=run_id, generation=generation)}
        if not rows:
            return None
        ordered = [rows[task_id_for(run_id, generation, i)] for i in range(len(rows))]
        return [
            TaskItem(
                task_id=t.id,
                source=t.source,
                spec=TaskSpec(
                    environment=t.environment,
                    difficulty=t.difficulty,
                    prompt=t.prompt,
                    reference=dict(t.reference or {}),
                    metadata=dict(t.meta or {}),
                ),
            )
            for t in ordered
        ]

    def _store_tasks(self, run_id: str, generation: int, proposed: list[ProposedTask]) -> list[TaskItem]:
        items: list[TaskItem] = []
        with self.db.session() as session:  # one transaction: a generation's tasks exist all together or not at all
            for index, p in enumerate(proposed):
                task = repo.add_task(
                    session,
                    environment=p.task.environment,
                    difficulty=p.task.difficulty,
                    prompt=p.task.prompt,
                    reference=p.task.reference,
                    meta=p.task.metadata,
                    source=p.source,
                    run_id=run_id,
                    generation=generation,
                    task_id=task_id_for(run_id, generation, index),
                )
                items.append(TaskItem(task_id=task.id, source=p.source, spec=p.task))
        return items

    def _episode_ids_by_prefix(self, prefix: str) -> list[str]:
        """A generation's recorded episodes in task and sample order ([] when the node has not recorded them)."""
        with self.db.session() as session:
            found = repo.episode_ids_by_key_prefix(session, prefix)
        return [found[key] for key in sorted(found, key=_key_order)]

    def _emit(self, event: Event, run_id: str) -> None:
        published = self.bus.publish(event, run_id=run_id)
        if self.listener is not None:
            try:
                self.listener.on_event(published)
            except Exception:  # a broken progress display must not stop the run
                log.exception("listener failed on %s", event.TYPE)

    def _notify(self, node: str, generation: int, *, finished: bool) -> None:
        if self.listener is not None:
            try:
                self.listener.on_node(node, generation, finished)
            except Exception:
                log.exception("listener failed on node %s", node)

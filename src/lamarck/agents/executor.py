"""The executor: a ReAct loop — reason, call a tool or skill, observe, repeat, answer.

Every rollout advances on its own: the first step asks for ``samples_per_task`` completions
of each task's prompt in one call, and each rollout sends its next call as soon as its last
observation is in, without waiting for the others. The engine batches continuously, so one
episode's second step joins other episodes' first steps in the same forward pass.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import hashlib
import logging
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from lamarck.agents.actions import ACTION_END, parse_action
from lamarck.agents.harness import HarnessSpec, default_harness
from lamarck.agents.prefetch import Prefetched, PrefetchSlot, prefetch
from lamarck.agents.teacher import HintLevel, TeacherHelp, apply_help
from lamarck.agents.toolbox import LessonHandle, LessonSource, SkillSource, Toolbox
from lamarck.curriculum.environment import Environment, TaskSpec
from lamarck.memory.base import RetrievalQuery
from lamarck.platform.llm.gateway import GatewayError, LLMGateway
from lamarck.platform.llm.version_names import version_call
from lamarck.platform.storage.records import new_id
from lamarck.platform.storage.trajectory import (
    OBSERVATION_PREFIX,
    STUDENT_OPENING,
    STUDENT_TOOLS,
    Message,
    ToolCall,
    Trajectory,
    render_for_model,
)
from lamarck.platform.tracing import CallContext, call_context

log = logging.getLogger(__name__)

__all__ = [
    "Attempt",
    "Executor",
    "ExecutorInput",
    "ExecutorOutput",
    "opening_messages",
    "render_for_model",
    "student_opening",
]

STOP_SEQUENCES = ["RESULT:", "<|im_end|>"]
MODEL_CALL_FAILED = "model call failed"  # an attempt's failure reason when the gateway gave up (not the model's fault)


class ExecutorInput(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    tasks: list[TaskSpec]
    model_version: str
    harnesses: dict[str, HarnessSpec] = Field(default_factory=dict)
    samples_per_task: int | None = Field(None, ge=1, le=64)
    seed: int = 0
    run_id: str | None = None
    help: dict[int, TeacherHelp] = Field(default_factory=dict)  # task index -> the teacher's help (rollouts only)


class Attempt(BaseModel):
    episode_id: str = Field(default_factory=new_id)  # the attempt's model calls are linked to it before it is stored
    task_index: int
    sample_index: int
    environment: str
    harness_version: str
    hint_level: HintLevel = HintLevel.NONE
    trajectory: Trajectory
    answer: str | None = None
    failure_reason: str | None = None
    steps: int = 0
    skills_used: list[str] = Field(default_factory=list)
    lessons_used: list[str] = Field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    wall_seconds: float = 0.0


class ExecutorOutput(BaseModel):
    attempts: list[Attempt]
    model_calls: int
    wall_seconds: float
    model_seconds: float


@dataclass
class _Rollout:
    attempt: Attempt
    harness: HarnessSpec
    toolbox: Toolbox
    started: float
    done: bool = False
    step_seed: int = 0
    skills: set[str] = field(default_factory=set)
    max_temperature: float | None = None  # the teacher's cap at a privileged rung


class _Tally:
    """Model calls and seconds across the rollout threads, and how many steps are still under way."""

    def __init__(self) -> None:
        self.calls = 0
        self.model_seconds = 0.0
        self.error: Exception | None = None
        self._outstanding = 0
        self._changed = threading.Condition()

    def begin(self) -> None:
        with self._changed:
            self._outstanding += 1

    def record(self, seconds: float) -> None:
        with self._changed:
            self.calls += 1
            self.model_seconds += seconds

    def end(self) -> None:
        with self._changed:
            self._outstanding -= 1
            self._changed.notify_all()

    def wait(self) -> None:
        with self._changed:
            self._changed.wait_for(lambda: self._outstanding == 0)


class Executor:
    def __init__(
        self,
        gateway: LLMGateway,
        environments: Mapping[str, Environment],
        *,
        skills: SkillSource | None = None,
        lessons: LessonSource | None = None,
        max_concurrency: int = 64,
    ) -> None:
        self.gateway = gateway
        self.environments = environments
        self.skills = skills
        self.lessons = lessons
        self.max_concurrency = max_concurrency
        self._prefetch = PrefetchSlot()

    def run(self, request: ExecutorInput) -> ExecutorOutput:
        started = time.perf_counter()
        rollouts = [r for index, task in enumerate(request.tasks) for r in self._start(index, task, request)]
        by_task: dict[int, list[_Rollout]] = {}
        for rollout in rollouts:
            if not rollout.done:
                by_task.setdefault(rollout.attempt.task_index, []).append(rollout)
        tally = _Tally()
        with ThreadPoolExecutor(max_workers=self.max_concurrency) as pool:

            def step(work: Callable[[], float], rollouts_after: list[_Rollout]) -> None:
                try:
                    tally.record(work())
                except Exception as exc:  # a bug, not a model failure: end the rollouts, re-raise below
                    tally.error = tally.error or exc
                    for rollout in rollouts_after:
                        if not rollout.done:
                            self._fail(rollout, f"executor error: {type(exc).__name__}: {exc}")
                finally:
                    for rollout in rollouts_after:
                        if not rollout.done:
                            tally.begin()
                            work = functools.partial(self._next_step, rollout, request)
                            pool.submit(contextvars.copy_context().run, step, work, [rollout])
                    tally.end()

            for group in by_task.values():
                tally.begin()
                pool.submit(
                    contextvars.copy_context().run, step, functools.partial(self._first_step, group, request), group
                )
            tally.wait()
        if tally.error is not None:
            raise tally.error
        for rollout in rollouts:
            rollout.attempt.skills_used = sorted(rollout.skills)
        return ExecutorOutput(
            attempts=[r.attempt for r in rollouts],
            model_calls=tally.calls,
            wall_seconds=time.perf_counter() - started,
            model_seconds=tally.model_seconds,
        )

    # setting up

    def _start(self, index: int, task: TaskSpec, request: ExecutorInput) -> list[_Rollout]:
        harness = request.harnesses.get(task.environment) or default_harness(task.environment)
        k = request.samples_per_task or harness.sampling.samples_per_task
        now = time.perf_counter()
        environment = self.environments.get(task.environment)
        problem = _unusable(task, environment)
        toolbox = Toolbox()
        lessons: list[LessonHandle] = []
        messages: list[Message] = []
        last = index == len(request.tasks) - 1
        prefetched = self._prefetch.get(request, lambda: self._prefetched(request), last=last)
        if problem is None and environment is not None:
            toolbox = self._toolbox(task, environment, harness, prefetched)
            lessons = self._lessons(task, harness, prefetched)
            messages = opening_messages(task, environment, harness, toolbox, lessons)
            messages[0].meta.update(student_view(task, environment, harness))
        help = request.help.get(index)
        if help is not None and messages:
            messages = apply_help(messages, help)
        rollouts = []
        for sample in range(k):
            attempt = Attempt(
                task_index=index,
                sample_index=sample,
                environment=task.environment,
                harness_version=harness.version_id,
                hint_level=help.level if help is not None else HintLevel.NONE,
                trajectory=Trajectory(messages=[m.model_copy() for m in messages]),
                lessons_used=[lesson.id for lesson in lessons],
                failure_reason=problem,
            )
            seed = _seed(request.seed, index, sample)
            rollouts.append(
                _Rollout(
                    attempt,
                    harness,
                    toolbox,
                    now,
                    done=problem is not None,
                    step_seed=seed,
                    max_temperature=help.max_temperature if help is not None else None,
                )
            )
        return rollouts

    def _prefetched(self, request: ExecutorInput) -> Prefetched:
        """Skills and lessons for all the request's usable tasks: one call per source, the prompts embedded together."""
        skill_queries: list[RetrievalQuery] = []
        lesson_queries: list[RetrievalQuery] = []
        for task in request.tasks:
            if _unusable(task, self.environments.get(task.environment)) is not None:
                continue
            harness = request.harnesses.get(task.environment) or default_harness(task.environment)
            if harness.max_skills > 0:
                skill_queries.append(RetrievalQuery(task.prompt, task.environment, harness.max_skills))
            if harness.lesson_depth != 0:
                lesson_queries.append(RetrievalQuery(task.prompt, task.environment, harness.lesson_depth))
        return prefetch(
            request,
            skills=self.skills,
            skill_queries=skill_queries,
            lessons=self.lessons,
            lesson_queries=lesson_queries,
        )

    def _toolbox(
        self, task: TaskSpec, environment: Environment, harness: HarnessSpec, prefetched: Prefetched
    ) -> Toolbox:
        tools = [tool for tool in environment.tools() if harness.tools is None or tool.name in harness.tools]
        skills = []
        if self.skills is not None and harness.max_skills > 0:
            found = prefetched.skills.get(RetrievalQuery(task.prompt, task.environment, harness.max_skills))
            skills = (
                list(found)
                if found is not None
                else self.skills.retrieve(task.prompt, environment=task.environment, k=harness.max_skills)
            )
        return Toolbox(tools=tools, skills=skills)

    def _lessons(self, task: TaskSpec, harness: HarnessSpec, prefetched: Prefetched) -> list[LessonHandle]:
        if self.lessons is None or harness.lesson_depth == 0:
            return []
        found = prefetched.lessons.get(RetrievalQuery(task.prompt, task.environment, harness.lesson_depth))
        if found is not None:
            return list(found)
        return self.lessons.retrieve(task.prompt, environment=task.environment, k=harness.lesson_depth)

    # stepping

    def _first_step(self, group: list[_Rollout], request: ExecutorInput) -> float:
        lead = group[0]
        with _linked(lead, request):
            replies, seconds, tokens = self._ask(lead, request, n=len(group))
        for rollout, reply in zip(group, replies, strict=False):
            rollout.attempt.prompt_tokens += tokens[0] // max(1, len(group))
            rollout.attempt.completion_tokens += tokens[1] // max(1, len(group))
            with _linked(rollout, request):
                self._advance(rollout, reply)
        short = "the model returned fewer samples than asked for"
        for rollout in group[len(replies) :]:
            self._fail(rollout, lead.attempt.failure_reason if not replies and lead.attempt.failure_reason else short)
        return seconds

    def _next_step(self, rollout: _Rollout, request: ExecutorInput) -> float:
        with _linked(rollout, request):
            replies, seconds, tokens = self._ask(rollout, request, n=1)
            rollout.attempt.prompt_tokens += tokens[0]
            rollout.attempt.completion_tokens += tokens[1]
            if replies:
                self._advance(rollout, replies[0])
        return seconds

    def _ask(self, rollout: _Rollout, request: ExecutorInput, n: int) -> tuple[list[str], float, tuple[int, int]]:
        sampling = rollout.harness.sampling
        temperature = sampling.temperature
        if rollout.max_temperature is not None:
            temperature = min(temperature, rollout.max_temperature)
        params: dict[str, Any] = {
            "temperature": temperature,
            "top_p": sampling.top_p,
            "max_tokens": sampling.max_tokens_per_step,
            "stop": STOP_SEQUENCES,
            "seed": rollout.step_seed + rollout.attempt.steps,
            "run_id": request.run_id,
        }
        if n > 1:
            params["n"] = n
        versioned = version_call(self.gateway.route("executor"), request.model_version)
        if versioned is not None:
            params["model"] = versioned.model
            if versioned.lamarck_engine:
                params["stop_after"] = [ACTION_END]  # a Lamarck engine stops where parse_action would cut
        try:
            result = self.gateway.complete("executor", render_for_model(rollout.attempt.trajectory), **params)
        except GatewayError as exc:
            self._fail(rollout, f"{MODEL_CALL_FAILED}: {exc}")
            return [], 0.0, (0, 0)
        return result.choices, result.latency_s, (result.prompt_tokens, result.completion_tokens)

    def _advance(self, rollout: _Rollout, reply: str) -> None:
        attempt = rollout.attempt
        attempt.steps += 1
        action = parse_action(reply, known_tools=rollout.toolbox.names, primary_tool=rollout.toolbox.primary)
        if action.kind == "answer":
            attempt.trajectory.append(Message(role="assistant", content=action.text))
            attempt.answer = action.answer
            self._finish(rollout)
            return
        if action.kind == "call" and action.tool is not None:
            call_id = f"call_{attempt.steps}"
            call = ToolCall(id=call_id, name=action.tool, arguments={"input": action.argument})
            attempt.trajectory.append(Message(role="assistant", content=action.text, tool_calls=[call]))
            observation = rollout.toolbox.call(action.tool, action.argument)
            if rollout.toolbox.is_skill(action.tool):
                rollout.skills.add(action.tool)
            attempt.trajectory.append(Message(role="tool", name=action.tool, tool_call_id=call_id, content=observation))
        else:
            attempt.trajectory.append(Message(role="assistant", content=reply.strip()))
            attempt.trajectory.append(Message(role="user", content=f"{action.error}", meta={"feedback": True}))
        if attempt.steps >= rollout.harness.step_budget:
            self._fail(rollout, f"step budget of {rollout.harness.step_budget} exhausted without an answer")

    def _fail(self, rollout: _Rollout, reason: str) -> None:
        rollout.attempt.failure_reason = reason
        self._finish(rollout)

    def _finish(self, rollout: _Rollout) -> None:
        rollout.done = True
        rollout.attempt.wall_seconds = time.perf_counter() - rollout.started


def opening_messages(
    task: TaskSpec,
    environment: Environment,
    harness: HarnessSpec,
    toolbox: Toolbox,
    lessons: list[LessonHandle],
) -> list[Message]:
    """The system prompt, the harness's worked examples and the task: what the model sees before its first reply.

    A pure function of its arguments, so a training row can be re-rendered with the student's opening."""
    tools_text, skills_text = toolbox.describe(harness.tool_description)
    lessons_text = ""
    if lessons:
        lessons_text = "Lessons from earlier attempts:\n" + "\n".join(f"- {lesson.text}" for lesson in lessons)
    system = harness.system_prompt.format(
        environment_description=environment.description,
        tools=tools_text,
        skills=skills_text,
        lessons=lessons_text,
        answer_format=harness.answer_format,
    )
    messages = [Message(role="system", content=_tidy(system), meta={"lessons": [lesson.id for lesson in lessons]})]
    for example in harness.few_shot.examples[: harness.few_shot.count]:
        messages.append(Message(role="user", content=example.task, meta={"few_shot": True}))
        for index, turn in enumerate(example.turns):
            role, content = ("assistant", turn) if index % 2 == 0 else ("user", f"{OBSERVATION_PREFIX}{turn}")
            messages.append(Message(role=role, content=content, meta={"few_shot": True}))
    messages.append(Message(role="user", content=task.prompt))
    return messages


def student_opening(task: TaskSpec, environment: Environment, harness: HarnessSpec) -> list[Message]:
    """What the executor shows the student for ``task``: the harness's own tools, no skills, lessons or hints."""
    tools = [tool for tool in environment.tools() if harness.tools is None or tool.name in harness.tools]
    return opening_messages(task, environment, harness, Toolbox(tools=tools), [])


def student_view(task: TaskSpec, environment: Environment, harness: HarnessSpec) -> dict[str, Any]:
    """Recorded with every rollout: the student's opening and tools, so a training row can be re-rendered with what
    the gate and users see, whatever skills, lessons or hints the rollout had."""
    tools = sorted(
        tool.name
        for tool in environment.tools()
        if tool.fn is not None and (harness.tools is None or tool.name in harness.tools)
    )
    return {
        STUDENT_OPENING: render_for_model(Trajectory(messages=student_opening(task, environment, harness))),
        STUDENT_TOOLS: tools,
    }


def _linked(rollout: _Rollout, request: ExecutorInput) -> contextlib.AbstractContextManager[CallContext]:
    """Model and tool calls inside belong to this rollout's episode, at its current step."""
    return call_context(run_id=request.run_id, episode_id=rollout.attempt.episode_id, step=rollout.attempt.steps)


def _unusable(task: TaskSpec, environment: Environment | None) -> str | None:
    if environment is None:
        return f"unknown environment {task.environment!r} for this executor"
    if not task.prompt.strip():
        return "the task has an empty prompt"
    return None


def _seed(seed: int, task_index: int, sample_index: int) -> int:
    digest = hashlib.sha256(f"{seed}:{task_index}:{sample_index}".encode()).digest()
    return int.from_bytes(digest[:4], "big")


def _tidy(text: str) -> str:
    lines = [line.rstrip() for line in text.splitlines()]
    tidy: list[str] = []
    for line in lines:
        if line or (tidy and tidy[-1]):
            tidy.append(line)
    return "\n".join(tidy).strip()

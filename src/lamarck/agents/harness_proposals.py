"""Where the harness-critic's challengers come from, and the guard rails every challenger must pass.

Three sources, each usable on its own:
- ``demonstration_proposals``: worked examples drawn from the agent's own verified, process-filtered successes on
  training tasks (DSPy's BootstrapFewShot with random search): random subsets, weighted toward the difficulties
  where the recent failures are;
- ``knob_proposals``: one or two knobs of the parent changed (sampling, step budget, tokens per step, tool
  description detail, how many worked examples are shown); it needs no model at all, so it works when the model
  is weak;
- ``rewrite_proposal``: the ``harness_critic`` model route rewrites the system prompt with a stated rationale,
  reflecting on the failure groups (GEPA-style). With the embedded 135M model these rarely validate; any
  OpenAI-compatible server on the same route is used without code changes.

``guard`` refuses what a harness may not do: change the environment or its answer format, drop the placeholders
the executor fills (tools, answer format), or name a tool the environment does not register.
"""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from collections.abc import Collection, Sequence
from string import Formatter
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from lamarck.agents.harness import FewShot, FewShotExample, HarnessSpec, load_prompt

Source = Literal["demonstrations", "knobs", "rewrite"]

PROMPT_FIELDS = frozenset({"environment_description", "tools", "skills", "lessons", "answer_format"})
REQUIRED_FIELDS = frozenset({"tools", "answer_format"})


class FailureCase(BaseModel):
    """One failed attempt, as the harness-critic reads it."""

    episode_id: str
    difficulty: int
    failure_reason: str | None = None  # the executor's: budget exhausted, model call failed, ...
    verifier_detail: str = ""  # why the verifier refused the answer
    feedback: list[str] = Field(default_factory=list)  # the executor's feedback on malformed actions
    answered: bool = False


class FailureGroup(BaseModel):
    cause: str  # malformed_action, unknown_tool, budget_exhausted, no_answer, answer_format, wrong_answer
    count: int
    episode_ids: list[str] = Field(default_factory=list)
    difficulties: list[int] = Field(default_factory=list)


class Proposal(BaseModel):
    model_config = ConfigDict(frozen=True)

    spec: HarnessSpec
    source: Source
    rationale: str
    changed: dict[str, Any] = Field(default_factory=dict)


class Rejected(BaseModel):
    """A proposal that did not become a challenger, and why (recorded, never silently dropped)."""

    source: Source
    reason: str
    rationale: str = ""


FORMAT_HINTS = ("format", "not a number", "could not parse", "expected a", "no code block")


def cause_of(case: FailureCase) -> str:
    """The first cause that explains a failure, most specific first."""
    reason = (case.failure_reason or "").lower()
    if any(text.startswith("unknown tool") for text in case.feedback):
        return "unknown_tool"
    if case.feedback and not case.answered:
        return "malformed_action"
    if reason.startswith("step budget"):
        return "budget_exhausted"
    if not case.answered:
        return "no_answer"
    if any(hint in case.verifier_detail.lower() for hint in FORMAT_HINTS):
        return "answer_format"
    return "wrong_answer"


def group_failures(cases: Sequence[FailureCase]) -> list[FailureGroup]:
    """Failures grouped by cause, largest group first (ties by name, so the order is stable)."""
    groups: dict[str, FailureGroup] = {}
    for case in cases:
        cause = cause_of(case)
        group = groups.setdefault(cause, FailureGroup(cause=cause, count=0))
        group.count += 1
        group.episode_ids.append(case.episode_id)
        group.difficulties.append(case.difficulty)
    return sorted(groups.values(), key=lambda g: (-g.count, g.cause))


# guard rails


def prompt_fields(template: str) -> set[str]:
    try:
        return {name for _, name, _, _ in Formatter().parse(template) if name is not None}
    except ValueError as exc:
        raise ValueError(f"the system prompt is not a valid template: {exc}") from None


def guard(parent: HarnessSpec, spec: HarnessSpec, registered_tools: Sequence[str]) -> str | None:
    """Why ``spec`` may not replace ``parent``, or None when it may."""
    if spec.environment != parent.environment:
        return f"a harness may not change its environment ({parent.environment!r} to {spec.environment!r})"
    if spec.answer_format != parent.answer_format:
        return "a harness may not change the answer format the verifier expects"
    try:
        fields = prompt_fields(spec.system_prompt)
    except ValueError as exc:
        return str(exc)
    if unknown := sorted(fields - PROMPT_FIELDS):
        return f"the system prompt names unknown fields {unknown}: use only {sorted(PROMPT_FIELDS)}"
    if missing := sorted(REQUIRED_FIELDS - fields):
        return f"the system prompt drops {', '.join('{' + m + '}' for m in missing)}, which the executor fills"
    if "ANSWER:" not in spec.system_prompt:
        return "the system prompt no longer says how to answer (an `ANSWER:` line)"
    if spec.tools is not None and (extra := sorted(set(spec.tools) - set(registered_tools))):
        return f"tools {extra} are not registered for {spec.environment}"
    return None


# knobs


class KnobSpace(BaseModel):
    """The values the structured search may try; each proposal moves one or two knobs of the parent."""

    temperature: tuple[float, ...] = (0.0, 0.3, 0.7, 1.0)
    top_p: tuple[float, ...] = (0.9, 0.95, 1.0)
    samples_per_task: tuple[int, ...] = (1, 2, 4, 8)
    step_budget: tuple[int, ...] = (3, 4, 6, 8)
    max_tokens_per_step: tuple[int, ...] = (64, 96, 160)
    tool_description: tuple[str, ...] = ("name", "short", "full")
    few_shot_count: tuple[int, ...] = (0, 1, 2, 3)


SAMPLING_KNOBS = ("temperature", "top_p", "samples_per_task", "max_tokens_per_step")


def knob_value(spec: HarnessSpec, knob: str) -> Any:
    if knob in SAMPLING_KNOBS:
        return getattr(spec.sampling, knob)
    if knob == "few_shot_count":
        return spec.few_shot.count
    return getattr(spec, knob)


def with_knob(spec: HarnessSpec, knob: str, value: Any) -> HarnessSpec:
    if knob in SAMPLING_KNOBS:
        return spec.derive(sampling={knob: value})
    if knob == "few_shot_count":
        return spec.derive(few_shot={"count": min(int(value), len(spec.few_shot.examples))})
    return spec.derive(**{knob: value})


def without_redundant_samples(spec: HarnessSpec) -> HarnessSpec:
    """At temperature 0 the engine decodes greedily, so every sample of a task is the same and top_p does nothing:
    a greedy harness takes one sample with top_p 1. Otherwise a move to temperature 0 would keep the parent's
    samples and pay several times for one answer (measured on arithmetic's dev slice: greedy with 4 samples costs
    4x the tokens of greedy with 1 for the same passes), and the token limit would refuse it."""
    if spec.sampling.temperature != 0.0 or (spec.sampling.samples_per_task, spec.sampling.top_p) == (1, 1.0):
        return spec
    return spec.derive(sampling={"samples_per_task": 1, "top_p": 1.0})


def knob_proposals(
    parent: HarnessSpec,
    space: KnobSpace,
    rng: random.Random,
    count: int,
    *,
    tried: Collection[str] = (),
) -> list[Proposal]:
    """Up to ``count`` distinct children, each with one knob moved (two when single moves run out), none of them a
    spec whose digest is in ``tried``: every single move is proposed once before any pair."""
    if count <= 0:
        return []
    singles: list[dict[str, Any]] = []
    knobs = list(space.model_dump())
    for knob, values in space.model_dump().items():
        for value in values:
            if value != knob_value(parent, knob):
                singles.append({knob: value})
    rng.shuffle(singles)
    pairs = [{**a, **b} for a, b in zip(singles[::2], singles[1::2], strict=False) if a.keys() != b.keys()]
    proposals: list[Proposal] = []
    seen = {parent.digest(), *tried}
    for changes in [*singles, *pairs]:
        spec = parent
        for knob, value in changes.items():
            spec = with_knob(spec, knob, value)
        spec = without_redundant_samples(spec)
        changes = {k: knob_value(spec, k) for k in knobs if knob_value(spec, k) != knob_value(parent, k)}
        if spec.digest() in seen:
            continue
        seen.add(spec.digest())
        moved = ", ".join(f"{k} {knob_value(parent, k)!r} -> {v!r}" for k, v in changes.items())
        proposals.append(Proposal(spec=spec, source="knobs", rationale=f"structured search: {moved}", changed=changes))
        if len(proposals) >= count:
            break
    return proposals


# demonstrations


def demonstration_proposals(
    parent: HarnessSpec,
    pool: Sequence[tuple[int, FewShotExample]],
    groups: Sequence[FailureGroup],
    rng: random.Random,
    count: int,
    shots: Sequence[int] = (2, 3),
) -> list[Proposal]:
    """Random subsets of verified successes ``(difficulty, example)`` as the worked examples, drawn with weight
    toward the difficulties the failures are at, so the examples cover what is failing."""
    if not pool or count <= 0:
        return []
    failing = Counter(d for group in groups for d in group.difficulties)
    weights = [1.0 + failing.get(difficulty, 0) for difficulty, _ in pool]
    proposals: list[Proposal] = []
    seen = {parent.digest()}
    for _ in range(4 * count):
        k = min(rng.choice(list(shots)), len(pool))
        chosen: list[int] = []
        while len(chosen) < k:
            index = rng.choices(range(len(pool)), weights=weights)[0]
            if index not in chosen:
                chosen.append(index)
        examples = tuple(pool[i][1] for i in chosen)
        spec = parent.derive(few_shot=FewShot(source="memory", count=len(examples), examples=examples))
        if spec.digest() in seen:
            continue
        seen.add(spec.digest())
        levels = sorted(pool[i][0] for i in chosen)
        proposals.append(
            Proposal(
                spec=spec,
                source="demonstrations",
                changed={"few_shot": f"{k} bootstrapped"},
                rationale=f"bootstrapped {k} verified successes (levels {levels}) as worked "
                f"examples, weighted toward failing levels {sorted(failing)}",
            )
        )
        if len(proposals) >= count:
            break
    return proposals


# the model's rewrite

_JSON = re.compile(r"\{.*\}", re.DOTALL)


def rewrite_request(parent: HarnessSpec, groups: Sequence[FailureGroup], examples: Sequence[str]) -> str:
    summary = "\n".join(f"- {g.cause}: {g.count} failures" for g in groups) or "- (no failures recorded)"
    shown = "\n".join(f"- {text[:300]}" for text in examples[:3]) or "- (none)"
    return load_prompt("harness_rewrite.md").format(
        system_prompt=parent.system_prompt, failures=summary, examples=shown
    )


def parse_rewrite(parent: HarnessSpec, reply: str) -> Proposal | Rejected:
    """The model's reply as a challenger: JSON with ``system_prompt`` and ``rationale``."""
    match = _JSON.search(reply or "")
    if match is None:
        return Rejected(source="rewrite", reason="the reply holds no JSON object")
    try:
        data = json.loads(match.group(0))
    except json.JSONDecodeError as exc:
        return Rejected(source="rewrite", reason=f"the reply's JSON does not parse: {exc.msg}")
    if not isinstance(data, dict) or not isinstance(data.get("system_prompt"), str):
        return Rejected(source="rewrite", reason="the reply's JSON has no string `system_prompt`")
    rationale = str(data.get("rationale") or "").strip()
    if not rationale:
        return Rejected(source="rewrite", reason="the rewrite states no rationale")
    try:
        spec = parent.derive(system_prompt=data["system_prompt"])
    except ValidationError as exc:
        return Rejected(source="rewrite", reason=f"not a valid harness: {exc.errors()[0]['msg']}", rationale=rationale)
    if spec.digest() == parent.digest():
        return Rejected(source="rewrite", reason="the rewrite changes nothing", rationale=rationale)
    return Proposal(spec=spec, source="rewrite", rationale=rationale, changed={"system_prompt": "rewritten"})

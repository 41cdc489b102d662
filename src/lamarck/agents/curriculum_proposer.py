"""The curriculum-proposer: a batch of tasks at the edge of what the executor can do.

The frontier picks (environment, difficulty) slots where expected success is near the
target and replays recent failures. Each fresh slot gets a procedural task, or, for a
share of them, a variant written by the ``curriculum`` model; a variant is accepted
only when the environment can check it and it is neither a near-duplicate of a recent
task nor a held-out task. A rejected variant is recorded with its reason and the slot
falls back to a procedural task, so the batch is always full.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field

from lamarck.agents.harness import load_prompt
from lamarck.curriculum.environment import Environment, TaskSpec
from lamarck.curriculum.frontier import FrontierSelector, FrontierSlot
from lamarck.curriculum.heldout import is_heldout, training_task
from lamarck.curriculum.learnable import Cell, CellEvidence, LearnableFrontier
from lamarck.curriculum.profile import CapabilityProfile
from lamarck.curriculum.proposals import SCHEMAS, ProposalRejected, build_task, parse_proposal
from lamarck.platform.llm.gateway import GatewayError, LLMGateway
from lamarck.platform.storage.fingerprints import normalise_prompt

if TYPE_CHECKING:
    from lamarck.platform.sandbox import Sandbox

NEAR_DUPLICATE = 0.85
PROPOSAL_TOKENS = 200
Source = Literal["procedural", "llm", "replay"]


class ProposerInput(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    profile: CapabilityProfile | dict[Cell, CellEvidence] = Field(
        description="what the frontier reads: the capability profile for the Thompson frontier, per-cell evidence "
        "for the learnable-cells frontier"
    )
    batch_size: int = Field(ge=1, le=4096)
    seed: int = 0
    llm_share: float = Field(0.25, ge=0.0, le=1.0)
    recent_failures: list[TaskSpec] = Field(default_factory=list)
    recent_prompts: list[str] = Field(default_factory=list)
    run_id: str | None = None


class ProposedTask(BaseModel):
    task: TaskSpec
    source: Source
    reason: str


class Rejection(BaseModel):
    environment: str
    difficulty: int
    category: str
    detail: str


class ProposerOutput(BaseModel):
    tasks: list[ProposedTask]
    llm_attempted: int = 0
    llm_accepted: int = 0
    fallbacks: int = 0
    rejections: list[Rejection] = Field(default_factory=list)

    @property
    def rejection_counts(self) -> dict[str, int]:
        return dict(Counter(r.category for r in self.rejections))


class CurriculumProposer:
    def __init__(
        self,
        gateway: LLMGateway | None,
        environments: Mapping[str, Environment],
        *,
        sandbox: Sandbox | None = None,
        frontier: FrontierSelector | LearnableFrontier | None = None,
    ) -> None:
        self.gateway = gateway
        self.environments = dict(environments)
        self.sandbox = sandbox
        self.frontier = frontier or FrontierSelector.from_environments(list(self.environments.values()))

    def _select(self, request: ProposerInput, rng: random.Random) -> list[FrontierSlot]:
        """The frontier's slots; each frontier reads its own kind of profile."""
        profile, failed = request.profile, request.recent_failures
        if isinstance(self.frontier, LearnableFrontier):
            if isinstance(profile, CapabilityProfile):
                raise TypeError("the learnable frontier reads per-cell evidence, not a capability profile")
            return self.frontier.select(profile, request.batch_size, rng=rng, failed_tasks=failed)
        if not isinstance(profile, CapabilityProfile):
            raise TypeError("the Thompson frontier reads a capability profile, not per-cell evidence")
        return self.frontier.select(profile, request.batch_size, rng=rng, failed_tasks=failed)

    def run(self, request: ProposerInput) -> ProposerOutput:
        rng = random.Random(request.seed)
        slots = self._select(request, rng)
        asks = [
            self.gateway is not None
            and slot.replay_task is None
            and slot.environment in SCHEMAS
            and rng.random() < request.llm_share
            for slot in slots
        ]
        seeds = [rng.randrange(2**31) for _ in slots]
        replies = self._ask_all(
            [(slot, seed) for slot, seed, ask in zip(slots, seeds, asks, strict=True) if ask], request.run_id
        )
        output = ProposerOutput(tasks=[])
        novelty = _Novelty(request.recent_prompts)
        for slot, ask in zip(slots, asks, strict=True):
            if slot.replay_task is not None:
                output.tasks.append(ProposedTask(task=slot.replay_task, source="replay", reason=slot.reason))
                novelty.add(slot.replay_task.prompt)
                continue
            task = self._accept(slot, replies.pop(0), novelty, output) if ask else None
            if task is None:
                task = ProposedTask(task=self._procedural(slot, rng, novelty), source="procedural", reason=slot.reason)
            novelty.add(task.task.prompt)
            output.tasks.append(task)
        return output

    def _ask_all(self, asks: list[tuple[FrontierSlot, int]], run_id: str | None) -> list[str | GatewayError]:
        """All proposal calls at once, so the model server batches them."""
        if not asks:
            return []
        with ThreadPoolExecutor(max_workers=min(32, len(asks))) as pool:
            return list(pool.map(lambda ask: self._ask(ask[0], ask[1], run_id), asks))

    def _ask(self, slot: FrontierSlot, seed: int, run_id: str | None) -> str | GatewayError:
        assert self.gateway is not None
        env = self.environments[slot.environment]
        example = training_task(env, slot.difficulty, random.Random(seed))
        prompt = load_prompt("curriculum_propose.md").format(
            environment=env.name,
            description=env.description,
            difficulty=slot.difficulty,
            example=example.prompt,
            schema=SCHEMAS[env.name],
        )
        try:
            return self.gateway.complete(
                "curriculum",
                [{"role": "user", "content": prompt}],
                seed=seed,
                max_tokens=PROPOSAL_TOKENS,
                run_id=run_id,
            ).text
        except GatewayError as exc:
            return exc

    def _procedural(self, slot: FrontierSlot, rng: random.Random, novelty: _Novelty) -> TaskSpec:
        env = self.environments[slot.environment]
        task = training_task(env, slot.difficulty, rng)
        for _ in range(5):
            if not novelty.duplicate_of(task.prompt):
                break
            task = training_task(env, slot.difficulty, rng)
        return task

    def _accept(
        self, slot: FrontierSlot, reply: str | GatewayError, novelty: _Novelty, output: ProposerOutput
    ) -> ProposedTask | None:
        output.llm_attempted += 1
        env_name = slot.environment
        try:
            if isinstance(reply, GatewayError):
                raise ProposalRejected("gateway_error", str(reply))
            task = build_task(env_name, slot.difficulty, parse_proposal(reply), sandbox=self.sandbox)
            if is_heldout(env_name, task.prompt):
                raise ProposalRejected("heldout", "the proposal repeats a held-out evaluation task")
            if (twin := novelty.duplicate_of(task.prompt)) is not None:
                raise ProposalRejected("duplicate", f"near-duplicate of a recent task: {twin[:60]!r}")
        except ProposalRejected as exc:
            self._reject(output, slot, exc.category, exc.detail)
            return None
        output.llm_accepted += 1
        return ProposedTask(
            task=task.model_copy(update={"source_id": f"{env_name}/llm"}), source="llm", reason=slot.reason
        )

    @staticmethod
    def _reject(output: ProposerOutput, slot: FrontierSlot, category: str, detail: str) -> None:
        output.rejections.append(
            Rejection(environment=slot.environment, difficulty=slot.difficulty, category=category, detail=detail)
        )
        output.fallbacks += 1


class _Novelty:
    """Near-duplicate check by normalised text: identical, or character-trigram Jaccard above a threshold."""

    def __init__(self, prompts: Sequence[str]) -> None:
        self._seen: list[tuple[str, frozenset[str]]] = []
        for prompt in prompts:
            self.add(prompt)

    def add(self, prompt: str) -> None:
        self._seen.append((prompt, _trigrams(prompt)))

    def duplicate_of(self, prompt: str) -> str | None:
        grams = _trigrams(prompt)
        for seen, seen_grams in self._seen:
            union = len(grams | seen_grams)
            if union and len(grams & seen_grams) / union >= NEAR_DUPLICATE:
                return seen
        return None


def _trigrams(prompt: str) -> frozenset[str]:
    text = re.sub(r"[^a-z0-9 ]", "", normalise_prompt(prompt))
    return frozenset(text[i : i + 3] for i in range(max(1, len(text) - 2)))

"""Proposer logic with a scripted curriculum model: acceptance, rejection reasons, fallback, novelty, replay."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from lamarck.agents.curriculum_proposer import CurriculumProposer, ProposerInput
from lamarck.curriculum.environments.arithmetic import ArithmeticEnv
from lamarck.curriculum.environments.string_ops import StringOpsEnv
from lamarck.curriculum.heldout import heldout_set
from lamarck.curriculum.profile import CapabilityProfile
from lamarck.platform.llm.gateway import LLMGateway
from lamarck.platform.settings import GatewaySettings, ModelRoute, ModelRoutes
from lamarck.testing import ScriptedLLM, scripted_provider

VALID = json.dumps(
    {"question": "Kai has 12 cards and gets 30 more. How many now?", "expression": "12+30", "answer": 42}
)


def _proposer(envs: dict[str, Any]) -> CurriculumProposer:
    gateway = LLMGateway(ModelRoutes(curriculum=ModelRoute(model="scripted/c")), GatewaySettings(retries=0))
    return CurriculumProposer(gateway, envs)


def test_valid_proposal_is_accepted_and_duplicates_fall_back() -> None:
    handler = ScriptedLLM(lambda messages, n: [VALID] * n)
    with scripted_provider(handler):
        out = _proposer({"arithmetic": ArithmeticEnv()}).run(
            ProposerInput(profile=CapabilityProfile(), batch_size=6, seed=1, llm_share=1.0)
        )
    assert len(out.tasks) == 6
    assert out.llm_attempted == 6 and out.llm_accepted == 1
    assert out.rejection_counts == {"duplicate": 5}
    assert out.fallbacks == 5
    assert [t.source for t in out.tasks].count("llm") == 1
    llm_task = next(t.task for t in out.tasks if t.source == "llm")
    assert ArithmeticEnv().verify(llm_task, "42").passed


def test_garbage_from_the_model_is_counted_and_the_batch_stays_full() -> None:
    replies = iter(
        ["not json at all", '{"question": "x"}', json.dumps({"input": "ab cd", "steps": [{"name": "nope"}]})]
    )
    handler = ScriptedLLM(lambda messages, n: [next(replies, "still nothing")] * n)
    with scripted_provider(handler):
        out = _proposer({"arithmetic": ArithmeticEnv(), "string_ops": StringOpsEnv()}).run(
            ProposerInput(profile=CapabilityProfile(), batch_size=5, seed=3, llm_share=1.0)
        )
    assert len(out.tasks) == 5 and out.llm_accepted == 0
    assert out.fallbacks == out.llm_attempted == 5
    assert set(out.rejection_counts) <= {"invalid_json", "invalid_fields"}
    assert all(t.source == "procedural" for t in out.tasks)


def test_heldout_tasks_are_never_proposed() -> None:
    held = heldout_set("arithmetic", per_level=1)[0]
    reply = json.dumps({"question": held.prompt.split("\n")[0], "expression": "1+1", "answer": 2})
    handler = ScriptedLLM(lambda messages, n: [reply] * n)
    with scripted_provider(handler):
        out = _proposer({"arithmetic": ArithmeticEnv()}).run(
            ProposerInput(profile=CapabilityProfile(), batch_size=4, seed=5, llm_share=1.0)
        )
    heldout_prompts = {t.prompt for t in heldout_set("arithmetic")}
    assert not any(t.task.prompt in heldout_prompts for t in out.tasks)


def test_no_model_means_procedural_tasks_and_replays_of_failures() -> None:
    env = ArithmeticEnv()
    failed = [env.generate(2, random.Random(i)) for i in range(3)]
    out = CurriculumProposer(None, {"arithmetic": env}).run(
        ProposerInput(profile=CapabilityProfile(), batch_size=10, seed=2, recent_failures=failed)
    )
    assert len(out.tasks) == 10 and out.llm_attempted == 0
    assert any(t.source == "replay" for t in out.tasks)
    assert len({t.task.prompt for t in out.tasks}) == 10


def test_same_seed_same_batch() -> None:
    def run() -> list[str]:
        out = CurriculumProposer(None, {"arithmetic": ArithmeticEnv(), "string_ops": StringOpsEnv()}).run(
            ProposerInput(profile=CapabilityProfile(), batch_size=8, seed=11)
        )
        return [t.task.prompt for t in out.tasks]

    assert run() == run()


@pytest.mark.parametrize("batch_size", [0, -3])
def test_bad_batch_size_is_rejected(batch_size: int) -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError):
        ProposerInput(profile=CapabilityProfile(), batch_size=batch_size)

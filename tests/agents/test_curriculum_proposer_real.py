"""The proposer with the real local model end to end: whatever it writes is validated or rejected and counted."""

from __future__ import annotations

import pytest

from lamarck.agents.curriculum_proposer import CurriculumProposer, ProposerInput
from lamarck.curriculum.environments.arithmetic import ArithmeticEnv
from lamarck.curriculum.environments.python_functions import PythonFunctionsEnv
from lamarck.curriculum.profile import CapabilityProfile
from lamarck.platform.sandbox import Sandbox
from lamarck.platform.settings import SandboxSettings


@pytest.mark.slow
def test_proposer_with_the_real_model(local_gateway) -> None:  # type: ignore[no-untyped-def]
    sandbox = Sandbox(SandboxSettings())
    envs = {"arithmetic": ArithmeticEnv(), "python_functions": PythonFunctionsEnv(sandbox=sandbox)}
    proposer = CurriculumProposer(local_gateway, envs, sandbox=sandbox)
    out = proposer.run(ProposerInput(profile=CapabilityProfile(), batch_size=4, seed=7, llm_share=1.0))
    assert len(out.tasks) == 4
    assert out.llm_attempted == 4
    assert out.llm_accepted + out.fallbacks == out.llm_attempted
    assert len(out.rejections) == out.fallbacks
    assert all(r.detail and "\n" not in r.detail for r in out.rejections)
    for proposed in out.tasks:
        if proposed.source == "llm":
            assert envs[proposed.task.environment].verify(proposed.task, _reference_answer(proposed.task)).passed


def _reference_answer(task) -> str:  # type: ignore[no-untyped-def]
    if task.environment == "python_functions":
        return task.reference["solution"]
    return str(task.reference["answer"])

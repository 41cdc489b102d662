"""The gate's evaluator runs the held-out tasks through the executor and reports pass/fail per task, in order."""

from __future__ import annotations

from typing import Any

from lamarck.agents.evaluation import gate_evaluator
from lamarck.curriculum.environments.arithmetic import ArithmeticEnv
from lamarck.curriculum.heldout import heldout_set
from lamarck.platform.llm.gateway import LLMGateway
from lamarck.platform.settings import GatewaySettings, ModelRoute, ModelRoutes
from scripted_llm import ScriptedLLM, scripted_provider


def test_gate_evaluator_reports_each_task_in_order() -> None:
    env = ArithmeticEnv()
    tasks = heldout_set("arithmetic", per_level=1)[:4]
    answers = {t.prompt: str(t.reference["answer"]) for t in tasks[:2]}

    def respond(messages: list[dict[str, Any]], n: int) -> list[str]:
        return [f"ANSWER: {answers.get(messages[-1]['content'], '-1')}"] * n

    gateway = LLMGateway(ModelRoutes(executor=ModelRoute(model="scripted/x")), GatewaySettings(retries=0))
    with scripted_provider(ScriptedLLM(respond)):
        passed = gate_evaluator(gateway, {"arithmetic": env})("m", "arithmetic", tasks)
    assert passed == [True, True, False, False]

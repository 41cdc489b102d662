"""The gate's evaluator runs the held-out tasks through the executor and reports pass/fail per task, in order."""

from __future__ import annotations

from typing import Any

from lamarck.agents.evaluation import gate_evaluator
from lamarck.curriculum.environments.arithmetic import ArithmeticEnv
from lamarck.curriculum.heldout import heldout_set
from lamarck.platform.llm.gateway import LLMGateway
from lamarck.platform.settings import GatewaySettings, ModelRoute, ModelRoutes
from lamarck.testing import ScriptedLLM, scripted_provider


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


def test_with_a_database_the_gate_judges_under_the_promoted_harness(sqlite_db) -> None:  # type: ignore[no-untyped-def]
    from lamarck.agents.evaluation import default_harness_for, release_harness
    from lamarck.agents.harness import save_harness
    from lamarck.agents.harness_archive import promote_harness
    from lamarck.platform.storage import repositories as repo
    from lamarck.platform.storage.records import Evaluation

    env = ArithmeticEnv()
    tasks = heldout_set("arithmetic", per_level=1)[:3]
    answers = {t.prompt: str(t.reference["answer"]) for t in tasks}

    def respond(messages: list[dict[str, Any]], n: int) -> list[str]:  # right only under the promoted prompt
        right = "Think in numbers." in messages[0]["content"]
        return [f"ANSWER: {answers[messages[-1]['content']] if right else '-1'}"] * n

    default = default_harness_for(env)
    promoted = default.derive(system_prompt=default.system_prompt + "\nThink in numbers.")
    gateway = LLMGateway(ModelRoutes(executor=ModelRoute(model="scripted/x")), GatewaySettings(retries=0))
    with scripted_provider(ScriptedLLM(respond)):
        assert gate_evaluator(gateway, {"arithmetic": env}, sqlite_db)("m", "arithmetic", tasks) == [False] * 3
        with sqlite_db.session() as session:
            root = save_harness(session, default, status="promoted")
            save_harness(session, promoted, parent_id=root)
            promote_harness(session, harness_id=promoted.version_id, reason="test")
        assert release_harness(sqlite_db, env) == promoted
        assert gate_evaluator(gateway, {"arithmetic": env}, sqlite_db)("m", "arithmetic", tasks) == [True] * 3
    with sqlite_db.session() as session:
        assert {e.harness_version for e in session.query(Evaluation)} == {default.version_id, promoted.version_id}
        assert repo.promoted_harness_ids(session) == {"arithmetic": promoted.version_id}


def test_an_evaluation_says_which_tasks_parsed_to_an_answer() -> None:
    from lamarck.agents.evaluation import default_harness_for, evaluate

    env = ArithmeticEnv()
    tasks = heldout_set("arithmetic", per_level=1)[:3]

    def respond(messages: list[dict[str, Any]], n: int) -> list[str]:  # answers the first task, calls on the rest
        return ["ANSWER: 1" if messages[-1]["content"] == tasks[0].prompt else "CALL calculator: 1 +"] * n

    gateway = LLMGateway(ModelRoutes(executor=ModelRoute(model="scripted/x")), GatewaySettings(retries=0))
    with scripted_provider(ScriptedLLM(respond)):
        result = evaluate(gateway, env, tasks, "m", default_harness_for(env).derive(step_budget=1))
    assert result.answered == [1.0, 0.0, 0.0]

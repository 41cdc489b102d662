"""An executor whose route has an ``api_base`` asks a real ``lamarck serve-model`` for the release's version by name,
so the gate's candidate and champion are different models; a version the server lacks fails its attempts with the
server's reason, and the executor (and the run around it) goes on."""

from __future__ import annotations

import random

import pytest
from sqlalchemy import select

from lamarck.agents.evaluation import EvaluationError, gate_evaluator
from lamarck.agents.executor import MODEL_CALL_FAILED, Executor, ExecutorInput, ExecutorOutput
from lamarck.agents.harness import default_harness
from lamarck.curriculum.environment import TaskSpec
from lamarck.curriculum.environments.arithmetic import ArithmeticEnv
from lamarck.platform.llm.gateway import LLMGateway
from lamarck.platform.settings import GatewaySettings, ModelRoute, ModelRoutes
from lamarck.platform.storage.database import Database
from lamarck.platform.storage.records import LLMCall
from remote_model_fixtures import BASE, RemoteModelServer, remote_models_fixture  # noqa: F401  (the fixture)

ENV = ArithmeticEnv()


def _gateway(remote: RemoteModelServer, db: Database) -> LLMGateway:
    """The executor on a remote Lamarck route, the way `lamarck init` writes it: no key, no version template."""
    route = ModelRoute(model=f"lamarck/{BASE}", api_base=remote.base_url)
    return LLMGateway(ModelRoutes(executor=route), GatewaySettings(retries=0), db=db)


def _tasks(count: int) -> list[TaskSpec]:
    return [ENV.generate(1, random.Random(index)) for index in range(count)]


def _run(gateway: LLMGateway, version: str, tasks: list[TaskSpec]) -> ExecutorOutput:
    harness = default_harness(ENV.name, ENV.answer_format).derive(
        step_budget=1, sampling={"temperature": 0.0, "top_p": 1.0, "max_tokens_per_step": 24}
    )
    return Executor(gateway, {ENV.name: ENV}).run(
        ExecutorInput(tasks=tasks, model_version=version, harnesses={ENV.name: harness}, samples_per_task=1)
    )


def _replies(out: ExecutorOutput) -> list[str]:
    return [m.content for a in out.attempts for m in a.trajectory.messages if m.role == "assistant"]


@pytest.mark.slow
def test_a_remote_executor_asks_for_the_version_by_name(remote_models: RemoteModelServer, sqlite_db: Database) -> None:
    gateway, tasks = _gateway(remote_models, sqlite_db), _tasks(1)
    adapter = remote_models.adapter_version
    del remote_models.served[:]
    tuned = _run(gateway, adapter, tasks)
    assert remote_models.served and set(remote_models.served) == {adapter}
    del remote_models.served[:]
    base = _run(gateway, BASE, tasks)
    assert remote_models.served and set(remote_models.served) == {BASE}
    for out in (tuned, base):
        assert not [a.failure_reason for a in out.attempts if (a.failure_reason or "").startswith(MODEL_CALL_FAILED)]
    assert _replies(tuned) != _replies(base)
    with sqlite_db.session() as session:
        models = {call.model for call in session.scalars(select(LLMCall))}
    assert models == {f"openai/{adapter}", f"openai/{BASE}"}


@pytest.mark.slow
def test_a_version_the_server_lacks_fails_the_attempts_with_its_reason_and_the_executor_goes_on(
    remote_models: RemoteModelServer, sqlite_db: Database
) -> None:
    gateway, tasks = _gateway(remote_models, sqlite_db), _tasks(1)
    out = _run(gateway, "never-trained", tasks)
    assert len(out.attempts) == 1 and all(a.answer is None for a in out.attempts)
    for attempt in out.attempts:
        reason = attempt.failure_reason or ""
        assert reason.startswith(
            f"{MODEL_CALL_FAILED}: model openai/never-trained for role executor refused the call: "
            "model version 'never-trained' is not in this server's model store: train or import it there"
        )
        assert f"ask for one of: {BASE}" in reason and "\n" not in reason
    del remote_models.served[:]
    after = _run(gateway, BASE, tasks)  # the same executor and server go on serving the versions they have
    assert remote_models.served and not any(
        (a.failure_reason or "").startswith(MODEL_CALL_FAILED) for a in after.attempts
    )


@pytest.mark.slow
def test_the_gate_evaluates_candidate_and_champion_as_different_models(
    remote_models: RemoteModelServer, sqlite_db: Database
) -> None:
    evaluator = gate_evaluator(_gateway(remote_models, sqlite_db), {ENV.name: ENV})
    tasks, adapter = _tasks(1), remote_models.adapter_version
    del remote_models.served[:]
    candidate = evaluator(adapter, ENV.name, tasks)
    assert remote_models.served and set(remote_models.served) == {adapter}
    del remote_models.served[:]
    champion = evaluator(BASE, ENV.name, tasks)
    assert remote_models.served and set(remote_models.served) == {BASE}
    assert len(candidate) == len(champion) == 1
    with pytest.raises(EvaluationError, match="could not reach never-trained: .*is not in this server's model store"):
        evaluator("never-trained", ENV.name, tasks)

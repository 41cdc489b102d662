"""The executor with the real local model on easy tasks of each environment, recorded completely."""

from __future__ import annotations

import random

import pytest

from lamarck.agents.episodes import record_attempts
from lamarck.agents.executor import Executor, ExecutorInput
from lamarck.agents.harness import default_harness
from lamarck.curriculum.environments.arithmetic import ArithmeticEnv
from lamarck.curriculum.environments.python_functions import PythonFunctionsEnv
from lamarck.curriculum.environments.string_ops import StringOpsEnv
from lamarck.platform.sandbox import Sandbox
from lamarck.platform.settings import SandboxSettings
from lamarck.platform.storage import repositories as repo


@pytest.mark.slow
def test_executor_runs_each_environment_with_the_real_model(local_gateway, sqlite_db) -> None:  # type: ignore[no-untyped-def]
    sandbox = Sandbox(SandboxSettings())
    envs = {
        "arithmetic": ArithmeticEnv(),
        "python_functions": PythonFunctionsEnv(sandbox=sandbox),
        "string_ops": StringOpsEnv(),
    }
    tasks = [env.generate(1, random.Random(index)) for index, env in enumerate(envs.values())]
    harnesses = {
        name: default_harness(name, env.answer_format).derive(step_budget=2, sampling={"max_tokens_per_step": 48})
        for name, env in envs.items()
    }
    out = Executor(local_gateway, envs).run(
        ExecutorInput(tasks=tasks, model_version="smollm2-135m", harnesses=harnesses, samples_per_task=2, seed=3)
    )
    assert len(out.attempts) == 6
    with sqlite_db.session() as session:
        task_ids = [
            repo.add_task(session, environment=t.environment, difficulty=t.difficulty, prompt=t.prompt).id
            for t in tasks
        ]
    episode_ids = record_attempts(sqlite_db, out.attempts, task_ids=task_ids, model_version="smollm2-135m")
    with sqlite_db.session() as session:
        for attempt, episode_id in zip(out.attempts, episode_ids, strict=True):
            episode = repo.get_episode(session, episode_id=episode_id)
            trajectory = repo.episode_trajectory(episode)
            assert trajectory == attempt.trajectory
            assert [m.role for m in trajectory.messages[:2]] == ["system", "user"]
            assert any(m.role == "assistant" and m.content for m in trajectory.messages)
            assert episode.model_version == "smollm2-135m"
            assert episode.harness_version == harnesses[attempt.environment].version_id
            assert episode.completion_tokens > 0 and episode.prompt_tokens > 0
            assert (episode.answer is not None) != (episode.failure_reason is not None)
            if episode.answer is not None:
                task = tasks[attempt.task_index]
                reward = envs[attempt.environment].verify(task, episode.answer)  # the real model's answer
                assert reward.passed == (reward.score == 1.0) and reward.details  # a failure says why
        assert repo.llm_usage(session)["calls"] == out.model_calls

"""One generation of the loop with the real local model on every role (tiny batch, short harness)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import select
from test_orchestrator_support import make_container

from lamarck.agents.evaluation import default_harness_for, evaluate, heldout_tasks
from lamarck.agents.harness import save_harness
from lamarck.agents.orchestrator import Orchestrator
from lamarck.agents.runs import RunConfig
from lamarck.curriculum.environments.arithmetic import ArithmeticEnv
from lamarck.memory.chroma import ChromaMemory
from lamarck.platform.settings import DEFAULT_MODEL_VERSION
from lamarck.platform.storage import repositories as repo
from lamarck.platform.storage.records import Episode, LLMCall, Verdict


@pytest.mark.slow
def test_one_generation_with_the_real_model(local_gateway, sqlite_db, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    short = default_harness_for(ArithmeticEnv()).derive(step_budget=2, sampling={"max_tokens_per_step": 48})
    with sqlite_db.session() as session:
        repo.register_model_version(
            session, version_id=DEFAULT_MODEL_VERSION, base=DEFAULT_MODEL_VERSION, status="promoted"
        )
        harness_id = save_harness(session, short)
    config = RunConfig(
        environments=["arithmetic"],
        generations=1,
        batch_size=2,
        samples_per_task=1,
        llm_share=0.0,
        repair=False,
        harnesses={"arithmetic": harness_id},
    )
    memory = ChromaMemory.embedded(tmp_path / "chroma")
    try:
        orchestrator = Orchestrator(make_container(sqlite_db, tmp_path, local_gateway, memory), seed_builtins=False)
        run_id = orchestrator.start(config)
        outcome = orchestrator.run(run_id)
    finally:
        memory.close()
    assert outcome.status == "finished" and outcome.generations_done == 1
    with sqlite_db.session() as session:
        episodes = list(session.scalars(select(Episode).where(Episode.run_id == run_id)))
        # the hint ladder retries a task no sample solved: 2 first attempts, then up to 4 rungs each
        assert 2 <= len(episodes) <= 10 and all(e.harness_version == harness_id for e in episodes)
        assert len({(e.task_id, e.sample_index) for e in episodes}) == len(episodes)
        assert all(e.outcome in ("passed", "failed") for e in episodes)
        verdicts = list(session.scalars(select(Verdict)))
        assert len(verdicts) == len(episodes) and {v.source for v in verdicts} <= {"verifier", "both"}
        roles = {call.role for call in session.scalars(select(LLMCall).where(LLMCall.run_id == run_id))}
        assert {"executor", "critic"} <= roles
    summary = outcome.summaries[0]
    assert summary.attempts == len(episodes) and summary.tokens > 0 and summary.cells[0].tokens > 0

    # the held-out evaluation on the same model: greedy, so the same score twice
    env = ArithmeticEnv()
    tasks, eval_set = heldout_tasks(env, per_level=1, limit=3)
    first = evaluate(local_gateway, env, tasks, DEFAULT_MODEL_VERSION, short, eval_set=eval_set)
    second = evaluate(local_gateway, env, tasks, DEFAULT_MODEL_VERSION, short, eval_set=eval_set)
    assert first.n_tasks == 3 and first.per_task == second.per_task and first.eval_set == second.eval_set

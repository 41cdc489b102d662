"""One loop generation with the real local model, traced: the model calls are stored with their text and linked to
the episode they served, and the spans read back show the graph node, its chat calls and its tool calls."""

from __future__ import annotations

from pathlib import Path

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from sqlalchemy import select
from test_orchestrator_support import make_container

from lamarck.agents.evaluation import default_harness_for
from lamarck.agents.harness import save_harness
from lamarck.agents.orchestrator import Orchestrator
from lamarck.agents.runs import RunConfig
from lamarck.curriculum.environments.arithmetic import ArithmeticEnv
from lamarck.memory.chroma import ChromaMemory
from lamarck.platform.settings import DEFAULT_MODEL_VERSION
from lamarck.platform.storage import repositories as repo
from lamarck.platform.storage.records import Episode, LLMCall


def _children(spans: list[ReadableSpan], parent: ReadableSpan, prefix: str) -> list[ReadableSpan]:
    assert parent.context is not None
    return [
        s
        for s in spans
        if s.name.startswith(prefix) and s.parent is not None and s.parent.span_id == parent.context.span_id
    ]


@pytest.mark.slow
def test_a_real_generation_is_traced_and_linked(  # type: ignore[no-untyped-def]
    local_gateway, sqlite_db, tmp_path: Path, spans: InMemorySpanExporter
) -> None:
    short = default_harness_for(ArithmeticEnv()).derive(step_budget=2, sampling={"max_tokens_per_step": 32})
    with sqlite_db.session() as session:
        repo.register_model_version(
            session, version_id=DEFAULT_MODEL_VERSION, base=DEFAULT_MODEL_VERSION, status="promoted"
        )
        harness_id = save_harness(session, short)
    config = RunConfig(
        environments=["arithmetic"],
        generations=1,
        batch_size=1,
        samples_per_task=1,
        llm_share=0.0,
        repair=False,
        induce_skills=False,
        hints=["none"],
        frontier="thompson",  # the learnable frontier would first measure the release on development tasks
        seed=5,
        harnesses={"arithmetic": harness_id},
    )
    memory = ChromaMemory.embedded(tmp_path / "chroma")
    try:
        orchestrator = Orchestrator(make_container(sqlite_db, tmp_path, local_gateway, memory), seed_builtins=False)
        run_id = orchestrator.start(config)
        assert orchestrator.run(run_id).status == "finished"
    finally:
        memory.close()

    with sqlite_db.session() as session:
        [episode] = session.scalars(select(Episode).where(Episode.run_id == run_id))
        calls = list(session.scalars(select(LLMCall).where(LLMCall.episode_id == episode.id)))
    executor_calls = sorted((c for c in calls if c.role == "executor"), key=lambda c: c.step or 0)
    assert executor_calls and [c.step for c in executor_calls] == list(range(len(executor_calls)))
    assert all(c.run_id == run_id and c.ok and c.completion_tokens > 0 for c in executor_calls)
    first = executor_calls[0]
    assert first.prompt is not None and first.prompt[-1]["role"] == "user"
    assert episode.steps and first.prompt[-1]["content"] in {step.content for step in episode.steps}
    assert first.response and first.response[0].strip()  # what the real model said, stored
    assert any(c.role == "critic" for c in calls)  # the judge's call on this episode is linked to it too

    finished = list(spans.get_finished_spans())
    [execute] = [s for s in finished if s.name == "invoke_agent execute"]
    chats = _children(finished, execute, "chat ")
    assert len(chats) == len(executor_calls)
    for span, call in zip(sorted(chats, key=lambda s: s.start_time or 0), executor_calls, strict=True):
        attributes = dict(span.attributes or {})
        assert span.name == f"chat {call.model}" and attributes["gen_ai.operation.name"] == "chat"
        assert attributes["gen_ai.provider.name"] == "lamarck" and attributes["gen_ai.request.max_tokens"] == 32
        assert attributes["gen_ai.usage.output_tokens"] == call.completion_tokens
        assert attributes["lamarck.episode.id"] == episode.id and attributes["lamarck.step"] == call.step
        assert call.trace_id == f"{span.context.trace_id:032x}"  # type: ignore[union-attr]
    tool_steps = [step for step in episode.steps if step.role == "tool"]
    tools = _children(finished, execute, "execute_tool ")
    assert tool_steps, "this seeded task's real episode calls the calculator; if the model changed, pick another seed"
    assert [(s.attributes or {})["gen_ai.tool.name"] for s in tools] == [step.name for step in tool_steps]
    assert all((s.attributes or {})["lamarck.episode.id"] == episode.id for s in tools)

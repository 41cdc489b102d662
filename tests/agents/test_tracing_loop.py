"""A loop generation as a readable trace: node spans parent the chat and tool spans their agents make, and every
executor call is linked to a stored episode and step. Scripted models here; test_tracing_real.py runs the real one."""

from __future__ import annotations

from pathlib import Path

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from sqlalchemy import select
from test_orchestrator_support import scripted_orchestrator, small_config

from lamarck.platform.storage.database import Database
from lamarck.platform.storage.records import Episode, LLMCall


def _parent_id(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def test_a_generation_is_one_readable_trace(sqlite_db: Database, tmp_path: Path, spans: InMemorySpanExporter) -> None:
    with scripted_orchestrator(sqlite_db, tmp_path) as orchestrator:
        run_id = orchestrator.start(small_config(generations=1, batch_size=2, samples_per_task=2))
        assert orchestrator.run(run_id).status == "finished"
    finished = spans.get_finished_spans()
    nodes = {s.attributes["gen_ai.agent.name"]: s for s in finished if s.name.startswith("invoke_agent ")}
    assert {"propose", "execute", "critique", "induce", "assess", "record"} <= set(nodes)
    execute = nodes["execute"]
    assert execute.context is not None and (execute.attributes or {})["lamarck.run.id"] == run_id

    with sqlite_db.session() as session:
        episodes = {e.id: e for e in session.scalars(select(Episode).where(Episode.run_id == run_id))}
        calls = list(session.scalars(select(LLMCall).where(LLMCall.run_id == run_id)))
    executor_calls = [c for c in calls if c.role == "executor"]
    assert len(episodes) == 4 and executor_calls
    assert all(c.episode_id in episodes and c.step is not None for c in executor_calls)
    assert all(c.prompt and c.response for c in executor_calls)
    for episode_id in episodes:  # every episode's replies are found from the episode
        steps = sorted(c.step for c in executor_calls if c.episode_id == episode_id and c.step is not None)
        assert steps and steps == sorted(set(steps))
    assert {c.episode_id for c in calls if c.role == "critic"} <= set(episodes)

    chats = [
        s
        for s in finished
        if s.name == "chat scripted/executor" and (s.attributes or {}).get("lamarck.run.id") == run_id
    ]
    assert len(chats) == len(executor_calls)
    assert all(_parent_id(s) == execute.context.span_id for s in chats)  # the rollout threads keep the node's trace
    assert {(s.attributes or {})["lamarck.episode.id"] for s in chats} <= set(episodes)
    tools = [s for s in finished if s.name == "execute_tool calculator" and _parent_id(s) == execute.context.span_id]
    assert tools and {(s.attributes or {})["lamarck.episode.id"] for s in tools} == set(episodes)
    trace_ids = {c.trace_id for c in executor_calls}
    assert trace_ids == {f"{execute.context.trace_id:032x}"}
    critique = nodes["critique"]
    judged = [
        s for s in finished if s.name.startswith("chat ") and (s.attributes or {}).get("lamarck.role") == "critic"
    ]
    assert len(judged) == len([c for c in calls if c.role == "critic"]) > 0
    assert critique.context is not None
    assert all(_parent_id(s) == critique.context.span_id for s in judged)  # the judges' threads keep the node's trace

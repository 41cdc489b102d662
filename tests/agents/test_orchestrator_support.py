"""Shared pieces for the orchestrator tests (no tests here): a scripted model for every role, a composition root over a
real database and a real Chroma directory, and a child-process entry point that drives a run until it is killed.

    python tests/agents/test_orchestrator_support.py run|resume DATABASE_URL DATA_DIR RUN_ID DELAY_SECONDS
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from lamarck.agents.orchestrator import Orchestrator
from lamarck.agents.runs import RunConfig
from lamarck.memory.chroma import ChromaMemory
from lamarck.platform.container import Container
from lamarck.platform.llm.gateway import LLMGateway
from lamarck.platform.sandbox import Sandbox
from lamarck.platform.settings import (
    EngineSettings,
    GatewaySettings,
    HarnessCriticSettings,
    ModelRoute,
    ModelRoutes,
    SandboxSettings,
    Settings,
)
from lamarck.platform.storage import migrate
from lamarck.platform.storage.database import Database
from lamarck.testing import ScriptedLLM, scripted_provider

NUMBER = re.compile(r"\d+")


def scripted_routes() -> ModelRoutes:
    return ModelRoutes(
        **{
            role: ModelRoute(model=f"scripted/{role}")
            for role in ("curriculum", "executor", "critic", "harness_critic")
        }
    )


def scripted_gateway(db: Database) -> LLMGateway:
    return LLMGateway(scripted_routes(), GatewaySettings(retries=0), db=db)


def responder(delay: float = 0.0):  # type: ignore[no-untyped-def]
    """Every role: the executor adds the story's first two numbers with the calculator (right on a + b tasks only),
    the judge fails everything with a lesson that depends on the task's length, repairs are wrong, proposals junk."""

    def respond(messages: list[dict[str, Any]], n: int) -> list[str]:
        if delay:
            time.sleep(delay)
        last = next(m["content"] for m in reversed(messages) if m["role"] == "user")
        if "You review one attempt" in last:
            steps = last.split("Attempt, step by step:")[0].count(".")
            return [
                f"VERDICT: fail\nFIRST_ERROR: 1\nCRITIQUE: wrong operation.\nLESSON: Stories with {steps} "
                f"sentences need {max(1, steps - 1)} operations; apply each in order."
            ] * n
        if "got this task wrong" in last:
            return ["ANSWER: -1"] * n
        if last.startswith("RESULT: "):
            return [f"ANSWER: {last.removeprefix('RESULT: ').strip()}"] * n
        if messages[0]["role"] == "system":
            numbers = NUMBER.findall(last)[:2]
            return [f"CALL calculator: {' + '.join(numbers) or '0'}"] * n
        return ["not a task"] * n

    return respond


def make_container(
    db: Database,
    data_dir: Path,
    gateway: LLMGateway,
    memory: ChromaMemory,
    harness_critic: HarnessCriticSettings | None = None,
) -> Container:
    """The composition root over the test's database, gateway and memory; the rest from settings."""
    settings = Settings(
        data_dir=data_dir,
        engine=EngineSettings(slots=16, max_batch_size=16),
        harness_critic=harness_critic or HarnessCriticSettings(),
    )
    return Container(settings, db=db, gateway=gateway, memory=memory, sandbox=Sandbox(SandboxSettings()))


@contextmanager
def scripted_orchestrator(
    db: Database,
    data_dir: Path,
    delay: float = 0.0,
    listener: Any = None,
    builtins: bool = False,
    harness_critic: HarnessCriticSettings | None = None,
) -> Iterator[Orchestrator]:
    memory = ChromaMemory.embedded(data_dir / "chroma")
    try:
        with scripted_provider(ScriptedLLM(responder(delay))):
            container = make_container(db, data_dir, scripted_gateway(db), memory, harness_critic)
            yield Orchestrator(container, listener=listener, seed_builtins=builtins)
    finally:
        memory.close()


def small_config(**changes: Any) -> RunConfig:
    """Two small generations; no hint ladder unless asked, so counts are batch x samples x generations."""
    base: dict[str, Any] = {
        "environments": ["arithmetic"],
        "generations": 2,
        "batch_size": 4,
        "samples_per_task": 2,
        "llm_share": 0.0,
        "seed": 7,
        "hints": ["none"],
    }
    return RunConfig.model_validate({**base, **changes})


def child_main(mode: str, database_url: str, data_dir: str, run_id: str, delay: float) -> None:
    db = Database(database_url)
    migrate.upgrade(db)
    with scripted_orchestrator(db, Path(data_dir), delay=delay) as orchestrator:
        orchestrator.resume(run_id) if mode == "resume" else orchestrator.run(run_id)


if __name__ == "__main__":
    child_main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5]))

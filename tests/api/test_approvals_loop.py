"""The setting reaches the loop: with ``approvals.required`` the distillation driver's passing gate leaves the
champion serving and asks for an approval instead; off (the default), it promotes as before."""

from __future__ import annotations

from pathlib import Path

import pytest

from lamarck.agents.distillation import Distillation
from lamarck.agents.evaluation import gate_evaluator
from lamarck.curriculum.environments.arithmetic import ArithmeticEnv
from lamarck.curriculum.heldout import heldout_set
from lamarck.platform.container import Container
from lamarck.platform.events import EventBus
from lamarck.platform.settings import (
    ApprovalSettings,
    GatewaySettings,
    ModelRoute,
    ModelRoutes,
    Settings,
    TrainingSettings,
)
from lamarck.platform.storage import approvals
from lamarck.platform.storage.database import Database
from lamarck.testing import ScriptedLLM, scripted_provider
from lamarck.training import registry

CANDIDATE = "smollm2-135m-ft-good"


@pytest.mark.parametrize("required", [True, False])
def test_the_gate_of_a_run_waits_for_approval_only_when_required(
    tmp_path: Path, sqlite_db: Database, required: bool
) -> None:
    settings = Settings(
        data_dir=tmp_path / "data",
        database_url=sqlite_db.url,
        models=ModelRoutes(executor=ModelRoute(model="scripted/x")),
        gateway=GatewaySettings(retries=0),
        training=TrainingSettings(gate_per_level=2, gate_environments=[]),
        approvals=ApprovalSettings(required=required),
    )
    container = Container(settings)
    try:
        with sqlite_db.session() as session:
            registry.ensure_base_registered(session)
            registry.register_candidate(
                session,
                version_id=CANDIDATE,
                base="smollm2-135m",
                adapter_path=None,
                parent_id="smollm2-135m",
                dataset_digest="ab".ljust(64, "0"),
                training_metrics={"environments": ["arithmetic"]},
            )
        tasks = heldout_set("arithmetic", per_level=2)
        answers = {t.prompt: str(t.reference["answer"]) for t in tasks}
        right = ScriptedLLM(lambda messages, n: [f"ANSWER: {answers.get(messages[-1]['content'], '-1')}"] * n)
        wrong = ScriptedLLM(lambda messages, n: ["ANSWER: -1"] * n)
        evaluate = gate_evaluator(container.gateway, {"arithmetic": ArithmeticEnv()}, sqlite_db)
        with scripted_provider(right):
            evaluate(CANDIDATE, "arithmetic", tasks)
        notes: list[str] = []
        driver = Distillation(container, send=lambda name, kwargs: None, bus=EventBus(sqlite_db), notify=notes.append)
        with scripted_provider(wrong):
            evaluate("smollm2-135m", "arithmetic", tasks)
            [decision] = driver.gate_pending()  # both results come from the stored evaluations
        assert decision.promote
        with sqlite_db.session() as session:
            pending = approvals.page(session, status="pending")
            assert registry.champion(session) == ("smollm2-135m" if required else CANDIDATE)
            assert [(a.kind, a.subject) for a in pending] == ([("model", CANDIDATE)] if required else [])
        assert any(("waits for approval" if required else "promoted") in note for note in notes)
    finally:
        container.close()

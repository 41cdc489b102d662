"""The run's side of distillation with scripted model replies: scheduling around in-flight jobs, the gate's cache,
refusing a candidate that cannot be evaluated, and the orchestrator's between-generations hook."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "training"))  # the shared episode helpers

from training_helpers import add_episode, add_task  # noqa: E402

from lamarck.agents.distillation import Distillation, focus_levels, gate_environments, gate_tasks
from lamarck.agents.evaluation import default_harness_for, gate_evaluator
from lamarck.agents.executor import student_view
from lamarck.curriculum.environment import TaskSpec
from lamarck.curriculum.environments.arithmetic import ArithmeticEnv
from lamarck.curriculum.heldout import heldout_set
from lamarck.platform.container import Container
from lamarck.platform.event_types import JobFailed, JobStarted
from lamarck.platform.events import EventBus
from lamarck.platform.llm.gateway import LLMGateway
from lamarck.platform.settings import GatewaySettings, ModelRoute, ModelRoutes, Settings, TrainingSettings
from lamarck.platform.storage import repositories as repo
from lamarck.platform.storage.database import Database
from lamarck.platform.storage.trajectory import STUDENT_TOOLS
from lamarck.testing import ScriptedLLM, scripted_provider
from lamarck.training import registry


def _container(tmp_path: Path, db: Database, **training: Any) -> Container:
    """The shared helpers' episodes are level-1 passes through a generic `calc` tool: the process filter and the
    anchor cap (tested in tests/training/test_dataset_filters.py) would refuse them all, so they are off here."""
    training = {"process_filter": False, "anchor_levels": 0, **training}
    routes = ModelRoutes(executor=ModelRoute(model="scripted/x"))
    settings = Settings(
        data_dir=tmp_path / "data",
        database_url=db.url,
        models=routes,
        gateway=GatewaySettings(retries=0),
        training=TrainingSettings(**training),
    )
    return Container(settings)


def _student_view(prompt: str) -> dict[str, object]:
    """What the executor records with a rollout of this arithmetic task under the default harness."""
    env = ArithmeticEnv()
    task = TaskSpec(environment="arithmetic", difficulty=1, prompt=prompt)
    view = student_view(task, env, default_harness_for(env))
    return {**view, STUDENT_TOOLS: ["calculator", "calc"]}  # the helpers' episodes call a tool named `calc`


def _register_candidate(db: Database, version_id: str) -> None:
    with db.session() as session:
        registry.ensure_base_registered(session)
        registry.register_candidate(
            session,
            version_id=version_id,
            base="smollm2-135m",
            adapter_path=None,
            parent_id="smollm2-135m",
            dataset_digest=version_id.encode().hex().ljust(64, "0"),
            training_metrics={"environments": ["arithmetic"]},
        )


def _answers_right(tasks: list[Any]) -> ScriptedLLM:
    answers = {t.prompt: str(t.reference["answer"]) for t in tasks}
    return ScriptedLLM(lambda messages, n: [f"ANSWER: {answers.get(messages[-1]['content'], '-1')}"] * n)


def test_gate_evaluator_reuses_a_stored_evaluation_of_the_same_model_and_tasks(sqlite_db: Database) -> None:
    tasks = heldout_set("arithmetic", per_level=1)[:3]
    llm = _answers_right(tasks)
    gateway = LLMGateway(ModelRoutes(executor=ModelRoute(model="scripted/x")), GatewaySettings(retries=0))
    evaluator = gate_evaluator(gateway, {"arithmetic": ArithmeticEnv()}, sqlite_db)
    with scripted_provider(llm):
        first = evaluator("champion-a", "arithmetic", tasks)
        calls = len(llm.calls)
        again = evaluator("champion-a", "arithmetic", tasks)
        assert len(llm.calls) == calls, "the champion's greedy results were recomputed"
        evaluator("candidate-b", "arithmetic", tasks)
        assert len(llm.calls) > calls
    assert first == again == [True, True, True]


def test_gate_evaluator_runs_only_the_tasks_a_model_has_not_met_on_the_slice(sqlite_db: Database) -> None:
    """A candidate's gate that looks closely at other levels shares most tasks with the last one: the champion's
    stored results are reused task by task."""
    tasks = heldout_set("arithmetic", per_level=2)
    first, wider = tasks[::2], tasks  # the wider set holds every task of the first and as many new ones
    llm = _answers_right(tasks)
    gateway = LLMGateway(ModelRoutes(executor=ModelRoute(model="scripted/x")), GatewaySettings(retries=0))
    evaluator = gate_evaluator(gateway, {"arithmetic": ArithmeticEnv()}, sqlite_db)
    with scripted_provider(llm):
        assert evaluator("champion-a", "arithmetic", first) == [True] * len(first)
        asked = {call["messages"][-1]["content"] for call in llm.calls}
        before = len(llm.calls)
        assert evaluator("champion-a", "arithmetic", wider) == [True] * len(wider)
        again = {call["messages"][-1]["content"] for call in llm.calls[before:]}
    assert again and not again & asked, "a task the champion already met was run again"
    assert again == {task.prompt for task in tasks[1::2]}


def test_schedules_one_job_at_a_time_and_reports_a_failed_one(tmp_path: Path, sqlite_db: Database) -> None:
    container = _container(tmp_path, sqlite_db, min_new_episodes=2)
    sent: list[dict[str, Any]] = []
    notes: list[str] = []
    bus = EventBus(sqlite_db)
    driver = Distillation(container, send=lambda name, kwargs: sent.append(kwargs), bus=bus, notify=notes.append)
    try:
        for seed in (510, 511):
            task, prompt = add_task(sqlite_db, seed=seed)
            add_episode(sqlite_db, task, prompt, student=_student_view(prompt))
        first = driver.schedule()
        assert first is not None and first.scheduled and first.job is not None
        assert driver.in_flight() == [first.job] and len(sent) == 1

        task, prompt = add_task(sqlite_db, seed=512)
        add_episode(sqlite_db, task, prompt, student=_student_view(prompt))
        assert driver.schedule() is None and len(sent) == 1  # the first job has not ended: rollouts just go on

        job = {"job": first.job, "task": "lamarck.train.distill", "celery_id": None, "attempt": 1, "redelivered": False}
        bus.publish(JobStarted(**job))
        assert driver.in_flight() == [first.job]
        bus.publish(JobFailed(**job, error="RuntimeError: out of memory", final=True, retryable=True))
        assert driver.in_flight() == []
        assert any("failed: RuntimeError: out of memory" in note for note in notes)
        second = driver.schedule()
        assert second is not None and second.scheduled and second.dataset_digest != first.dataset_digest
    finally:
        container.close()


def test_a_candidate_that_cannot_be_evaluated_is_refused_once_and_the_champion_stays(
    tmp_path: Path, sqlite_db: Database
) -> None:
    container = _container(tmp_path, sqlite_db, gate_per_level=1, gate_environments=[])
    notes: list[str] = []
    driver = Distillation(container, send=lambda name, kwargs: None, bus=EventBus(sqlite_db), notify=notes.append)

    def unreachable(messages: list[dict[str, Any]], n: int) -> list[str]:
        raise RuntimeError("adapter fails to load")

    broken = ScriptedLLM(unreachable)
    try:
        _register_candidate(sqlite_db, "smollm2-135m-ft-broken")
        with scripted_provider(broken):
            assert driver.gate_pending() == []
            assert driver.gate_pending() == []  # judged once, not retried every generation
        with sqlite_db.session() as session:
            assert registry.champion(session) == "smollm2-135m"
            version = repo.get_model_version(session, version_id="smollm2-135m-ft-broken")
            assert version.status == "candidate" and "could not evaluate" in (version.reason or "")
        assert [e.payload["promote"] for e in EventBus(sqlite_db).replay() if e.type == "model.gate"] == [False]
        assert sum("refused" in note for note in notes) == 1
    finally:
        container.close()


def test_a_better_candidate_is_promoted_through_the_driver(tmp_path: Path, sqlite_db: Database) -> None:
    container = _container(tmp_path, sqlite_db, gate_per_level=2, gate_environments=[])
    tasks = heldout_set("arithmetic", per_level=2)
    driver = Distillation(container, send=lambda name, kwargs: None, bus=EventBus(sqlite_db))
    try:
        _register_candidate(sqlite_db, "smollm2-135m-ft-good")
        # one scripted model per version: the candidate answers right, the champion never does
        llm = _answers_right(tasks)
        llm_base = ScriptedLLM(lambda messages, n: ["ANSWER: -1"] * n)
        with scripted_provider(llm):
            candidate_results = gate_evaluator(container.gateway, {"arithmetic": ArithmeticEnv()}, sqlite_db)(
                "smollm2-135m-ft-good", "arithmetic", tasks
            )
        with scripted_provider(llm_base):
            gate_evaluator(container.gateway, {"arithmetic": ArithmeticEnv()}, sqlite_db)(
                "smollm2-135m", "arithmetic", tasks
            )
            decisions = driver.gate_pending()  # both results come from the stored evaluations
        assert all(candidate_results)
        assert [d.promote for d in decisions] == [True]
        with sqlite_db.session() as session:
            assert registry.champion(session) == "smollm2-135m-ft-good"
    finally:
        container.close()


def test_gate_environments_puts_the_trained_ones_first_without_duplicates() -> None:
    assert gate_environments(["arithmetic"], ["string_ops", "arithmetic"]) == ["arithmetic", "string_ops"]
    everything = gate_environments(["string_ops"], None)
    assert everything[0] == "string_ops" and "python_functions" in everything and "humaneval" not in everything


def test_gate_tasks_look_closer_at_the_levels_the_candidate_trained_on() -> None:
    env = ArithmeticEnv()
    tasks = gate_tasks(env, 1, 4, focus=[2, 3])
    per_level = {level: sum(t.difficulty == level for t in tasks) for level in env.difficulties}
    assert per_level == {level: 4 if level in (2, 3) else 1 for level in env.difficulties}
    assert [t.fingerprint for t in gate_tasks(env, 1, 4, focus=[])] == [
        t.fingerprint for t in heldout_set("arithmetic", per_level=1)
    ]
    wider = [t.fingerprint for t in heldout_set("arithmetic", per_level=4) if t.difficulty == 2]
    assert [t.fingerprint for t in tasks if t.difficulty == 2] == wider  # the same tasks, a longer prefix


def test_the_gate_looks_closely_only_at_levels_with_a_real_share_of_the_rows() -> None:
    rows = {"2": 64, "3": 15, "4": 9, "5": 1, "6": 0}
    assert focus_levels(rows, 0.1) == [2, 3, 4]
    assert focus_levels(rows, 0.0) == [2, 3, 4, 5]
    assert focus_levels({}, 0.1) == []


def test_a_refused_candidate_better_on_the_dev_slice_becomes_the_rollout_sampler(
    tmp_path: Path, sqlite_db: Database
) -> None:
    from lamarck.curriculum.heldout import dev_set

    container = _container(tmp_path, sqlite_db, gate_per_level=2, gate_environments=[], sampler_dev_per_level=2)
    gate, dev = heldout_set("arithmetic", per_level=2), dev_set("arithmetic", per_level=2)
    envs = {"arithmetic": ArithmeticEnv()}
    driver = Distillation(container, send=lambda name, kwargs: None, bus=EventBus(sqlite_db))
    try:
        _register_candidate(sqlite_db, "smollm2-135m-ft-unproven")
        wrong = ScriptedLLM(lambda messages, n: ["ANSWER: -1"] * n)
        with scripted_provider(wrong):  # the gate's tasks: the same for both, so the gate refuses
            for version in ("smollm2-135m-ft-unproven", "smollm2-135m"):
                gate_evaluator(container.gateway, envs, sqlite_db)(version, "arithmetic", gate)
            gate_evaluator(container.gateway, envs, sqlite_db, slice_="dev")("smollm2-135m", "arithmetic", dev)
        with scripted_provider(_answers_right(dev)):
            gate_evaluator(container.gateway, envs, sqlite_db, slice_="dev")(
                "smollm2-135m-ft-unproven", "arithmetic", dev
            )
            decisions = driver.gate_pending()  # every result comes from the stored evaluations
        assert [d.promote for d in decisions] == [False]
        with sqlite_db.session() as session:
            scores = repo.get_model_version(session, version_id="smollm2-135m-ft-unproven").eval_scores
            assert scores["dev_better"] is True and scores["dev"]["wins"] == len(dev) and "gate" in scores
            assert scores["gate_harnesses"] == {"arithmetic": default_harness_for(envs["arithmetic"]).version_id}
            assert registry.rollout_sampler(session) == "smollm2-135m-ft-unproven"
            assert registry.champion(session) == "smollm2-135m"
    finally:
        container.close()


def test_a_look_beyond_the_plan_refuses_without_running_the_gate(tmp_path: Path, sqlite_db: Database) -> None:
    container = _container(
        tmp_path, sqlite_db, gate_per_level=2, gate_environments=[], gate_looks=1, sampler_dev_per_level=1
    )
    notes: list[str] = []
    driver = Distillation(container, send=lambda name, kwargs: None, bus=EventBus(sqlite_db), notify=notes.append)
    try:
        for name in ("smollm2-135m-ft-first", "smollm2-135m-ft-second"):
            _register_candidate(sqlite_db, name)
        with sqlite_db.session() as session:  # the first look was spent already
            registry.record_decision(session, version_id="smollm2-135m-ft-first", scores={"gate": {}}, reason="refused")
        calls: list[int] = []
        with scripted_provider(ScriptedLLM(lambda messages, n: calls.append(n) or ["ANSWER: -1"] * n)):
            decisions = driver.gate_pending()
        assert [(d.promote, d.look) for d in decisions] == [(False, 2)] and "alpha spent" in decisions[0].reason
        dev_tasks = 9  # one per arithmetic level, for each of the two models; no gate task was run
        assert len(calls) == 2 * dev_tasks
        with sqlite_db.session() as session:
            second = repo.get_model_version(session, version_id="smollm2-135m-ft-second")
            assert "alpha spent" in (second.reason or "") and second.eval_scores["dev_better"] is False
            assert registry.gate_looks(session) == 2
    finally:
        container.close()


def test_the_gate_also_judges_what_the_champions_lineage_was_trained_on(tmp_path: Path, sqlite_db: Database) -> None:
    """A python_functions candidate from an arithmetic-trained champion is judged on arithmetic too, even when the
    configured guard list names only string_ops (a reference run lost 9 points of arithmetic that way, unseen)."""
    container = _container(tmp_path, sqlite_db, gate_per_level=1, gate_focus_per_level=1, gate_environments=[])
    notes: list[str] = []
    driver = Distillation(container, send=lambda name, kwargs: None, bus=EventBus(sqlite_db), notify=notes.append)
    try:
        _register_candidate(sqlite_db, "smollm2-135m-ft-arith")
        with sqlite_db.session() as session:
            registry.promote(session, version_id="smollm2-135m-ft-arith")
            registry.register_candidate(
                session,
                version_id="smollm2-135m-ft-python",
                base="smollm2-135m",
                adapter_path=None,
                parent_id="smollm2-135m-ft-arith",
                dataset_digest="ab" * 32,
                training_metrics={"environments": ["python_functions"]},
            )
            assert registry.lineage_environments(session, version_id="smollm2-135m-ft-python") == [
                "python_functions",
                "arithmetic",
            ]
        with scripted_provider(ScriptedLLM(lambda messages, n: ["ANSWER: -1"] * n)):
            [decision] = driver.gate_pending()
        assert not decision.promote
        [look] = [note for note in notes if note.startswith("gate look")]
        assert "on python_functions (" in look and "arithmetic (" in look and "string_ops" not in look
    finally:
        container.close()

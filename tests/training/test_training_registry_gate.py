"""Registry promote/rollback and the evaluation gate, on both databases."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from lamarck.curriculum.environment import TaskSpec
from lamarck.platform.events import EventBus
from lamarck.platform.storage import repositories as repo
from lamarck.platform.storage.database import Database
from lamarck.platform.storage.records import Evaluation
from lamarck.training import registry
from lamarck.training.gate import decide, run_gate, sign_test_p


def _candidate(db: Database, name: str, parent: str = "smollm2-135m") -> None:
    with db.session() as session:
        registry.ensure_base_registered(session)
        registry.register_candidate(
            session,
            version_id=name,
            base="smollm2-135m",
            adapter_path=f"/x/{name}",
            parent_id=parent,
            dataset_digest=name.ljust(64, "0"),
            training_metrics={},
        )


def test_promote_and_rollback(db: Database) -> None:
    _candidate(db, "gen1")
    _candidate(db, "gen2", parent="gen1")
    with db.session() as session:
        assert registry.champion(session) == "smollm2-135m"
        registry.promote(session, version_id="gen1")
        registry.promote(session, version_id="gen2")
    with db.session() as session:
        assert registry.champion(session) == "gen2"
        assert repo.get_model_version(session, version_id="gen1").status == "retired"
        assert repo.get_model_version(session, version_id="smollm2-135m").status == "retired"
        restored = registry.rollback(session)
    assert restored.id == "gen1"
    with db.session() as session:
        assert registry.champion(session) == "gen1"
        assert repo.get_model_version(session, version_id="gen2").status == "candidate"
        assert len(repo.list_model_versions(session, status="promoted")) == 1
        assert registry.rollback(session).id == "smollm2-135m"
        with pytest.raises(registry.RegistryError, match="no previous champion"):
            registry.rollback(session)


def test_sign_test() -> None:
    assert sign_test_p(0, 0) == 1.0
    assert sign_test_p(5, 0) == pytest.approx(1 / 32)
    assert sign_test_p(8, 2) == pytest.approx(56 / 1024)


def test_decide_refuses_a_worse_or_unproven_candidate_and_accepts_a_better_one() -> None:
    champ = [True] * 10 + [False] * 20
    better = [True] * 10 + [True] * 12 + [False] * 8  # 12 wins, 0 losses
    worse = [False] * 5 + [True] * 5 + [False] * 20
    slight = [True] * 10 + [True, True] + [False] * 18  # 2 wins: not significant
    other = [True] * 10
    ok = decide("c", "h", {"arithmetic": (better, champ), "string_ops": (other, other)}, ["arithmetic"])
    assert ok.promote and ok.p_value is not None and ok.p_value < 0.05
    bad = decide("c", "h", {"arithmetic": (worse, champ)}, ["arithmetic"])
    assert not bad.promote and "not better" in bad.reason
    unproven = decide("c", "h", {"arithmetic": (slight, champ)}, ["arithmetic"])
    assert not unproven.promote and "not significantly better" in unproven.reason
    regress = decide(
        "c", "h", {"arithmetic": (better, champ), "string_ops": ([False] * 3 + [True] * 7, other)}, ["arithmetic"]
    )
    assert not regress.promote and "worse on string_ops" in regress.reason


def _tasks(env: str, n: int) -> list[TaskSpec]:
    return [
        TaskSpec(environment=env, difficulty=1, prompt=f"{env} task {i}", seed=i, source_id=f"{env}/{i}")
        for i in range(n)
    ]


def test_run_gate_records_and_promotes_only_a_better_candidate(sqlite_db: Database) -> None:
    _candidate(sqlite_db, "good")
    _candidate(sqlite_db, "bad")
    tasks = {"arithmetic": _tasks("arithmetic", 20), "string_ops": _tasks("string_ops", 10)}
    seen: list[tuple[str, str, tuple[str, ...]]] = []

    def evaluator(version: str, env: str, batch: Sequence[TaskSpec]) -> list[bool]:
        seen.append((version, env, tuple(t.prompt for t in batch)))
        base = [i % 4 == 0 for i in range(len(batch))]
        if version == "good" and env == "arithmetic":
            return [True] * len(batch)
        if version == "bad" and env == "arithmetic":
            return [False] * len(batch)
        return base

    bus = EventBus(sqlite_db)
    refused = run_gate(
        sqlite_db,
        candidate="bad",
        champion="smollm2-135m",
        evaluator=evaluator,
        environments=list(tasks),
        trained_environments=["arithmetic"],
        tasks=tasks,
        bus=bus,
    )
    assert not refused.promote
    accepted = run_gate(
        sqlite_db,
        candidate="good",
        champion="smollm2-135m",
        evaluator=evaluator,
        environments=list(tasks),
        trained_environments=["arithmetic"],
        tasks=tasks,
        bus=bus,
    )
    assert accepted.promote
    # both models saw exactly the same tasks
    by_env: dict[str, set[tuple[str, ...]]] = {}
    for _version, env, prompts in seen:
        by_env.setdefault(env, set()).add(prompts)
    assert all(len(v) == 1 for v in by_env.values())
    with sqlite_db.session() as session:
        assert registry.champion(session) == "good"
        bad = repo.get_model_version(session, version_id="bad")
        assert bad.status == "candidate" and "not better" in (bad.reason or "")
        evaluations = list(session.query(Evaluation).filter(Evaluation.kind == "gate"))
        assert len(evaluations) == 4
        good_arith = next(e for e in evaluations if e.model_version == "good" and e.environment == "arithmetic")
        assert good_arith.decision["promote"] is True and good_arith.score == 1.0
        assert good_arith.per_task["champion"]["arithmetic/0"] is True
    gates = [e for e in bus.replay() if e.type == "model.gate"]
    assert [e.payload["promote"] for e in gates] == [False, True]

"""The rollout sampler: a candidate the gate found better but not significantly so rolls out for the teacher, while
the champion stays what users, the student's evaluations and the gate's baseline get."""

from __future__ import annotations

from collections.abc import Sequence

from lamarck.curriculum.environment import TaskSpec
from lamarck.platform.storage import repositories as repo
from lamarck.platform.storage.database import Database
from lamarck.training import registry
from lamarck.training.gate import decide, run_gate

BASE = "smollm2-135m"


def _candidate(db: Database, name: str, parent: str = BASE) -> None:
    with db.session() as session:
        registry.ensure_base_registered(session)
        registry.register_candidate(session, version_id=name, base=BASE, adapter_path=f"/x/{name}",
                                    parent_id=parent, dataset_digest=name.ljust(64, "0"), training_metrics={})


def _tasks(env: str, n: int) -> list[TaskSpec]:
    return [TaskSpec(environment=env, difficulty=2, prompt=f"{env} task {i}", seed=i, source_id=f"{env}/{i}")
            for i in range(n)]


def test_better_means_more_wins_than_losses_and_nothing_broken_elsewhere() -> None:
    champ = [True] * 10 + [False] * 20
    slight = [True] * 10 + [True, True, True] + [False] * 17  # 3 wins, 0 losses: not significant
    other = [True] * 10
    unproven = decide("c", "h", {"arithmetic": (slight, champ), "string_ops": (other, other)}, ["arithmetic"])
    assert not unproven.promote and unproven.better
    even = [False] + [True] * 9 + [True] + [False] * 19  # 1 win, 1 loss
    assert not decide("c", "h", {"arithmetic": (even, champ)}, ["arithmetic"]).better
    broke = decide("c", "h", {"arithmetic": (slight, champ), "string_ops": ([False] * 3 + [True] * 7, other)},
                   ["arithmetic"])
    assert not broke.better
    assert not decide("c", "h", {"string_ops": (other, other)}, ["arithmetic"]).better


def test_the_sampler_is_the_newest_better_candidate_of_the_champion(sqlite_db: Database) -> None:
    tasks = {"arithmetic": _tasks("arithmetic", 30)}

    def evaluator(version: str, env: str, batch: Sequence[TaskSpec]) -> list[bool]:
        passes = 10 + {"worse": -3, "slight": 3, "slighter": 2}.get(version, 0)
        return [i < passes for i in range(len(batch))]

    with sqlite_db.session() as session:
        registry.ensure_base_registered(session)
        assert registry.rollout_sampler(session) == BASE
    for name in ("worse", "slight", "slighter"):
        _candidate(sqlite_db, name)
        decision = run_gate(sqlite_db, candidate=name, champion=BASE, evaluator=evaluator,
                            environments=["arithmetic"], trained_environments=["arithmetic"], tasks=tasks)
        assert not decision.promote
    with sqlite_db.session() as session:
        assert registry.rollout_sampler(session) == "slighter"
        assert registry.champion(session) == BASE
        assert repo.get_model_version(session, version_id="worse").eval_scores["gate_better"] is False
    _candidate(sqlite_db, "pending")  # not judged yet: not a sampler
    with sqlite_db.session() as session:
        assert registry.rollout_sampler(session) == "slighter"


def test_a_promotion_ends_the_old_champions_sampler(sqlite_db: Database) -> None:
    _candidate(sqlite_db, "slight")
    _candidate(sqlite_db, "winner")
    with sqlite_db.session() as session:
        registry.record_decision(session, version_id="slight", scores={"gate": {}, "gate_better": True},
                                 reason="not significantly better")
        assert registry.rollout_sampler(session) == "slight"
        registry.promote(session, version_id="winner")
    with sqlite_db.session() as session:
        assert registry.rollout_sampler(session) == "winner"

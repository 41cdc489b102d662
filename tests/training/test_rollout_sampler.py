"""The rollout sampler: a candidate the gate refused but that won more dev-slice tasks rolls out for the teacher, while
the champion stays what users, the student's evaluations and the gate's baseline get."""

from __future__ import annotations

from lamarck.platform.storage.database import Database
from lamarck.training import registry

BASE = "smollm2-135m"


def _candidate(db: Database, name: str, parent: str = BASE) -> None:
    with db.session() as session:
        registry.ensure_base_registered(session)
        registry.register_candidate(
            session,
            version_id=name,
            base=BASE,
            adapter_path=f"/x/{name}",
            parent_id=parent,
            dataset_digest=name.ljust(64, "0"),
            training_metrics={},
        )


def _decide(db: Database, name: str, *, dev_better: bool | None) -> None:
    scores: dict[str, object] = {"gate": {}, "gate_p_value": 0.3}
    if dev_better is not None:
        scores["dev_better"] = dev_better
    with db.session() as session:
        registry.record_decision(session, version_id=name, scores=scores, reason="not significantly better")


def test_the_sampler_is_the_newest_candidate_of_the_champion_that_was_better_on_dev(sqlite_db: Database) -> None:
    with sqlite_db.session() as session:
        registry.ensure_base_registered(session)
        assert registry.rollout_sampler(session) == BASE
    for name, better in (("worse", False), ("slight", True), ("slighter", True), ("gate_only", None)):
        _candidate(sqlite_db, name)
        _decide(sqlite_db, name, dev_better=better)
    _candidate(sqlite_db, "pending")  # not judged yet: not a sampler
    _candidate(sqlite_db, "grandchild", parent="slight")  # not trained from the champion
    _decide(sqlite_db, "grandchild", dev_better=True)
    with sqlite_db.session() as session:
        assert registry.rollout_sampler(session) == "slighter"
        assert registry.champion(session) == BASE


def test_a_promotion_ends_the_old_champions_sampler(sqlite_db: Database) -> None:
    _candidate(sqlite_db, "slight")
    _candidate(sqlite_db, "winner")
    with sqlite_db.session() as session:
        registry.record_decision(
            session, version_id="slight", scores={"gate": {}, "dev_better": True}, reason="not significantly better"
        )
        assert registry.rollout_sampler(session) == "slight"
        registry.promote(session, version_id="winner")
    with sqlite_db.session() as session:
        assert registry.rollout_sampler(session) == "winner"

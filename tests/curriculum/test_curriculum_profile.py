from __future__ import annotations

import pytest
from sqlalchemy import select

from lamarck.curriculum.profile import CapabilityProfile, ProfileSnapshot
from lamarck.platform.storage.records import CapabilityCell


def test_prior_and_updates_persist(db):
    profile = CapabilityProfile()
    assert profile.estimate("arithmetic", 1) == pytest.approx((0.5, 0.05, 0.95))
    with db.session() as session:
        for passed in (True, True, True, False):
            profile.update(session, "arithmetic", 1, passed)
        cell = profile.update(session, "arithmetic", 2, False)
    assert cell.alpha == 1 and cell.beta == 2 and cell.attempts == 1 and cell.successes == 0

    mean, lower, upper = profile.estimate("arithmetic", 1)
    assert mean == pytest.approx(4 / 6) and lower < mean < upper

    with db.session() as session:
        rows = {(r.environment, r.difficulty): r for r in session.scalars(select(CapabilityCell))}
        assert (rows["arithmetic", 1].alpha, rows["arithmetic", 1].beta) == (4.0, 2.0)
        assert (rows["arithmetic", 1].attempts, rows["arithmetic", 1].successes) == (4, 3)
        reloaded = CapabilityProfile.load(session)
    assert reloaded.estimate("arithmetic", 1) == pytest.approx(profile.estimate("arithmetic", 1))


def test_bulk_update_from_verdict_like_records(db):
    class VerdictRow:
        def __init__(self, environment, difficulty, passed):
            self.environment, self.difficulty, self.passed, self.critique = environment, difficulty, passed, "x"

    profile = CapabilityProfile()
    records = [
        VerdictRow("string_ops", 3, True),
        {"environment": "string_ops", "difficulty": 3, "passed": False},
        VerdictRow("python_functions", 1, True),
    ]
    with db.session() as session:
        assert profile.update_many(session, records) == 3
    with db.session() as session:
        loaded = CapabilityProfile.load(session)
    assert loaded.posterior("string_ops", 3) == (2.0, 2.0)
    assert loaded.attempts("python_functions", 1) == 1


def test_two_profiles_share_the_database(db):
    first, second = CapabilityProfile(), CapabilityProfile()
    with db.session() as session:
        first.update(session, "arithmetic", 4, True)
    with db.session() as session:
        second.update(session, "arithmetic", 4, True)  # reads the row first wrote, not its own empty memory
    assert second.posterior("arithmetic", 4) == (3.0, 1.0)


def test_decay_tracks_a_changing_executor():
    steady, forgetful = CapabilityProfile(), CapabilityProfile(decay=0.9)
    for profile in (steady, forgetful):
        for _ in range(100):
            profile.record("arithmetic", 5, True)
        for _ in range(20):
            profile.record("arithmetic", 5, False)
    assert steady.estimate("arithmetic", 5)[0] > 0.8
    assert forgetful.estimate("arithmetic", 5)[0] < 0.3
    assert forgetful.attempts("arithmetic", 5) == 120
    alpha, beta = forgetful.posterior("arithmetic", 5)
    assert alpha + beta < 1 / (1 - 0.9) + 2 + 1e-9  # bounded evidence


def test_snapshot_is_a_pydantic_model():
    profile = CapabilityProfile()
    profile.record("string_ops", 2, True)
    profile.record("arithmetic", 1, False)
    snap = profile.snapshot()
    assert isinstance(snap, ProfileSnapshot)
    assert snap.environments() == ["arithmetic", "string_ops"]
    cell = snap.cell("string_ops", 2)
    assert cell is not None and cell.mean == pytest.approx(2 / 3) and cell.lower < cell.mean < cell.upper
    assert ProfileSnapshot.model_validate_json(snap.model_dump_json()) == snap


def test_bad_arguments():
    with pytest.raises(ValueError, match="decay"):
        CapabilityProfile(decay=0.0)
    with pytest.raises(ValueError, match="difficulty must be an integer"):
        CapabilityProfile().record("arithmetic", "3", True)

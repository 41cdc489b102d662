"""``lease_held`` tells whether a delivery of a job is running, for both lease kinds: a Redis key (distributed) and an
``flock`` on a file in the data directory (embedded); the probe itself takes nothing away from the holder."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from lamarck.platform.settings import Settings, WorkerSettings
from lamarck.platform.workers import LeaseBusy, lease, lease_held


@pytest.mark.parametrize("broker", ["embedded", "redis"])
def test_lease_held_while_a_delivery_holds_it(broker: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    url = request.getfixturevalue("redis_url") if broker == "redis" else None
    settings = Settings(data_dir=tmp_path, broker_url=url, workers=WorkerSettings(lease_ttl_seconds=10))
    key = f"rollout:test-{uuid.uuid4().hex}:g0:t0"
    assert not lease_held(settings, key)
    with lease(settings, key):
        assert lease_held(settings, key)
        assert lease_held(settings, key)  # probing twice leaves the holder's lease in place
        with pytest.raises(LeaseBusy), lease(settings, key):
            pass
    assert not lease_held(settings, key)

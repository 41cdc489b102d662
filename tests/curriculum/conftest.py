from __future__ import annotations

import pytest

from lamarck.platform.settings import SandboxSettings


@pytest.fixture(scope="session")
def sandbox():
    """The real platform sandbox, bubblewrap only: without it these tests skip, and CI fails on the skip (no quiet
    fallback to the limits-only mode, which would let CI pass without the isolation the project relies on)."""
    from lamarck.platform.sandbox import Sandbox, SandboxUnavailable

    box = Sandbox(SandboxSettings(mode="bubblewrap"))
    try:
        ready = box.run_python("print('ready')").stdout.strip() == "ready"
    except SandboxUnavailable as exc:
        pytest.skip(f"bubblewrap cannot run here: {exc}")
    if not ready:
        pytest.skip("bubblewrap ran but the sandbox printed nothing: tests/platform/test_sandbox.py shows why")
    return box


@pytest.fixture
def db(tmp_path):
    from lamarck.platform.storage.database import Database
    from lamarck.platform.storage.records import Base

    database = Database(f"sqlite:///{tmp_path / 'profile.db'}")
    Base.metadata.create_all(database.engine)
    yield database
    database.dispose()

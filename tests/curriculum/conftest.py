from __future__ import annotations

import pytest

from lamarck.platform.settings import SandboxSettings


@pytest.fixture(scope="session")
def sandbox():
    """The real platform sandbox (bubblewrap); limits-only where bubblewrap cannot run here."""
    from lamarck.platform.sandbox import Sandbox, SandboxUnavailable

    for mode in ("bubblewrap", "limits_only"):
        box = Sandbox(SandboxSettings(mode=mode))
        try:
            if box.run_python("print('ready')").stdout.strip() == "ready":
                return box
        except SandboxUnavailable:
            continue
    pytest.skip("no working sandbox on this machine")


@pytest.fixture
def db(tmp_path):
    from lamarck.platform.storage.database import Database
    from lamarck.platform.storage.records import Base

    database = Database(f"sqlite:///{tmp_path / 'profile.db'}")
    Base.metadata.create_all(database.engine)
    yield database
    database.dispose()

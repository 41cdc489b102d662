"""Skill-library fixtures: a real sandbox, a SQLite-backed library, and one with a real Chroma memory."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from lamarck.memory.chroma import ChromaMemory
from lamarck.platform.sandbox import Sandbox
from lamarck.platform.settings import MemorySettings, SandboxSettings
from lamarck.platform.storage.database import Database
from lamarck.skills_library.library import SkillLibrary


@pytest.fixture(scope="session")
def skill_sandbox() -> Sandbox:
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap not installed: apt-get install bubblewrap")
    return Sandbox(SandboxSettings(cpu_seconds=2, wall_seconds=10.0, memory_mb=512, processes=32))


@pytest.fixture
def library(sqlite_db: Database, skill_sandbox: Sandbox) -> SkillLibrary:
    return SkillLibrary(sqlite_db, skill_sandbox)


@pytest.fixture
def skill_memory(tmp_path: Path) -> Iterator[ChromaMemory]:
    memory = ChromaMemory.embedded(tmp_path / "chroma", MemorySettings())
    yield memory
    memory.close()


@pytest.fixture
def memory_library(sqlite_db: Database, skill_sandbox: Sandbox, skill_memory: ChromaMemory) -> SkillLibrary:
    return SkillLibrary(sqlite_db, skill_sandbox, skill_memory)

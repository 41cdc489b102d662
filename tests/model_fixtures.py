"""Session-scoped fixtures over the real default model (a pytest plugin: ``pytest_plugins = ["model_fixtures"]``).

``model_store``: a ModelStore at ``<repo>/.cache/test-models`` (or ``$LAMARCK_TEST_MODEL_STORE``); the GGUF is
imported once per machine and verified by sha256 on later sessions.
``local_engine``: one LocalEngine (llama.cpp, the embedded default) for the whole session, closed at the end.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from typing import TYPE_CHECKING  # noqa: E402

if TYPE_CHECKING:  # torch and transformers load only when a test asks for the model
    from lamarck.platform.llm.engine import LocalEngine
    from lamarck.platform.llm.model_store import ModelStore

REPO = Path(__file__).resolve().parents[1]


def test_model_store_root() -> Path:
    return Path(os.environ.get("LAMARCK_TEST_MODEL_STORE", REPO / ".cache" / "test-models"))


test_model_store_root.__test__ = False  # type: ignore[attr-defined]


@pytest.fixture(scope="session")
def model_store() -> ModelStore:
    from lamarck.platform.llm.model_store import ModelStore

    store = ModelStore(test_model_store_root())
    store.import_default(progress=False)
    return store


@pytest.fixture(scope="session")
def local_engine(model_store: ModelStore) -> Iterator[LocalEngine]:
    from lamarck.platform.llm.engine import LocalEngine
    from lamarck.platform.settings import EngineSettings

    engine = LocalEngine(model_store, EngineSettings(slots=32))
    yield engine
    engine.close()

"""The composition root: builds every client and store from Settings, lazily and once.

Agents, nodes and commands receive what they need from here; nothing else constructs its own clients. Heavy parts
(the local engine, torch, the vector memory) load only when first used. As the one place that knows every part, it
may import the parts above ``platform/``, but only inside the properties that build them (tests/test_layering.py).

Tests and benchmarks pass their own parts (a scripted gateway, an in-memory vector store) as keyword arguments;
everything they do not pass is built from the settings as usual.
"""

from __future__ import annotations

import threading
from functools import cached_property
from typing import TYPE_CHECKING

from lamarck.platform import tracing
from lamarck.platform.events import EventBus
from lamarck.platform.llm.gateway import LLMGateway
from lamarck.platform.settings import Settings, load_settings
from lamarck.platform.storage import migrate
from lamarck.platform.storage.database import Database

if TYPE_CHECKING:
    from lamarck.memory.chroma import ChromaMemory
    from lamarck.memory.lessons import LessonStore
    from lamarck.platform.llm.model_store import ModelStore
    from lamarck.platform.llm.serving import ServingEngine
    from lamarck.platform.sandbox import Sandbox
    from lamarck.skills_library.library import SkillLibrary


class Container:
    def __init__(
        self,
        settings: Settings | None = None,
        *,
        db: Database | None = None,
        gateway: LLMGateway | None = None,
        memory: ChromaMemory | None = None,
        sandbox: Sandbox | None = None,
    ) -> None:
        self.settings = settings or load_settings()
        tracing.configure(self.settings.tracing)
        self._lock = threading.Lock()
        self._engine: ServingEngine | None = None
        given = {"db": db, "gateway": gateway, "memory": memory, "sandbox": sandbox}
        self._given = {name for name, part in given.items() if part is not None}
        self.__dict__.update({name: given[name] for name in self._given})

    @cached_property
    def db(self) -> Database:
        """The database, migrated to the newest schema on first use."""
        if self.settings.database_url is None:
            raise ValueError("settings.database_url is unset: set LAMARCK_DATABASE_URL or LAMARCK_DATA_DIR")
        database = Database(self.settings.database_url)
        migrate.upgrade(database)
        return database

    @cached_property
    def model_store(self) -> ModelStore:
        from lamarck.platform.llm.model_store import ModelStore

        return ModelStore(self.settings.models_dir)

    @property
    def engine(self) -> ServingEngine:
        with self._lock:
            if self._engine is None:
                from lamarck.platform.llm.serving import open_engine

                self._engine = open_engine(self.model_store, self.settings.engine)
            return self._engine

    def ensure_local_provider(self) -> None:
        from lamarck.platform.llm.provider import register_local_provider

        register_local_provider(self.engine)

    @cached_property
    def gateway(self) -> LLMGateway:
        key = self.settings.openai_api_key
        return LLMGateway(
            self.settings.models,
            self.settings.gateway,
            db=self.db,
            ensure_local_provider=self.ensure_local_provider,
            default_api_key=key.get_secret_value() if key else None,
        )

    @cached_property
    def sandbox(self) -> Sandbox:
        from lamarck.platform.sandbox import Sandbox

        return Sandbox(self.settings.sandbox)

    @cached_property
    def bus(self) -> EventBus:
        return EventBus(self.db)

    @cached_property
    def memory(self) -> ChromaMemory:
        """The vector memory (lessons and skill retrieval): a Chroma server or the data directory's store."""
        from lamarck.memory.chroma import open_memory

        return open_memory(self.settings)

    @cached_property
    def lessons(self) -> LessonStore:
        from lamarck.memory.lessons import LessonStore

        return LessonStore(self.db, self.memory.lessons, dedup_distance=self.settings.memory.dedup_threshold)

    @cached_property
    def library(self) -> SkillLibrary:
        from lamarck.skills_library.library import SkillLibrary

        return SkillLibrary(self.db, self.sandbox, self.memory)

    def close(self) -> None:
        if self._engine is not None:
            self._engine.close()
            self._engine = None
        if "memory" in self.__dict__ and "memory" not in self._given:
            self.memory.close()
            del self.__dict__["memory"]
        if "db" in self.__dict__ and "db" not in self._given:
            self.db.dispose()

"""The composition root: builds every client and store from Settings, lazily and once.

Agents and commands receive what they need from here; nothing else constructs its own clients.
Heavy parts (the local engine, torch) load only when first used.
"""

from __future__ import annotations

import threading
from functools import cached_property
from typing import TYPE_CHECKING

from lamarck.platform.llm.gateway import LLMGateway
from lamarck.platform.settings import Settings, load_settings
from lamarck.platform.storage import migrate
from lamarck.platform.storage.database import Database

if TYPE_CHECKING:
    from lamarck.platform.llm.model_store import ModelStore
    from lamarck.platform.llm.serving import ServingEngine
    from lamarck.platform.sandbox import Sandbox


class Container:
    def __init__(self, settings: Settings | None = None) -> None:
        self.settings = settings or load_settings()
        self._lock = threading.Lock()
        self._engine: ServingEngine | None = None

    @cached_property
    def db(self) -> Database:
        """The database, migrated to the newest schema on first use."""
        assert self.settings.database_url is not None
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

    def close(self) -> None:
        if self._engine is not None:
            self._engine.close()
            self._engine = None
        if "db" in self.__dict__:
            self.db.dispose()

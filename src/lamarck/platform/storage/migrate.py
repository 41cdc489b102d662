"""Run Alembic migrations from code: ``upgrade(db)`` brings any database to the newest schema."""

from __future__ import annotations

from collections.abc import Callable
from importlib.resources import files

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

from lamarck.platform.storage.database import Database


def alembic_config(db: Database) -> Config:
    config = Config()
    config.set_main_option("script_location", str(files("lamarck.platform.storage") / "migrations"))
    config.set_main_option("sqlalchemy.url", db.url.replace("%", "%%"))
    return config


def upgrade(db: Database, revision: str = "head") -> None:
    _migrate(db, command.upgrade, revision)


def downgrade(db: Database, revision: str = "base") -> None:
    _migrate(db, command.downgrade, revision)


def _migrate(db: Database, step: Callable[[Config, str], None], revision: str) -> None:
    db.check()
    config = alembic_config(db)
    with db.engine.begin() as connection:
        config.attributes["connection"] = connection
        step(config, revision)


def current_revision(db: Database) -> str | None:
    with db.engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def head_revision(db: Database) -> str | None:
    return ScriptDirectory.from_config(alembic_config(db)).get_current_head()


def is_current(db: Database) -> bool:
    return current_revision(db) == head_revision(db)

from __future__ import annotations

import pytest
from sqlalchemy import inspect

from lamarck.platform.storage import migrate
from lamarck.platform.storage.database import Database, DatabaseError
from lamarck.platform.storage.records import Base


def test_migrations_up_down_up(db: Database) -> None:
    assert migrate.is_current(db)
    assert set(Base.metadata.tables) <= set(inspect(db.engine).get_table_names())
    migrate.downgrade(db)
    assert migrate.current_revision(db) is None
    assert not set(Base.metadata.tables) & set(inspect(db.engine).get_table_names())
    migrate.upgrade(db)
    assert migrate.is_current(db)


def test_migrations_match_the_records(db: Database) -> None:
    """The newest migration creates exactly the schema the ORM records describe."""
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    with db.engine.connect() as connection:
        diff = compare_metadata(MigrationContext.configure(connection), Base.metadata)
    assert diff == []


def test_unreachable_database_is_one_clear_line() -> None:
    db = Database("postgresql://nobody@127.0.0.1:1/none")
    with pytest.raises(DatabaseError) as info:
        db.check()
    message = str(info.value)
    assert "\n" not in message and "LAMARCK_DATABASE_URL" in message


def test_malformed_url_is_rejected() -> None:
    with pytest.raises(DatabaseError, match="malformed database URL"):
        Database("not a url")

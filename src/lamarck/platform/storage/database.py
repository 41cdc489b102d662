"""Engine and sessions: one SQLAlchemy engine per database URL, sessions as context managers."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, OperationalError
from sqlalchemy.orm import Session, sessionmaker


class DatabaseError(RuntimeError):
    """A database that cannot be used; the message is one line and names the fix."""


def normalise_url(url: str) -> str:
    """Use psycopg 3 for ``postgresql://`` URLs, the driver this project installs."""
    if url.startswith("postgresql://") or url.startswith("postgres://"):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    return url


class Database:
    def __init__(self, url: str) -> None:
        self.url = normalise_url(url)
        try:
            parsed = make_url(self.url)
        except ArgumentError as exc:
            raise DatabaseError(
                f"malformed database URL {url!r}: use sqlite:///path.db or postgresql://host/db"
            ) from exc
        self.dialect = parsed.get_backend_name()
        kwargs: dict[str, object] = {"future": True}
        if self.dialect == "sqlite":
            database = parsed.database
            if database and database != ":memory:":
                Path(database).expanduser().parent.mkdir(parents=True, exist_ok=True)
            kwargs["connect_args"] = {"check_same_thread": False, "timeout": 30}
        else:
            kwargs["pool_pre_ping"] = True
            kwargs["connect_args"] = {"connect_timeout": 5}
        self.engine: Engine = create_engine(self.url, **kwargs)
        if self.dialect == "sqlite":
            event.listen(self.engine, "connect", _sqlite_pragmas)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)

    def check(self) -> None:
        try:
            with self.engine.connect() as connection:
                connection.execute(text("SELECT 1"))
        except OperationalError as exc:
            reason = str(exc.orig).strip().splitlines()[0] if exc.orig else str(exc).splitlines()[0]
            raise DatabaseError(
                f"cannot reach database {self.safe_url}: {reason} (start it or fix LAMARCK_DATABASE_URL)"
            ) from exc

    @property
    def safe_url(self) -> str:
        return make_url(self.url).render_as_string(hide_password=True)

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A unit of work: commits on success, rolls back on any error."""
        session = self._sessions()
        try:
            yield session
            session.commit()
        except BaseException:
            session.rollback()
            raise
        finally:
            session.close()

    def dispose(self) -> None:
        self.engine.dispose()


def _sqlite_pragmas(dbapi_connection, _record) -> None:  # type: ignore[no-untyped-def]
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()

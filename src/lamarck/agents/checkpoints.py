"""The graph's checkpointer: SQLite beside the data (embedded mode), PostgreSQL when the database is PostgreSQL.

Both serialize the run's state with LangGraph's JsonPlusSerializer, told which of our models the state holds
(``STATE_MODELS``): it revives only those, so a checkpoint cannot name an arbitrary class to construct.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from sqlalchemy.engine import make_url

from lamarck.curriculum.environment import TaskSpec
from lamarck.platform.storage.database import Database

CHECKPOINT_FILE = "checkpoints.sqlite"
STATE_MODELS: tuple[type, ...] = (TaskSpec,)  # the pydantic models RunState holds (agents/state.py)


def state_serializer() -> JsonPlusSerializer:
    return JsonPlusSerializer(allowed_msgpack_modules=[(model.__module__, model.__name__) for model in STATE_MODELS])


@contextmanager
def open_checkpointer(db: Database, data_dir: Path) -> Iterator[BaseCheckpointSaver[str]]:
    """A ready saver (tables created); thread ids are run ids."""
    if db.dialect == "postgresql":
        from langgraph.checkpoint.postgres import PostgresSaver
        from psycopg import Connection
        from psycopg.rows import dict_row

        url = make_url(db.url).set(drivername="postgresql").render_as_string(hide_password=False)
        with Connection.connect(url, autocommit=True, prepare_threshold=0, row_factory=dict_row) as pg:
            saver = PostgresSaver(pg, serde=state_serializer())
            saver.setup()
            yield saver
        return
    from langgraph.checkpoint.sqlite import SqliteSaver

    data_dir.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(data_dir / CHECKPOINT_FILE, check_same_thread=False, timeout=30)
    conn.execute("PRAGMA journal_mode=WAL")
    try:
        sqlite_saver = SqliteSaver(conn, serde=state_serializer())
        sqlite_saver.setup()
        yield sqlite_saver
    finally:
        conn.close()

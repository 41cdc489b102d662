"""The graph's checkpointer: SQLite beside the data (embedded mode), PostgreSQL when the database is PostgreSQL."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from langgraph.checkpoint.base import BaseCheckpointSaver
from sqlalchemy.engine import make_url

from lamarck.platform.storage.database import Database

CHECKPOINT_FILE = "checkpoints.sqlite"


@contextmanager
def open_checkpointer(db: Database, data_dir: Path) -> Iterator[BaseCheckpointSaver[str]]:
    """A ready saver (tables created); thread ids are run ids."""
    if db.dialect == "postgresql":
        from langgraph.checkpoint.postgres import PostgresSaver

        url = make_url(db.url).set(drivername="postgresql").render_as_string(hide_password=False)
        with PostgresSaver.from_conn_string(url) as saver:
            saver.setup()
            yield saver
        return
    from langgraph.checkpoint.sqlite import SqliteSaver

    data_dir.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(data_dir / CHECKPOINT_FILE, check_same_thread=False, timeout=30)
    conn.execute("PRAGMA journal_mode=WAL")
    try:
        sqlite_saver = SqliteSaver(conn)
        sqlite_saver.setup()
        yield sqlite_saver
    finally:
        conn.close()

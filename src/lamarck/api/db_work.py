"""Where a request's blocking database work runs: on the event loop for SQLite, in the thread pool otherwise.

FastAPI runs a plain ``def`` route or dependency in its thread pool. On this project's 2-core machine that hop costs
more than the work: a page of 50 runs takes about 1.3 ms of database and pydantic time, yet served from the thread
pool the list endpoint saturates at about 200 requests a second, and at about 415 when the same work runs on the
event loop (measured with 50 and 200 keep-alive clients; the worker threads and the event loop contend for the GIL).
A local SQLite read in WAL mode never waits for a writer, so running it inline is the faster and still responsive
choice. A server database (PostgreSQL) can stall on the network, which would stall every open event stream with it,
so there the work keeps its thread.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ParamSpec, TypeVar

from fastapi.concurrency import run_in_threadpool

from lamarck.platform.storage.database import Database

P = ParamSpec("P")
T = TypeVar("T")


async def run_db(db: Database, work: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """``work(*args, **kwargs)``, inline when ``db`` is SQLite, else in the thread pool. Keep ``work`` to bounded
    reads (a page, one row): it holds the event loop for as long as it runs."""
    if db.url.startswith("sqlite"):
        return work(*args, **kwargs)
    return await run_in_threadpool(work, *args, **kwargs)

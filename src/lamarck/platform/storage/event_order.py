"""The order in which stored events are safe to deliver, and the one dialect-specific piece of it.

On PostgreSQL an event's id comes from a sequence when it is inserted, but the row becomes visible when its
transaction commits, so ids commit out of order: a reader that polls ``id > last`` can see id 7 before id 6 commits
and then skip id 6 forever. Each row therefore records its transaction (``xid``, from ``pg_current_xact_id()``)
and readers take only rows whose transaction is older than the oldest one still running
(``pg_snapshot_xmin(pg_current_snapshot())``): every transaction below that horizon has ended, so the set of such
rows is final. Delivered in ``(xid, id)`` order, a cursor never passes a row that could still appear. The cost is
that a long-running writing transaction anywhere on the server holds delivery back until it ends.

SQLite has one writer at a time, so ids commit in order: every row gets ``xid`` 0, the horizon is above every
row, and ``(xid, id)`` order is id order.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import BigInteger
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.expression import FunctionElement

NO_HORIZON = 2**63 - 1


class current_xid(FunctionElement[int]):  # noqa: N801 - SQL function elements are named like functions
    """The writing transaction's id (0 where ids commit in order)."""

    type = BigInteger()
    inherit_cache = True


class safe_xid_horizon(FunctionElement[int]):  # noqa: N801
    """Rows with an ``xid`` below this belong to transactions that have all ended."""

    type = BigInteger()
    inherit_cache = True


@compiles(current_xid)
def _current_xid(element: current_xid, compiler: Any, **kw: Any) -> str:
    return "0"


@compiles(current_xid, "postgresql")
def _current_xid_pg(element: current_xid, compiler: Any, **kw: Any) -> str:
    return "(pg_current_xact_id()::text::bigint)"


@compiles(safe_xid_horizon)
def _horizon(element: safe_xid_horizon, compiler: Any, **kw: Any) -> str:
    return str(NO_HORIZON)


@compiles(safe_xid_horizon, "postgresql")
def _horizon_pg(element: safe_xid_horizon, compiler: Any, **kw: Any) -> str:
    return "(pg_snapshot_xmin(pg_current_snapshot())::text::bigint)"

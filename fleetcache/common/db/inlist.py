"""``IN`` lists of a few sizes only, so that SQLite keeps a few prepared statements, not one per
size.

SQLAlchemy renders ``column.in_(values)`` with one bound parameter per value, so each length
of list is another SQL text, and Python's ``sqlite3`` keeps up to 128 prepared statements per
connection (``cached_statements``), each holding its parameters. A pre-cache job's result
batches (1 to 200 hosts) and its service pages (500 hosts, then the rest) gave as many texts
as there were lengths.

NOTE: the prepared statements one SQLite connection held grew with the hosts a job's result
batches covered (``sqlite3_db_status(SQLITE_DBSTATUS_STMT_USED)``; docs/performance.md,
"SQLite's page cache and prepared statements"). PostgreSQL's and MariaDB's drivers prepare
nothing, and a repeated value changes no ``IN``'s answer.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeVar

T = TypeVar("T")


def padded(values: Iterable[T]) -> list[T]:
    """``values`` as a list whose length is a power of two, the last value repeated to fill
    it (an empty list stays empty): a list of up to 512 values has one of 10 lengths."""
    out = list(values)
    if out:
        size = 1 << (len(out) - 1).bit_length()
        out.extend([out[-1]] * (size - len(out)))
    return out

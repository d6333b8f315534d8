"""Many rows into PostgreSQL at once: COPY into a temporary table, then one INSERT ... SELECT upsert.

Row-by-row upserts cost PostgreSQL about 100 µs a row even batched; COPY costs a tenth of that,
which is what lets a trace of a million attempts import in a minute. Names in the COPY statement
are our own tables' columns, quoted by the driver's SQL composition; values travel as COPY's text
format.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from typing import Any

from sqlalchemy import Column, Connection, MetaData, Table, and_, select
from sqlalchemy.dialects import postgresql
from sqlalchemy.exc import DBAPIError

BULK_FROM_ROWS = 2_000  # fewer rows: the plain upsert is as fast and needs no temporary table


def can_copy(conn: Connection, rows: int) -> bool:
    """Whether :func:`copy_upsert` applies: PostgreSQL through psycopg2, and enough rows."""
    if conn.dialect.name != "postgresql" or rows < BULK_FROM_ROWS:
        return False
    return hasattr(conn.connection.driver_connection, "cursor") and conn.dialect.driver == "psycopg2"


def copy_upsert(
    conn: Connection, table: Table, values: Mapping[str, Sequence[Any]], keys: Sequence[str], *, all_new: bool
) -> Callable[[], None]:
    """The write that inserts or replaces (by ``keys``) the rows whose columns are ``values`` and
    whose keys are unique, through COPY: straight into ``table`` when the caller knows none is stored
    yet, else through a temporary table. The rows are COPY text already, so the caller may run it
    later, in the background."""
    columns = list(values)
    data = _copy_text(values.values())
    if all_new:
        return partial(_copy, conn, table.name, columns, data)
    stage = _stage(table, columns)
    insert = postgresql.insert(table).from_select(columns, select(*(stage.c[c] for c in columns)))
    changed = {c: insert.excluded[c] for c in columns if c not in keys}

    def staged() -> None:
        stage.create(conn, checkfirst=True)  # once per transaction: it is dropped at commit
        _copy(conn, stage.name, columns, data)
        conn.execute(insert.on_conflict_do_update(index_elements=list(keys), set_=changed))
        conn.execute(stage.delete())

    return staged


class Background:
    """One write at a time run in a thread, so that PostgreSQL stores a batch while Python reads
    the next (a COPY of a million attempts keeps the server busy about 25 s). Whoever uses the
    connection next calls :meth:`settle` first, which waits and raises the write's error."""

    def __init__(self) -> None:
        self._pool: ThreadPoolExecutor | None = None
        self._running: Future[None] | None = None

    def submit(self, write: Callable[[], None]) -> None:
        self.settle()
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="adaptive-copy")
        self._running = self._pool.submit(write)

    def settle(self) -> None:
        running, self._running = self._running, None
        if running is not None:
            running.result()

    def close(self) -> None:
        """Wait for the write (raising its error) and stop the thread."""
        try:
            self.settle()
        finally:
            if self._pool is not None:
                self._pool.shutdown()
                self._pool = None


def copy_lookup(
    conn: Connection, table: Table, keys: Sequence[tuple[Any, ...]], key_columns: Sequence[str]
) -> Any:
    """The rows of ``table`` whose ``key_columns`` equal one of ``keys``: the keys are copied into a
    temporary table and joined on the unique index (one query, whatever the planner knows)."""
    stage = _stage(table, key_columns, name=f"{table.name}_keys")
    stage.create(conn, checkfirst=True)
    _copy(conn, stage.name, key_columns, _copy_text(zip(*keys, strict=True)))
    joined = select(table).join(stage, and_(*(table.c[c] == stage.c[c] for c in key_columns)))
    found = conn.execute(joined).all()
    conn.execute(stage.delete())
    return found


def _copy_text(columns: Iterable[Sequence[Any]]) -> str:
    fields = [_texts(list(column)) for column in columns]  # a column at a time: no call a value
    return "".join(f"{line}\n" for line in map("\t".join, zip(*fields, strict=True)))


def _copy(conn: Connection, table_name: str, columns: Sequence[str], data: str) -> None:
    import psycopg2
    from psycopg2 import sql

    copy = sql.SQL("COPY {} ({}) FROM STDIN").format(
        sql.Identifier(table_name), sql.SQL(", ").join(sql.Identifier(c) for c in columns)
    )
    driver = conn.connection.driver_connection
    assert driver is not None  # can_copy checked it
    try:
        with driver.cursor() as cursor:
            cursor.copy_expert(copy, io.StringIO(data), size=1 << 20)  # larger reads: fewer GIL hand-overs
    except psycopg2.Error as err:  # the driver's own: as SQLAlchemy's, as for every other statement
        raise DBAPIError.instance(f"COPY {table_name}", None, err, psycopg2.Error) from err


def executemany_compiled(conn: Connection, stmt: Any, columns: Mapping[str, Sequence[Any]]) -> None:
    """``conn.execute(stmt, rows)`` for rows given a column at a time, without SQLAlchemy's per-row
    parameter handling (two thirds of the time for SQLite): the statement compiled once by
    SQLAlchemy, each column converted by its type's own bind processor, the rows handed to the
    driver's executemany."""
    dialect = conn.dialect
    compiled = stmt.compile(dialect=dialect, column_keys=list(columns))
    converted = []
    for name in compiled.positiontup or ():
        to = stmt.table.c[name].type.dialect_impl(dialect).bind_processor(dialect)
        converted.append(columns[name] if to is None else list(map(to, columns[name])))  # e.g. time as text
    conn.exec_driver_sql(str(compiled), list(zip(*converted, strict=True)))


_ESCAPES_FOR = ("\\", "\t", "\n", "\r")
_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})


def _texts(column: list[Any]) -> list[str]:
    """A column's fields in COPY's text format: \\N for NULL, backslash escapes for the separators
    (looked for once in the whole column: they are rare, and escaping each value costs a call)."""
    kinds = set(map(type, column))  # one C-level pass; a column is mostly of one type
    if kinds == {str} and not _special("".join(column)):
        return column
    if kinds in ({int}, {float}):
        return list(map(str, column))
    strings = "".join([v for v in column if type(v) is str])
    if _special(strings):
        return [
            "\\N" if v is None else v.translate(_ESCAPES) if isinstance(v, str) else str(v) for v in column
        ]
    return ["\\N" if v is None else v if isinstance(v, str) else str(v) for v in column]


def _special(text: str) -> bool:
    return any(special in text for special in _ESCAPES_FOR)


def _stage(table: Table, columns: Sequence[str], name: str | None = None) -> Table:
    return Table(
        name or f"{table.name}_stage",
        MetaData(),
        *(Column(c, table.c[c].type) for c in columns),
        prefixes=["TEMPORARY"],
        postgresql_on_commit="DROP",
    )

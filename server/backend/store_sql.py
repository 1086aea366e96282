"""The SQL under the store (`server/backend/store.py`): its tables on SQLite or PostgreSQL, and query helpers.

Both back ends take the same statements, written with `?` placeholders, and answer rows as dicts:
`execute(sql, params)` returns the number of rows changed, `fetchall(sql, params)` the rows, and
`setup(...)` creates the tables and adds columns that older databases lack.
"""
from __future__ import annotations

import asyncio
import contextlib
import time
from typing import AsyncIterator, Iterable

ORDERABLE = {"create_time", "update_time", "title", "name"}


def is_integrity_error(error: BaseException) -> bool:
    """A unique key or constraint refused the row (on SQLite or PostgreSQL)."""
    import sqlite3
    try:
        import psycopg
        pg = (psycopg.IntegrityError,)
    except ImportError:             # pragma: no cover - psycopg is a dependency
        pg = ()
    return isinstance(error, (sqlite3.IntegrityError, *pg))


class SqliteTables:
    """The store's tables on the checkpointer's own SQLite connection, under its lock.

    One connection for both: two connections to one file would take turns on SQLite's file lock,
    whose busy handler sleeps for milliseconds at a time under load. Like the checkpointer
    (`runtime/run/sqlite_saver.py`), statements run in place: each is a few tens of microseconds.
    """
    placeholder = "?"

    def __init__(self, saver):
        self.conn = saver.conn
        self.lock = saver.lock

    async def setup(self, statements: Iterable[str], columns: Iterable[tuple[str, str, str]] = ()) -> None:
        import sqlite3
        with self.lock:
            # WAL, `synchronous` and the busy timeout are set by open_checkpointer; another process
            # (a second server, `canvas2graph tokens`) may write the same file, so it waits for it
            for sql in statements:
                self.conn.execute(sql)
            for table, column, definition in columns:
                present = {row[1] for row in self.conn.execute(f"PRAGMA table_info({table})").fetchall()}
                if column not in present:
                    try:
                        self.conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {definition}")
                    except sqlite3.OperationalError as e:     # another process added it meanwhile
                        if "duplicate column" not in str(e):
                            raise
            self.conn.commit()

    async def execute(self, sql: str, params: tuple = ()) -> int:
        with self.lock:
            try:
                cursor = self.conn.execute(sql, params)
                self.conn.commit()
            except BaseException:
                self.conn.rollback()
                raise
            return cursor.rowcount

    async def fetchall(self, sql: str, params: tuple = ()) -> list[dict]:
        with self.lock:
            cursor = self.conn.execute(sql, params)
            try:
                names = [c[0] for c in cursor.description]
                return [dict(zip(names, row)) for row in cursor.fetchall()]
            finally:
                cursor.close()


@contextlib.asynccontextmanager
async def schema_lock(conn, key: int) -> AsyncIterator[None]:
    """Hold PostgreSQL advisory lock `key` on `conn` (an autocommit connection) for the block.

    Waits by trying again every 50 ms rather than with `pg_advisory_lock`: a process blocked in that call sits
    in a transaction, and the holder's schema set-up (LangGraph's saver creates its indexes CONCURRENTLY, which
    waits for every open transaction to end) then waits for it in turn: processes starting at once on a new
    database waited for each other for good."""
    while not await _first_value(conn, f"SELECT pg_try_advisory_lock({key})"):
        await asyncio.sleep(0.05)
    try:
        yield
    finally:
        await conn.execute(f"SELECT pg_advisory_unlock({key})")


async def _first_value(conn, sql: str):
    row = await (await conn.execute(sql)).fetchone()           # a dict or a tuple, by the connection's rows
    return next(iter(row.values())) if isinstance(row, dict) else row[0]


async def _autocommit(conn) -> None:
    await conn.set_autocommit(True)


class PostgresTables:
    """The store's tables on a pool of PostgreSQL connections, shared with the checkpointer."""

    placeholder = "%s"

    def __init__(self, url: str, max_size: int = 8):
        if max_size < 2:
            raise ValueError("a PostgreSQL pool needs 2 connections or more")
        self.url = url
        self.max_size = max_size
        self.pool = None

    async def open(self) -> None:
        from psycopg.rows import dict_row
        from psycopg_pool import AsyncConnectionPool
        # one pool for the checkpointer, these tables and the job engine (server/backend/jobs/engine.py): a process
        # holds at most `max_size` connections besides its listening ones. Autocommit and no prepared statements
        # are what LangGraph's saver requires of its connections; autocommit is set when a connection is made
        # (`configure`), not among the connection arguments, because procrastinate opens its listening connection
        # with those arguments plus its own autocommit. A connection that sat in the pool is checked as it is
        # handed out: after PostgreSQL restarts, the pool's old connections are dead, and a request would fail on
        # one (an empty query's round trip, 0.1 ms here, against a 500 for the first requests after a restart)
        self.pool = AsyncConnectionPool(self.url, min_size=1, max_size=self.max_size, open=False, timeout=30,
                                        check=_check_if_idle, reset=_note_returned, configure=_autocommit,
                                        kwargs={"prepare_threshold": 0, "row_factory": dict_row})
        await self.pool.open(wait=True, timeout=30)

    async def close(self) -> None:
        if self.pool is not None:
            await self.pool.close()

    async def setup(self, statements: Iterable[str], saver=None, columns: Iterable[tuple[str, str, str]] = ()) -> None:
        # several servers may start at once: one sets the schema up while the others wait
        async with self.pool.connection() as conn, schema_lock(conn, 740215):
            if saver is not None:
                await saver.setup()
            for sql in statements:
                await conn.execute(sql)
            for table, column, definition in columns:
                await conn.execute(f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS {column} {definition}")

    async def execute(self, sql: str, params: tuple = ()) -> int:
        async with self.pool.connection() as conn:
            cursor = await conn.execute(sql.replace("?", "%s"), params)
            return cursor.rowcount

    async def fetchall(self, sql: str, params: tuple = ()) -> list[dict]:
        async with self.pool.connection() as conn:
            cursor = await conn.execute(sql.replace("?", "%s"), params)
            return list(await cursor.fetchall())


def like_literal(text: str) -> str:
    """`text` as a literal inside a LIKE pattern: its own %, _ and \\ escaped (the queries say ESCAPE '\\')."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def order_by(orderby: str, desc: bool, default: str) -> str:
    """An ORDER BY clause: `orderby` when it is a column lists may be sorted by, else `default`; ties by id."""
    column = orderby if orderby in ORDERABLE else default
    return f"{column} {'DESC' if desc else 'ASC'}, id"


def page_window(page: int, page_size: int) -> tuple[int, int]:
    """(LIMIT, OFFSET) of a 1-based page; a page holds 1 to 1000 rows."""
    page, size = max(int(page), 1), min(max(int(page_size), 1), 1000)
    return size, (page - 1) * size


# A connection back in the pool for less than this is handed out again unchecked. Checking every one doubled the
# round trips of a busy process (`python -m bench.scale`: 37 of a turn's 94 statements were the check) for
# nothing: a connection used a moment ago is alive, and one that broke in use is not put back. A restart of the
# database takes longer than this, so the connections it killed are checked before they are used again.
CHECK_AFTER_IDLE_SECONDS = 1.0


async def _note_returned(conn) -> None:
    conn._c2g_returned_at = time.monotonic()


async def _check_if_idle(conn) -> None:
    if time.monotonic() - getattr(conn, "_c2g_returned_at", 0.0) >= CHECK_AFTER_IDLE_SECONDS:
        from psycopg_pool import AsyncConnectionPool
        await AsyncConnectionPool.check_connection(conn)

"""A database that goes away for a moment (PostgreSQL restarting, a connection that broke) is not a turn's failure:
what the workers and readers write or read then is tried again until it answers."""
from __future__ import annotations

import asyncio
import time
from typing import Any, Awaitable, Callable


def database_away(error: BaseException) -> bool:
    """Whether an error (or one it was raised from) says the database could not be reached (PostgreSQL restarting,
    a connection that broke), as opposed to a turn's own failure."""
    import psycopg
    import psycopg_pool
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, (psycopg.OperationalError, psycopg_pool.PoolTimeout)):
            return True
        error = error.__cause__ or error.__context__
    return False


async def retrying(call: Callable[[], Awaitable[Any]], seconds: float = 60.0) -> Any:
    """`call()`, tried again while the database is away (up to `seconds`): a restart of PostgreSQL costs a turn
    a pause, not its end or its record."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return await call()
        except Exception as e:          # noqa: BLE001
            if not database_away(e) or time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.5)

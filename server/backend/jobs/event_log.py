"""Each turn's events, written by the worker that runs it and read by any API process that streams it.

A worker appends a turn's events in batches (`append`); a reader follows them from any position
(`follow`), so a client's stream does not depend on where its turn runs, a client that lost its connection
(or whose API process died) re-attaches from the start, and LangGraph's `join_stream` works from any
process. A turn's log ends with its `end` record (`wire.TURN_EVENT`). Events are kept in `c2g_turn_events`,
in the sessions' database, for a while after the turn ended (`prune`, called by the engine's upkeep).

What differs between the databases is how a reader learns that a batch came:
- `SqliteEventLog` (the embedded default: one process runs the turns and serves them): the append wakes the
  readers of this process at once;
- `PostgresEventLog` (several processes): each batch's row is written with a NOTIFY on `c2g_events`; every
  process that follows turns LISTENs on one connection of its own (from its first reader on) and wakes the
  readers of that turn. A batch small enough travels in the notification itself, so a reader that is up to
  date reads no row.
A reader reads the table when it starts and when a batch may have been missed (a gap, a wake-up without its
batch); it also looks at the table after `POLL_SECONDS` without news (on PostgreSQL, less and less often while
nothing comes, up to `QUIET_POLL_SECONDS`), so a notification lost to a reconnect (or a second process on one
SQLite file) delays it, never stalls it.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Awaitable, Callable

from canvas2graph.server.backend.jobs.outages import database_away
from canvas2graph.server.backend.jobs.wire import TURN_EVENT, decode, encode

log = logging.getLogger("canvas2graph.events")

CHANNEL = "c2g_events"
POLL_SECONDS = 1.0              # a reader looks at the table after this long without news (lost notifications) ...
QUIET_POLL_SECONDS = 8.0        # ... twice as long after each look that found nothing, up to this (PostgreSQL)
NOTIFY_MAX = 7000               # PostgreSQL's payload limit is 8000 bytes: larger batches are read from the table
DATABASE_PATIENCE = 60.0        # a reader waits this long for a database that went away before it gives up


def ends(events: list[dict]) -> bool:
    """Whether a batch holds its turn's `end` record."""
    return any(e.get("event") == TURN_EVENT and e.get("kind") == "end" for e in events)


@dataclass(eq=False)
class _Waiter:
    """A reader waiting for a turn's next batch; batches that came in notifications wait here for it."""
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    batches: dict[int, list[dict]] = field(default_factory=dict)
    missed: bool = False        # woken for a batch that did not come with the wake-up: the table has it

    def put(self, seq: int, events: list[dict] | None) -> None:
        if events is None:
            self.missed = True
        else:
            self.batches[seq] = events
        self.changed.set()

    def take(self, position: int) -> list[tuple[int, list[dict]]]:
        """The batches from `position` on, if they came without a gap. What is taken no longer wakes the
        reader; a batch left (after a gap) still does."""
        found = []
        while position in self.batches:
            events = self.batches.pop(position)
            found.append((position, events))
            position += len(events)
        for seq in [s for s in self.batches if s < position]:
            del self.batches[seq]
        if found and not self.batches and not self.missed:
            self.changed.clear()
        return found

    async def wait(self, timeout: float) -> bool:
        """Wait for a batch (or a wake-up); False when `timeout` passed without one."""
        try:
            await asyncio.wait_for(self.changed.wait(), timeout)
        except asyncio.TimeoutError:
            return False
        self.changed.clear()
        return True


class EventLog:
    """The table both logs keep, and `follow`, written once over it and the waiters appends wake."""

    linger = 0.0        # seconds a writer waits to gather a batch (0: a batch is what came during the last write)
    # the longest a reader waits between looks at the table while nothing comes: a log whose readers are woken by
    # notifications (PostgreSQL) looks less and less often at the table of a turn that waits for a worker (a
    # thousand waiting readers looked a thousand times a second, `python -m bench.scale`); SQLite's readers in
    # another process than the writer's are woken by nothing else
    quiet_poll = POLL_SECONDS

    def __init__(self, db: Any):
        self.db = db                    # server.backend.store_sql: SqliteTables or PostgresTables
        self.waiters: dict[str, set[_Waiter]] = {}

    async def start(self) -> None:
        pass

    async def close(self) -> None:
        pass

    async def _listen_for_readers(self) -> None:
        """Before a reader's first read: be told of the batches that come (PostgreSQL: LISTEN)."""

    async def append(self, turn_id: str, seq: int, events: list[dict]) -> int:
        """Add a batch at position `seq` (the count of the turn's events before it); returns the next position."""
        await self.db.execute("INSERT INTO c2g_turn_events (turn_id, seq, n, events, created_at) VALUES (?, ?, ?, ?, ?) "
                              "ON CONFLICT (turn_id, seq) DO NOTHING",
                              (turn_id, seq, len(events), encode(events).decode(), time.time()))
        self._wake(turn_id, seq, events)
        return seq + len(events)

    def _wake(self, turn_id: str, seq: int, events: list[dict] | None) -> None:
        for waiter in self.waiters.get(turn_id, ()):
            waiter.put(seq, events)

    async def next_seq(self, turn_id: str) -> int:
        """How many events the turn has logged (where the next batch goes)."""
        rows = await self.db.fetchall("SELECT seq + n AS next FROM c2g_turn_events WHERE turn_id = ? "
                                      "ORDER BY seq DESC LIMIT 1", (turn_id,))
        return rows[0]["next"] if rows else 0

    async def forget(self, turn_ids: list[str]) -> None:
        if turn_ids:
            marks = ", ".join("?" * len(turn_ids))
            await self.db.execute(f"DELETE FROM c2g_turn_events WHERE turn_id IN ({marks})", tuple(turn_ids))

    async def prune(self, ended_before: float) -> None:
        """Drop the events of turns that ended before `ended_before` (other work logs here too, under ids of its
        own, and drops its events itself)."""
        await self.db.execute("DELETE FROM c2g_turn_events WHERE created_at < ? AND turn_id IN "
                              "(SELECT id FROM c2g_turns WHERE ended_at < ?)", (ended_before, ended_before))

    async def _read(self, turn_id: str, start: int) -> list[tuple[int, list[dict]]]:
        rows = await self.db.fetchall("SELECT seq, events FROM c2g_turn_events WHERE turn_id = ? AND seq + n > ? "
                                      "ORDER BY seq", (turn_id, start))
        return [(r["seq"], decode(r["events"])) for r in rows]

    async def read_all(self, turn_id: str) -> list[dict]:
        """Every event the turn has logged so far."""
        return [e for _seq, events in await self._read(turn_id, 0) for e in events]

    async def follow(self, turn_id: str, start: int = 0,
                     settled: Callable[[], Awaitable[dict | None]] | None = None) -> AsyncIterator[list[dict]]:
        """The turn's events from position `start`, batch by batch, until its `end` record (included).

        `settled()`, asked when nothing came for a while (`POLL_SECONDS`, then longer), gives the turn's end
        from its row once it has ended: a turn whose end record is not in the log (its events were dropped, or
        its process died while logging it) then ends its readers with that instead of leaving them waiting."""
        await self._listen_for_readers()
        waiter = _Waiter()      # listening before the first read: nothing appended meanwhile is missed
        self.waiters.setdefault(turn_id, set()).add(waiter)
        position = start
        away_since: float | None = None
        # the table is read first (what was logged before this reader came), then only when a batch may have been
        # missed: a wake-up without the batch (too big to notify, the listener reconnected), a gap, or a poll with
        # nothing new; batches that came in notifications are followed without reading it
        read = True
        poll = POLL_SECONDS
        try:
            while True:
                try:
                    batches = waiter.take(position)
                    if not batches and (read or waiter.missed):
                        waiter.missed = False
                        batches = await self._read(turn_id, position)
                    read = False
                    away_since = None
                except Exception as e:          # noqa: BLE001 - a database restarting: the reader waits for it
                    away_since = away_since or time.monotonic()
                    if not database_away(e) or time.monotonic() - away_since > DATABASE_PATIENCE:
                        raise
                    await asyncio.sleep(0.5)
                    continue
                for seq, events in batches:
                    if seq + len(events) <= position:
                        continue            # read twice (a notification and the table)
                    if seq > position:
                        read = True         # a gap: read the table again
                        break
                    events = events[position - seq:]
                    position += len(events)
                    poll = POLL_SECONDS
                    yield events
                    if ends(events):
                        return
                else:
                    if batches:
                        continue
                    read = True
                    if await waiter.wait(poll):
                        poll = POLL_SECONDS
                        continue
                    poll = min(poll * 2, self.quiet_poll)
                    if settled is None:
                        continue
                    end = await settled()
                    if end is not None and not await self._read(turn_id, position):
                        yield [end]
                        return
        finally:
            found = self.waiters.get(turn_id)
            if found is not None:
                found.discard(waiter)
                if not found:
                    del self.waiters[turn_id]


class SqliteEventLog(EventLog):
    """The embedded default: appends wake this process's readers (with the batch itself: they read no row).
    A write runs in place, so batches are gathered for `linger`: a streaming model's tokens are then one
    statement every few milliseconds, not one each (200 streams of 50 tokens a second: 10,000 statements)."""

    linger = 0.005


class PostgresEventLog(EventLog):
    """Rows and a NOTIFY per batch; a LISTEN of this process's own wakes its readers."""

    quiet_poll = QUIET_POLL_SECONDS

    def __init__(self, db: Any):
        super().__init__(db)
        self._listener: asyncio.Task | None = None
        self.listening = asyncio.Event()
        self._listened = False

    async def start(self) -> None:
        """Nothing yet: the process LISTENs once it has a reader (a worker, which writes events and does not follow
        them, never does: every notification would wake it for nothing)."""

    async def _listen_for_readers(self) -> None:
        if self._listener is None:
            self._listener = asyncio.create_task(self._listen(), name="event-log-listener")
        if not self._listened:          # the first readers wait for the LISTEN (later ones, for a reconnect, poll)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.listening.wait(), 10)

    async def close(self) -> None:
        if self._listener is not None:
            self._listener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._listener

    async def _listen(self) -> None:
        import psycopg
        delay = 0.1
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(self.db.url, autocommit=True) as conn:
                    await conn.execute(f"LISTEN {CHANNEL}")
                    self.listening.set()
                    self._listened = True
                    delay = 0.1
                    self._wake_all()            # what was missed while not listening is read from the table
                    async for note in conn.notifies():
                        self._notified(note.payload)
            except asyncio.CancelledError:
                raise
            except Exception as e:              # the database went away: listen again once it is back
                self.listening.clear()
                self._wake_all()
                log.warning("event log listener lost its connection (%s); reconnecting", e)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)

    def _notified(self, payload: str) -> None:
        turn_id, seq, rest = (payload.split("\t", 2) + ["", ""])[:3]
        if turn_id in self.waiters:
            self._wake(turn_id, int(seq), decode(rest) if rest else None)

    def _wake_all(self) -> None:
        for turn_id in list(self.waiters):
            self._wake(turn_id, -1, None)

    async def append(self, turn_id: str, seq: int, events: list[dict]) -> int:
        data = encode(events).decode()
        note = f"{turn_id}\t{seq}\t{data}" if len(data) + len(turn_id) < NOTIFY_MAX else f"{turn_id}\t{seq}"
        # the row and its notification in one statement (one transaction: readers are woken once it is visible)
        await self.db.execute(
            "WITH added AS (INSERT INTO c2g_turn_events (turn_id, seq, n, events, created_at) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT (turn_id, seq) DO NOTHING RETURNING 1) SELECT pg_notify(?, ?) FROM added",
            (turn_id, seq, len(events), data, time.time(), CHANNEL, note))
        return seq + len(events)

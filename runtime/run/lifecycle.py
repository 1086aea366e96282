"""Session lifecycle: list the sessions a database holds, delete them, expire the idle ones.

A session is a LangGraph thread (thread id = session id) and, for sessions a server made, a row of
`c2g_sessions` (server/backend/store.py). What it holds in the database is its checkpoints and pending writes
(LangGraph's tables: the state of every step, which is also its trace, runtime/run/steps.py) and that row
(the DSL it runs and its message log). Deleting a session removes all of them.

What deleting does not remove: uploaded files and artifacts belong to the tenant that uploaded or
produced them, not to one session (RAGFlow keeps them the same way: a file is uploaded once and may
be named by any later request), so they are left to the files folder's own policy (docs/files.md).

Many sessions at once (a prune after a long time, RAGFlow #10419's bulk delete) are deleted in
batches of `BATCH` in one statement per table, and the event loop runs other work between batches:
on SQLite the statements run in place on the loop (runtime/run/sqlite_saver.py), so a batch is the
longest the server waits. SQLite files made by this version reclaim the space as they go
(`auto_vacuum=INCREMENTAL`, set when the file is created); older files keep the freed pages for
reuse until `canvas2graph sessions prune --vacuum` rebuilds them once.

Last activity of a session: the time of its newest checkpoint (LangGraph's checkpoint ids are
UUIDv6, whose leading bits are the time they were made) or, for a server session, its row's
`update_time`, whichever is later.
"""
from __future__ import annotations

import asyncio
import inspect
import logging
import re
import time
import uuid
from dataclasses import asdict, dataclass
from typing import Any, Iterable

from canvas2graph.runtime.graph.state import GLOBALS, reduce_globals
from canvas2graph.runtime.run.checkpoint import is_postgres
from canvas2graph.runtime.run.retention import TABLE as COMPACTED

log = logging.getLogger("canvas2graph.sessions")

BATCH = 200                  # sessions deleted per statement; the loop runs other work between batches
VACUUM_PAGES = 2_000         # pages an incremental vacuum step gives back before the loop runs again
_UUID_EPOCH_100NS = 0x01B21DD213814000      # 1582-10-15 (UUID time) to 1970-01-01, in 100 ns units
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h|d|w)?\s*$", re.I)
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


class LifecycleError(ValueError):
    """A request the lifecycle commands cannot act on (a bad duration, an unknown session)."""


@dataclass
class SessionInfo:
    id: str
    last_active: float            # epoch seconds: newest checkpoint or the server row's update_time
    steps: int                    # checkpoints stored (every step of every turn)
    tenant: str | None = None     # server sessions only
    agent_id: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "last_active": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.last_active))}


def parse_duration(text: str) -> float:
    """Seconds in "90s", "30m", "12h", "7d", "2w" or a bare number of seconds."""
    match = _DURATION.match(str(text or ""))
    if not match:
        raise LifecycleError(f"{text!r} is not a duration: write a number with s, m, h, d or w (e.g. 30d)")
    return float(match.group(1)) * _UNITS[(match.group(2) or "s").lower()]


def checkpoint_time(checkpoint_id: str) -> float:
    """The epoch seconds a LangGraph checkpoint id (UUIDv6) was made at; 0 for an id of another kind."""
    try:
        u = uuid.UUID(checkpoint_id)
    except (ValueError, TypeError, AttributeError):
        return 0.0
    if u.version != 6:
        return 0.0
    n = u.int >> 64
    ticks = ((n >> 32) << 28) | (((n >> 16) & 0xFFFF) << 12) | (n & 0x0FFF)
    return max(0.0, (ticks - _UUID_EPOCH_100NS) / 1e7)


# --- reading -----------------------------------------------------------------------------------
async def _rows(store, sql: str, params: tuple = ()) -> list[dict]:
    return await store.db.fetchall(sql, params)


async def list_sessions(store) -> list[SessionInfo]:
    """Every session the database holds: threads with checkpoints and server sessions, newest first."""
    found: dict[str, SessionInfo] = {}
    for row in await _rows(store, "SELECT thread_id, MAX(checkpoint_id) AS last, COUNT(*) AS steps "
                                  "FROM checkpoints WHERE checkpoint_ns = '' GROUP BY thread_id"):
        found[row["thread_id"]] = SessionInfo(row["thread_id"], checkpoint_time(row["last"]), int(row["steps"]))
    for row in await _rows(store, "SELECT id, tenant, agent_id, update_time FROM c2g_sessions"):
        info = found.setdefault(row["id"], SessionInfo(row["id"], 0.0, 0))
        info.tenant, info.agent_id = row["tenant"], row["agent_id"]
        info.last_active = max(info.last_active, (row["update_time"] or 0) / 1000)
    return sorted(found.values(), key=lambda s: s.last_active, reverse=True)


async def show_session(store, session_id: str) -> dict[str, Any]:
    """One session: when it was last active, what it stores and where its conversation stands."""
    info = next((s for s in await list_sessions(store) if s.id == session_id), None)
    if info is None:
        raise LifecycleError(f"no session {session_id} in this database")
    out = info.as_dict()
    writes_table = "checkpoint_writes" if is_postgres(store.url) else "writes"
    out["pending_writes"] = int((await _rows(store, f"SELECT COUNT(*) AS n FROM {writes_table} WHERE thread_id = ?",
                                             (session_id,)))[0]["n"])
    saved = await store.checkpointer.aget_tuple({"configurable": {"thread_id": session_id}})
    if saved is not None:
        values = saved.checkpoint.get("channel_values") or {}
        globals_ = await _globals_of(store.checkpointer, saved)
        out["turns"] = globals_.get("sys.conversation_turns")
        request = values.get("request") if isinstance(values.get("request"), dict) else {}
        out["open_turn"] = bool(request.get("open")) or any(w[1] == "__interrupt__" for w in saved.pending_writes or [])
    return out


async def _globals_of(checkpointer, saved) -> dict:
    """The globals at a checkpoint: stored there (an older session, or a snapshot), else rebuilt from the
    writes since the last snapshot (the channel is a `DeltaChannel`, runtime/state.py)."""
    value = (saved.checkpoint.get("channel_values") or {}).get(GLOBALS)
    if value is None and GLOBALS in (saved.checkpoint.get("channel_versions") or {}):
        found = (await checkpointer.aget_delta_channel_history(config=saved.config, channels=[GLOBALS]))[GLOBALS]
        seed = found.get("seed")
        value = reduce_globals(dict(getattr(seed, "value", seed) or {}), [write[2] for write in found["writes"]])
    value = getattr(value, "value", value)          # a snapshot (`_DeltaSnapshot`) holds its value
    return value if isinstance(value, dict) else {}


async def idle_sessions(store, older_than: float, *, now: float | None = None) -> list[SessionInfo]:
    """Sessions last active `older_than` seconds or more before `now` (default: this moment)."""
    cutoff = (time.time() if now is None else now) - older_than
    return [s for s in await list_sessions(store) if s.last_active <= cutoff]


# --- deleting ----------------------------------------------------------------------------------
def _batches(ids: list[str], size: int = BATCH) -> Iterable[list[str]]:
    for i in range(0, len(ids), size):
        yield ids[i:i + size]


async def _delete_batch(store, ids: list[str]) -> None:
    """One batch: the server rows, then the checkpoints and writes, one statement per table."""
    marks = ", ".join("?" * len(ids))
    await store.db.execute(f"DELETE FROM c2g_sessions WHERE id IN ({marks})", tuple(ids))
    await store.db.execute(f"DELETE FROM c2g_session_messages WHERE session_id IN ({marks})", tuple(ids))
    # the turns asked of them and the events those streamed (server/backend/jobs/)
    await store.db.execute(f"DELETE FROM c2g_turn_events WHERE turn_id IN (SELECT id FROM c2g_turns "
                           f"WHERE session_id IN ({marks}))", tuple(ids))
    await store.db.execute(f"DELETE FROM c2g_turns WHERE session_id IN ({marks})", tuple(ids))
    await store.delete_a2a_tasks_in(ids)        # the A2A tasks that ran them (a context is a session)
    if is_postgres(store.url):
        present = {r["t"] for r in await _rows(store, "SELECT table_name AS t FROM information_schema.tables "
                                                      "WHERE table_schema = current_schema()")}
        for table in [t for t in ("checkpoint_writes", "checkpoint_blobs", "checkpoints", COMPACTED) if t in present]:
            await store.db.execute(f"DELETE FROM {table} WHERE thread_id IN ({marks})", tuple(ids))
        return
    saver = store.checkpointer
    with saver.lock:                 # LangGraph's two tables, in one transaction on the saver's connection
        try:
            tables = [t for (t,) in saver.conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
            for table in [t for t in ("writes", "checkpoint_blobs", "checkpoints", COMPACTED) if t in tables]:
                saver.conn.execute(f"DELETE FROM {table} WHERE thread_id IN ({marks})", tuple(ids))
            saver.conn.commit()
        except BaseException:
            saver.conn.rollback()
            raise


async def delete_sessions(store, session_ids: Iterable[str]) -> int:
    """Delete every trace of these sessions; returns how many ids were given. Yields to the loop
    between batches and gives SQLite's freed pages back as it goes (when the file allows it)."""
    ids = list(dict.fromkeys(session_ids))
    for batch in _batches(ids):
        await _delete_batch(store, batch)
        await give_space_back(store)
        await asyncio.sleep(0)
    return len(ids)


async def give_space_back(store) -> int:
    """SQLite: return freed pages to the file system, a bounded step at a time (files made with
    `auto_vacuum=INCREMENTAL`); returns the pages still free. PostgreSQL's autovacuum does this itself."""
    if is_postgres(store.url):
        return 0
    saver = store.checkpointer
    with saver.lock:
        if saver.conn.execute("PRAGMA auto_vacuum").fetchone()[0] != 2:
            return saver.conn.execute("PRAGMA freelist_count").fetchone()[0]
        # executescript steps the pragma to its end (one page per step); execute() would free a single page
        saver.conn.executescript(f"PRAGMA incremental_vacuum({VACUUM_PAGES})")
        return saver.conn.execute("PRAGMA freelist_count").fetchone()[0]


def vacuum(store) -> None:
    """Rebuild a SQLite file once: free pages go back and the file reclaims space from then on
    (`auto_vacuum=INCREMENTAL`). It holds the file for as long as it runs: the command line's, not
    a serving process's."""
    if is_postgres(store.url):
        return
    saver = store.checkpointer
    with saver.lock:
        saver.conn.execute("PRAGMA auto_vacuum=INCREMENTAL")
        saver.conn.execute("VACUUM")


async def prune(store, older_than: float, *, now: float | None = None, keep: set[str] | None = None) -> list[str]:
    """Delete the sessions idle for `older_than` seconds or more, except those in `keep` (running ones)."""
    idle = [s.id for s in await idle_sessions(store, older_than, now=now) if s.id not in (keep or set())]
    await delete_sessions(store, idle)
    return idle


# --- the server's time-to-live -----------------------------------------------------------------
async def expire_sessions(store, ttl: float, *, running: Any = None, interval: float | None = None) -> None:
    """Forever (until cancelled): every `interval` seconds (default a tenth of `ttl`, between 1 s and
    an hour) delete the sessions idle for `ttl` seconds or more. `running()` (a function, or a coroutine
    function) names the sessions with a turn queued or in progress; a session another process is running
    holds a live lease."""
    every = interval if interval is not None else min(3600.0, max(1.0, ttl / 10))
    while True:
        try:
            found = running() if running else ()
            busy = set(await found if inspect.isawaitable(found) else found)
            idle = [s for s in await idle_sessions(store, ttl) if s.id not in busy]
            expired = [s.id for s in idle if s.tenant is None or not await store.lease_is_live(s.id)]
            await delete_sessions(store, expired)
            if expired:
                log.info("expired %d sessions idle for %s s or more", len(expired), f"{ttl:g}")
        except asyncio.CancelledError:
            raise
        except Exception:               # a database hiccup must not end expiry for the server's life
            log.exception("session expiry failed; trying again in %s s", f"{every:g}")
        await asyncio.sleep(every)

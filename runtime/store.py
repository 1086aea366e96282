"""Agents, sessions and API tokens, in the same database as the checkpoints.

`open_store(url)` opens one database for everything the server keeps: a SQLite file (the default) or
PostgreSQL (`postgresql://...`, which several server processes can share). LangGraph's checkpointer
keeps the graph state of each session (thread id = session id); these tables keep what RAGFlow's
API shows around it: tenants' tokens, agents (title + DSL), sessions (the DSL they run, the message
log) and, per session, a *lease*: which server process is running a turn on it, so that two
processes (or two requests) never run one session at once.

A lease names its owner (`host:pid:instance`) and expires unless renewed; a lease whose owner is a
dead process on this host is taken over at once, so a killed server's sessions resume immediately
after a restart.
"""
from __future__ import annotations

import hashlib
import json
import os
import secrets
import socket
import time
import uuid
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Iterable

from runtime.checkpoint import is_postgres

TOKEN_PREFIX = "c2g-"
LEASE_SECONDS = 20.0                 # a running turn renews its lease well before this
ORDERABLE = {"create_time", "update_time", "title", "name"}

SCHEMA = [
    """CREATE TABLE IF NOT EXISTS c2g_tokens (
        id TEXT PRIMARY KEY, secret_hash TEXT NOT NULL UNIQUE, tenant TEXT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL, revoked_at DOUBLE PRECISION)""",
    """CREATE TABLE IF NOT EXISTS c2g_agents (
        id TEXT PRIMARY KEY, tenant TEXT NOT NULL, title TEXT NOT NULL, description TEXT,
        avatar TEXT, dsl TEXT NOT NULL, create_time BIGINT NOT NULL, update_time BIGINT NOT NULL)""",
    "CREATE UNIQUE INDEX IF NOT EXISTS c2g_agents_title ON c2g_agents (tenant, title)",
    """CREATE TABLE IF NOT EXISTS c2g_sessions (
        id TEXT PRIMARY KEY, tenant TEXT NOT NULL, agent_id TEXT, source TEXT NOT NULL, name TEXT,
        user_id TEXT, dsl TEXT NOT NULL, messages TEXT NOT NULL, reference TEXT NOT NULL,
        create_time BIGINT NOT NULL, update_time BIGINT NOT NULL,
        lease_owner TEXT, lease_until DOUBLE PRECISION, cancel_requested INTEGER NOT NULL DEFAULT 0)""",
    "CREATE INDEX IF NOT EXISTS c2g_sessions_agent ON c2g_sessions (tenant, agent_id)",
]


class StoreError(Exception):
    """A store request that cannot be done as asked (a duplicate title, say)."""


def now_ms() -> int:
    return int(time.time() * 1000)


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def process_owner() -> str:
    """This process as a lease owner: host, pid and a per-process instance id."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def _owner_is_dead(owner: str) -> bool:
    """True when `owner` names a process on this host that no longer runs."""
    try:
        host, pid, _ = owner.rsplit(":", 2)
        pid_n = int(pid)
    except ValueError:
        return False
    if host != socket.gethostname():
        return False            # another machine: only the lease's expiry tells
    if pid_n == os.getpid():
        return False
    try:
        os.kill(pid_n, 0)
    except ProcessLookupError:
        return True
    except PermissionError:     # it exists, owned by someone else
        return False
    return False


@dataclass
class Agent:
    id: str
    tenant: str
    title: str
    dsl: Any
    description: str | None = None
    avatar: str | None = None
    create_time: int = 0
    update_time: int = 0


@dataclass
class Session:
    id: str
    tenant: str
    agent_id: str | None
    source: str                       # "agent" (created by the sessions route), "workflow" or "graph"
    dsl: Any
    name: str = ""
    user_id: str = ""
    messages: list = field(default_factory=list)
    reference: list = field(default_factory=list)
    create_time: int = 0
    update_time: int = 0
    dsl_text: str = ""                # the DSL as stored: the compile cache keys on it


def _agent(row: dict) -> Agent:
    return Agent(id=row["id"], tenant=row["tenant"], title=row["title"], dsl=json.loads(row["dsl"]),
                 description=row["description"], avatar=row["avatar"], create_time=row["create_time"],
                 update_time=row["update_time"])


def _session(row: dict, with_dsl: bool = True) -> Session:
    return Session(id=row["id"], tenant=row["tenant"], agent_id=row["agent_id"], source=row["source"],
                   dsl=json.loads(row["dsl"]) if with_dsl else None, dsl_text=row["dsl"] if with_dsl else "",
                   name=row["name"] or "", user_id=row["user_id"] or "", messages=json.loads(row["messages"]),
                   reference=json.loads(row["reference"]), create_time=row["create_time"],
                   update_time=row["update_time"])


def _is_integrity_error(error: BaseException) -> bool:
    import sqlite3
    try:
        import psycopg
        pg = (psycopg.IntegrityError,)
    except ImportError:             # pragma: no cover - psycopg is a dependency
        pg = ()
    return isinstance(error, (sqlite3.IntegrityError, *pg))


class _Sqlite:
    """The store's tables on the checkpointer's own SQLite connection, under its lock.

    One connection for both: two connections to one file would take turns on SQLite's file lock,
    whose busy handler sleeps for milliseconds at a time under load.
    """
    placeholder = "?"

    def __init__(self, saver):
        self.conn = saver.conn
        self.lock = saver.lock

    async def setup(self, statements: Iterable[str]) -> None:
        async with self.lock:
            # WAL and `synchronous` are set by open_checkpointer; another process (a second server,
            # `canvas2graph tokens`) may write the same file, so wait for it rather than fail
            await self.conn.execute("PRAGMA busy_timeout=30000")
            for sql in statements:
                await self.conn.execute(sql)
            await self.conn.commit()

    async def execute(self, sql: str, params: tuple = ()) -> int:
        async with self.lock:
            cursor = await self.conn.execute(sql, params)
            await self.conn.commit()
            return cursor.rowcount

    async def fetchall(self, sql: str, params: tuple = ()) -> list[dict]:
        async with self.lock, self.conn.execute(sql, params) as cursor:
            names = [c[0] for c in cursor.description]
            return [dict(zip(names, row)) for row in await cursor.fetchall()]


class _Postgres:
    placeholder = "%s"

    def __init__(self, url: str):
        self.url = url
        self.pool = None

    async def open(self) -> None:
        from psycopg.rows import dict_row
        from psycopg_pool import AsyncConnectionPool
        # one pool for the checkpointer and these tables; autocommit and no prepared statements are
        # what LangGraph's saver requires of its connections
        self.pool = AsyncConnectionPool(self.url, min_size=1, max_size=8, open=False, timeout=30,
                                        kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row})
        await self.pool.open(wait=True, timeout=30)

    async def close(self) -> None:
        if self.pool is not None:
            await self.pool.close()

    async def setup(self, statements: Iterable[str], saver=None) -> None:
        # several servers may start at once: one sets the schema up while the others wait
        async with self.pool.connection() as conn:
            await conn.execute("SELECT pg_advisory_lock(740215)")
            try:
                if saver is not None:
                    await saver.setup()
                for sql in statements:
                    await conn.execute(sql)
            finally:
                await conn.execute("SELECT pg_advisory_unlock(740215)")

    async def execute(self, sql: str, params: tuple = ()) -> int:
        async with self.pool.connection() as conn:
            cursor = await conn.execute(sql.replace("?", "%s"), params)
            return cursor.rowcount

    async def fetchall(self, sql: str, params: tuple = ()) -> list[dict]:
        async with self.pool.connection() as conn:
            cursor = await conn.execute(sql.replace("?", "%s"), params)
            return list(await cursor.fetchall())


class Store:
    """Tenants' tokens, agents and sessions; `checkpointer` keeps the sessions' graph state."""

    def __init__(self, db, checkpointer, url: str):
        self.db = db
        self.checkpointer = checkpointer
        self.url = url

    # --- tokens --------------------------------------------------------------------------------
    async def create_token(self, tenant: str) -> tuple[str, str]:
        """A new token for `tenant`: (token id, token). Only its hash is stored: show it once."""
        if not tenant or not tenant.strip():
            raise StoreError("a tenant name is required")
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        token_id = "tok_" + secrets.token_hex(6)
        await self.db.execute("INSERT INTO c2g_tokens (id, secret_hash, tenant, created_at) VALUES (?, ?, ?, ?)",
                              (token_id, _hash(token), tenant.strip(), time.time()))
        return token_id, token

    async def list_tokens(self, tenant: str | None = None) -> list[dict]:
        sql = "SELECT id, tenant, created_at, revoked_at FROM c2g_tokens"
        params: tuple = ()
        if tenant:
            sql, params = sql + " WHERE tenant = ?", (tenant,)
        return await self.db.fetchall(sql + " ORDER BY created_at", params)

    async def revoke_token(self, token_or_id: str, tenant: str | None = None) -> bool:
        """Revoke by token id or by the token itself; False when no live token matches."""
        sql = "UPDATE c2g_tokens SET revoked_at = ? WHERE (id = ? OR secret_hash = ?) AND revoked_at IS NULL"
        params: tuple = (time.time(), token_or_id, _hash(token_or_id))
        if tenant:
            sql, params = sql + " AND tenant = ?", params + (tenant,)
        return await self.db.execute(sql, params) > 0

    async def tenant_of(self, token: str) -> str | None:
        rows = await self.db.fetchall("SELECT tenant FROM c2g_tokens WHERE secret_hash = ? AND revoked_at IS NULL",
                                      (_hash(token),))
        return rows[0]["tenant"] if rows else None

    # --- agents --------------------------------------------------------------------------------
    async def create_agent(self, tenant: str, title: str, dsl: Any, description: str | None = None,
                           avatar: str | None = None) -> Agent:
        if await self._title_taken(tenant, title):
            raise StoreError(f"an agent titled {title!r} already exists")
        now = now_ms()
        agent = Agent(id=uuid.uuid4().hex, tenant=tenant, title=title, dsl=dsl, description=description,
                      avatar=avatar, create_time=now, update_time=now)
        try:
            await self.db.execute(
                "INSERT INTO c2g_agents (id, tenant, title, description, avatar, dsl, create_time, update_time) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (agent.id, tenant, title, description, avatar, json.dumps(dsl, ensure_ascii=False), now, now))
        except Exception as e:
            if _is_integrity_error(e):      # created by a concurrent request meanwhile
                raise StoreError(f"an agent titled {title!r} already exists") from None
            raise
        return agent

    async def _title_taken(self, tenant: str, title: str, other_than: str | None = None) -> bool:
        rows = await self.db.fetchall("SELECT id FROM c2g_agents WHERE tenant = ? AND title = ?", (tenant, title))
        return any(r["id"] != other_than for r in rows)

    async def get_agent(self, tenant: str, agent_id: str) -> Agent | None:
        rows = await self.db.fetchall("SELECT * FROM c2g_agents WHERE tenant = ? AND id = ?", (tenant, agent_id))
        return _agent(rows[0]) if rows else None

    async def list_agents(self, tenant: str, *, page: int = 1, page_size: int = 30, orderby: str = "update_time",
                          desc: bool = True, agent_id: str | None = None, title: str | None = None
                          ) -> tuple[list[Agent], int]:
        where, params = "tenant = ?", [tenant]
        if agent_id:
            where, params = where + " AND id = ?", params + [agent_id]
        if title:
            where, params = where + " AND title = ?", params + [title]
        total = (await self.db.fetchall(f"SELECT COUNT(*) AS n FROM c2g_agents WHERE {where}", tuple(params)))[0]["n"]
        order = _order(orderby, desc, default="update_time")
        rows = await self.db.fetchall(f"SELECT * FROM c2g_agents WHERE {where} ORDER BY {order} LIMIT ? OFFSET ?",
                                      tuple(params) + _page(page, page_size))
        return [_agent(r) for r in rows], int(total)

    async def update_agent(self, tenant: str, agent_id: str, **changes: Any) -> Agent | None:
        agent = await self.get_agent(tenant, agent_id)
        if agent is None:
            return None
        if "title" in changes and await self._title_taken(tenant, changes["title"], other_than=agent_id):
            raise StoreError(f"an agent titled {changes['title']!r} already exists")
        for key, value in changes.items():
            setattr(agent, key, value)
        agent.update_time = now_ms()
        await self.db.execute(
            "UPDATE c2g_agents SET title = ?, description = ?, avatar = ?, dsl = ?, update_time = ? "
            "WHERE tenant = ? AND id = ?",
            (agent.title, agent.description, agent.avatar, json.dumps(agent.dsl, ensure_ascii=False),
             agent.update_time, tenant, agent_id))
        return agent

    async def delete_agent(self, tenant: str, agent_id: str) -> bool:
        """Delete an agent with its sessions and their checkpoints."""
        if await self.get_agent(tenant, agent_id) is None:
            return False
        rows = await self.db.fetchall("SELECT id FROM c2g_sessions WHERE tenant = ? AND agent_id = ?", (tenant, agent_id))
        await self.delete_sessions(tenant, [r["id"] for r in rows])
        await self.db.execute("DELETE FROM c2g_agents WHERE tenant = ? AND id = ?", (tenant, agent_id))
        return True

    # --- sessions ------------------------------------------------------------------------------
    async def create_session(self, tenant: str, *, source: str, dsl: Any, agent_id: str | None = None,
                             name: str = "", user_id: str = "", messages: list | None = None,
                             session_id: str | None = None) -> Session:
        now = now_ms()
        dsl_text = dsl if isinstance(dsl, str) else json.dumps(dsl, ensure_ascii=False)
        session = Session(id=session_id or uuid.uuid4().hex, tenant=tenant, agent_id=agent_id, source=source,
                          dsl=json.loads(dsl_text), dsl_text=dsl_text, name=name, user_id=user_id,
                          messages=list(messages or []), create_time=now, update_time=now)
        try:
            await self.db.execute(
                "INSERT INTO c2g_sessions (id, tenant, agent_id, source, name, user_id, dsl, messages, reference, "
                "create_time, update_time) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (session.id, tenant, agent_id, source, name, user_id, dsl_text,
                 json.dumps(session.messages, ensure_ascii=False), "[]", now, now))
        except Exception as e:
            if _is_integrity_error(e):
                raise StoreError(f"session id {session.id} is not available: choose another") from None
            raise
        return session

    async def session_exists(self, session_id: str) -> bool:
        """Whether any tenant has a session with this id (ids chosen by clients must not collide)."""
        return bool(await self.db.fetchall("SELECT id FROM c2g_sessions WHERE id = ?", (session_id,)))

    async def get_session(self, tenant: str, session_id: str) -> Session | None:
        rows = await self.db.fetchall("SELECT * FROM c2g_sessions WHERE tenant = ? AND id = ?", (tenant, session_id))
        return _session(rows[0]) if rows else None

    async def list_sessions(self, tenant: str, agent_id: str, *, page: int = 1, page_size: int = 30,
                            orderby: str = "update_time", desc: bool = True, session_id: str | None = None,
                            user_id: str | None = None, with_dsl: bool = True) -> list[Session]:
        where, params = "tenant = ? AND agent_id = ?", [tenant, agent_id]
        if session_id:
            where, params = where + " AND id = ?", params + [session_id]
        if user_id:
            where, params = where + " AND user_id = ?", params + [user_id]
        columns = "*" if with_dsl else ("id, tenant, agent_id, source, name, user_id, messages, reference, "
                                        "create_time, update_time")
        order = _order(orderby, desc, default="update_time")
        rows = await self.db.fetchall(f"SELECT {columns} FROM c2g_sessions WHERE {where} ORDER BY {order} "
                                      "LIMIT ? OFFSET ?", tuple(params) + _page(page, page_size))
        return [_session(r, with_dsl) for r in rows]

    async def delete_sessions(self, tenant: str, session_ids: list[str]) -> list[str]:
        """Delete the tenant's sessions among `session_ids` (and their checkpoints); returns those deleted."""
        deleted = []
        for sid in session_ids:
            if await self.db.execute("DELETE FROM c2g_sessions WHERE tenant = ? AND id = ?", (tenant, sid)):
                deleted.append(sid)
                if self.checkpointer is not None:
                    await self.checkpointer.adelete_thread(sid)
        return deleted

    async def append_messages(self, session_id: str, messages: list[dict], reference: dict | None = None) -> bool:
        """Add to a session's message log; False when the session was deleted meanwhile.
        Only the lease holder calls this, so read-then-write is safe."""
        rows = await self.db.fetchall("SELECT messages, reference FROM c2g_sessions WHERE id = ?", (session_id,))
        if not rows:
            return False
        log = json.loads(rows[0]["messages"]) + messages
        refs = json.loads(rows[0]["reference"])
        if reference is not None:
            refs.append(reference)
        await self.db.execute("UPDATE c2g_sessions SET messages = ?, reference = ?, update_time = ? WHERE id = ?",
                              (json.dumps(log, ensure_ascii=False, default=str),
                               json.dumps(refs, ensure_ascii=False, default=str), now_ms(), session_id))
        return True

    # --- leases and cancellation ----------------------------------------------------------------
    async def acquire_lease(self, session_id: str, owner: str, seconds: float = LEASE_SECONDS) -> bool:
        """Take the session for one turn; False when another live turn holds it."""
        now = time.time()
        taken = await self.db.execute(
            "UPDATE c2g_sessions SET lease_owner = ?, lease_until = ?, cancel_requested = 0 "
            "WHERE id = ? AND (lease_owner IS NULL OR lease_until < ?)", (owner, now + seconds, session_id, now))
        if taken:
            return True
        rows = await self.db.fetchall("SELECT lease_owner FROM c2g_sessions WHERE id = ?", (session_id,))
        holder = rows[0]["lease_owner"] if rows else None
        if holder and _owner_is_dead(holder):
            # compare-and-set on the dead owner: of two processes taking over, one wins
            return bool(await self.db.execute(
                "UPDATE c2g_sessions SET lease_owner = ?, lease_until = ?, cancel_requested = 0 "
                "WHERE id = ? AND lease_owner = ?", (owner, now + seconds, session_id, holder)))
        return False

    async def renew_leases(self, owner: str, session_ids: list[str], seconds: float = LEASE_SECONDS) -> None:
        if session_ids:
            marks = ", ".join("?" * len(session_ids))
            await self.db.execute(f"UPDATE c2g_sessions SET lease_until = ? WHERE lease_owner = ? AND id IN ({marks})",
                                  (time.time() + seconds, owner, *session_ids))

    async def release_lease(self, session_id: str, owner: str) -> None:
        await self.db.execute("UPDATE c2g_sessions SET lease_owner = NULL, lease_until = NULL, cancel_requested = 0 "
                              "WHERE id = ? AND lease_owner = ?", (session_id, owner))

    async def request_cancel(self, tenant: str, session_id: str) -> bool:
        """Flag the session's running turn for cancellation; False when no turn is running."""
        return bool(await self.db.execute(
            "UPDATE c2g_sessions SET cancel_requested = 1 WHERE tenant = ? AND id = ? "
            "AND lease_owner IS NOT NULL AND lease_until >= ?", (tenant, session_id, time.time())))

    async def cancel_requests(self, owner: str) -> list[str]:
        """Sessions whose turns this owner runs and someone asked to cancel."""
        rows = await self.db.fetchall("SELECT id FROM c2g_sessions WHERE lease_owner = ? AND cancel_requested = 1",
                                      (owner,))
        return [r["id"] for r in rows]


def _order(orderby: str, desc: bool, default: str) -> str:
    column = orderby if orderby in ORDERABLE else default
    return f"{column} {'DESC' if desc else 'ASC'}, id"


def _page(page: int, page_size: int) -> tuple[int, int]:
    page, size = max(int(page), 1), min(max(int(page_size), 1), 1000)
    return size, (page - 1) * size


def sqlite_path(url: str) -> str:
    return url[len("sqlite:///"):] if url.startswith("sqlite:///") else url


@asynccontextmanager
async def open_store(url: str) -> AsyncIterator[Store]:
    """The store and its checkpointer on one database: a SQLite path (or sqlite:///path) or a postgresql:// URL."""
    if not url or url == ":memory:":
        raise StoreError("the server needs a database that outlives it: a SQLite file or a postgresql:// URL")
    if is_postgres(url):
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
        db = _Postgres(url)
        await db.open()
        try:
            saver = AsyncPostgresSaver(conn=db.pool)
            await db.setup(SCHEMA, saver)
            yield Store(db, saver, url)
        finally:
            await db.close()
        return
    from runtime.checkpoint import open_checkpointer
    path = sqlite_path(url)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    async with open_checkpointer(path) as saver:
        await saver.setup()
        db = _Sqlite(saver)
        await db.setup(SCHEMA)
        yield Store(db, saver, url)

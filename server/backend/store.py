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

from canvas2graph.runtime.run.checkpoint import is_postgres

TOKEN_PREFIX = "c2g-"
LEASE_SECONDS = 20.0                 # a running turn renews its lease well before this
ORDERABLE = {"create_time", "update_time", "title", "name"}
MAX_DRAFT_VERSIONS = 20              # unreleased versions kept per agent (released ones are all kept), as RAGFlow
WEBHOOK_CALLS_KEPT = 100             # calls (and their events) kept per agent for /webhook/logs
TAG_MAX_CHARS, TAGS_MAX_CHARS = 64, 512

SCHEMA = [
    """CREATE TABLE IF NOT EXISTS c2g_tokens (
        id TEXT PRIMARY KEY, secret_hash TEXT NOT NULL UNIQUE, tenant TEXT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL, revoked_at DOUBLE PRECISION)""",
    """CREATE TABLE IF NOT EXISTS c2g_agents (
        id TEXT PRIMARY KEY, tenant TEXT NOT NULL, title TEXT NOT NULL, description TEXT,
        avatar TEXT, dsl TEXT NOT NULL, create_time BIGINT NOT NULL, update_time BIGINT NOT NULL,
        tags TEXT NOT NULL DEFAULT '', canvas_type TEXT)""",
    "CREATE UNIQUE INDEX IF NOT EXISTS c2g_agents_title ON c2g_agents (tenant, title)",
    """CREATE TABLE IF NOT EXISTS c2g_sessions (
        id TEXT PRIMARY KEY, tenant TEXT NOT NULL, agent_id TEXT, source TEXT NOT NULL, name TEXT,
        user_id TEXT, dsl TEXT NOT NULL, messages TEXT NOT NULL, reference TEXT NOT NULL,
        create_time BIGINT NOT NULL, update_time BIGINT NOT NULL,
        lease_owner TEXT, lease_until DOUBLE PRECISION, cancel_requested INTEGER NOT NULL DEFAULT 0,
        version_id TEXT, version_title TEXT)""",
    "CREATE INDEX IF NOT EXISTS c2g_sessions_agent ON c2g_sessions (tenant, agent_id)",
    """CREATE TABLE IF NOT EXISTS c2g_agent_versions (
        id TEXT PRIMARY KEY, tenant TEXT NOT NULL, agent_id TEXT NOT NULL, title TEXT, description TEXT,
        released INTEGER NOT NULL DEFAULT 0, dsl TEXT NOT NULL, diagnostics TEXT NOT NULL, created_by TEXT,
        create_time BIGINT NOT NULL, update_time BIGINT NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS c2g_agent_versions_agent ON c2g_agent_versions (tenant, agent_id, create_time)",
    """CREATE TABLE IF NOT EXISTS c2g_webhook_calls (
        id TEXT PRIMARY KEY, tenant TEXT NOT NULL, agent_id TEXT NOT NULL, session_id TEXT,
        is_test INTEGER NOT NULL, mode TEXT NOT NULL, method TEXT, client TEXT, status TEXT NOT NULL,
        http_status INTEGER, error TEXT, request TEXT NOT NULL, owner TEXT,
        start_ts DOUBLE PRECISION NOT NULL, end_ts DOUBLE PRECISION)""",
    "CREATE INDEX IF NOT EXISTS c2g_webhook_calls_agent ON c2g_webhook_calls (tenant, agent_id, start_ts)",
    "CREATE INDEX IF NOT EXISTS c2g_webhook_calls_status ON c2g_webhook_calls (status)",
    """CREATE TABLE IF NOT EXISTS c2g_webhook_events (
        call_id TEXT NOT NULL, seq INTEGER NOT NULL, ts DOUBLE PRECISION NOT NULL, event TEXT NOT NULL,
        PRIMARY KEY (call_id, seq))""",
    """CREATE TABLE IF NOT EXISTS c2g_rate_buckets (
        bucket TEXT PRIMARY KEY, tokens DOUBLE PRECISION NOT NULL, ts DOUBLE PRECISION NOT NULL)""",
]

# Columns added to tables after their first release: (table, column, definition). A database made by an
# earlier version gets them when a store opens it (CREATE TABLE IF NOT EXISTS leaves old tables as they are).
ADDED_COLUMNS = [
    ("c2g_agents", "tags", "TEXT NOT NULL DEFAULT ''"),
    ("c2g_agents", "canvas_type", "TEXT"),
    ("c2g_sessions", "version_id", "TEXT"),
    ("c2g_sessions", "version_title", "TEXT"),
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
    tags: str = ""                    # comma-separated, as RAGFlow stores them
    canvas_type: str | None = None

    @property
    def tag_list(self) -> list[str]:
        return [t for t in self.tags.split(",") if t]


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
    version_id: str | None = None     # the agent version the session started with (its DSL is `dsl`)
    version_title: str | None = None


@dataclass
class Version:
    """One saved DSL of an agent: who saved it, when, and what the compiler said about it."""
    id: str
    agent_id: str
    tenant: str
    title: str
    released: bool
    create_time: int
    update_time: int
    created_by: str = ""
    description: str | None = None
    dsl: Any = None                   # None in listings
    diagnostics: dict | None = None   # {"compiles": bool, "diagnostics": [...]}; None in listings


@dataclass
class WebhookCall:
    """One request a webhook received, and how its run went."""
    id: str
    tenant: str
    agent_id: str
    is_test: bool
    mode: str                         # "Immediately" (answered at once, run in the background) or "Streaming"
    status: str                       # running, finished, paused, stopped, cancelled, failed, rejected, interrupted
    start_ts: float
    session_id: str | None = None
    method: str = ""
    client: str = ""
    http_status: int | None = None
    error: str | None = None
    end_ts: float | None = None
    request: dict = field(default_factory=dict)   # the run's request ({query, inputs, user_id}), to resume it
    owner: str | None = None          # the server process that accepted it


def _agent(row: dict) -> Agent:
    return Agent(id=row["id"], tenant=row["tenant"], title=row["title"], dsl=json.loads(row["dsl"]),
                 description=row["description"], avatar=row["avatar"], create_time=row["create_time"],
                 update_time=row["update_time"], tags=row.get("tags") or "", canvas_type=row.get("canvas_type"))


def _session(row: dict, with_dsl: bool = True) -> Session:
    return Session(id=row["id"], tenant=row["tenant"], agent_id=row["agent_id"], source=row["source"],
                   dsl=json.loads(row["dsl"]) if with_dsl else None, dsl_text=row["dsl"] if with_dsl else "",
                   name=row["name"] or "", user_id=row["user_id"] or "", messages=json.loads(row["messages"]),
                   reference=json.loads(row["reference"]), create_time=row["create_time"],
                   update_time=row["update_time"], version_id=row.get("version_id"),
                   version_title=row.get("version_title"))


def _version(row: dict) -> Version:
    return Version(id=row["id"], agent_id=row["agent_id"], tenant=row["tenant"], title=row["title"] or "",
                   released=bool(row["released"]), create_time=row["create_time"], update_time=row["update_time"],
                   created_by=row.get("created_by") or "", description=row.get("description"),
                   dsl=json.loads(row["dsl"]) if row.get("dsl") is not None else None,
                   diagnostics=json.loads(row["diagnostics"]) if row.get("diagnostics") is not None else None)


def _webhook_call(row: dict) -> WebhookCall:
    return WebhookCall(id=row["id"], tenant=row["tenant"], agent_id=row["agent_id"], is_test=bool(row["is_test"]),
                       mode=row["mode"], status=row["status"], start_ts=row["start_ts"], session_id=row["session_id"],
                       method=row["method"] or "", client=row["client"] or "", http_status=row["http_status"],
                       error=row["error"], end_ts=row["end_ts"], request=json.loads(row["request"]),
                       owner=row["owner"])


def normalize_tags(tags: Any) -> str:
    """RAGFlow's tag rules: a list or a comma-separated text; commas inside a tag become spaces, tags are
    cut to 64 characters, case-insensitive duplicates dropped, and the whole kept within 512 characters."""
    if isinstance(tags, (list, tuple)):
        cleaned = [str(t).replace(",", " ").strip() for t in tags if t is not None and str(t).strip()]
    else:
        cleaned = [t.strip() for t in str(tags or "").split(",") if t.strip()]
    kept: list[str] = []
    seen: set[str] = set()
    used = 0
    for tag in cleaned:
        tag = tag[:TAG_MAX_CHARS]
        if tag.lower() in seen:
            continue
        extra = len(tag) + (1 if kept else 0)
        if used + extra > TAGS_MAX_CHARS:
            break
        seen.add(tag.lower())
        kept.append(tag)
        used += extra
    return ",".join(kept)


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

    async def setup(self, statements: Iterable[str], saver=None, columns: Iterable[tuple[str, str, str]] = ()) -> None:
        # several servers may start at once: one sets the schema up while the others wait
        async with self.pool.connection() as conn:
            await conn.execute("SELECT pg_advisory_lock(740215)")
            try:
                if saver is not None:
                    await saver.setup()
                for sql in statements:
                    await conn.execute(sql)
                for table, column, definition in columns:
                    await conn.execute(f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS {column} {definition}")
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
                           avatar: str | None = None, canvas_type: str | None = None) -> Agent:
        if await self._title_taken(tenant, title):
            raise StoreError(f"an agent titled {title!r} already exists")
        now = now_ms()
        agent = Agent(id=uuid.uuid4().hex, tenant=tenant, title=title, dsl=dsl, description=description,
                      avatar=avatar, create_time=now, update_time=now, canvas_type=canvas_type)
        try:
            await self.db.execute(
                "INSERT INTO c2g_agents (id, tenant, title, description, avatar, dsl, create_time, update_time, "
                "canvas_type) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (agent.id, tenant, title, description, avatar, json.dumps(dsl, ensure_ascii=False), now, now,
                 canvas_type))
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

    async def find_agent(self, agent_id: str) -> Agent | None:
        """An agent by id, whoever owns it: for its webhook, whose URL is public by design."""
        rows = await self.db.fetchall("SELECT * FROM c2g_agents WHERE id = ?", (agent_id,))
        return _agent(rows[0]) if rows else None

    async def list_agents(self, tenant: str, *, page: int = 1, page_size: int = 30, orderby: str = "update_time",
                          desc: bool = True, agent_id: str | None = None, title: str | None = None,
                          tags: list[str] | None = None, keywords: str | None = None) -> tuple[list[Agent], int]:
        """`tags`: agents with any of them; `keywords`: in the title or the tags (RAGFlow's filters)."""
        where, params = "tenant = ?", [tenant]
        if agent_id:
            where, params = where + " AND id = ?", params + [agent_id]
        if title:
            where, params = where + " AND title = ?", params + [title]
        if tags:
            # wrapped in commas so that tag "ml" does not match "ml-ops"
            where += " AND (" + " OR ".join(["LOWER(',' || tags || ',') LIKE ? ESCAPE '\\'"] * len(tags)) + ")"
            params += [f"%,{_like(t.lower())},%" for t in tags]
        if keywords:
            where += " AND (LOWER(title) LIKE ? ESCAPE '\\' OR LOWER(tags) LIKE ? ESCAPE '\\')"
            params += [f"%{_like(keywords.lower())}%"] * 2
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
            "UPDATE c2g_agents SET title = ?, description = ?, avatar = ?, dsl = ?, update_time = ?, "
            "canvas_type = ? WHERE tenant = ? AND id = ?",
            (agent.title, agent.description, agent.avatar, json.dumps(agent.dsl, ensure_ascii=False),
             agent.update_time, agent.canvas_type, tenant, agent_id))
        return agent

    async def delete_agent(self, tenant: str, agent_id: str) -> bool:
        """Delete an agent with its sessions and their checkpoints, its versions and its webhook log."""
        if await self.get_agent(tenant, agent_id) is None:
            return False
        rows = await self.db.fetchall("SELECT id FROM c2g_sessions WHERE tenant = ? AND agent_id = ?", (tenant, agent_id))
        await self.delete_sessions(tenant, [r["id"] for r in rows])
        await self.db.execute("DELETE FROM c2g_agent_versions WHERE tenant = ? AND agent_id = ?", (tenant, agent_id))
        await self.db.execute("DELETE FROM c2g_webhook_events WHERE call_id IN "
                              "(SELECT id FROM c2g_webhook_calls WHERE tenant = ? AND agent_id = ?)", (tenant, agent_id))
        await self.db.execute("DELETE FROM c2g_webhook_calls WHERE tenant = ? AND agent_id = ?", (tenant, agent_id))
        await self.db.execute("DELETE FROM c2g_rate_buckets WHERE bucket = ?", (webhook_bucket(agent_id),))
        await self.db.execute("DELETE FROM c2g_agents WHERE tenant = ? AND id = ?", (tenant, agent_id))
        return True

    # --- tags ----------------------------------------------------------------------------------
    async def set_tags(self, tenant: str, agent_id: str, tags: Any) -> str | None:
        """Replace an agent's tags (normalized as RAGFlow does); None when the tenant has no such agent."""
        value = normalize_tags(tags)
        changed = await self.db.execute("UPDATE c2g_agents SET tags = ? WHERE tenant = ? AND id = ?",
                                        (value, tenant, agent_id))
        return value if changed else None

    async def tag_counts(self, tenant: str) -> list[tuple[str, int]]:
        """(tag, number of the tenant's agents with it), most used first, then by name."""
        counts: dict[str, int] = {}
        for row in await self.db.fetchall("SELECT tags FROM c2g_agents WHERE tenant = ?", (tenant,)):
            for tag in (row["tags"] or "").split(","):
                if tag.strip():
                    counts[tag.strip()] = counts.get(tag.strip(), 0) + 1
        return sorted(counts.items(), key=lambda item: (-item[1], item[0]))

    # --- versions ------------------------------------------------------------------------------
    async def save_version(self, tenant: str, agent_id: str, dsl: Any, *, title: str, diagnostics: dict,
                           created_by: str, released: bool = False, description: str | None = None) -> Version:
        """Keep a saved DSL as a version, as RAGFlow's save_or_replace_latest does.

        A save whose DSL is the latest version's refreshes that version (its time, author and release
        flag) instead of adding a copy, unless the latest is released and this save is not: a released
        version is never changed. At most MAX_DRAFT_VERSIONS unreleased versions are kept.
        """
        text = json.dumps(dsl, ensure_ascii=False, sort_keys=True)
        now = now_ms()
        rows = await self.db.fetchall(
            "SELECT id, dsl, released FROM c2g_agent_versions WHERE tenant = ? AND agent_id = ? "
            "ORDER BY create_time DESC, id DESC LIMIT 1", (tenant, agent_id))
        latest = rows[0] if rows else None
        same = latest is not None and json.dumps(json.loads(latest["dsl"]), ensure_ascii=False, sort_keys=True) == text
        if same and not (latest["released"] and not released):
            await self.db.execute(
                "UPDATE c2g_agent_versions SET update_time = ?, created_by = ?, released = ?, diagnostics = ? "
                "WHERE id = ?", (now, created_by, int(bool(latest["released"]) or released),
                                 json.dumps(diagnostics, ensure_ascii=False), latest["id"]))
            version_id = latest["id"]
        else:
            version_id = uuid.uuid4().hex
            # a version made in the same millisecond as the last one still sorts after it
            newest = await self.db.fetchall("SELECT MAX(create_time) AS t FROM c2g_agent_versions "
                                            "WHERE tenant = ? AND agent_id = ?", (tenant, agent_id))
            created = max(now, int(newest[0]["t"] or 0) + 1)
            await self.db.execute(
                "INSERT INTO c2g_agent_versions (id, tenant, agent_id, title, description, released, dsl, diagnostics, "
                "created_by, create_time, update_time) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (version_id, tenant, agent_id, title, description, int(released), json.dumps(dsl, ensure_ascii=False),
                 json.dumps(diagnostics, ensure_ascii=False), created_by, created, created))
            await self._prune_versions(tenant, agent_id)
        version = await self.get_version(tenant, agent_id, version_id)
        assert version is not None
        return version

    async def _prune_versions(self, tenant: str, agent_id: str) -> None:
        drafts = await self.db.fetchall(
            "SELECT id FROM c2g_agent_versions WHERE tenant = ? AND agent_id = ? AND released = 0 "
            "ORDER BY create_time DESC, id DESC", (tenant, agent_id))
        for row in drafts[MAX_DRAFT_VERSIONS:]:
            await self.db.execute("DELETE FROM c2g_agent_versions WHERE id = ?", (row["id"],))

    async def list_versions(self, tenant: str, agent_id: str) -> list[Version]:
        """An agent's versions, the most recently saved first, without their DSLs."""
        rows = await self.db.fetchall(
            "SELECT id, tenant, agent_id, title, released, created_by, create_time, update_time FROM c2g_agent_versions "
            "WHERE tenant = ? AND agent_id = ? ORDER BY update_time DESC, create_time DESC", (tenant, agent_id))
        return [_version(r) for r in rows]

    async def get_version(self, tenant: str, agent_id: str, version_id: str) -> Version | None:
        rows = await self.db.fetchall("SELECT * FROM c2g_agent_versions WHERE tenant = ? AND agent_id = ? AND id = ?",
                                      (tenant, agent_id, version_id))
        return _version(rows[0]) if rows else None

    async def latest_version(self, tenant: str, agent_id: str, *, released: bool = False) -> Version | None:
        """The newest version (the newest released one with `released`), with its DSL."""
        where = " AND released = 1" if released else ""
        rows = await self.db.fetchall(f"SELECT * FROM c2g_agent_versions WHERE tenant = ? AND agent_id = ?{where} "
                                      "ORDER BY create_time DESC, id DESC LIMIT 1", (tenant, agent_id))
        return _version(rows[0]) if rows else None

    # --- sessions ------------------------------------------------------------------------------
    async def create_session(self, tenant: str, *, source: str, dsl: Any, agent_id: str | None = None,
                             name: str = "", user_id: str = "", messages: list | None = None,
                             session_id: str | None = None, version: Version | None = None) -> Session:
        """A session runs `dsl` for its whole life; `version` names the agent version that DSL is."""
        now = now_ms()
        dsl_text = dsl if isinstance(dsl, str) else json.dumps(dsl, ensure_ascii=False)
        session = Session(id=session_id or uuid.uuid4().hex, tenant=tenant, agent_id=agent_id, source=source,
                          dsl=json.loads(dsl_text), dsl_text=dsl_text, name=name, user_id=user_id,
                          messages=list(messages or []), create_time=now, update_time=now,
                          version_id=version.id if version else None, version_title=version.title if version else None)
        try:
            await self.db.execute(
                "INSERT INTO c2g_sessions (id, tenant, agent_id, source, name, user_id, dsl, messages, reference, "
                "create_time, update_time, version_id, version_title) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (session.id, tenant, agent_id, source, name, user_id, dsl_text,
                 json.dumps(session.messages, ensure_ascii=False), "[]", now, now, session.version_id,
                 session.version_title))
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
                                        "create_time, update_time, version_id, version_title")
        order = _order(orderby, desc, default="update_time")
        rows = await self.db.fetchall(f"SELECT {columns} FROM c2g_sessions WHERE {where} ORDER BY {order} "
                                      "LIMIT ? OFFSET ?", tuple(params) + _page(page, page_size))
        return [_session(r, with_dsl) for r in rows]

    async def session_dsl(self, session_id: str) -> str | None:
        """The DSL a session runs, whoever's it is (for the operator's `canvas2graph trace`)."""
        rows = await self.db.fetchall("SELECT dsl FROM c2g_sessions WHERE id = ?", (session_id,))
        return rows[0]["dsl"] if rows else None

    async def find_session_of_message(self, tenant: str, agent_id: str | None, message_id: str) -> Session | None:
        """The tenant's session (of `agent_id`, if given) whose message log has a message with this id."""
        if not message_id:
            return None
        where, params = "tenant = ? AND messages LIKE ? ESCAPE '\\'", [tenant, f'%"id": {_like(json.dumps(message_id))}%']
        if agent_id:
            where, params = where + " AND agent_id = ?", params + [agent_id]
        rows = await self.db.fetchall(f"SELECT * FROM c2g_sessions WHERE {where} ORDER BY update_time DESC LIMIT 20",
                                      tuple(params))
        for row in rows:            # the pattern may match inside a message's text: check the ids
            session = _session(row)
            if any(isinstance(m, dict) and m.get("id") == message_id for m in session.messages):
                return session
        return None

    async def delete_sessions(self, tenant: str, session_ids: list[str]) -> list[str]:
        """Delete the tenant's sessions among `session_ids` (their rows, checkpoints and pending writes);
        returns those deleted. Many at once go in batches that let the server answer meanwhile
        (runtime/run/lifecycle.py)."""
        import asyncio

        from canvas2graph.runtime.run.lifecycle import BATCH, delete_sessions
        ids, owned = list(dict.fromkeys(session_ids)), []
        for i in range(0, len(ids), BATCH):
            batch = ids[i:i + BATCH]
            marks = ", ".join("?" * len(batch))
            rows = await self.db.fetchall(f"SELECT id FROM c2g_sessions WHERE tenant = ? AND id IN ({marks})",
                                          (tenant, *batch))
            owned += [sid for sid in batch if sid in {r["id"] for r in rows}]
            await asyncio.sleep(0)
        if self.checkpointer is None:
            for i in range(0, len(owned), BATCH):
                await self.db.execute(f"DELETE FROM c2g_sessions WHERE id IN ({', '.join('?' * len(owned[i:i + BATCH]))})",
                                      tuple(owned[i:i + BATCH]))
            return owned
        await delete_sessions(self, owned)
        return owned

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

    async def lease_is_live(self, session_id: str) -> bool:
        """Whether a live process holds the session's lease (it is running a turn on it)."""
        rows = await self.db.fetchall("SELECT lease_owner, lease_until FROM c2g_sessions WHERE id = ?", (session_id,))
        if not rows or not rows[0]["lease_owner"]:
            return False
        return rows[0]["lease_until"] >= time.time() and not _owner_is_dead(rows[0]["lease_owner"])

    # --- webhooks ------------------------------------------------------------------------------
    async def add_webhook_call(self, call: WebhookCall) -> None:
        """Record a call (and forget the agent's oldest beyond WEBHOOK_CALLS_KEPT)."""
        await self.db.execute(
            "INSERT INTO c2g_webhook_calls (id, tenant, agent_id, session_id, is_test, mode, method, client, status, "
            "http_status, error, request, owner, start_ts, end_ts) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (call.id, call.tenant, call.agent_id, call.session_id, int(call.is_test), call.mode, call.method,
             call.client, call.status, call.http_status, call.error, json.dumps(call.request, ensure_ascii=False,
                                                                                 default=str),
             call.owner, call.start_ts, call.end_ts))
        old = await self.db.fetchall(
            "SELECT id FROM c2g_webhook_calls WHERE tenant = ? AND agent_id = ? ORDER BY start_ts DESC, id DESC",
            (call.tenant, call.agent_id))
        for row in old[WEBHOOK_CALLS_KEPT:]:
            await self.db.execute("DELETE FROM c2g_webhook_events WHERE call_id = ?", (row["id"],))
            await self.db.execute("DELETE FROM c2g_webhook_calls WHERE id = ?", (row["id"],))

    async def update_webhook_call(self, call_id: str, **fields: Any) -> None:
        allowed = {"status", "http_status", "error", "end_ts", "session_id", "owner"}
        if not fields or set(fields) - allowed:
            raise ValueError(f"cannot update webhook call fields {sorted(set(fields) - allowed)}")
        assignments = ", ".join(f"{name} = ?" for name in fields)
        await self.db.execute(f"UPDATE c2g_webhook_calls SET {assignments} WHERE id = ?",
                              (*fields.values(), call_id))

    async def add_webhook_events(self, call_id: str, first_seq: int, events: list[tuple[float, dict]]) -> None:
        """Append (ts, event) pairs to a call's trace, numbered from `first_seq`."""
        for i, (ts, event) in enumerate(events):
            await self.db.execute("INSERT INTO c2g_webhook_events (call_id, seq, ts, event) VALUES (?, ?, ?, ?)",
                                  (call_id, first_seq + i, ts, json.dumps(event, ensure_ascii=False, default=str)))

    async def webhook_events(self, call_id: str, since_ts: float) -> list[dict]:
        rows = await self.db.fetchall("SELECT ts, event FROM c2g_webhook_events WHERE call_id = ? AND ts > ? "
                                      "ORDER BY seq", (call_id, since_ts))
        return [{"ts": r["ts"], **json.loads(r["event"])} for r in rows]

    async def next_event_seq(self, call_id: str) -> int:
        rows = await self.db.fetchall("SELECT MAX(seq) AS n FROM c2g_webhook_events WHERE call_id = ?", (call_id,))
        return int(rows[0]["n"]) + 1 if rows and rows[0]["n"] is not None else 0

    async def webhook_calls(self, tenant: str, agent_id: str, *, limit: int = 20, is_test: bool | None = None,
                            after_ts: float | None = None, oldest_first: bool = False) -> list[WebhookCall]:
        where, params = "tenant = ? AND agent_id = ?", [tenant, agent_id]
        if is_test is not None:
            where, params = where + " AND is_test = ?", params + [int(is_test)]
        if after_ts is not None:
            where, params = where + " AND start_ts > ?", params + [after_ts]
        order = "ASC" if oldest_first else "DESC"
        rows = await self.db.fetchall(f"SELECT * FROM c2g_webhook_calls WHERE {where} ORDER BY start_ts {order} "
                                      "LIMIT ?", (*params, max(1, min(int(limit), WEBHOOK_CALLS_KEPT))))
        return [_webhook_call(r) for r in rows]

    async def webhook_call(self, tenant: str, agent_id: str, call_id: str) -> WebhookCall | None:
        rows = await self.db.fetchall("SELECT * FROM c2g_webhook_calls WHERE tenant = ? AND agent_id = ? AND id = ?",
                                      (tenant, agent_id, call_id))
        return _webhook_call(rows[0]) if rows else None

    async def running_webhook_calls(self) -> list[WebhookCall]:
        """Calls of every tenant whose run has not ended (or whose process died before saying so)."""
        rows = await self.db.fetchall("SELECT * FROM c2g_webhook_calls WHERE status = 'running' ORDER BY start_ts")
        return [_webhook_call(r) for r in rows]

    # --- rate limits ---------------------------------------------------------------------------
    async def take_token(self, bucket: str, capacity: float, per_seconds: float) -> bool:
        """Take one token from a token bucket that holds `capacity` and refills `capacity` per
        `per_seconds`; False when it is empty. One statement decides, so concurrent requests (and
        servers sharing a database) never take the same token twice."""
        now, rate = time.time(), capacity / per_seconds
        level = "(CASE WHEN tokens + (? - ts) * ? > ? THEN ? ELSE tokens + (? - ts) * ? END)"
        level_params = (now, rate, capacity, capacity, now, rate)
        for _ in range(2):
            if await self.db.execute(f"UPDATE c2g_rate_buckets SET tokens = {level} - 1, ts = ? "
                                     f"WHERE bucket = ? AND {level} >= 1",
                                     (*level_params, now, bucket, *level_params)):
                return True
            if await self.db.fetchall("SELECT bucket FROM c2g_rate_buckets WHERE bucket = ?", (bucket,)):
                return False
            if await self.db.execute("INSERT INTO c2g_rate_buckets (bucket, tokens, ts) VALUES (?, ?, ?) "
                                     "ON CONFLICT (bucket) DO NOTHING", (bucket, capacity - 1, now)):
                return True
        return False


def webhook_bucket(agent_id: str) -> str:
    return f"webhook:{agent_id}"


def _like(text: str) -> str:
    """`text` as a literal inside a LIKE pattern: its own %, _ and \\ escaped (the queries say ESCAPE '\\')."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


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
            await db.setup(SCHEMA, saver, ADDED_COLUMNS)
            yield Store(db, saver, url)
        finally:
            await db.close()
        return
    from canvas2graph.runtime.run.checkpoint import open_checkpointer
    path = sqlite_path(url)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    async with open_checkpointer(path) as saver:     # the saver has set its tables up
        db = _Sqlite(saver)
        await db.setup(SCHEMA, ADDED_COLUMNS)
        yield Store(db, saver, url)

"""Agents, sessions and API tokens, in the same database as the checkpoints.

`open_store(url)` opens one database for everything the server keeps: a SQLite file (the default) or
PostgreSQL (`postgresql://...`, which several server processes can share). LangGraph's checkpointer
keeps the graph state of each session (thread id = session id); these tables keep what RAGFlow's
API shows around it: tenants' tokens, agents (title + DSL), sessions (the DSL they run, the message
log) and, per session, a *lease*: which server process is running a turn on it, so that two
processes (or two requests) never run one session at once.

`Store` gathers the tables, each kept in a module beside this one: `store_tokens.py`, `store_agents.py`
(agents and tags), `store_versions.py`, `store_sessions.py` (sessions and message logs),
`store_leases.py` (leases and cancellation), `store_webhooks.py` (webhook calls, events and rate-limit
buckets), `store_turns.py` (every turn asked for, as the job engine runs it), `store_schedules.py` (agents
run on a cron expression), `store_a2a.py` (A2A tasks and their recent events), `store_mcp.py` (MCP sessions, so
that any server process serves any of them); `store_records.py` holds the records they hand out and
`store_sql.py` the SQLite and PostgreSQL back ends. The names other modules use are importable from here.
"""
from __future__ import annotations

import os
from contextlib import asynccontextmanager
from typing import AsyncIterator

from canvas2graph.runtime.run.checkpoint import is_postgres
from canvas2graph.server.backend.store_a2a import A2A_SCHEMA, A2ATables, A2ATaskRow
from canvas2graph.server.backend.store_agents import AgentTables
from canvas2graph.server.backend.store_leases import LEASE_SECONDS, LeaseTables, lease_owner_is_dead, process_owner
from canvas2graph.server.backend.store_mcp import McpTables
from canvas2graph.server.backend.store_records import Agent, Session, StoreError, Version, WebhookCall, normalize_tags, now_ms
from canvas2graph.server.backend.store_sessions import SessionTables
from canvas2graph.server.backend.store_sql import PostgresTables, SqliteTables
from canvas2graph.server.backend.store_tokens import TOKEN_PREFIX, TokenTables
from canvas2graph.server.backend.store_schedules import SCHEMA as SCHEDULES_SCHEMA, Schedule, ScheduleTables
from canvas2graph.server.backend.store_turns import SCHEMA as TURNS_SCHEMA, TurnTables
from canvas2graph.server.backend.store_versions import MAX_DRAFT_VERSIONS, VersionTables
from canvas2graph.server.backend.store_webhooks import WEBHOOK_CALLS_KEPT, WebhookTables, webhook_bucket

__all__ = ["A2ATaskRow", "ADDED_COLUMNS", "Agent", "LEASE_SECONDS", "MAX_DRAFT_VERSIONS", "SCHEMA", "Schedule",
           "Session", "Store",
           "StoreError", "TOKEN_PREFIX", "Version", "WEBHOOK_CALLS_KEPT", "WebhookCall", "lease_owner_is_dead",
           "normalize_tags", "now_ms", "open_store", "process_owner", "sqlite_path", "webhook_bucket"]

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
    # a session's message log, a row per message, so that logging one costs the same at the thousandth turn as at
    # the first (the session row's `messages` keeps those it was created with, and an older database's log)
    """CREATE TABLE IF NOT EXISTS c2g_session_messages (
        session_id TEXT NOT NULL, seq INTEGER NOT NULL, message_id TEXT, role TEXT, message TEXT NOT NULL,
        reference TEXT, PRIMARY KEY (session_id, seq))""",
    "CREATE UNIQUE INDEX IF NOT EXISTS c2g_session_messages_id ON c2g_session_messages (session_id, message_id, role)",
    "CREATE INDEX IF NOT EXISTS c2g_session_messages_message ON c2g_session_messages (message_id)",
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
    *TURNS_SCHEMA,
    *SCHEDULES_SCHEMA,
    # each turn's events, where every process reads them (server/backend/jobs/event_log.py)
    """CREATE TABLE IF NOT EXISTS c2g_turn_events (
        turn_id TEXT NOT NULL, seq INTEGER NOT NULL, n INTEGER NOT NULL, events TEXT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL, PRIMARY KEY (turn_id, seq))""",
    *A2A_SCHEMA,
    """CREATE TABLE IF NOT EXISTS c2g_mcp_sessions (
        id TEXT PRIMARY KEY, tenant TEXT NOT NULL, protocol_version TEXT NOT NULL, client TEXT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL, seen_at DOUBLE PRECISION NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS c2g_mcp_sessions_seen ON c2g_mcp_sessions (seen_at)",
    """CREATE TABLE IF NOT EXISTS c2g_mcp_conversations (
        mcp_session TEXT NOT NULL, agent_id TEXT NOT NULL, session_id TEXT NOT NULL, pause TEXT,
        call_id TEXT, call_owner TEXT, asking INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (mcp_session, agent_id))""",
    """CREATE TABLE IF NOT EXISTS c2g_mcp_replies (
        id TEXT PRIMARY KEY, mcp_session TEXT NOT NULL, owner TEXT NOT NULL, message TEXT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS c2g_mcp_replies_owner ON c2g_mcp_replies (mcp_session, owner)",
]

# Columns added to tables after their first release: (table, column, definition). A database made by an
# earlier version gets them when a store opens it (CREATE TABLE IF NOT EXISTS leaves old tables as they are).
ADDED_COLUMNS = [
    ("c2g_agents", "tags", "TEXT NOT NULL DEFAULT ''"),
    ("c2g_agents", "canvas_type", "TEXT"),
    ("c2g_sessions", "version_id", "TEXT"),
    ("c2g_sessions", "version_title", "TEXT"),
    ("c2g_turns", "queue", "TEXT"),
]


class Store(TokenTables, AgentTables, VersionTables, SessionTables, LeaseTables, WebhookTables, TurnTables,
            ScheduleTables, A2ATables, McpTables):
    """Tenants' tokens, agents and sessions; `checkpointer` keeps the sessions' graph state."""

    def __init__(self, db, checkpointer, url: str):
        self.db = db
        self.checkpointer = checkpointer
        self.url = url


def sqlite_path(url: str) -> str:
    return url[len("sqlite:///"):] if url.startswith("sqlite:///") else url


@asynccontextmanager
async def open_store(url: str, *, pool_size: int = 8) -> AsyncIterator[Store]:
    """The store and its checkpointer on one database: a SQLite path (or sqlite:///path) or a postgresql:// URL
    (with a pool of at most `pool_size` connections, shared by the store, the checkpointer and the job engine)."""
    if not url or url == ":memory:":
        raise StoreError("the server needs a database that outlives it: a SQLite file or a postgresql:// URL")
    if is_postgres(url):
        from canvas2graph.runtime.run.postgres_saver import CanvasPostgresSaver
        db = PostgresTables(url, max_size=pool_size)
        await db.open()
        try:
            saver = CanvasPostgresSaver(conn=db.pool)
            await db.setup(SCHEMA, saver, ADDED_COLUMNS)
            yield Store(db, saver, url)
        finally:
            await db.close()
        return
    from canvas2graph.runtime.run.checkpoint import open_checkpointer
    path = sqlite_path(url)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    async with open_checkpointer(path) as saver:     # the saver has set its tables up
        db = SqliteTables(saver)
        await db.setup(SCHEMA, ADDED_COLUMNS)
        yield Store(db, saver, url)

"""A server's sessions come to an end: deleted in bulk without stopping the server, expired by
`serve --session-ttl`. Real `canvas2graph serve` processes on 127.0.0.1, on SQLite and PostgreSQL."""
from __future__ import annotations

import asyncio
import threading
import time
import uuid

import httpx
import pytest

from langgraph.checkpoint.base import empty_checkpoint
from canvas2graph.runtime.run.checkpoint import is_postgres
from canvas2graph.server.backend.store import open_store
from tests import forkserver
from tests.server.helpers import CHAT_DSL, Api, Server, make_token

MANY = 10_000


@pytest.fixture(params=["sqlite", "postgres"])
def db(request, tmp_path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "server.db")
    from tests.runtime.checkpointers import postgres_url
    return postgres_url()


async def many_sessions(db: str, tenant: str, count: int) -> tuple[str, list[str]]:
    """An agent of `tenant` with `count` sessions, each with a stored row, two checkpoints and a pending
    write: one made through the store and LangGraph's saver, the others copies of its rows under new
    ids (10,000 real turns would take many minutes)."""
    async with open_store(db) as store:
        agent = await store.create_agent(tenant, f"many-{uuid.uuid4().hex[:6]}", CHAT_DSL)
        first = (await store.create_session(tenant, source="agent", dsl=CHAT_DSL, agent_id=agent.id)).id
        config = {"configurable": {"thread_id": first, "checkpoint_ns": ""}}
        for step in range(2):
            config = await store.checkpointer.aput(config, empty_checkpoint(), {"source": "loop", "step": step}, {})
        await store.checkpointer.aput_writes(config, [("history", [["user", "hi"]])], "task-1")
        ids = [first] + [str(uuid.uuid4()) for _ in range(count - 1)]
        tables = {"c2g_sessions": "id", "checkpoints": "thread_id",
                  **({"checkpoint_blobs": "thread_id", "checkpoint_writes": "thread_id"} if is_postgres(db)
                     else {"writes": "thread_id"})}
        for table, key in tables.items():
            rows = await store.db.fetchall(f"SELECT * FROM {table} WHERE {key} = ?", (first,))
            if not rows:                # an empty checkpoint stores no channel blob
                continue
            columns = list(rows[0])
            copies = [tuple(sid if c == key else row[c] for c in columns) for sid in ids[1:] for row in rows]
            await insert_many(store, db, f"INSERT INTO {table} ({', '.join(columns)}) VALUES "
                                         f"({', '.join(['%s' if is_postgres(db) else '?'] * len(columns))})", copies)
        return agent.id, ids


async def insert_many(store, db: str, sql: str, rows: list[tuple]) -> None:
    if is_postgres(db):
        from psycopg.types.json import Jsonb
        rows = [tuple(Jsonb(v) if isinstance(v, dict) else v for v in row) for row in rows]
        async with store.db.pool.connection() as conn:
            async with conn.cursor() as cursor:
                await cursor.executemany(sql, rows)
        return
    with store.checkpointer.lock:
        store.checkpointer.conn.executemany(sql, rows)
        store.checkpointer.conn.commit()


async def rows_left(db: str, ids: list[str]) -> int:
    async with open_store(db) as store:
        left = 0
        for i in range(0, len(ids), 500):
            marks = ", ".join("?" * len(ids[i:i + 500]))
            for table in ("c2g_sessions", "checkpoints"):
                column = "id" if table == "c2g_sessions" else "thread_id"
                rows = await store.db.fetchall(f"SELECT COUNT(*) AS n FROM {table} WHERE {column} IN ({marks})",
                                               tuple(ids[i:i + 500]))
                left += rows[0]["n"]
        return left


def test_deleting_10000_sessions_at_once_leaves_the_server_answering_meanwhile(db, tmp_path):
    tenant = f"bulk-{uuid.uuid4().hex[:6]}"
    agent_id, ids = asyncio.run(many_sessions(db, tenant, MANY))
    token = make_token(db, tenant)
    with Server(db, tmp_path) as server:
        api = Api(server, token)
        reply: dict = {}

        def delete_all() -> None:
            with httpx.Client(base_url=server.url + "/api/v1", timeout=600,
                              headers={"Authorization": f"Bearer {token}"}) as client:
                reply.update(client.request("DELETE", f"/agents/{agent_id}/sessions", json={"delete_all": True}).json())

        deleting = threading.Thread(target=delete_all)
        deleting.start()
        answered_meanwhile = 0
        deadline = time.monotonic() + 600
        while deleting.is_alive() and time.monotonic() < deadline:
            agents = api.call("GET", "/agents", params={"page": 1, "page_size": 5})
            if deleting.is_alive():          # the answer came while the deletion was still running
                answered_meanwhile += 1
            assert agents["code"] == 0, agents
        deleting.join(10)
        assert not deleting.is_alive(), "the bulk delete did not end"
        assert reply == {"code": 0, "data": True, "message": "success"} or reply.get("code") == 0, reply
        assert answered_meanwhile >= 1, "no other request was answered while 10,000 sessions were deleted"
        assert server.proc.poll() is None                       # the server is still up
        assert api.ok("GET", f"/agents/{agent_id}/sessions") == []
        api.close()
    assert asyncio.run(rows_left(db, ids)) == 0


def test_serve_with_a_session_ttl_deletes_idle_sessions(tmp_path):
    db = str(tmp_path / "server.db")
    tenant = f"ttl-{uuid.uuid4().hex[:6]}"
    token = make_token(db, tenant)
    with Server(db, tmp_path, None, "--session-ttl", "1s", "--log-level", "info") as server:
        api = Api(server, token)
        agent_id = api.agent(CHAT_DSL)
        # the turn makes its session (a session made first could expire before a loaded machine sends the turn)
        events = api.stream("/agents/chat/completions", {"agent_id": agent_id, "query": "hello", "stream": True})
        session_id = events[0]["session_id"]
        assert events[-1]["data"] is True or events
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and api.ok("GET", f"/agents/{agent_id}/sessions"):
            time.sleep(0.5)
        assert api.ok("GET", f"/agents/{agent_id}/sessions") == []
        api.close()
    assert asyncio.run(rows_left(db, [session_id])) == 0
    assert "sessions idle for 1 s or more are deleted (--session-ttl)" in server.log.read_text()


def test_serve_refuses_a_session_ttl_that_is_no_duration(tmp_path):
    import subprocess
    done = subprocess.run([*forkserver.python(), "-m", "canvas2graph.cli", "serve", "--db", str(tmp_path / "s.db"),
                           "--session-ttl", "forever"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "--session-ttl: 'forever' is not a duration" in done.stderr


def test_is_postgres_names_the_stores_the_lifecycle_knows():
    assert is_postgres("postgresql://x/y") and not is_postgres("/tmp/s.db")

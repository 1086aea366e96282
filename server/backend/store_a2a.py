"""A2A tasks in the store, so that every server process sharing the database sees them.

`server/protocols/a2a_tasks.py` stores `a2a-sdk`'s tasks here (each serialized by protobuf, opaque to this
module) with the columns it filters and orders by: the tenant and agent the task belongs to, its context,
its state, its status timestamp and a version that every write increments. A write names the version it
read (compare-and-set), so two processes writing one task never overwrite each other unnoticed.

Beside the tasks, the events that changed them (`c2g_a2a_events`, keyed by task and version): a
process streaming a task that runs in another process reads them (`SubscribeToTask`). They are only
needed while someone follows the task, so they are kept minutes, tasks days (`expire_a2a`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from canvas2graph.server.backend.store_sql import PostgresTables, is_integrity_error

# BYTEA is PostgreSQL's byte string; SQLite gives the name NUMERIC affinity, which stores a byte string
# as the BLOB it is (only text and numbers are ever converted), so one statement serves both.
A2A_SCHEMA = [
    """CREATE TABLE IF NOT EXISTS c2g_a2a_tasks (
        id TEXT PRIMARY KEY, tenant TEXT NOT NULL, agent_id TEXT NOT NULL, context_id TEXT NOT NULL,
        state TEXT NOT NULL, status_ns BIGINT NOT NULL, version BIGINT NOT NULL, task BYTEA NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS c2g_a2a_tasks_list ON c2g_a2a_tasks (tenant, agent_id, status_ns, id)",
    "CREATE INDEX IF NOT EXISTS c2g_a2a_tasks_updated ON c2g_a2a_tasks (updated_at)",
    "CREATE INDEX IF NOT EXISTS c2g_a2a_tasks_context ON c2g_a2a_tasks (context_id)",
    """CREATE TABLE IF NOT EXISTS c2g_a2a_events (
        task_id TEXT NOT NULL, version BIGINT NOT NULL, event BYTEA NOT NULL, created_at DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (task_id, version))""",
    "CREATE INDEX IF NOT EXISTS c2g_a2a_events_created ON c2g_a2a_events (created_at)",
]

_COLUMNS = "id, tenant, agent_id, context_id, state, status_ns, version, task, updated_at"


@dataclass
class A2ATaskRow:
    """One stored task: who it belongs to, what lists filter and order by, and the task's bytes."""
    id: str
    tenant: str
    agent_id: str
    context_id: str
    state: str              # the TaskState's name, e.g. TASK_STATE_WORKING
    status_ns: int          # the status timestamp in nanoseconds, -1 without one (listed last)
    version: int            # 1 for the first write, one more for each write after it
    task: bytes
    updated_at: float       # when it was last written (time.time()), what expiry goes by


def _row(found: dict) -> A2ATaskRow:
    return A2ATaskRow(**{**found, "task": bytes(found["task"])})


class A2ATables:
    """`Store`'s A2A tasks and their recent events."""

    db: Any

    async def a2a_task(self, tenant: str, agent_id: str, task_id: str) -> A2ATaskRow | None:
        """The task, when it belongs to this tenant's agent (another's is not found, as if it did not exist)."""
        rows = await self.db.fetchall(f"SELECT {_COLUMNS} FROM c2g_a2a_tasks WHERE id = ? AND tenant = ? AND agent_id = ?",
                                      (task_id, tenant, agent_id))
        return _row(rows[0]) if rows else None

    async def a2a_task_by_id(self, task_id: str) -> A2ATaskRow | None:
        """The task whoever owns it: for a stream whose subscriber was already checked against its owner."""
        rows = await self.db.fetchall(f"SELECT {_COLUMNS} FROM c2g_a2a_tasks WHERE id = ?", (task_id,))
        return _row(rows[0]) if rows else None

    async def a2a_task_head(self, task_id: str) -> tuple[int, str, str] | None:
        """(version, state, context id) of a task whoever owns it, without its bytes: what a stream that
        follows the task (its subscriber already checked against the owner) polls."""
        rows = await self.db.fetchall("SELECT version, state, context_id FROM c2g_a2a_tasks WHERE id = ?", (task_id,))
        return (int(rows[0]["version"]), rows[0]["state"], rows[0]["context_id"]) if rows else None

    async def insert_a2a_task(self, row: A2ATaskRow) -> bool:
        """Store a task's first version; False when its id is taken (someone wrote it first)."""
        try:
            await self.db.execute(f"INSERT INTO c2g_a2a_tasks ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                                  (row.id, row.tenant, row.agent_id, row.context_id, row.state, row.status_ns,
                                   row.version, row.task, row.updated_at))
        except Exception as e:
            if is_integrity_error(e):
                return False
            raise
        return True

    async def replace_a2a_task(self, row: A2ATaskRow, prev_version: int, event: bytes | None = None) -> bool:
        """Write `row` over the stored task if that is still at `prev_version`, logging `event` as the one that
        made `row.version`; False when another write came first (or the task is gone)."""
        update = ("UPDATE c2g_a2a_tasks SET context_id = ?, state = ?, status_ns = ?, version = ?, task = ?, "
                  "updated_at = ? WHERE id = ? AND tenant = ? AND agent_id = ? AND version = ?")
        params = (row.context_id, row.state, row.status_ns, row.version, row.task, row.updated_at,
                  row.id, row.tenant, row.agent_id, prev_version)
        if event is None:
            return bool(await self.db.execute(update, params))
        if isinstance(self.db, PostgresTables):
            # one round trip instead of two (a write per streamed chunk: half a millisecond each), and the
            # event is logged only by the write that took place
            return bool(await self.db.execute(
                f"WITH written AS ({update} RETURNING id) INSERT INTO c2g_a2a_events (task_id, version, event, "
                "created_at) SELECT id, ?, ?, ? FROM written ON CONFLICT DO NOTHING",
                (*params, row.version, event, row.updated_at)))
        if not await self.db.execute(update, params):      # SQLite: tens of microseconds a statement
            return False
        await self.add_a2a_event(row.id, row.version, event, row.updated_at)
        return True

    async def list_a2a_tasks(self, tenant: str, agent_id: str, *, context_id: str | None = None,
                             state: str | None = None, since_ns: int | None = None,
                             after: tuple[int, str] | None = None, limit: int = 50) -> tuple[list[A2ATaskRow], int]:
        """A page of the agent's tasks, newest status first (then by id, descending), and how many match in
        all. `after` is the (status_ns, id) of the previous page's last task: the page starts after it."""
        where, params = ["tenant = ?", "agent_id = ?"], [tenant, agent_id]
        for column, value, test in (("context_id", context_id, "="), ("state", state, "="),
                                    ("status_ns", since_ns, ">=")):
            if value is not None:
                where.append(f"{column} {test} ?")
                params.append(value)
        clause = " AND ".join(where)
        total = (await self.db.fetchall(f"SELECT COUNT(*) AS n FROM c2g_a2a_tasks WHERE {clause}", tuple(params)))[0]["n"]
        if after is not None:
            clause += " AND (status_ns < ? OR (status_ns = ? AND id < ?))"
            params += [after[0], after[0], after[1]]
        rows = await self.db.fetchall(f"SELECT {_COLUMNS} FROM c2g_a2a_tasks WHERE {clause} "
                                      "ORDER BY status_ns DESC, id DESC LIMIT ?", (*params, int(limit)))
        return [_row(r) for r in rows], int(total)

    async def delete_a2a_task(self, tenant: str, agent_id: str, task_id: str) -> bool:
        deleted = await self.db.execute("DELETE FROM c2g_a2a_tasks WHERE id = ? AND tenant = ? AND agent_id = ?",
                                        (task_id, tenant, agent_id))
        if deleted:
            await self.db.execute("DELETE FROM c2g_a2a_events WHERE task_id = ?", (task_id,))
        return bool(deleted)

    async def delete_a2a_tasks_of(self, tenant: str, agent_id: str) -> None:
        """Forget an agent's tasks (the agent is being deleted)."""
        await self.db.execute("DELETE FROM c2g_a2a_tasks WHERE tenant = ? AND agent_id = ?", (tenant, agent_id))

    async def delete_a2a_tasks_in(self, context_ids: list[str]) -> None:
        """Forget the tasks of these contexts (their sessions are being deleted, with every trace of them)."""
        if context_ids:
            marks = ", ".join("?" * len(context_ids))
            await self.db.execute(f"DELETE FROM c2g_a2a_tasks WHERE context_id IN ({marks})", tuple(context_ids))

    async def add_a2a_event(self, task_id: str, version: int, event: bytes, created_at: float) -> None:
        """Log the event that made `version` of the task (once: a second one for that version is the same)."""
        await self.db.execute("INSERT INTO c2g_a2a_events (task_id, version, event, created_at) VALUES (?, ?, ?, ?) "
                              "ON CONFLICT DO NOTHING", (task_id, version, event, created_at))

    async def a2a_events(self, task_id: str, after_version: int, limit: int = 200) -> list[tuple[int, bytes]]:
        """(version, event) of the task's logged events after `after_version`, oldest first."""
        rows = await self.db.fetchall("SELECT version, event FROM c2g_a2a_events WHERE task_id = ? AND version > ? "
                                      "ORDER BY version LIMIT ?", (task_id, after_version, int(limit)))
        return [(int(r["version"]), bytes(r["event"])) for r in rows]

    async def expire_a2a(self, tasks_before: float, events_before: float) -> tuple[int, int]:
        """Forget tasks last written before `tasks_before` and events logged before `events_before`
        (two indexed deletes); (tasks, events) deleted."""
        tasks = await self.db.execute("DELETE FROM c2g_a2a_tasks WHERE updated_at < ?", (tasks_before,))
        events = await self.db.execute("DELETE FROM c2g_a2a_events WHERE created_at < ?", (events_before,))
        return tasks, events

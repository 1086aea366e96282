"""Schedules in the store: agents run on a cron expression, by RAGFlow's API (`/agents/{id}/schedules`) or as
LangGraph's crons (`/langgraph/runs/crons`). The job engine's `c2g.schedules` task fires the due ones
(server/backend/schedules.py); `next_run_at` moves on with a compare-and-set, so each firing happens once
however many processes look."""
from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

SCHEMA = [
    """CREATE TABLE IF NOT EXISTS c2g_schedules (
        id TEXT PRIMARY KEY, tenant TEXT NOT NULL, kind TEXT NOT NULL, agent_id TEXT NOT NULL, thread_id TEXT,
        schedule TEXT NOT NULL, timezone TEXT, payload TEXT NOT NULL, metadata TEXT NOT NULL,
        enabled INTEGER NOT NULL, end_time DOUBLE PRECISION, on_run_completed TEXT,
        next_run_at DOUBLE PRECISION, last_run_at DOUBLE PRECISION, last_turn_id TEXT, last_session_id TEXT,
        last_error TEXT, runs INTEGER NOT NULL DEFAULT 0,
        created_at DOUBLE PRECISION NOT NULL, updated_at DOUBLE PRECISION NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS c2g_schedules_due ON c2g_schedules (enabled, next_run_at)",
    "CREATE INDEX IF NOT EXISTS c2g_schedules_agent ON c2g_schedules (tenant, agent_id, created_at)",
]

_UPDATABLE = {"schedule", "timezone", "payload", "metadata", "enabled", "end_time", "on_run_completed",
              "next_run_at", "last_turn_id", "last_session_id", "last_error"}


@dataclass
class Schedule:
    id: str
    tenant: str
    kind: str                           # "agent" (RAGFlow's API) or "langgraph" (a LangGraph cron)
    agent_id: str
    schedule: str                       # a cron expression (5 fields; a 6th is seconds)
    payload: dict                       # agent: {"query", "inputs", "user_id"}; langgraph: the run's body
    thread_id: str | None = None        # the session its runs continue (None: a new one each time)
    timezone: str | None = None         # IANA name; None is UTC
    metadata: dict = field(default_factory=dict)
    enabled: bool = True
    end_time: float | None = None       # no firing after this
    on_run_completed: str | None = None     # a LangGraph cron without a thread: "delete" or "keep" its threads
    next_run_at: float | None = None
    last_run_at: float | None = None
    last_turn_id: str | None = None
    last_session_id: str | None = None
    last_error: str | None = None
    runs: int = 0
    created_at: float = 0.0
    updated_at: float = 0.0


def _schedule(row: dict) -> Schedule:
    return Schedule(id=row["id"], tenant=row["tenant"], kind=row["kind"], agent_id=row["agent_id"],
                    schedule=row["schedule"], payload=json.loads(row["payload"]), thread_id=row["thread_id"],
                    timezone=row["timezone"], metadata=json.loads(row["metadata"]), enabled=bool(row["enabled"]),
                    end_time=row["end_time"], on_run_completed=row["on_run_completed"],
                    next_run_at=row["next_run_at"], last_run_at=row["last_run_at"], last_turn_id=row["last_turn_id"],
                    last_session_id=row["last_session_id"], last_error=row["last_error"], runs=row["runs"],
                    created_at=row["created_at"], updated_at=row["updated_at"])


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


class ScheduleTables:
    """`Store`'s schedules."""

    db: Any

    async def add_schedule(self, schedule: Schedule) -> Schedule:
        now = time.time()
        schedule.id = schedule.id or str(uuid.uuid4())
        schedule.created_at = schedule.updated_at = now
        await self.db.execute(
            "INSERT INTO c2g_schedules (id, tenant, kind, agent_id, thread_id, schedule, timezone, payload, metadata, "
            "enabled, end_time, on_run_completed, next_run_at, created_at, updated_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (schedule.id, schedule.tenant, schedule.kind, schedule.agent_id, schedule.thread_id, schedule.schedule,
             schedule.timezone, _json(schedule.payload), _json(schedule.metadata), int(schedule.enabled),
             schedule.end_time, schedule.on_run_completed, schedule.next_run_at, now, now))
        return schedule

    async def get_schedule(self, tenant: str, schedule_id: str) -> Schedule | None:
        rows = await self.db.fetchall("SELECT * FROM c2g_schedules WHERE tenant = ? AND id = ?", (tenant, schedule_id))
        return _schedule(rows[0]) if rows else None

    async def list_schedules(self, tenant: str, *, kind: str | None = None, agent_id: str | None = None,
                             thread_id: str | None = None, enabled: bool | None = None) -> list[Schedule]:
        where, params = "tenant = ?", [tenant]
        for column, value in (("kind", kind), ("agent_id", agent_id), ("thread_id", thread_id)):
            if value is not None:
                where, params = where + f" AND {column} = ?", params + [value]
        if enabled is not None:
            where, params = where + " AND enabled = ?", params + [int(enabled)]
        rows = await self.db.fetchall(f"SELECT * FROM c2g_schedules WHERE {where} ORDER BY created_at, id",
                                      tuple(params))
        return [_schedule(r) for r in rows]

    async def update_schedule(self, tenant: str, schedule_id: str, **fields: Any) -> Schedule | None:
        if set(fields) - _UPDATABLE:
            raise ValueError(f"cannot update schedule fields {sorted(set(fields) - _UPDATABLE)}")
        values = {k: (_json(v) if k in ("payload", "metadata") else int(v) if k == "enabled" else v)
                  for k, v in fields.items()}
        values["updated_at"] = time.time()
        assignments = ", ".join(f"{name} = ?" for name in values)
        await self.db.execute(f"UPDATE c2g_schedules SET {assignments} WHERE tenant = ? AND id = ?",
                              (*values.values(), tenant, schedule_id))
        return await self.get_schedule(tenant, schedule_id)

    async def delete_schedule(self, tenant: str, schedule_id: str) -> bool:
        return bool(await self.db.execute("DELETE FROM c2g_schedules WHERE tenant = ? AND id = ?", (tenant, schedule_id)))

    async def delete_agent_schedules(self, tenant: str, agent_id: str) -> None:
        await self.db.execute("DELETE FROM c2g_schedules WHERE tenant = ? AND agent_id = ?", (tenant, agent_id))

    async def due_schedules(self, now: float, limit: int = 100) -> list[Schedule]:
        rows = await self.db.fetchall("SELECT * FROM c2g_schedules WHERE enabled = 1 AND next_run_at <= ? "
                                      "ORDER BY next_run_at LIMIT ?", (now, limit))
        return [_schedule(r) for r in rows]

    async def advance_schedule(self, schedule_id: str, was: float, next_run_at: float | None, now: float) -> bool:
        """Move a due schedule to its next firing, if it is still at `was`: True for the one process that fires
        it now (`next_run_at` None ends it: it is disabled)."""
        return bool(await self.db.execute(
            "UPDATE c2g_schedules SET next_run_at = ?, enabled = ?, last_run_at = ?, runs = runs + 1, updated_at = ? "
            "WHERE id = ? AND enabled = 1 AND next_run_at = ?",
            (next_run_at, int(next_run_at is not None), now, now, schedule_id, was)))

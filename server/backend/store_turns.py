"""Turns in the store: every turn a session was asked for, from queued to ended, whichever process runs it.

A turn is a durable job (server/backend/jobs/): its row here says what was asked (the request, as JSON),
who runs it (`owner`, the worker process), how often it was taken up (`attempts`: more than one after a
worker died mid-turn) and how it ended. The job engine's own job says only *when* it runs; this row is
what the API processes, the workers and the step trace agree on. The turn's events live beside it in
the event log (`jobs/event_log.py`).

Statuses: `queued`, `running` (the open ones), then `finished`, `paused` (a form waits), `stopped` (a
component failed), `cancelled`, `failed` (the engine or a worker broke it, `error` says how), `rejected`
(it could not start: a paused session without its inputs, a DSL that no longer compiles), `interrupted`
(LangGraph's `multitask_strategy="interrupt"` stopped it) or `rolled_back` (`"rollback"`: stopped, and
its steps deleted).
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

OPEN = ("queued", "running")
ENDED = ("finished", "paused", "stopped", "cancelled", "failed", "rejected", "interrupted", "rolled_back")

SCHEMA = [
    """CREATE TABLE IF NOT EXISTS c2g_turns (
        id TEXT PRIMARY KEY, session_id TEXT NOT NULL, tenant TEXT NOT NULL, source TEXT NOT NULL,
        status TEXT NOT NULL, request TEXT NOT NULL, options TEXT NOT NULL, message_id TEXT NOT NULL, queue TEXT,
        job_id BIGINT, owner TEXT, attempts INTEGER NOT NULL DEFAULT 0, error TEXT, cancel TEXT,
        created_at DOUBLE PRECISION NOT NULL, started_at DOUBLE PRECISION, ended_at DOUBLE PRECISION)""",
    "CREATE INDEX IF NOT EXISTS c2g_turns_session ON c2g_turns (session_id, created_at)",
    "CREATE INDEX IF NOT EXISTS c2g_turns_open ON c2g_turns (status, created_at) WHERE status IN ('queued', 'running')",
    "CREATE INDEX IF NOT EXISTS c2g_turns_ended ON c2g_turns (ended_at)",
]

_UPDATABLE = {"status", "job_id", "owner", "attempts", "error", "cancel", "started_at", "ended_at", "options"}


@dataclass
class TurnRecord:
    id: str
    session_id: str
    tenant: str
    source: str                       # who asked: "agent" (RAGFlow's routes), "openai", "langgraph", "webhook", ...
    status: str
    request: dict                     # runtime.run.runner.TurnRequest.to_dict()
    message_id: str
    options: dict = field(default_factory=dict)     # what the protocol adds (LangGraph: metadata, strategy, ...)
    job_id: int | None = None
    owner: str | None = None
    attempts: int = 0
    error: str | None = None
    cancel: str | None = None         # a cancel asked for: "cancel", "interrupt" or "rollback"
    queue: str | None = None          # the job engine's queue it is run from (serve/worker --queue)
    created_at: float = 0.0
    started_at: float | None = None
    ended_at: float | None = None

    @property
    def open(self) -> bool:
        return self.status in OPEN


def _record(row: dict) -> TurnRecord:
    return TurnRecord(id=row["id"], session_id=row["session_id"], tenant=row["tenant"], source=row["source"],
                      status=row["status"], request=json.loads(row["request"]), message_id=row["message_id"],
                      options=json.loads(row["options"] or "{}"), job_id=row["job_id"], owner=row["owner"],
                      attempts=row["attempts"], error=row["error"], cancel=row["cancel"], queue=row["queue"],
                      created_at=row["created_at"], started_at=row["started_at"], ended_at=row["ended_at"])


def _marks(values: list | tuple) -> str:
    return ", ".join("?" * len(values))


class TurnTables:
    """`Store`'s turns."""

    db: Any

    async def add_turn(self, turn: TurnRecord) -> None:
        turn.created_at = turn.created_at or time.time()
        await self.db.execute(
            "INSERT INTO c2g_turns (id, session_id, tenant, source, status, request, options, message_id, job_id, "
            "owner, attempts, error, cancel, created_at, queue) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (turn.id, turn.session_id, turn.tenant, turn.source, turn.status,
             json.dumps(turn.request, ensure_ascii=False, default=str),
             json.dumps(turn.options, ensure_ascii=False, default=str), turn.message_id, turn.job_id, turn.owner,
             turn.attempts, turn.error, turn.cancel, turn.created_at, turn.queue))

    async def get_turn(self, turn_id: str, tenant: str | None = None) -> TurnRecord | None:
        if tenant is None:
            rows = await self.db.fetchall("SELECT * FROM c2g_turns WHERE id = ?", (turn_id,))
        else:
            rows = await self.db.fetchall("SELECT * FROM c2g_turns WHERE id = ? AND tenant = ?", (turn_id, tenant))
        return _record(rows[0]) if rows else None

    async def update_turn(self, turn_id: str, *, only_open: bool = False, **fields: Any) -> bool:
        """Set some of a turn's fields; with `only_open`, only while it is queued or running (False otherwise)."""
        if not fields or set(fields) - _UPDATABLE:
            raise ValueError(f"cannot update turn fields {sorted(set(fields) - _UPDATABLE)}")
        if "options" in fields:
            fields["options"] = json.dumps(fields["options"], ensure_ascii=False, default=str)
        assignments = ", ".join(f"{name} = ?" for name in fields)
        where = "id = ?" + (" AND status IN ('queued', 'running')" if only_open else "")
        return bool(await self.db.execute(f"UPDATE c2g_turns SET {assignments} WHERE {where}",
                                          (*fields.values(), turn_id)))

    async def claim_turn(self, turn_id: str, owner: str) -> TurnRecord | None:
        """Take an open turn up for running (one more attempt); None when it has ended meanwhile."""
        taken = await self.db.execute(
            "UPDATE c2g_turns SET status = 'running', owner = ?, attempts = attempts + 1, "
            "started_at = COALESCE(started_at, ?) WHERE id = ? AND status IN ('queued', 'running')",
            (owner, time.time(), turn_id))
        return await self.get_turn(turn_id) if taken else None

    async def end_turn(self, turn_id: str, status: str, error: str | None = None, *, only_queued: bool = False) -> bool:
        """Record how an open turn ended (with `only_queued`, only one that never started); False when it had
        ended already, so it is recorded once."""
        if status not in ENDED:
            raise ValueError(f"{status!r} is no end of a turn")
        where = "status = 'queued'" if only_queued else "status IN ('queued', 'running')"
        return bool(await self.db.execute(f"UPDATE c2g_turns SET status = ?, error = ?, ended_at = ? WHERE id = ? AND {where}",
                                          (status, error, time.time(), turn_id)))

    async def running_turn_rows(self, turn_ids: list[str]) -> list[dict]:
        """Who runs these turns, which attempt, and the cancels asked for: what a worker watches of its turns."""
        if not turn_ids:
            return []
        return await self.db.fetchall(f"SELECT id, owner, attempts, cancel FROM c2g_turns WHERE id IN "
                                      f"({_marks(turn_ids)})", tuple(turn_ids))

    async def open_turns(self, session_id: str | None = None, *, older_than: float | None = None,
                         queue: str | None = None) -> list[TurnRecord]:
        """Queued and running turns (of one session, of one queue), oldest first."""
        where, params = "status IN ('queued', 'running')", []
        if session_id is not None:
            where, params = where + " AND session_id = ?", [session_id]
        if queue is not None:
            where, params = where + " AND queue = ?", params + [queue]
        if older_than is not None:
            where, params = where + " AND created_at < ?", params + [older_than]
        rows = await self.db.fetchall(f"SELECT * FROM c2g_turns WHERE {where} ORDER BY created_at, id", tuple(params))
        return [_record(r) for r in rows]

    async def session_turns(self, tenant: str, session_id: str, *, source: str | None = None,
                            status: str | None = None, limit: int = 10, offset: int = 0) -> list[TurnRecord]:
        """A session's turns, newest first."""
        where, params = "tenant = ? AND session_id = ?", [tenant, session_id]
        if source is not None:
            where, params = where + " AND source = ?", params + [source]
        if status is not None:
            where, params = where + " AND status = ?", params + [status]
        rows = await self.db.fetchall(f"SELECT * FROM c2g_turns WHERE {where} ORDER BY created_at DESC, id "
                                      "LIMIT ? OFFSET ?", (*params, limit, offset))
        return [_record(r) for r in rows]

    async def last_turns(self, tenant: str, session_ids: list[str]) -> dict[str, TurnRecord]:
        """The newest turn of each session that has one (the order of `session_turns`), in one query: a sessions
        page asks for its rows' newest turns together."""
        if not session_ids:
            return {}
        rows = await self.db.fetchall(
            "SELECT t.* FROM c2g_turns t WHERE t.tenant = ? AND t.session_id IN "
            f"({_marks(session_ids)}) AND NOT EXISTS (SELECT 1 FROM c2g_turns u WHERE u.tenant = t.tenant AND "
            "u.session_id = t.session_id AND (u.created_at > t.created_at OR (u.created_at = t.created_at AND u.id < t.id)))",
            (tenant, *session_ids))
        return {r["session_id"]: _record(r) for r in rows}

    async def delete_turns(self, turn_ids: list[str]) -> None:
        if turn_ids:
            await self.db.execute(f"DELETE FROM c2g_turns WHERE id IN ({_marks(turn_ids)})", tuple(turn_ids))

    async def delete_session_turns(self, session_ids: list[str]) -> list[str]:
        """Forget the turns of deleted sessions; returns their ids (their events go too)."""
        if not session_ids:
            return []
        rows = await self.db.fetchall(f"SELECT id FROM c2g_turns WHERE session_id IN ({_marks(session_ids)})",
                                      tuple(session_ids))
        ids = [r["id"] for r in rows]
        await self.db.execute(f"DELETE FROM c2g_turns WHERE session_id IN ({_marks(session_ids)})", tuple(session_ids))
        return ids

    async def ended_turns(self, before: float, limit: int = 1000) -> list[str]:
        """Ids of turns that ended before `before` (their kept events may go)."""
        rows = await self.db.fetchall("SELECT id FROM c2g_turns WHERE ended_at < ? ORDER BY ended_at LIMIT ?",
                                      (before, limit))
        return [r["id"] for r in rows]

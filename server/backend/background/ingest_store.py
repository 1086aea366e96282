"""Ingestion runs kept per tenant in the server's database (`c2g_ingestions`), so that any API process lists them,
streams one and cancels one, whichever worker runs it.

A row is an ingestion asked for (`POST /datasets/{id}/ingest`): the dataset, how many files, its `request` (the
pipeline DSL, the uploaded files' ids and names, the embedding model), how it ended (`finished` with its `report`,
the totals of `ingest_finished`; `failed` with its `error`; `cancelled`) and the run columns of runs.py. Its events
are in the event log under its id (server/backend/jobs/event_log.py) while it runs and `EVENTS_KEPT_SECONDS` after.
"""
from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

from canvas2graph.server.backend.background.runs import RunTable
from canvas2graph.server.backend.store import now_ms

__all__ = ["Ingestion", "IngestionStore"]

SCHEMA = [
    """CREATE TABLE IF NOT EXISTS c2g_ingestions (
        id TEXT PRIMARY KEY, tenant TEXT NOT NULL, dataset_id TEXT NOT NULL, status TEXT NOT NULL, error TEXT,
        files INTEGER NOT NULL, report TEXT, request TEXT, job_id BIGINT, owner TEXT, lease_until DOUBLE PRECISION,
        attempts INTEGER NOT NULL DEFAULT 0, cancel TEXT, events_kept INTEGER NOT NULL DEFAULT 1,
        create_time BIGINT NOT NULL, update_time BIGINT NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS c2g_ingestions_dataset ON c2g_ingestions (tenant, dataset_id, create_time)",
    "CREATE INDEX IF NOT EXISTS c2g_ingestions_running ON c2g_ingestions (status) WHERE status = 'running'",
    "CREATE INDEX IF NOT EXISTS c2g_ingestions_events ON c2g_ingestions (update_time) WHERE events_kept = 1",
]
_COLUMNS = "id, tenant, dataset_id, status, error, files, report, create_time, update_time"


@dataclass
class Ingestion:
    id: str
    tenant: str
    dataset_id: str
    status: str
    error: str | None
    files: int
    report: dict | None
    create_time: int
    update_time: int

    def view(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in ("id", "dataset_id", "status", "error", "files", "report", "create_time",
                                              "update_time")}


def _ingestion(row: dict) -> Ingestion:
    return Ingestion(id=row["id"], tenant=row["tenant"], dataset_id=row["dataset_id"], status=row["status"],
                     error=row["error"], files=row["files"], report=json.loads(row["report"]) if row["report"] else None,
                     create_time=row["create_time"], update_time=row["update_time"])


class IngestionStore:
    def __init__(self, store):
        self.db = store.db
        self.runs = RunTable(self.db, "c2g_ingestions")
        self._ready = False

    async def setup(self) -> None:
        if not self._ready:
            await self.db.setup(SCHEMA)
            self._ready = True

    async def create(self, tenant: str, dataset_id: str, request: dict, files: int) -> Ingestion:
        await self.setup()
        now = now_ms()
        found = Ingestion(id=uuid.uuid4().hex, tenant=tenant, dataset_id=dataset_id, status="running", error=None,
                          files=files, report=None, create_time=now, update_time=now)
        await self.db.execute(
            "INSERT INTO c2g_ingestions (id, tenant, dataset_id, status, files, request, create_time, update_time) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (found.id, tenant, dataset_id, "running", files, json.dumps(request, ensure_ascii=False), now, now))
        return found

    async def get(self, tenant: str, dataset_id: str, ingestion_id: str) -> Ingestion | None:
        await self.setup()
        rows = await self.db.fetchall(f"SELECT {_COLUMNS} FROM c2g_ingestions WHERE tenant = ? AND dataset_id = ? AND id = ?",
                                      (tenant, dataset_id, ingestion_id))
        return _ingestion(rows[0]) if rows else None

    async def find(self, ingestion_id: str) -> Ingestion | None:
        """Any tenant's (for the job that runs it)."""
        await self.setup()
        rows = await self.db.fetchall(f"SELECT {_COLUMNS} FROM c2g_ingestions WHERE id = ?", (ingestion_id,))
        return _ingestion(rows[0]) if rows else None

    async def list(self, tenant: str, dataset_id: str, limit: int = 100) -> list[Ingestion]:
        await self.setup()
        rows = await self.db.fetchall(
            f"SELECT {_COLUMNS} FROM c2g_ingestions WHERE tenant = ? AND dataset_id = ? "
            f"ORDER BY create_time DESC, id DESC LIMIT {int(limit)}", (tenant, dataset_id))
        return [_ingestion(r) for r in rows]

    async def events_to_forget(self, ended_before_ms: int) -> list[str]:
        """Ended runs whose events are still kept, ended before then."""
        await self.setup()
        rows = await self.db.fetchall("SELECT id FROM c2g_ingestions WHERE events_kept = 1 AND status <> 'running' "
                                      "AND update_time < ? LIMIT 500", (ended_before_ms,))
        return [r["id"] for r in rows]

    async def events_forgotten(self, ingestion_ids: list[str]) -> None:
        if ingestion_ids:
            marks = ", ".join("?" * len(ingestion_ids))
            await self.db.execute(f"UPDATE c2g_ingestions SET events_kept = 0 WHERE id IN ({marks})", tuple(ingestion_ids))

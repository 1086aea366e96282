"""Evaluations kept per tenant in the server's database (the store's own connection, SQLite or
PostgreSQL): one row per evaluation, its summary apart from its report so listings stay small.

A run is `running` until its report is saved (`finished`) or it fails (`failed`, with the reason). A
server stopped mid-run leaves it `running` (docs/testing.md says so): create it again.
"""
from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

from canvas2graph.server.backend.store import now_ms

__all__ = ["Evaluation", "EvaluationStore"]

SCHEMA = [
    """CREATE TABLE IF NOT EXISTS c2g_evaluations (
        id TEXT PRIMARY KEY, tenant TEXT NOT NULL, agent_id TEXT NOT NULL, version_id TEXT, compare_version_id TEXT,
        dataset TEXT NOT NULL, metric TEXT NOT NULL, judge TEXT, status TEXT NOT NULL, error TEXT,
        summary TEXT, report TEXT, create_time BIGINT NOT NULL, update_time BIGINT NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS c2g_evaluations_agent ON c2g_evaluations (tenant, agent_id, create_time)",
]


@dataclass
class Evaluation:
    id: str
    tenant: str
    agent_id: str
    version_id: str | None
    compare_version_id: str | None
    dataset: str
    metric: str
    judge: str | None
    status: str
    error: str | None
    summary: dict | None
    create_time: int
    update_time: int
    report: dict | None = None          # None in listings

    def view(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in ("id", "agent_id", "version_id", "compare_version_id", "dataset", "metric",
                                             "judge", "status", "error", "summary", "create_time", "update_time")}
        if self.report is not None:
            out["report"] = self.report
        return out


def _evaluation(row: dict, with_report: bool) -> Evaluation:
    return Evaluation(id=row["id"], tenant=row["tenant"], agent_id=row["agent_id"], version_id=row["version_id"],
                      compare_version_id=row["compare_version_id"], dataset=row["dataset"], metric=row["metric"],
                      judge=row["judge"], status=row["status"], error=row["error"],
                      summary=json.loads(row["summary"]) if row["summary"] else None,
                      create_time=row["create_time"], update_time=row["update_time"],
                      report=json.loads(row["report"]) if with_report and row.get("report") else None)


class EvaluationStore:
    def __init__(self, store):
        self.db = store.db
        self._ready = False

    async def setup(self) -> None:
        if not self._ready:
            await self.db.setup(SCHEMA)
            self._ready = True

    async def create(self, tenant: str, agent_id: str, *, dataset: str, metric: str, judge: str | None,
                     version_id: str | None, compare_version_id: str | None) -> Evaluation:
        await self.setup()
        now = now_ms()
        evaluation = Evaluation(id=uuid.uuid4().hex, tenant=tenant, agent_id=agent_id, version_id=version_id,
                                compare_version_id=compare_version_id, dataset=dataset, metric=metric, judge=judge,
                                status="running", error=None, summary=None, create_time=now, update_time=now)
        await self.db.execute(
            "INSERT INTO c2g_evaluations (id, tenant, agent_id, version_id, compare_version_id, dataset, metric, judge, "
            "status, create_time, update_time) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (evaluation.id, tenant, agent_id, version_id, compare_version_id, dataset, metric, judge, "running", now, now))
        return evaluation

    async def finish(self, evaluation_id: str, report: dict, summary: dict) -> None:
        await self.db.execute("UPDATE c2g_evaluations SET status = ?, summary = ?, report = ?, update_time = ? WHERE id = ?",
                              ("finished", json.dumps(summary, ensure_ascii=False),
                               json.dumps(report, ensure_ascii=False, default=str), now_ms(), evaluation_id))

    async def fail(self, evaluation_id: str, error: str) -> None:
        await self.db.execute("UPDATE c2g_evaluations SET status = ?, error = ?, update_time = ? WHERE id = ?",
                              ("failed", error, now_ms(), evaluation_id))

    async def get(self, tenant: str, agent_id: str, evaluation_id: str) -> Evaluation | None:
        await self.setup()
        rows = await self.db.fetchall("SELECT * FROM c2g_evaluations WHERE tenant = ? AND agent_id = ? AND id = ?",
                                      (tenant, agent_id, evaluation_id))
        return _evaluation(rows[0], True) if rows else None

    async def list(self, tenant: str, agent_id: str, limit: int = 100) -> list[Evaluation]:
        await self.setup()
        rows = await self.db.fetchall(
            "SELECT id, tenant, agent_id, version_id, compare_version_id, dataset, metric, judge, status, error, summary, "
            "create_time, update_time FROM c2g_evaluations WHERE tenant = ? AND agent_id = ? "
            f"ORDER BY create_time DESC, id DESC LIMIT {int(limit)}", (tenant, agent_id))
        return [_evaluation(r, False) for r in rows]

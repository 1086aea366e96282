"""Evaluations kept per tenant in the server's database (the store's own connection, SQLite or
PostgreSQL): one row per evaluation, its summary apart from its report so listings stay small.

A run is `running` until its report is saved (`finished`), it fails (`failed`, with the reason) or it is
cancelled (`cancelled`). It runs as a background job (server/backend/background/evaluation_runs.py): its row keeps
what a worker needs to run it (`request`: the DSLs, the rows, the options) and who runs it (the columns of
background/runs.py), and each row scored is kept in `c2g_evaluation_rows` as soon as it is scored, so a worker that
takes the evaluation over scores only the others, and any process tells how far it got (`progress`).
"""
from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

from canvas2graph.server.backend.background.runs import RUN_COLUMNS, RunTable
from canvas2graph.server.backend.store import now_ms

__all__ = ["Evaluation", "EvaluationStore"]

SCHEMA = [
    """CREATE TABLE IF NOT EXISTS c2g_evaluations (
        id TEXT PRIMARY KEY, tenant TEXT NOT NULL, agent_id TEXT NOT NULL, version_id TEXT, compare_version_id TEXT,
        dataset TEXT NOT NULL, metric TEXT NOT NULL, judge TEXT, status TEXT NOT NULL, error TEXT,
        summary TEXT, report TEXT, create_time BIGINT NOT NULL, update_time BIGINT NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS c2g_evaluations_agent ON c2g_evaluations (tenant, agent_id, create_time)",
    # the running ones, which the sweep reads (background/sweep.py)
    "CREATE INDEX IF NOT EXISTS c2g_evaluations_running ON c2g_evaluations (status) WHERE status = 'running'",
    # each row's result as soon as it is scored (plan 1: the compared version), until the report holds them
    """CREATE TABLE IF NOT EXISTS c2g_evaluation_rows (
        evaluation_id TEXT NOT NULL, plan INTEGER NOT NULL, row_index INTEGER NOT NULL, result TEXT NOT NULL,
        PRIMARY KEY (evaluation_id, plan, row_index))""",
]
# columns added after the table's first release (older databases get them when the table is set up)
ADDED_COLUMNS = [("c2g_evaluations", column, definition)
                 for column, definition in [*RUN_COLUMNS, ("total", "INTEGER NOT NULL DEFAULT 0")]]


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
    total: int = 0                      # rows to score (rows x versions)
    done: int | None = None             # rows scored so far, while it runs (`EvaluationStore.with_progress`)

    def view(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in ("id", "agent_id", "version_id", "compare_version_id", "dataset", "metric",
                                             "judge", "status", "error", "summary", "create_time", "update_time")}
        if self.report is not None:
            out["report"] = self.report
        if self.status == "running" and self.done is not None:
            out["progress"] = {"done": self.done, "total": self.total}
        return out


def _evaluation(row: dict, with_report: bool) -> Evaluation:
    return Evaluation(id=row["id"], tenant=row["tenant"], agent_id=row["agent_id"], version_id=row["version_id"],
                      compare_version_id=row["compare_version_id"], dataset=row["dataset"], metric=row["metric"],
                      judge=row["judge"], status=row["status"], error=row["error"],
                      summary=json.loads(row["summary"]) if row["summary"] else None,
                      create_time=row["create_time"], update_time=row["update_time"],
                      report=json.loads(row["report"]) if with_report and row.get("report") else None,
                      total=row.get("total") or 0)


class EvaluationStore:
    def __init__(self, store):
        self.db = store.db
        self.runs = RunTable(self.db, "c2g_evaluations")
        self._ready = False

    async def setup(self) -> None:
        if not self._ready:
            await self.db.setup(SCHEMA, columns=ADDED_COLUMNS)
            self._ready = True

    async def create(self, tenant: str, agent_id: str, *, dataset: str, metric: str, judge: str | None,
                     version_id: str | None, compare_version_id: str | None, request: dict | None = None,
                     total: int = 0) -> Evaluation:
        """A new evaluation, `running`; `request` is what its job runs (see background/evaluation_runs.py)."""
        await self.setup()
        now = now_ms()
        evaluation = Evaluation(id=uuid.uuid4().hex, tenant=tenant, agent_id=agent_id, version_id=version_id,
                                compare_version_id=compare_version_id, dataset=dataset, metric=metric, judge=judge,
                                status="running", error=None, summary=None, create_time=now, update_time=now,
                                total=total, done=0)
        await self.db.execute(
            "INSERT INTO c2g_evaluations (id, tenant, agent_id, version_id, compare_version_id, dataset, metric, judge, "
            "status, create_time, update_time, request, total) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (evaluation.id, tenant, agent_id, version_id, compare_version_id, dataset, metric, judge, "running", now, now,
             json.dumps(request, ensure_ascii=False, default=str) if request is not None else None, total))
        return evaluation

    async def get(self, tenant: str, agent_id: str, evaluation_id: str) -> Evaluation | None:
        await self.setup()
        rows = await self.db.fetchall(
            "SELECT id, tenant, agent_id, version_id, compare_version_id, dataset, metric, judge, status, error, summary, "
            "report, total, create_time, update_time FROM c2g_evaluations WHERE tenant = ? AND agent_id = ? AND id = ?",
            (tenant, agent_id, evaluation_id))
        return (await self.with_progress([_evaluation(rows[0], True)]))[0] if rows else None

    async def list(self, tenant: str, agent_id: str, limit: int = 100) -> list[Evaluation]:
        await self.setup()
        rows = await self.db.fetchall(
            "SELECT id, tenant, agent_id, version_id, compare_version_id, dataset, metric, judge, status, error, summary, "
            "total, create_time, update_time FROM c2g_evaluations WHERE tenant = ? AND agent_id = ? "
            f"ORDER BY create_time DESC, id DESC LIMIT {int(limit)}", (tenant, agent_id))
        return await self.with_progress([_evaluation(r, False) for r in rows])

    async def with_progress(self, evaluations: list[Evaluation]) -> list[Evaluation]:
        """The running ones with the rows they have scored (whichever process scores them)."""
        running = [e.id for e in evaluations if e.status == "running"]
        if running:
            marks = ", ".join("?" * len(running))
            counts = {r["evaluation_id"]: r["done"] for r in await self.db.fetchall(
                f"SELECT evaluation_id, COUNT(*) AS done FROM c2g_evaluation_rows WHERE evaluation_id IN ({marks}) "
                "GROUP BY evaluation_id", tuple(running))}
            for e in evaluations:
                if e.status == "running":
                    e.done = counts.get(e.id, 0)
        return evaluations

    # --- the rows scored, for the job that runs it ----------------------------------------------
    async def add_row(self, evaluation_id: str, plan: int, result: dict) -> None:
        await self.db.execute("INSERT INTO c2g_evaluation_rows (evaluation_id, plan, row_index, result) VALUES (?, ?, ?, ?) "
                              "ON CONFLICT (evaluation_id, plan, row_index) DO NOTHING",
                              (evaluation_id, plan, int(result["row"]), json.dumps(result, ensure_ascii=False, default=str)))

    async def scored_rows(self, evaluation_id: str) -> dict[int, dict[int, dict]]:
        """plan -> row index -> result, of the rows already scored."""
        found: dict[int, dict[int, dict]] = {}
        for r in await self.db.fetchall("SELECT plan, row_index, result FROM c2g_evaluation_rows WHERE evaluation_id = ?",
                                        (evaluation_id,)):
            found.setdefault(r["plan"], {})[r["row_index"]] = json.loads(r["result"])
        return found

    async def forget_work(self, evaluation_id: str) -> None:
        """Once it ended: the rows scored (the report holds them) and its request (the dataset) go."""
        await self.db.execute("DELETE FROM c2g_evaluation_rows WHERE evaluation_id = ?", (evaluation_id,))
        await self.db.execute("UPDATE c2g_evaluations SET request = NULL WHERE id = ? AND status <> 'running'",
                              (evaluation_id,))

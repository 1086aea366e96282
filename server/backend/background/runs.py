"""What the row of every background run keeps beside its own fields, and the statements over it.

A run is `running` from the moment it is asked for until it ends (`finished`, `failed` with its `error`,
`cancelled`). While a worker runs it, the row names that worker (`owner`, the store's `host:pid:instance`) and a
lease it renews (`lease_until`): a run whose owner is alive is never taken from it, and one whose owner died (its
lease ran out, or its process is gone from this host) is taken over by the next worker that claims it, counting
one more takeover (`attempts`). `job_id` is the engine's job that runs it; `request` (JSON) is everything a worker
needs to run it from scratch or resume it; `cancel` is a cancel asked for from any process, which the owner reads.

The owner is the lock: two jobs of one run (a job queued again by the sweep while the first was only late) never
run it at once, the second finds it owned or ended and leaves it.
"""
from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from typing import Any

from canvas2graph.server.backend.store import lease_owner_is_dead, now_ms

__all__ = ["LEASE_SECONDS", "RENEW_SECONDS", "RUN_COLUMNS", "RunRow", "RunTable"]

LEASE_SECONDS = 10.0        # a running run's owner renews its lease ...
RENEW_SECONDS = 2.0         # ... this often (as the engine's heartbeat: a dead worker's runs are free when its jobs are retried)

# the columns a background run's table adds to its own (ADDED_COLUMNS-style: older databases get them when opened)
RUN_COLUMNS = [("request", "TEXT"), ("job_id", "BIGINT"), ("owner", "TEXT"), ("lease_until", "DOUBLE PRECISION"),
               ("attempts", "INTEGER NOT NULL DEFAULT 0"), ("cancel", "TEXT")]
_LISTED = "id, tenant, status, error, job_id, owner, lease_until, attempts, cancel, create_time"


@dataclass
class RunRow:
    id: str
    tenant: str
    status: str
    error: str | None
    job_id: int | None
    owner: str | None
    lease_until: float | None
    attempts: int                   # takeovers: times a worker took it up after its owner died holding it
    cancel: str | None
    create_time: int                # ms
    request: dict | None = None     # None when not read (listings) or not kept (a run of an earlier version)

    def held(self, now: float | None = None) -> bool:
        """Whether a live worker runs it (its lease is current and its process is not known to be dead)."""
        return bool(self.owner) and (self.lease_until or 0) >= (now or time.time()) \
            and not lease_owner_is_dead(self.owner or "")


def _row(found: dict) -> RunRow:
    raw = found.get("request")
    return RunRow(id=found["id"], tenant=found["tenant"], status=found["status"], error=found["error"],
                  job_id=found["job_id"], owner=found["owner"], lease_until=found["lease_until"],
                  attempts=found["attempts"] or 0, cancel=found["cancel"], create_time=found["create_time"],
                  request=json.loads(raw) if raw else None)


class RunTable:
    """The run columns of one table (`table` is a constant of the code, never a request's)."""

    def __init__(self, db: Any, table: str):
        self.db, self.table = db, table

    async def get(self, run_id: str, *, with_request: bool = False) -> RunRow | None:
        columns = _LISTED + (", request" if with_request else "")
        rows = await self.db.fetchall(f"SELECT {columns} FROM {self.table} WHERE id = ?", (run_id,))
        return _row(rows[0]) if rows else None

    async def running(self) -> list[RunRow]:
        rows = await self.db.fetchall(f"SELECT {_LISTED} FROM {self.table} WHERE status = 'running'", ())
        return [_row(r) for r in rows]

    async def set_job(self, run_id: str, job_id: int) -> None:
        await self.db.execute(f"UPDATE {self.table} SET job_id = ? WHERE id = ? AND status = 'running'", (job_id, run_id))

    # --- the owner ------------------------------------------------------------------------------
    async def claim(self, run_id: str, owner: str) -> RunRow | None:
        """Take the run up once: when nobody holds it, its owner's lease ran out, or its owner is a dead process
        of this host. None when it ended or a live owner holds it."""
        now = time.time()
        # a takeover counts when the owner that held it is another (this process taking its own run up again, after
        # the database went away, is no takeover)
        update = (f"UPDATE {self.table} SET owner = ?, lease_until = ?, update_time = ?, attempts = attempts + "
                  "(CASE WHEN owner IS NULL OR owner = ? THEN 0 ELSE 1 END) WHERE id = ? AND status = 'running' ")
        taken = await self.db.execute(update + "AND (owner IS NULL OR lease_until IS NULL OR lease_until < ?)",
                                      (owner, now + LEASE_SECONDS, now_ms(), owner, run_id, now))
        if not taken:
            current = await self.get(run_id)
            if current is not None and current.status == "running" and current.owner \
                    and lease_owner_is_dead(current.owner):
                # compare-and-set on the dead owner: of two workers taking over, one wins
                taken = await self.db.execute(update + "AND owner = ?",
                                              (owner, now + LEASE_SECONDS, now_ms(), owner, run_id, current.owner))
        return await self.get(run_id, with_request=True) if taken else None

    async def take(self, run_id: str, owner: str, wait_seconds: float = LEASE_SECONDS + RENEW_SECONDS) -> RunRow | None:
        """Claim the run, waiting up to `wait_seconds` for a lease that may belong to a dead worker of another host
        to run out. None when it ended, or a live owner still holds it then (that one runs it)."""
        deadline = time.monotonic() + wait_seconds
        while True:
            claimed = await self.claim(run_id, owner)
            if claimed is not None:
                return claimed
            current = await self.get(run_id)
            if current is None or current.status != "running" or time.monotonic() >= deadline:
                return None
            await asyncio.sleep(0.5)

    async def renew(self, run_id: str, owner: str) -> bool:
        """Renew the lease; False when the run is no longer this owner's (ended, or taken over meanwhile)."""
        return bool(await self.db.execute(
            f"UPDATE {self.table} SET lease_until = ? WHERE id = ? AND owner = ? AND status = 'running'",
            (time.time() + LEASE_SECONDS, run_id, owner)))

    async def cancel_asked(self, run_id: str) -> str | None:
        rows = await self.db.fetchall(f"SELECT cancel FROM {self.table} WHERE id = ?", (run_id,))
        return rows[0]["cancel"] if rows else None

    async def release(self, run_id: str, owner: str) -> None:
        """Let the run go without ending it (a stopping worker hands it back: the next claim is no takeover)."""
        await self.db.execute(f"UPDATE {self.table} SET owner = NULL, lease_until = NULL WHERE id = ? AND owner = ?",
                              (run_id, owner))

    async def end(self, run_id: str, status: str, error: str | None = None, *, owner: str | None = None,
                  values: dict[str, Any] | None = None) -> bool:
        """End a running run (as `owner`, when given: a worker that lost it ends nothing), setting `values` too
        (column names of the code). False when it was no longer running (or no longer this owner's)."""
        values = dict(values or {})
        sets = "".join(f", {column} = ?" for column in values)
        sql = (f"UPDATE {self.table} SET status = ?, error = ?, owner = NULL, lease_until = NULL, update_time = ?{sets} "
               "WHERE id = ? AND status = 'running'")
        params: tuple = (status, error, now_ms(), *values.values(), run_id)
        if owner is not None:
            sql, params = sql + " AND owner = ?", params + (owner,)
        return bool(await self.db.execute(sql, params))

    # --- from any API process ---------------------------------------------------------------------
    async def request_cancel(self, run_id: str, tenant: str) -> str | None:
        """Cancel a run: "cancelled" when no worker had it (it ends here, and its job finds it ended), "cancelling"
        when one has (it stops it within a second), None when it is not running."""
        if await self.db.execute(
                f"UPDATE {self.table} SET status = 'cancelled', cancel = 'cancel', error = ?, update_time = ? "
                "WHERE id = ? AND tenant = ? AND status = 'running' AND owner IS NULL",
                ("cancelled", now_ms(), run_id, tenant)):
            return "cancelled"
        if not await self.db.execute(f"UPDATE {self.table} SET cancel = 'cancel' WHERE id = ? AND tenant = ? "
                                     "AND status = 'running'", (run_id, tenant)):
            return None
        current = await self.get(run_id)
        if current is not None and current.status == "running" and current.owner and not current.held():
            # its owner died and no worker took it over yet: it ends now (compare-and-set on that owner)
            if await self.db.execute(f"UPDATE {self.table} SET status = 'cancelled', error = ?, owner = NULL, "
                                     "lease_until = NULL, update_time = ? WHERE id = ? AND status = 'running' AND owner = ?",
                                     ("cancelled", now_ms(), run_id, current.owner)):
                return "cancelled"
        return "cancelling"

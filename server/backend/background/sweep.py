"""No run is left `running` without a live owner or a job that will run it: what the sweep queues again.

The engine already retries the jobs of a worker that died (server/backend/jobs/upkeep.py); the sweep covers what
that cannot see:
- the embedded engine keeps its jobs in memory: a process that starts queues again every run that no live process
  holds (`starting=True`), as `recover_open_turns` does for turns;
- a run whose job is gone while the run is still `running` (its API process died between recording it and queueing
  it; its job failed without ending the row, the database being away) is queued again once nobody holds it and it
  is `LOST_SECONDS` old.
A job queued twice is harmless: the run's owner is its lock (runs.py), so the second job finds it owned or ended.
Every process that runs a worker sweeps every `SWEEP_SECONDS`.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Sequence

from canvas2graph.server.backend.background.handler import RunKind
from canvas2graph.server.backend.jobs.engine import JobEngine
from canvas2graph.server.backend.store import now_ms

log = logging.getLogger("canvas2graph.background")

SWEEP_SECONDS = 10.0
LOST_SECONDS = 30.0         # a run nobody took up, with no live job, this long after it was asked for is queued again


class Sweeper:
    def __init__(self, engine: JobEngine, kinds: Sequence[RunKind]):
        self.engine, self.kinds = engine, list(kinds)
        self._task: asyncio.Task | None = None

    async def sweep(self, *, starting: bool = False) -> int:
        """Queue again the runs that need it; returns how many. `starting`: the embedded engine's start, where
        every job of an earlier process is gone (their ids mean nothing to this engine)."""
        count = 0
        for kind in self.kinds:
            for run in await kind.table.running():
                if run.held():
                    continue
                if not starting:
                    if run.job_id is not None and await self.engine.job_status(run.job_id) in ("todo", "doing"):
                        continue        # waiting for a worker, or a dead worker's job the engine's upkeep retries
                    if not run.owner and now_ms() - run.create_time < LOST_SECONDS * 1000:
                        continue        # just asked for: its job is being queued
                log.warning("%s %s had no live job: queued again", kind.kind, run.id)
                await kind.table.set_job(run.id, await kind.defer(run.id))
                count += 1
            await kind.tidy()
        return count

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._forever(), name="background-sweep")

    async def _forever(self) -> None:
        while True:
            await asyncio.sleep(SWEEP_SECONDS)
            try:
                await self.sweep()
            except Exception as e:      # noqa: BLE001 - the database is away: the next sweep tries again
                log.warning("sweeping background runs failed (%s: %s)", type(e).__name__, e)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

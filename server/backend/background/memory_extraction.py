"""Typed memory extraction as jobs (`c2g.job("memory", tenant)`): after a turn whose Message saved to memories, the
worker that ran it queues the tenant's extraction; any worker runs it (`extract_pending` over the tenant's pending
exchanges, runtime/services/memory/extraction.py), one at a time per tenant (the job's lock). The pending exchanges
live in the memory store, so a job lost with its worker loses nothing: the sweep (every `SWEEP_SECONDS` in a
process with a worker) queues again the tenants that still have pending exchanges."""
from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any, Callable

from canvas2graph.runtime.services.memory import saves_memory
from canvas2graph.runtime.services.memory.book import PENDING
from canvas2graph.runtime.services.memory.extraction import extract_pending

log = logging.getLogger("canvas2graph.memory")

KIND = "memory"
SWEEP_SECONDS = 60.0


class MemoryExtraction:
    """Queue (`after_turn`, `queue`) and run (`__call__`, the job handler) the extraction of typed memories."""

    def __init__(self, store: Any, engine: Any, models: Callable[[], tuple[Any, Any]], embedder: Any = None):
        self.store, self.engine, self.models, self.embedder = store, engine, models, embedder
        self._sweeper: asyncio.Task | None = None

    async def queue(self, tenant: str) -> None:
        # one at a time per tenant (`lock`), and one waiting at most (`once`): a busy tenant's turns do not pile
        # up jobs that would each find nothing left to extract
        await self.engine.defer_job(KIND, tenant, lock=f"c2g-memory:{tenant}", once=f"c2g-memory-queued:{tenant}")

    async def after_turn(self, tenant: str, components: dict) -> None:
        """A turn of a canvas with these components ended: queue its tenant's extraction if a Message saves."""
        if saves_memory(components):
            await self.queue(tenant)

    async def __call__(self, tenant: str, abort_reason: Callable[[], Any]) -> None:
        models, _ = self.models()
        while not abort_reason():
            if not await extract_pending(self.store, models, embedder=self.embedder, tenant=tenant, limit=20):
                return

    async def sweep(self) -> int:
        """Queue the extraction of every tenant with pending exchanges; returns how many were queued."""
        tenants = {item.value.get("tenant", "") for item in await self.store.asearch(PENDING, limit=1000)}
        for tenant in tenants:
            await self.queue(tenant)
        return len(tenants)

    def start(self) -> None:
        async def forever() -> None:
            while True:
                try:
                    queued = await self.sweep()
                    if queued:
                        log.info("queued the memory extraction of %d tenant(s) with pending exchanges", queued)
                except Exception as e:      # noqa: BLE001 - the database away: the next sweep tries again
                    log.warning("memory sweep failed: %s", e)
                await asyncio.sleep(SWEEP_SECONDS)
        self._sweeper = asyncio.create_task(forever(), name="memory-sweep")

    async def stop(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper

"""What one process runs of the job machinery: the engine, the event log, and (with `workers > 0`) a worker.

`serve` opens it with its turn slots (`--workers N`; 0 serves the API only) and `canvas2graph worker` with
its `--concurrency`: both are this same object, so a turn runs the same way in either.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, AsyncIterator, Awaitable, Callable

from canvas2graph.server.backend.conversations import Conversations, ModelSource
from canvas2graph.server.backend.jobs.engine import DEFAULT_QUEUE, JobEngine
from canvas2graph.server.backend.jobs.event_log import EventLog, PostgresEventLog, SqliteEventLog
from canvas2graph.server.backend.jobs.turn_runs import TurnWorker
from canvas2graph.server.backend.jobs.upkeep import Upkeep, recover_open_turns
from canvas2graph.server.backend.schedules import ScheduleFirer
from canvas2graph.server.backend.store import Store, process_owner

log = logging.getLogger("canvas2graph.jobs")


@dataclass
class JobProcess:
    store: Store
    engine: JobEngine
    events: EventLog
    conversations: Conversations
    worker: TurnWorker | None
    workers: int                        # turn slots this process runs (0: none)
    owner: str
    context: dict[str, Any]             # what the engine's tasks find in their job context
    _worker_task: asyncio.Task | None = None

    def add_job_kind(self, kind: str, handler: Callable[[str, Callable[[], Any]], Awaitable[None]]) -> None:
        """Run background jobs of `kind` (`JobEngine.defer_job(kind, job_id)`) with `handler(job_id, abort_reason)`.
        A handler is taken over like a turn when its worker dies: it must resume (or fail) the work `job_id`
        names from what it stored, and `abort_reason()` says "user_request" when its job was cancelled."""
        self.context.setdefault("jobs", {})[kind] = handler

    def start_worker(self, *, graceful_seconds: float | None = 30.0) -> None:
        if self.workers > 0 and self._worker_task is None:
            self._worker_task = asyncio.create_task(
                self.engine.run_worker(self.context, self.workers, graceful_seconds=graceful_seconds),
                name="job-worker")

    def worker_running(self) -> bool:
        return self._worker_task is not None and not self._worker_task.done()

    async def stop_worker(self) -> None:
        """Stop taking jobs; running turns get the graceful time to end, then go back to the queue."""
        if self._worker_task is not None:
            self._worker_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._worker_task
            self._worker_task = None


@asynccontextmanager
async def open_jobs(store: Store, models: ModelSource,
                    services: dict[str, Any] | Callable[[Any], dict[str, Any]] | None = None, *,
                    workers: int, policy: str = "enqueue", queue: str = DEFAULT_QUEUE) -> AsyncIterator[JobProcess]:
    owner = process_owner()
    engine = JobEngine(store.url, getattr(store.db, "pool", None), queue=queue)
    await engine.open()
    events: EventLog = PostgresEventLog(store.db) if engine.postgres else SqliteEventLog(store.db)
    await events.start()
    worker = TurnWorker(store, events, models, services, owner) if workers > 0 else None
    conversations = Conversations(store, engine, events, models, services, policy=policy, owner=owner)
    context: dict[str, Any] = {"turns": worker, "upkeep": Upkeep(store, events, owner),
                               "schedules": ScheduleFirer(store, conversations)}
    jobs = JobProcess(store=store, engine=engine, events=events, conversations=conversations, worker=worker,
                      workers=workers, owner=owner, context=context)
    try:
        async with contextlib.AsyncExitStack() as stack:
            if worker is not None:
                await stack.enter_async_context(worker)
            await stack.enter_async_context(conversations)
            if not engine.postgres:         # the embedded engine's jobs lived in a process that is gone
                recovered = await recover_open_turns(store, engine, owner)
                if recovered:
                    log.warning("queued again %d turn(s) a stopped process left open", recovered)
            try:
                yield jobs
            finally:
                await jobs.stop_worker()
    finally:
        await events.close()
        await engine.close()

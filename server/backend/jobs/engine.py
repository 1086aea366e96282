"""The job engine: procrastinate, on the PostgreSQL that holds the sessions, or in memory for the embedded
default. Turns, schedules and upkeep are its jobs; canvas2graph keeps no queue or scheduler of its own.

Why procrastinate (docs/architecture.md, "Turns as jobs", has the measurements): it runs on the database
the sessions are in (no new service); a job's `lock` runs one session's turns one at a time, in the order
they came (double texting queues, never reorders); LISTEN/NOTIFY picks a job up in milliseconds; an
asynchronous job is aborted by cancelling it (a cancel stops a model's stream); workers send heartbeats,
and the jobs of a worker whose heartbeat stopped are found (`get_stalled_jobs`) and retried; periodic tasks
are deferred once per tick however many workers run. The embedded default uses the same App, tasks and
worker over procrastinate's in-memory connector: one code path, and a process that restarts finds the
turns it had open in the turns table (`recover_open_turns`), the durable record.

Tasks (names are part of the database's contents: kept stable):
- `c2g.turn(turn_id)`: one turn (`TurnWorker.run`), locked on its session;
- `c2g.job(kind, job_id)`: background work of another kind (an evaluation, an ingestion), run by the handler
  registered for its kind (`JobProcess.add_job_kind`), taken over like a turn when its worker dies;
- `c2g.upkeep(timestamp)`, every `UPKEEP_CRON`: retries the turns of dead workers, re-queues turns whose job
  was lost, drops the events of turns that ended long ago;
- `c2g.schedules(timestamp)`, every `SCHEDULES_CRON`: fires the schedules that are due (server/backend/schedules.py).
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

import procrastinate
from procrastinate.testing import InMemoryConnector
from procrastinate.worker import Worker

from canvas2graph.runtime.run.checkpoint import is_postgres
from canvas2graph.server.backend.jobs.turn_runs import HandedBack
from canvas2graph.server.backend.store_sql import schema_lock

log = logging.getLogger("canvas2graph.jobs")

TURN_TASK, JOB_TASK, UPKEEP_TASK, SCHEDULES_TASK = "c2g.turn", "c2g.job", "c2g.upkeep", "c2g.schedules"
HEARTBEAT_SECONDS = 2.0         # a worker's heartbeat ...
STALLED_SECONDS = 10.0          # ... and how long without one before its turns are taken over
UPKEEP_CRON = "* * * * * */5"   # every 5 s (the 6th field is seconds): takeover within STALLED_SECONDS + 5 s of a worker's death
SCHEDULES_CRON = "* * * * * */5"
LOST_JOB_SECONDS = 30.0         # an open turn with no live job this long after it was queued is queued again
EVENTS_KEPT_SECONDS = 3600.0    # the events of an ended turn stay this long (re-attaching, LangGraph's join_stream)
SCHEMA_LOCK = 740216            # advisory lock: one process applies procrastinate's schema
DEFAULT_QUEUE = "canvas2graph"


def _session_lock(session_id: str) -> str:
    return f"c2g-session:{session_id}"


class JobEngine:
    """One process's view of the engine: defer and abort jobs; run a worker with `run_worker`."""

    def __init__(self, url: str, pool: Any = None, queue: str = DEFAULT_QUEUE):
        self.postgres = is_postgres(url or "")
        self.url = url
        # the store's pool (server/backend/store_sql.py): the engine's queries take their turn with the others
        self.pool = pool
        # the queue this process's API queues on and its worker takes from: processes that share a database
        # and a queue share their turns (two deployments on one database keep apart with two queues)
        self.queue = queue
        self.connector = procrastinate.PsycopgConnector() if self.postgres else InMemoryConnector()
        self.worker_ids: set[int] = set()      # this process's workers, as the engine's table names them
        self.app = procrastinate.App(connector=self.connector)
        self._register()

    def _register(self) -> None:
        app = self.app
        # a turn handed back (its worker stops, or the database went away) is queued again at once; its job keeps
        # its place before the session's later turns (procrastinate orders a lock's jobs by id)
        retry = procrastinate.RetryStrategy(max_attempts=1000, retry_exceptions={HandedBack})

        @app.task(name=TURN_TASK, pass_context=True, retry=retry, queue=self.queue)
        async def turn(context, turn_id: str) -> None:
            await context.additional_context["turns"].run(turn_id, context.abort_reason)

        @app.task(name=JOB_TASK, pass_context=True, retry=retry, queue=self.queue)
        async def job(context, kind: str, job_id: str) -> None:
            handler = (context.additional_context.get("jobs") or {}).get(kind)
            if handler is None:
                raise LookupError(f"no handler for background jobs of kind {kind!r} in this worker")
            await handler(job_id, context.abort_reason)

        # a queue's periodic jobs are its own: deferred once per tick among the workers of that queue
        @app.periodic(cron=UPKEEP_CRON, periodic_id=f"upkeep@{self.queue}")
        @app.task(name=UPKEEP_TASK, pass_context=True, queueing_lock=f"c2g-upkeep@{self.queue}", queue=self.queue)
        async def upkeep(context, timestamp: int) -> None:
            await context.additional_context["upkeep"](self)

        @app.periodic(cron=SCHEDULES_CRON, periodic_id=f"schedules@{self.queue}")
        @app.task(name=SCHEDULES_TASK, pass_context=True, queueing_lock=f"c2g-schedules@{self.queue}", queue=self.queue)
        async def schedules(context, timestamp: int) -> None:
            fire = context.additional_context.get("schedules")
            if fire is not None:
                await fire(timestamp)

    async def open(self) -> None:
        if self.postgres:
            await self._schema()
        await self.app.open_async(self.pool)

    async def close(self) -> None:
        await self.app.close_async()

    async def _schema(self) -> None:
        """procrastinate's tables, functions and types, applied once (several processes may start at once).
        On a connection of its own: the schema is many statements, which the pool's prepared statements refuse."""
        import psycopg
        async with await psycopg.AsyncConnection.connect(self.url, autocommit=True) as conn, \
                schema_lock(conn, SCHEMA_LOCK):
            present = await (await conn.execute("SELECT to_regclass('procrastinate_jobs')")).fetchone()
            if present[0] is None:
                await conn.execute(self.app.schema_manager.get_schema())

    # --- jobs -----------------------------------------------------------------------------------
    async def defer_turn(self, turn_id: str, session_id: str) -> int:
        """Queue a turn behind the session's earlier ones; returns its job id."""
        task = self.app.configure_task(TURN_TASK, lock=_session_lock(session_id))
        return await task.defer_async(turn_id=turn_id)

    async def defer_job(self, kind: str, job_id: str, *, lock: str | None = None,
                        once: str | None = None) -> int | None:
        """Queue background work of a kind other than turns (its handler runs it); returns the engine's job id.
        With `once`, a job queued under that name and not started yet stands for this one (None is returned)."""
        options: dict[str, Any] = {k: v for k, v in (("lock", lock), ("queueing_lock", once)) if v}
        task = self.app.configure_task(JOB_TASK, **options)
        try:
            return await task.defer_async(kind=kind, job_id=job_id)
        except procrastinate.exceptions.AlreadyEnqueued:
            return None

    async def abort(self, job_id: int, turn_id: str) -> str | None:
        """Cancel a turn's job: "queued" when it had not started (it is deleted: it never runs), "running" when
        it runs (its worker is told, and stops it), None when this engine has no such job (it ended, or it
        lives in another process's in-memory engine)."""
        if not await self._is_turn_job(job_id, turn_id):
            return None
        try:
            if not await self.app.job_manager.cancel_job_by_id_async(job_id, abort=True, delete_job=True):
                return None
        except KeyError:                # the in-memory connector's answer for a job it no longer has
            return None
        return "queued" if await self.job_status(job_id) in (None, "cancelled") else "running"

    async def _is_turn_job(self, job_id: int, turn_id: str) -> bool:
        """Whether job `job_id` of this engine runs that turn (an in-memory engine's ids are its process's own)."""
        if not self.postgres:
            job = self.connector.jobs.get(job_id)
            return job is not None and (job.get("args") or {}).get("turn_id") == turn_id
        async with self.pool.connection() as conn:
            row = await (await conn.execute("SELECT args->>'turn_id' AS turn FROM procrastinate_jobs WHERE id = %s",
                                            (job_id,))).fetchone()
        return row is not None and row["turn"] == turn_id

    async def job_status(self, job_id: int | None) -> str | None:
        if job_id is None:
            return None
        try:
            found = await self.app.job_manager.get_job_status_async(job_id)
        except (procrastinate.exceptions.NoResult, KeyError):
            return None                 # deleted once it ended
        return getattr(found, "value", found)

    async def stalled_jobs(self) -> list[Any]:
        """The jobs (turns, background work, upkeep) of workers whose heartbeat stopped."""
        return list(await self.app.job_manager.get_stalled_jobs(queue=self.queue,
                                                                 seconds_since_heartbeat=STALLED_SECONDS))

    async def retry(self, job: Any) -> None:
        """Run a stalled job again. An upkeep or schedules job whose next tick is queued already is dropped
        instead (its queueing lock allows one waiting)."""
        try:
            await self.app.job_manager.retry_job(job)
        except procrastinate.exceptions.UniqueViolation:
            await self.app.job_manager.finish_job_by_id_async(job.id, status=procrastinate.jobs.Status.FAILED,
                                                              delete_job=True)

    async def workers_alive(self) -> int:
        """Workers whose heartbeat is recent (for readiness: a turn queued with none waits)."""
        if not self.postgres:
            return len(self.connector.workers)
        async with self.pool.connection() as conn:
            row = await (await conn.execute(
                "SELECT count(*) AS n FROM procrastinate_workers WHERE last_heartbeat > NOW() - %s * INTERVAL '1 second'",
                (STALLED_SECONDS,))).fetchone()
        return int(row["n"])

    # --- a worker -------------------------------------------------------------------------------
    async def run_worker(self, context: dict[str, Any], concurrency: int, *, name: str = "canvas2graph",
                         graceful_seconds: float | None = 30.0) -> None:
        """Run jobs until cancelled. A worker whose database connection broke (procrastinate stops it then)
        starts again once the database answers; its running turns are handed back meanwhile."""
        delay = 0.5
        while True:
            started = time.monotonic()
            worker = PromptWorker(
                self.app, name=name, concurrency=concurrency, queues=[self.queue], wait=True, install_signal_handlers=False,
                additional_context=context, delete_jobs="always", listen_notify=True,
                # in memory a poll costs nothing; on PostgreSQL notifications wake the worker, and PromptWorker
                # fetches again where procrastinate would wait for the poll
                fetch_job_polling_interval=1.0 if self.postgres else 0.05, abort_job_polling_interval=1.0,
                update_heartbeat_interval=HEARTBEAT_SECONDS, stalled_worker_timeout=STALLED_SECONDS,
                shutdown_graceful_timeout=graceful_seconds)
            worker.ids = self.worker_ids
            try:
                await worker.run()
            except asyncio.CancelledError:
                raise
            except Exception as e:      # noqa: BLE001 - a database outage: work again once it is back
                log.warning("the worker stopped (%s: %s); starting again", type(e).__name__, e)
            else:
                log.warning("the worker stopped; starting again")
            if time.monotonic() - started > 60:
                delay = 0.5
            await asyncio.sleep(delay)
            delay = min(delay * 2, 10.0)


class PromptWorker(Worker):
    """procrastinate's worker, fetching as soon as there may be a job for it (measured in bench/queue_choice.py).

    procrastinate waits for its polling interval in two cases where a job is ready at once:
    - a notification of a new job that arrives while the worker is fetching is cleared when the fetch ends,
      so 5 to 10% of jobs queued back to back waited a whole poll;
    - a job waiting for its lock (the next turn of a session) is never notified when the job holding the lock
      ends (upstream issue #213): every queued message of a session waited a poll.
    So a fetch is made again when a notification came during the last one, and whenever a job ends.
    """

    _notified = 0
    ids: set[int] = set()           # the engine's: its processes' worker ids (a process never thinks itself dead)

    async def _handle_notification(self, *, channel: str, notification: Any) -> None:
        self._notified += 1
        await super()._handle_notification(channel=channel, notification=notification)

    async def _fetch_and_process_jobs(self) -> None:
        if self.worker_id is not None:
            self.ids.add(self.worker_id)
        seen = self._notified
        await super()._fetch_and_process_jobs()
        if self._notified != seen:
            self._new_job_event.set()

    async def _process_job(self, context: Any) -> None:
        try:
            await super()._process_job(context)
        finally:
            self._new_job_event.set()       # a lock may be free now: the session's next turn can start


@contextlib.asynccontextmanager
async def open_engine(url: str, pool: Any = None, queue: str = DEFAULT_QUEUE):
    engine = JobEngine(url, pool, queue)
    await engine.open()
    try:
        yield engine
    finally:
        await engine.close()

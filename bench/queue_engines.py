"""The job engines bench.queue_choice measures: one small adapter class each, and the job body they all run.

A parent process opens an engine (its own PostgreSQL database or Redis database), defers and aborts jobs;
a worker process (`python -m bench.queue_choice --worker KEY`) runs the engine's worker, whose job body
reports each event to the parent over a Unix socket.
"""
from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import random
import socket
import time
from datetime import timedelta
from pathlib import Path

PG = os.environ.get("C2G_QUEUE_PG", "postgresql://postgres@127.0.0.1:5432")
REDIS = os.environ.get("C2G_QUEUE_REDIS", "redis://127.0.0.1:6379")
REDIS_DB = {"saq": 9, "arq": 10}
CONCURRENCY = 20
TAKEOVER_BODY_S = 60.0

# ---------------------------------------------------------------- worker side: what a job body does

_REPORT: socket.socket | None = None


def connect_reporter(path: str) -> None:
    global _REPORT
    _REPORT = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    _REPORT.connect(path)


def report(ev: str, tag: str = "", **extra) -> None:
    line = {"ev": ev, "tag": tag, "t": time.monotonic(), "wall": time.time(), "pid": os.getpid(), **extra}
    _REPORT.sendall(json.dumps(line).encode() + b"\n")


def first_attempt(tag: str) -> bool:
    """True once per tag across every process (a marker file created exclusively)."""
    try:
        os.close(os.open(Path(os.environ["C2G_QB_MARKS"]) / tag, os.O_CREAT | os.O_EXCL))
        return True
    except FileExistsError:
        return False


async def body(kind: str, tag: str, arg: float = 0.0) -> None:
    """Every engine's job runs this: noop, ordered (arg=1: fail the first attempt) or sleep (arg seconds)."""
    report("start", tag)
    if kind == "noop":
        return
    if kind == "ordered":
        if arg and first_attempt(tag):
            report("fail", tag)
            raise RuntimeError("planned first-attempt failure")
        await asyncio.sleep(random.Random(tag).uniform(0.01, 0.05))
        report("end", tag)
        return
    try:
        await asyncio.sleep(arg)
    except asyncio.CancelledError:
        report("cancelled", tag)
        raise
    report("end", tag)


async def pg_admin(sql: str) -> None:
    import psycopg
    async with await psycopg.AsyncConnection.connect(f"{PG}/postgres", autocommit=True) as conn:
        await conn.execute(sql)


async def fresh_database(name: str) -> str:
    await pg_admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    await pg_admin(f"CREATE DATABASE {name}")
    return f"{PG}/{name}"


async def claim_redis_db(db: int) -> None:
    """Our Redis database must be empty or hold only this bench's keys (our marker says so)."""
    import redis.asyncio as aioredis
    client = aioredis.Redis.from_url(f"{REDIS}/{db}")
    try:
        if await client.dbsize() and not await client.exists("c2g-queue-bench"):
            raise RuntimeError(f"Redis database {db} holds keys that are not this bench's: not touching it")
        await client.flushdb()
        await client.set("c2g-queue-bench", "1")
    finally:
        await client.aclose()


async def release_redis_db(db: int) -> None:
    import redis.asyncio as aioredis
    client = aioredis.Redis.from_url(f"{REDIS}/{db}")
    try:
        await client.flushdb()
    finally:
        await client.aclose()


# ---------------------------------------------------------------- the engines

class Engine:
    key = dist = ""
    title = ""
    settings = ""          # the settings behind every figure (printed under the table)
    order_mechanism = ""   # how jobs sharing a key are serialized, or what the engine has instead
    inmemory: tuple[str, str] | None = None   # (module, attribute) of a backend needing no service

    def installed(self) -> bool:
        return all(importlib.util.find_spec(m) is not None for m in self.modules())

    def modules(self) -> tuple[str, ...]:
        return (self.dist,)

    async def open(self) -> None: ...
    async def close(self) -> None: ...
    async def defer(self, kind: str, tag: str, arg: float = 0.0, key: str | None = None): ...
    async def abort(self, handle) -> None: ...
    async def run_worker(self) -> None: ...

    async def defer_many(self, kind: str, tags: list[str]) -> None:
        sem = asyncio.Semaphore(20)

        async def one(tag):
            async with sem:
                await self.defer(kind, tag)
        await asyncio.gather(*(one(t) for t in tags))


class Procrastinate(Engine):
    key = dist = "procrastinate"
    title = "procrastinate"
    db = "c2g_qb_procrastinate"
    inmemory = ("procrastinate.testing", "InMemoryConnector")
    order_mechanism = "configure(lock=key)"
    settings = ("worker concurrency=20, listen_notify (default), fetch_job_polling_interval=1 s, "
                "update_heartbeat_interval=0.5 s, abort_job_polling_interval=1 s (abort arrives by NOTIFY); "
                "stalled jobs: the documented periodic task (cron '* * * * * *') calling "
                "job_manager.get_stalled_jobs(seconds_since_heartbeat=2) then retry_job(job); "
                "task retry=RetryStrategy(max_attempts=2, wait=1)")

    def app(self, dsn: str):
        import procrastinate
        app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=dsn))

        @app.task(name="job", retry=procrastinate.RetryStrategy(max_attempts=2, wait=1))
        async def job(kind: str, tag: str, arg: float = 0.0):
            await body(kind, tag, arg)

        @app.periodic(cron="* * * * * *")
        @app.task(name="tick")
        async def tick(timestamp: int):
            report("tick", str(timestamp))

        @app.periodic(cron="* * * * * *")
        @app.task(name="retry_stalled", pass_context=True)
        async def retry_stalled(context, timestamp: int):
            manager = context.app.job_manager
            for stalled in await manager.get_stalled_jobs(seconds_since_heartbeat=2):
                await manager.retry_job(stalled)
        return app

    async def open(self):
        self.parent = self.app(await fresh_database(self.db))
        await self.parent.open_async()
        await self.parent.schema_manager.apply_schema_async()

    async def close(self):
        await self.parent.close_async()
        await pg_admin(f"DROP DATABASE IF EXISTS {self.db} WITH (FORCE)")

    async def defer(self, kind, tag, arg=0.0, key=None):
        return await self.parent.configure_task("job", lock=key).defer_async(kind=kind, tag=tag, arg=arg)

    async def defer_many(self, kind, tags):
        await self.parent.tasks["job"].batch_defer_async(*({"kind": kind, "tag": t, "arg": 0.0} for t in tags))

    async def abort(self, job_id):
        await self.parent.job_manager.cancel_job_by_id_async(job_id, abort=True)

    async def run_worker(self):
        app = self.app(f"{PG}/{self.db}")
        async with app.open_async():
            report("ready")
            await app.run_worker_async(concurrency=CONCURRENCY, fetch_job_polling_interval=1,
                                       update_heartbeat_interval=0.5, abort_job_polling_interval=1,
                                       install_signal_handlers=False)


class PgQueuer(Engine):
    """On asyncpg, pgqueuer's first driver (PgQueuerPsycopg below runs it on psycopg)."""
    key = dist = "pgqueuer"
    title = "pgqueuer (asyncpg)"
    db = "c2g_qb_pgqueuer"
    inmemory = ("pgqueuer", "InMemoryDriver")
    order_mechanism = "entrypoint concurrency_limit=1 (serializes the whole entrypoint, not a key)"
    settings = ("asyncpg connection; run(batch_size=10, max_concurrent_tasks=20, dequeue_timeout=1 s, "
                "heartbeat_timeout=2 s: beats every 1 s, a job whose heartbeat is 2 s old is re-picked by the "
                "next dequeue); abort = queries.mark_job_as_cancelled([id]) (NOTIFY), which cancels only a body "
                "run inside `with context.cancellation:` (done here); ordered jobs: entrypoint concurrency_limit=1 "
                "with DatabaseRetryEntrypointExecutor(max_attempts=2, initial_delay=1 s); periodic: "
                "schedule('tick', '* * * * * *')")

    def modules(self):
        return ("pgqueuer", "asyncpg")

    async def connect(self, dsn: str):
        """A connection and pgqueuer's driver over it."""
        import asyncpg
        from pgqueuer import AsyncpgDriver
        conn = await asyncpg.connect(dsn)
        return conn, AsyncpgDriver(conn)

    async def open(self):
        from pgqueuer import Queries
        self.conn, driver = await self.connect(await fresh_database(self.db))
        self.queries = Queries(driver)
        await self.queries.install()

    async def close(self):
        await self.conn.close()
        await pg_admin(f"DROP DATABASE IF EXISTS {self.db} WITH (FORCE)")

    async def defer(self, kind, tag, arg=0.0, key=None):
        (job_id,) = await self.queries.enqueue("ordered" if key else "job", json.dumps([kind, tag, arg]).encode())
        return job_id

    async def defer_many(self, kind, tags):
        await self.queries.enqueue(["job"] * len(tags), [json.dumps([kind, t, 0.0]).encode() for t in tags],
                                   [0] * len(tags))

    async def abort(self, job_id):
        await self.queries.mark_job_as_cancelled([job_id])

    async def run_worker(self):
        import functools

        from pgqueuer import DatabaseRetryEntrypointExecutor, PgQueuer as App
        app = App(connection=(await self.connect(f"{PG}/{self.db}"))[1])

        @app.entrypoint("job", accepts_context=True)
        async def job(job, context):
            with context.cancellation:
                await body(*json.loads(job.payload))

        retry = functools.partial(DatabaseRetryEntrypointExecutor, max_attempts=2, initial_delay=timedelta(seconds=1))

        @app.entrypoint("ordered", concurrency_limit=1, accepts_context=False, executor_factory=retry)
        async def ordered(job):
            await body(*json.loads(job.payload))

        @app.schedule("tick", "* * * * * *", accepts_context=False)
        async def tick(schedule):
            report("tick")
        report("ready")
        await app.run(dequeue_timeout=timedelta(seconds=1), batch_size=10, max_concurrent_tasks=CONCURRENCY,
                      heartbeat_timeout=timedelta(seconds=2))


class PgQueuerPsycopg(PgQueuer):
    key = "pgqueuer-psycopg"
    title = "pgqueuer (psycopg)"
    settings = "as pgqueuer (asyncpg), on a psycopg AsyncConnection(autocommit=True) and pgqueuer's PsycopgDriver"

    def modules(self):
        return ("pgqueuer", "psycopg")

    async def connect(self, dsn: str):
        import psycopg
        from pgqueuer import PsycopgDriver
        conn = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
        return conn, PsycopgDriver(conn)


class Saq(Engine):
    key = dist = "saq"
    title = "saq (Redis)"
    order_mechanism = "none (Job.key only de-duplicates)"
    settings = ("Worker(concurrency=20, timers={sweep: 1, abort: 0.2, schedule: 1}); jobs enqueued with "
                "timeout=0 (none), heartbeat=2, retries=2; the body runs a task calling job.update() every 0.5 s "
                "(saq does not beat for it); stuck job = heartbeat older than 2 s, found by the sweep (one "
                "worker per interval), aborted, waited on for up to 5 s (Queue.sweep's abort=5.0), then retried; "
                "abort = job.abort(); periodic: CronJob(tick, cron='* * * * * *')")

    def url(self) -> str:
        return f"{REDIS}/{REDIS_DB['saq']}"

    def queue(self):
        from saq import Queue
        return Queue.from_url(self.url(), name="c2g-bench")

    async def open(self):
        await claim_redis_db(REDIS_DB["saq"])
        self.queue_ = self.queue()
        await self.queue_.connect()

    async def close(self):
        await self.queue_.disconnect()
        await release_redis_db(REDIS_DB["saq"])

    async def defer(self, kind, tag, arg=0.0, key=None):
        return await self.queue_.enqueue("job", kind=kind, tag=tag, arg=arg, timeout=0, heartbeat=2, retries=2)

    async def abort(self, job):
        await job.abort("bench abort")

    async def run_worker(self):
        from saq import Worker
        from saq.job import CronJob
        queue = self.queue()
        await queue.connect()

        async def job(ctx, *, kind, tag, arg=0.0):
            beat = asyncio.create_task(saq_heartbeat(ctx["job"]))
            try:
                await body(kind, tag, arg)
            finally:
                beat.cancel()

        async def tick(ctx):
            report("tick")
        worker = Worker(queue, functions=[("job", job)], concurrency=CONCURRENCY,
                        cron_jobs=[CronJob(tick, cron="* * * * * *")],
                        timers={"sweep": 1, "abort": 0.2, "schedule": 1})
        report("ready")
        await worker.start()


async def saq_heartbeat(job) -> None:
    while True:
        await asyncio.sleep(0.5)
        await job.update()


class SaqPostgres(Saq):
    key = "saq-pg"
    title = "saq (PostgreSQL)"
    db = "c2g_qb_saq"
    settings = "as saq (Redis), on saq.queue.postgres.PostgresQueue (LISTEN/NOTIFY, sweep under an advisory lock)"

    def modules(self):
        return ("saq", "psycopg_pool")

    def url(self) -> str:
        return f"{PG}/{self.db}"

    async def open(self):
        await fresh_database(self.db)
        self.queue_ = self.queue()
        await self.queue_.connect()

    async def close(self):
        await self.queue_.disconnect()
        await pg_admin(f"DROP DATABASE IF EXISTS {self.db} WITH (FORCE)")


class Arq(Engine):
    key = dist = "arq"
    title = "arq"
    order_mechanism = "none (_job_id only de-duplicates)"
    settings = (f"Worker(max_jobs=20, poll_delay=0.1 s (default 0.5), allow_abort_jobs=True, job_timeout="
                f"{TAKEOVER_BODY_S + 1:.0f} s: a job must be allowed its 60 s); no heartbeat: a job is taken over "
                "when its in-progress key expires, job_timeout + 10 s after it started (arq's fixed margin); "
                "abort = Job.abort() (picked up by the next poll); periodic: cron(tick, second=every second)")

    def redis_settings(self):
        from arq.connections import RedisSettings
        return RedisSettings(host="127.0.0.1", port=6379, database=REDIS_DB["arq"])

    async def open(self):
        from arq import create_pool
        await claim_redis_db(REDIS_DB["arq"])
        self.pool = await create_pool(self.redis_settings(), default_queue_name="c2g-bench")

    async def close(self):
        await self.pool.aclose()
        await release_redis_db(REDIS_DB["arq"])

    async def defer(self, kind, tag, arg=0.0, key=None):
        return await self.pool.enqueue_job("job", kind, tag, arg)

    async def abort(self, job):
        self.aborting = asyncio.create_task(job.abort(timeout=20, poll_delay=0.1))   # it waits for the outcome

    async def run_worker(self):
        from arq.cron import cron
        from arq.worker import Worker, func

        async def job(ctx, kind, tag, arg=0.0):
            await body(kind, tag, arg)

        async def tick(ctx):
            report("tick")
        worker = Worker(functions=[func(job, name="job")], queue_name="c2g-bench", redis_settings=self.redis_settings(),
                        max_jobs=CONCURRENCY, job_timeout=TAKEOVER_BODY_S + 1, poll_delay=0.1, allow_abort_jobs=True,
                        cron_jobs=[cron(tick, name="tick", second=set(range(60)))], handle_signals=False)
        report("ready")
        await worker.main()


ENGINES = [Procrastinate(), PgQueuer(), PgQueuerPsycopg(), Saq(), SaqPostgres(), Arq()]
DEFAULT = ["procrastinate", "pgqueuer", "saq", "saq-pg", "arq"]    # pgqueuer-psycopg on request: its idle pickups wait 1 s

"""A worker process (`canvas2graph worker`): runs the turns, schedules, evaluations and ingestion runs `serve` processes
queue on one PostgreSQL database, with the same models and services as `serve` gives its own turn slots.

SIGTERM (or SIGINT) stops it gracefully: it takes no new job, gives its running turns `graceful_seconds`
to end, then hands the rest back to the queue, where another worker continues them from their last
checkpoint. SIGKILL loses nothing either: its heartbeat stops, and another worker takes its turns over
(server/backend/jobs/upkeep.py). With `health_port`, `GET /health` answers while the process runs and
`GET /ready` once its worker takes jobs (503 while the database is away).
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import signal

from canvas2graph.runtime.services.observability import flush as flush_traces
from canvas2graph.server.background import open_background
from canvas2graph.server.backend.jobs.process import JobProcess, open_jobs
from canvas2graph.server.backend.store import open_store
from canvas2graph.server.config import ServerConfig
from canvas2graph.server.services import RunServices

log = logging.getLogger("canvas2graph.worker")


async def run_worker(config: ServerConfig, concurrency: int, *, graceful_seconds: float = 30.0,
                     health_port: int | None = None, stop: asyncio.Event | None = None) -> None:
    """Run until `stop` is set (by default: until SIGTERM or SIGINT)."""
    stop = stop or _on_signals()
    services = RunServices(config)
    try:
        async with open_store(config.db, pool_size=config.pool_size) as store:
            async with open_jobs(store, services.models, services, workers=concurrency, queue=config.queue) as jobs, \
                    open_background(jobs, services):     # evaluations and ingestion runs: the same handlers as serve's
                jobs.start_worker(graceful_seconds=graceful_seconds)
                health = await _serve_health(jobs, health_port) if health_port else None
                log.info("worker %s runs up to %d turns at once", jobs.owner, concurrency)
                try:
                    await stop.wait()
                    log.info("stopping: running turns get %g s to end, then go back to the queue", graceful_seconds)
                finally:
                    if health is not None:
                        health.close()
    finally:
        await services.aclose()
        await asyncio.to_thread(flush_traces)


def _on_signals() -> asyncio.Event:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    return stop


async def _serve_health(jobs: JobProcess, port: int) -> asyncio.AbstractServer:
    """A minimal HTTP answer for a supervisor's probes (no framework: a worker serves nothing else)."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = (await asyncio.wait_for(reader.readline(), 5)).decode("latin-1")
            path = line.split(" ")[1] if line.count(" ") >= 2 else "/"
            ok, body = await _probe(jobs, path)
            status = "200 OK" if ok else ("404 Not Found" if body == "not found" else "503 Service Unavailable")
            data = body.encode()
            writer.write(f"HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {len(data)}\r\n"
                         f"Connection: close\r\n\r\n".encode() + data)
            await writer.drain()
        except Exception:               # noqa: BLE001 - a probe that went away
            pass
        finally:
            writer.close()

    return await asyncio.start_server(answer, "127.0.0.1", port)


async def _probe(jobs: JobProcess, path: str) -> tuple[bool, str]:
    if path == "/health":
        return True, "ok"
    if path == "/ready":
        try:
            await jobs.store.db.fetchall("SELECT 1 AS one", ())
        except Exception as e:          # noqa: BLE001
            return False, f"database: {type(e).__name__}"
        return jobs.worker_running(), "ok" if jobs.worker_running() else "worker not running"
    return False, "not found"

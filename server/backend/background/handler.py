"""The body of a background run's job (`JobProcess.add_job_kind(kind, RunHandler(...))`), whatever its kind.

It claims the run's row (runs.py), then runs the kind's `work` in a task of its own beside a watch that renews the
lease and reads the row's cancel flag, and ends the row with what `work` returned, or `failed` with the reason.
- Taken over: a worker that died left the run `running` with its lease; the engine retries its job on another
  worker (server/backend/jobs/upkeep.py), whose claim takes the run over and whose `work` resumes it from what the
  kind stored. A run taken over `MAX_TAKEOVERS` times (a run that kills its worker, say) ends `failed`.
- Cancelled (`RunKind.cancel`, from any process): the flag reaches the owner within `POLL_SECONDS`, which stops
  `work` and ends the run `cancelled`; the engine's own abort ("user_request") does the same.
- A worker that stops (SIGTERM; the engine aborts with "shutdown") hands the run back: `work` stops, the row is let
  go and `HandedBack` makes the engine queue the job again, for the next worker to resume.
- The database goes away (PostgreSQL restarting): that is no failure of the run; it is handed back the same way, and
  resumed once the database answers.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any, Callable, Protocol

from canvas2graph.server.backend.background.runs import RENEW_SECONDS, RunRow, RunTable
from canvas2graph.server.backend.jobs.outages import database_away
from canvas2graph.server.backend.jobs.turn_runs import HandedBack

log = logging.getLogger("canvas2graph.background")

MAX_TAKEOVERS = 3           # a run whose worker died this often ends `failed`, not taken up again
POLL_SECONDS = 0.5          # how soon a cancel asked through any process stops the run
CANCELLED = "cancelled on request"


class RunFailed(Exception):
    """A run that fails for a reason its message says in full (the row's `error` is the message alone)."""


class RunKind(Protocol):
    """One kind of background run: its job kind, its table, and what a worker does with it."""

    kind: str
    table: RunTable

    async def work(self, run: RunRow) -> dict[str, Any]:
        """Run (or resume) `run`; returns the columns its row ends `finished` with. Raising ends it `failed`."""

    async def ended(self, run: RunRow, status: str, error: str | None) -> None:
        """After the row ended (any status): what else records it (an end event, the rows kept for a takeover)."""

    async def defer(self, run_id: str) -> int:
        """Queue the run's job (again); returns the engine's job id."""

    async def tidy(self) -> None:
        """Drop what ended runs left behind long enough ago (called by the sweep)."""


class RunHandler:
    """`handler(job_id, abort_reason)` for the engine's `c2g.job` jobs of one kind, run as `owner`."""

    def __init__(self, kind: RunKind, owner: str):
        self.kind, self.owner = kind, owner

    async def __call__(self, run_id: str, abort_reason: Callable[[], Any]) -> None:
        try:
            await self._run(run_id, abort_reason)
        except Exception as e:
            if not database_away(e):
                raise
            with contextlib.suppress(Exception):        # else its lease runs out, and the next claim waits for that
                await self.kind.table.release(run_id, self.owner)
            log.warning("%s %s: the database went away; handed back", self.kind.kind, run_id)
            raise HandedBack(f"{self.kind.kind} {run_id} handed back: the database went away") from e

    async def _run(self, run_id: str, abort_reason: Callable[[], Any]) -> None:
        run = await self.kind.table.take(run_id, self.owner)
        if run is None:
            return                      # it ended meanwhile, or a live worker runs it (this job was a duplicate)
        refusal = _refusal(run)
        if refusal is not None:
            await self._end(run, *refusal)
            return
        if run.attempts:
            log.warning("%s %s: its worker stopped; taken over (takeover %d)", self.kind.kind, run.id, run.attempts)
        stop: dict[str, str] = {}
        inner = asyncio.create_task(self.kind.work(run), name=f"{self.kind.kind}-{run.id}")
        watch = asyncio.create_task(self._watch(run.id, inner, stop), name=f"{self.kind.kind}-watch-{run.id}")
        try:
            values = await asyncio.shield(inner)
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                await self._aborted(run, inner, abort_reason)       # the engine aborts the job
            elif stop.get("reason") == "cancel":
                await self._end(run, "cancelled", CANCELLED)
            return                      # "lost": the run is another worker's now
        except Exception as e:          # noqa: BLE001 - the run fails, saying why; the worker goes on
            if database_away(e):
                raise
            log.warning("%s %s failed: %s: %s", self.kind.kind, run.id, type(e).__name__, e)
            await self._end(run, "failed", _reason(e))
            return
        finally:
            watch.cancel()
        await self._end(run, "finished", None, values)

    async def _end(self, run: RunRow, status: str, error: str | None, values: dict[str, Any] | None = None) -> None:
        if await self.kind.table.end(run.id, status, error, owner=self.owner, values=values):
            await self.kind.ended(run, status, error)

    async def _aborted(self, run: RunRow, inner: asyncio.Task, abort_reason: Callable[[], Any]) -> None:
        reason = abort_reason()
        inner.cancel()
        with contextlib.suppress(BaseException):
            await inner
        if getattr(reason, "value", reason) == "user_request":
            await self._end(run, "cancelled", CANCELLED)
            return
        await self.kind.table.release(run.id, self.owner)
        raise HandedBack(f"{self.kind.kind} {run.id} handed back: its worker stopped")

    async def _watch(self, run_id: str, inner: asyncio.Task, stop: dict[str, str]) -> None:
        """Renew the lease; stop the work when a cancel was asked for, or when the run is no longer this worker's."""
        renewed = time.monotonic()
        while not inner.done():
            await asyncio.sleep(POLL_SECONDS)
            try:
                if await self.kind.table.cancel_asked(run_id):
                    stop["reason"] = "cancel"
                elif time.monotonic() - renewed >= RENEW_SECONDS:
                    if not await self.kind.table.renew(run_id, self.owner):
                        stop["reason"] = "lost"
                    renewed = time.monotonic()
            except Exception as e:      # noqa: BLE001 - a database hiccup: the lease is renewed at the next tick
                log.warning("%s %s: renewing its lease failed (%s)", self.kind.kind, run_id, e)
            if stop:
                inner.cancel()
                return


def _refusal(run: RunRow) -> tuple[str, str] | None:
    """Why a claimed run ends at once instead of running: (status, error), or None to run it."""
    if run.cancel:
        return "cancelled", CANCELLED
    if run.attempts >= MAX_TAKEOVERS:
        return "failed", f"its worker stopped {run.attempts} times while running it; it is not taken up again"
    if run.request is None:
        return "failed", ("it was started by an earlier version of the server, which kept nothing to resume it "
                          "from; start it again")
    return None


def _reason(error: BaseException) -> str:
    if isinstance(error, RunFailed):
        return str(error)
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__

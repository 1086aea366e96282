"""Keeping the turns moving when processes die: what the engine's periodic `c2g.upkeep` job does, and what a
process on the embedded engine does when it starts.

- A worker that died (no heartbeat for `STALLED_SECONDS`) left its jobs `doing`: they are retried, so another
  worker continues each turn from its last checkpoint (and each background job as its handler resumes it);
  the dead worker's session leases are let go first, so the takeover does not wait for them to expire.
- A turn whose job is gone while the turn is still open (its API process died between recording the turn and
  queueing it, or the job ended without recording the turn's end) is queued again.
- The events of turns that ended `EVENTS_KEPT_SECONDS` ago are dropped.
- The embedded engine keeps its jobs in memory: a process that starts queues again, in their order, the open
  turns a dead process left in the turns table.
"""
from __future__ import annotations

import logging
import time

from canvas2graph.server.backend.jobs.engine import EVENTS_KEPT_SECONDS, LOST_JOB_SECONDS, JobEngine
from canvas2graph.server.backend.jobs.event_log import EventLog
from canvas2graph.server.backend.store import Store, lease_owner_is_dead

log = logging.getLogger("canvas2graph.jobs")


class Upkeep:
    def __init__(self, store: Store, events: EventLog, owner: str):
        self.store, self.events, self.owner = store, events, owner

    async def __call__(self, engine: JobEngine) -> None:
        await self.take_over_stalled(engine)
        await self.requeue_lost(engine)
        await self.forget_old_events()

    async def take_over_stalled(self, engine: JobEngine) -> int:
        jobs = await engine.stalled_jobs()
        jobs = [job for job in jobs if job.worker_id not in engine.worker_ids]     # this process is alive
        for job in jobs:                # one at a time: a job another process retried meanwhile is left alone
            turn = await self.store.get_turn(str(job.task_kwargs.get("turn_id", ""))) if "turn_id" in job.task_kwargs \
                else None
            if turn is not None and turn.open and turn.owner:
                await self.store.release_lease(turn.session_id, turn.owner)
                log.warning("turn %s of session %s: its worker (%s) stopped answering; taking it over",
                            turn.id, turn.session_id, turn.owner)
            try:
                await engine.retry(job)
            except Exception as e:      # noqa: BLE001 - taken over by another process meanwhile, say: the others go on
                log.warning("could not retry stalled job %s: %s", job.id, e)
        return len(jobs)

    async def requeue_lost(self, engine: JobEngine) -> int:
        count = 0
        for turn in await self.store.open_turns(older_than=time.time() - LOST_JOB_SECONDS, queue=engine.queue):
            if await engine.job_status(turn.job_id) in ("todo", "doing"):
                continue
            if turn.owner and turn.owner != self.owner and not lease_owner_is_dead(turn.owner) \
                    and await self.store.lease_is_live(turn.session_id):
                continue                # a live process runs it (a job engine of its own: the embedded one)
            await requeue(self.store, engine, turn.id, turn.session_id)
            count += 1
        return count

    async def forget_old_events(self) -> None:
        await self.events.prune(time.time() - EVENTS_KEPT_SECONDS)


async def requeue(store: Store, engine: JobEngine, turn_id: str, session_id: str) -> None:
    log.warning("turn %s of session %s had no job: queued again", turn_id, session_id)
    job_id = await engine.defer_turn(turn_id, session_id)
    await store.update_turn(turn_id, job_id=job_id, only_open=True)


async def recover_open_turns(store: Store, engine: JobEngine, owner: str) -> int:
    """The embedded engine's start: queue again the open turns of processes that are gone, oldest first."""
    count = 0
    for turn in await store.open_turns(queue=engine.queue):
        if turn.owner and turn.owner != owner and not lease_owner_is_dead(turn.owner) \
                and await store.lease_is_live(turn.session_id):
            continue
        await requeue(store, engine, turn.id, turn.session_id)
        count += 1
    return count

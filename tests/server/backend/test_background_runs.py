"""The rows of background runs (server/backend/background/runs.py) and the sweep, on a SQLite file and PostgreSQL:
a run's owner is its lock, taken over at once from a dead process of this host and never from a live one; a cancel
ends a run nobody holds and flags one that is held; the sweep queues again what no live job will run; the handler
ends a run as its work ends, stops it on a cancel, hands it back when its worker stops and gives up after
`MAX_TAKEOVERS`."""
from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
import types
import uuid

import psycopg
import pytest

from canvas2graph.server.backend.agent_tests.eval_store import EvaluationStore
from canvas2graph.server.backend.background.evaluation_runs import EvaluationRuns
from canvas2graph.server.backend.background.handler import MAX_TAKEOVERS, RunHandler
from canvas2graph.server.backend.jobs.turn_runs import HandedBack
from canvas2graph.server.backend.background.sweep import LOST_SECONDS, Sweeper
from canvas2graph.server.backend.store import open_store


def tenant() -> str:
    return f"t-{uuid.uuid4().hex[:8]}"


def dead_owner() -> str:
    """The owner name of a process of this host that has ended."""
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    return f"{socket.gethostname()}:{gone.pid}:gone"


LIVE = f"{socket.gethostname()}:{os.getpid()}:live"


async def new_run(evaluations: EvaluationStore, who: str) -> str:
    found = await evaluations.create(who, "agent", dataset="rows.jsonl", metric="contains", judge=None, version_id=None,
                                     compare_version_id=None, request={"plans": [], "rows": [], "options": {}}, total=0)
    return found.id


async def test_a_runs_owner_is_its_lock_taken_over_only_from_a_dead_or_expired_one(durable_url):
    async with open_store(durable_url) as store:
        evaluations = EvaluationStore(store)
        runs, who = evaluations.runs, tenant()
        run_id = await new_run(evaluations, who)
        dead = dead_owner()
        first = await runs.claim(run_id, dead)
        assert first.owner == dead and first.attempts == 0 and first.request == {"plans": [], "rows": [], "options": {}}
        taken = await runs.claim(run_id, LIVE)                 # its owner is gone: taken over at once
        assert taken.owner == LIVE and taken.attempts == 1
        assert await runs.claim(run_id, "elsewhere:1:x") is None            # a live owner keeps it
        assert await runs.take(run_id, "elsewhere:1:x", wait_seconds=0.2) is None
        await runs.release(run_id, LIVE)                        # handed back: the next claim is no takeover
        again = await runs.claim(run_id, "elsewhere:1:x")
        assert again.attempts == 1 and await runs.renew(run_id, "elsewhere:1:x")
        assert not await runs.renew(run_id, LIVE)               # no longer this owner's
        assert not await runs.end(run_id, "finished", owner=LIVE)
        # a lease that ran out (an owner on another host, whose death only the lease tells) is taken over
        await store.db.execute("UPDATE c2g_evaluations SET lease_until = ? WHERE id = ?", (time.time() - 1, run_id))
        assert (await runs.claim(run_id, LIVE)).attempts == 2
        assert await runs.end(run_id, "finished", owner=LIVE, values={"summary": "{}"})
        assert await runs.claim(run_id, "elsewhere:1:x") is None and not await runs.end(run_id, "failed")
        assert (await runs.get(run_id)).status == "finished"


async def test_a_cancel_ends_a_run_nobody_holds_and_flags_one_that_is_held(durable_url):
    async with open_store(durable_url) as store:
        evaluations = EvaluationStore(store)
        runs, who = evaluations.runs, tenant()
        queued, held, orphaned = [await new_run(evaluations, who) for _ in range(3)]
        assert await runs.request_cancel(queued, tenant()) is None         # another tenant's: not found
        assert await runs.request_cancel(queued, who) == "cancelled"
        assert await runs.claim(queued, LIVE) is None                       # its job finds it ended
        await runs.claim(held, LIVE)
        assert await runs.request_cancel(held, who) == "cancelling"
        assert await runs.cancel_asked(held) == "cancel" and (await runs.get(held)).status == "running"
        await runs.claim(orphaned, dead_owner())
        assert await runs.request_cancel(orphaned, who) == "cancelled"      # its owner died: nobody would stop it
        assert [(await runs.get(i)).status for i in (queued, held, orphaned)] == ["cancelled", "running", "cancelled"]
        assert await runs.request_cancel(queued, who) is None


class Engine:
    """The engine as the sweep sees it: job states, and the jobs it queues."""

    def __init__(self, states: dict[int, str]):
        self.states, self.deferred = states, []

    async def job_status(self, job_id):
        return self.states.get(job_id)

    async def defer_job(self, kind: str, job_id: str, *, lock=None) -> int:
        self.deferred.append(job_id)
        return 10_000 + len(self.deferred)


def only_of(runs, who: str) -> None:
    """The sweep sees this tenant's runs only (other tests share the PostgreSQL database)."""
    everything = runs.running

    async def running():
        return [run for run in await everything() if run.tenant == who]
    runs.running = running


async def test_the_sweep_queues_again_the_runs_no_live_job_or_owner_will_run(durable_url):
    async with open_store(durable_url) as store:
        evaluations = EvaluationStore(store)
        runs, who = evaluations.runs, tenant()
        only_of(runs, who)
        lost, fresh, held, waiting, abandoned = [await new_run(evaluations, who) for _ in range(5)]
        old = int((time.time() - LOST_SECONDS - 5) * 1000)
        for run_id in (lost, held, waiting, abandoned):
            await store.db.execute("UPDATE c2g_evaluations SET create_time = ? WHERE id = ?", (old, run_id))
        await runs.claim(held, LIVE)
        await runs.set_job(waiting, 7)
        await runs.claim(abandoned, dead_owner())
        engine = Engine({7: "todo"})
        sweeper = Sweeper(engine, [EvaluationRuns(evaluations, engine, lambda: (None, None), {})])
        await sweeper.sweep()
        assert sorted(engine.deferred) == sorted([lost, abandoned])
        assert (await runs.get(lost)).job_id is not None
        # the embedded engine's start: every job of the process before is gone, young or queued
        engine = Engine({7: "todo"})
        await Sweeper(engine, [EvaluationRuns(evaluations, engine, lambda: (None, None), {})]).sweep(starting=True)
        assert sorted(engine.deferred) == sorted([lost, fresh, waiting, abandoned])


class Kind:
    """A kind of run whose work the test gives."""

    kind = "test"

    def __init__(self, table, work):
        self.table, self._work, self.ended_with = table, work, []

    async def work(self, run):
        return await self._work(run)

    async def ended(self, run, status, error):
        self.ended_with.append((status, error))

    async def defer(self, run_id):
        return 1

    async def tidy(self):
        pass


async def test_the_handler_ends_a_run_as_its_work_ends_stops_it_on_a_cancel_and_hands_it_back_on_shutdown(durable_url):
    async def forever(run):
        await asyncio.sleep(3600)

    async def boom(run):
        raise ValueError("the judge's provider is down")

    async def report(run):
        return {"summary": '{"rows": 0}'}

    async with open_store(durable_url) as store:
        evaluations = EvaluationStore(store)
        runs, who = evaluations.runs, tenant()
        reason = types.SimpleNamespace(value="user_request")
        for work, status, error in [(report, "finished", None), (boom, "failed", "ValueError: the judge's provider is down")]:
            kind = Kind(runs, work)
            run_id = await new_run(evaluations, who)
            await RunHandler(kind, LIVE)(run_id, lambda: reason)
            assert ((await runs.get(run_id)).status, kind.ended_with) == (status, [(status, error)])

        kind = Kind(runs, forever)                  # a cancel asked through the row stops the work within a second
        run_id = await new_run(evaluations, who)
        running = asyncio.create_task(RunHandler(kind, LIVE)(run_id, lambda: reason))
        await asyncio.sleep(0.3)
        assert await runs.request_cancel(run_id, who) == "cancelling"
        await asyncio.wait_for(running, 3)
        assert kind.ended_with == [("cancelled", "cancelled on request")]

        run_id = await new_run(evaluations, who)    # the worker stops: the run goes back, running and free
        running = asyncio.create_task(RunHandler(Kind(runs, forever), LIVE)(
            run_id, lambda: types.SimpleNamespace(value="shutdown")))
        await asyncio.sleep(0.3)
        running.cancel()
        with pytest.raises(HandedBack):
            await running
        found = await runs.get(run_id)
        assert (found.status, found.owner, found.attempts) == ("running", None, 0)

        await store.db.execute("UPDATE c2g_evaluations SET attempts = ? WHERE id = ?", (MAX_TAKEOVERS - 1, run_id))
        await runs.claim(run_id, dead_owner())      # its worker dies once more: the next one fails it
        kind = Kind(runs, report)
        await RunHandler(kind, LIVE)(run_id, lambda: reason)
        assert kind.ended_with == [("failed", f"its worker stopped {MAX_TAKEOVERS} times while running it; "
                                              "it is not taken up again")]


async def test_a_database_that_goes_away_hands_the_run_back_instead_of_failing_it(durable_url):
    async def away(run):
        raise RuntimeError("while storing a row") from psycopg.OperationalError("the connection is lost")

    async with open_store(durable_url) as store:
        evaluations = EvaluationStore(store)
        runs, who = evaluations.runs, tenant()
        run_id = await new_run(evaluations, who)
        kind = Kind(runs, away)
        with pytest.raises(HandedBack, match="the database went away"):
            await RunHandler(kind, LIVE)(run_id, lambda: None)
        found = await runs.get(run_id)
        assert (found.status, found.owner, found.attempts, kind.ended_with) == ("running", None, 0, [])
        # taken up again by the same process once its lease ran out (its release failed): no takeover either
        await runs.claim(run_id, LIVE)
        await store.db.execute("UPDATE c2g_evaluations SET lease_until = ? WHERE id = ?", (time.time() - 1, run_id))
        assert (await runs.claim(run_id, LIVE)).attempts == 0

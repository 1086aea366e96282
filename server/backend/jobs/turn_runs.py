"""A turn run as a job: what a worker does with the turn the engine hands it.

`TurnWorker.run(turn_id, abort_reason)` takes the turn's row up (one more attempt), runs it with the
Runner over the session's checkpoints, streams its events into the event log, logs the user's message and
the answer in the session's message log (each once, by message id, however many attempts it takes) and
records how it ended. Whichever attempt it is, the checkpoint tells where the turn stands:
- its newest checkpoint is another turn's: the turn has not started; it runs its request;
- it is this turn's and the turn is open: a worker died mid-turn; it continues from that checkpoint
  (what completed is not run again; the step that was running streams again);
- it is this turn's and the turn is over: only what was left to record is recorded.

Cancellation comes as the engine's abort (`abort_reason() == "user_request"`): the turn stops at once and
ends as RAGFlow ends a cancelled one. A worker that stops (SIGTERM) hands its turns back instead
(`HandedBack`): their checkpoints stay, and another worker continues them.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any, Awaitable, Callable

from canvas2graph.compiler.canvas import compile_dsl
from canvas2graph.runtime.graph.state import REQUEST
from canvas2graph.runtime.run.events import MESSAGE_ID
from canvas2graph.runtime.run.runner import Runner, TurnFailed, TurnRejected, TurnRequest
from canvas2graph.runtime.services.observability import tracing_enabled
from canvas2graph.server.backend.jobs.event_log import EventLog, ends
from canvas2graph.server.backend.jobs.outages import database_away, retrying
from canvas2graph.server.backend.jobs.publisher import AnswerFold, Publisher
from canvas2graph.server.backend.jobs.rollback import roll_back
from canvas2graph.server.backend.jobs.wire import turn_event
from canvas2graph.server.backend.store import LEASE_SECONDS, Session, Store
from canvas2graph.server.backend.store_turns import ENDED, TurnRecord

log = logging.getLogger("canvas2graph.worker")

MAX_ATTEMPTS = 3                # a turn whose worker died this often is failed, not taken up again
RENEW_SECONDS = LEASE_SECONDS / 4
CANCEL_POLL_SECONDS = 0.5      # how soon a cancel asked through another process's engine stops a turn here
# turns starting at once; the others wait for a slot. On SQLite a start is all CPU on the event loop
# (statements run in place), so starting two at once is no faster than one after the other and only delays
# the tokens of running streams (200 concurrent streams: p99 98 ms with 8, 21 ms with 1); on PostgreSQL a
# start waits on the network, so several overlap.
MAX_STARTING = {"sqlite": 1, "postgresql": 8}
# how a cancel asked for ends a turn, by the action asked (LangGraph's multitask strategies included)
CANCEL_STATUS = {"cancel": "cancelled", "interrupt": "interrupted", "rollback": "rolled_back"}

ModelSource = Callable[[], tuple[Any, Any]]     # () -> (ModelFactory, Script | None), one call per turn


class HandedBack(Exception):
    """The worker stops (or its database went away): its turn goes back to the queue, for a worker to continue."""


class DatabaseAway(Exception):
    """The database did not answer mid-turn: the turn is handed back, not failed."""


class TurnWorker:
    """Runs the turns the engine hands this process."""

    def __init__(self, store: Store, events: EventLog, models: ModelSource,
                 services: dict[str, Any] | Callable[[Any], dict[str, Any]] | None, owner: str, *,
                 max_starting: int | None = None):
        self.store, self.events, self.models, self.owner = store, events, models, owner
        self.services = services if callable(services) else dict(services or {})
        postgres = (store.url or "").startswith(("postgresql://", "postgres://"))
        self._starting = asyncio.Semaphore(max_starting or MAX_STARTING["postgresql" if postgres else "sqlite"])
        self.running: dict[str, Runner] = {}          # turn id -> its runner, while it runs here
        self.sessions: dict[str, str] = {}            # turn id -> its session (the leases this worker holds)
        self.cancel_actions: dict[str, str] = {}      # turn id -> the cancel asked for ("interrupt", ...)
        self.attempts: dict[str, int] = {}            # turn id -> the attempt this worker runs
        self.lost: set[str] = set()                   # turns another worker took up while this one ran them
        # called with (tenant, the canvas's components) after a turn ran here ended (the memory extraction's queue)
        self.after_turn: list[Callable[[str, dict], Awaitable[None]]] = []
        self.canvases: dict[str, dict] = {}          # turn id -> its canvas's components, while it runs here
        self._renewer: asyncio.Task | None = None

    # --- lifecycle ------------------------------------------------------------------------------
    async def __aenter__(self) -> "TurnWorker":
        self._renewer = asyncio.create_task(self._watch_forever(), name="turn-watch")
        return self

    async def __aexit__(self, *exc) -> None:
        if self._renewer is not None:
            self._renewer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._renewer

    async def _watch_forever(self) -> None:
        """Renew the leases of running turns; stop those a cancel was asked for through the database (the engine's
        abort is quicker, but reaches only the processes of its own engine: on SQLite, one); and stop at once,
        recording nothing, a turn another worker has taken up meanwhile (this worker was thought dead: its
        event loop stalled past the heartbeat's limit, say), so that a turn never runs twice at once."""
        renewed = time.monotonic()
        while True:
            await asyncio.sleep(CANCEL_POLL_SECONDS)
            if not self.running:
                continue
            try:
                for row in await self.store.running_turn_rows(list(self.running)):
                    turn_id = row["id"]
                    if row["owner"] != self.owner or row["attempts"] != self.attempts.get(turn_id, row["attempts"]):
                        if turn_id not in self.lost:
                            log.warning("turn %s was taken up by another worker (%s); this one stops", turn_id,
                                        row["owner"])
                            self.lost.add(turn_id)
                            self.running[turn_id].cancel(close=False)       # left as is: the other worker runs it
                    elif row["cancel"] and turn_id not in self.cancel_actions:
                        self.cancel_actions[turn_id] = row["cancel"]
                        self.cancel_here(turn_id, row["cancel"])
                if time.monotonic() - renewed >= RENEW_SECONDS and self.sessions:
                    await self.store.renew_leases(self.owner, list(self.sessions.values()))
                    renewed = time.monotonic()
            except Exception:           # noqa: BLE001 - a database hiccup must not end the watch
                log.exception("watching the running turns failed")

    # --- one turn -------------------------------------------------------------------------------
    async def run(self, turn_id: str, abort_reason: Callable[[], Any]) -> None:
        """The job's body. Raises `HandedBack` when the worker stops before the turn ends."""
        # the turn runs in a task of its own: the engine's abort (a cancel) or stop cancels this one, at any
        # point, and the turn then ends as a cancelled one or is handed back, never left half taken up
        inner = asyncio.create_task(self._take_up(turn_id), name=f"turn-{turn_id}")
        try:
            await asyncio.shield(inner)
        except asyncio.CancelledError:
            reason = getattr(abort_reason(), "value", abort_reason())
            if reason == "user_request":
                turn = await self.store.get_turn(turn_id)
                action = (turn.cancel if turn is not None else None) or "cancel"
                self.cancel_actions[turn_id] = action
                self.cancel_here(turn_id, action)
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.wait_for(asyncio.shield(inner), 30)
                return
            inner.cancel()              # the worker stops: the checkpoint keeps the turn for another one
            with contextlib.suppress(BaseException):
                await inner
            await self._hand_back(turn_id)
            raise HandedBack(f"turn {turn_id} handed back: its worker stopped") from None

    async def _hand_back(self, turn_id: str) -> None:
        """Put the turn back in the queue, as it was: the attempt it was does not count (MAX_ATTEMPTS counts
        the workers that died running it)."""
        with contextlib.suppress(Exception):
            turn = await self.store.get_turn(turn_id)
            if turn is not None and turn.open:
                await self.store.update_turn(turn_id, status="queued", owner=None, attempts=max(turn.attempts - 1, 0),
                                             only_open=True)
                await self.store.release_lease(turn.session_id, self.owner)

    async def _take_up(self, turn_id: str) -> None:
        turn = await retrying(lambda: self.store.claim_turn(turn_id, self.owner))
        if turn is None:
            return                      # it ended meanwhile (cancelled while queued, say)
        if turn.attempts > MAX_ATTEMPTS:
            # its worker died that many times running it (out of memory, say): it is not taken up again
            await self._give_up(turn, f"the turn was taken up {turn.attempts - 1} times after its worker died; "
                                      "it is not run again")
            return
        if turn.cancel:
            self.cancel_actions.setdefault(turn_id, turn.cancel)    # cancelled as it was taken up: it stops at once
        self.attempts[turn_id] = turn.attempts
        try:
            await self._run(turn)
        except DatabaseAway as e:
            log.warning("turn %s: the database went away (%s); it goes back to the queue", turn_id, e.__cause__)
            await self._hand_back(turn_id)
            await asyncio.sleep(1)      # queued again at once (keeping its place before the session's later turns)
            raise HandedBack(f"turn {turn_id} handed back: the database went away") from e

    async def _give_up(self, turn: TurnRecord, reason: str) -> None:
        # its checkpoint still holds the turn open, mid-step: closed as a failed turn, or the session's next turn
        # would continue it first and stream its answer as its own (bench.scale's random worker kills)
        try:
            session = await self.store.get_session(turn.tenant, turn.session_id)
            if session is not None:
                await (await self._runner(session)).abandon(turn.session_id, turn.message_id)
        except Exception:               # noqa: BLE001 - the turn is failed all the same
            log.exception("turn %s: could not close its checkpointed turn", turn.id)
        publisher = Publisher(self.events, turn.id, await self.events.next_seq(turn.id))
        await self.finish_turn(turn, publisher, AnswerFold(), {"status": "failed", "error": reason,
                                                            "error_type": "TooManyAttempts"})

    def cancel_here(self, turn_id: str, action: str = "cancel") -> bool:
        runner = self.running.get(turn_id)
        if runner is None:
            return False
        self.cancel_actions[turn_id] = action   # read when the turn ends (its status)
        runner.cancel()
        return True

    async def _run(self, turn: TurnRecord) -> None:
        publisher = Publisher(self.events, turn.id, await self.events.next_seq(turn.id))
        fold = AnswerFold()
        if turn.attempts > 1:
            for event in await self.events.read_all(turn.id):
                fold.add(event)
            if any(ends([e]) for e in await self.events.read_all(turn.id)):
                await self._settle_logged(turn)         # ended before its worker could record it
                await publisher.close()
                return
        attempt = turn_event("attempt", attempt=turn.attempts, owner=self.owner)
        publisher.put(attempt)
        fold.add(attempt)
        end: dict[str, Any] = {}
        try:
            end = await self._drive(turn, publisher, fold)
        except BaseException as e:
            if isinstance(e, asyncio.CancelledError):
                await publisher.close()
                raise
            if database_away(e):        # not the turn's fault: it resumes from its checkpoint once the database is back
                with contextlib.suppress(BaseException):
                    await publisher.close(timeout=5)
                raise DatabaseAway(str(e)) from e
            end = {"status": "failed", "error": _reason(e), "error_type": type(e).__name__}
            if not isinstance(e, TurnFailed):
                log.exception("turn %s of session %s failed", turn.id, turn.session_id)
        finally:
            self.running.pop(turn.id, None)
            self.attempts.pop(turn.id, None)
            self.cancel_actions.pop(turn.id, None)
            if self.sessions.pop(turn.id, None) is not None:
                with contextlib.suppress(Exception):
                    await asyncio.shield(self.store.release_lease(turn.session_id, self.owner))
        components = self.canvases.pop(turn.id, None)
        if turn.id in self.lost:            # another worker runs it now: it records the turn, not this one
            self.lost.discard(turn.id)
            await publisher.close(timeout=5)
            return
        await self.finish_turn(turn, publisher, fold, end)
        if components is not None:
            for hook in self.after_turn:
                try:
                    await hook(turn.tenant, components)
                except Exception as e:  # noqa: BLE001 - the turn is over and recorded; what follows it is logged
                    log.warning("after turn %s: %s", turn.id, e)

    async def _drive(self, turn: TurnRecord, publisher: Publisher, fold: AnswerFold) -> dict[str, Any]:
        session = await self.store.get_session(turn.tenant, turn.session_id)
        if session is None:
            return {"status": "failed", "error": f"session {turn.session_id} was deleted", "error_type": "Deleted"}
        try:
            runner = await self._runner(session)
        except Exception as e:          # noqa: BLE001 - the DSL no longer compiles, a model is not configured
            return {"status": "rejected", "error": _reason(e), "error_type": type(e).__name__,
                    **_diagnostics(e)}
        request, standing = await self._request(turn, runner)
        if request is None:             # over already, with nothing left to run
            status = await self._status_now(turn, runner, standing)
            if status == "finished" and turn.message_id not in fold.finished:
                # its worker died after the turn's last checkpoint, before it reported the end: reported now
                event = await runner.finished_event(turn.session_id, turn.message_id)
                if event is not None:
                    fold.add(event)
                    publisher.put(event)
            return {"status": status}
        self.running[turn.id] = runner
        self.canvases[turn.id] = runner.compiled.plan.dsl.components
        if turn.id in self.cancel_actions:      # asked before it started: it ends as it starts
            runner.cancel()
        await self._lease(session.id)
        self.sessions[turn.id] = session.id
        logged_question = False
        earlier = EarlierTurns(self, turn)
        events = runner.run_turn(session.id, request)
        try:
            async with self._starting:          # the costly part of a turn is its start, up to its first event
                event = await anext(events, None)
            while event is not None:
                if event.get("message_id") not in (None, turn.message_id):
                    if not await earlier.take(event):
                        # an earlier turn the table has ended (given up) that its checkpoint still held open: its
                        # text is kept under its own message id, and not streamed as the answer to this question
                        fold.add(event)
                    event = await anext(events, None)
                    continue
                await earlier.close()
                if not logged_question and event.get("message_id") == turn.message_id:
                    logged_question = True
                    await self._log_question(turn, session)
                fold.add(event)
                publisher.put(event)
                event = await anext(events, None)
        except TurnRejected as e:
            return {"status": "rejected", "error": str(e), "error_type": "TurnRejected"}
        finally:
            await events.aclose()
            await earlier.close(runner.outcome.status)
        if runner.outcome.extra.get("finished_first") and not logged_question:
            # the session's interrupted turn did not finish (it paused, failed or was cancelled): this one waits
            return {"status": "rejected", "error_type": "TurnRejected",
                    "error": f"session {session.id} has an earlier turn that did not finish: answer it, then ask again"}
        outcome = runner.outcome
        status = outcome.status
        if status == "cancelled":
            status = CANCEL_STATUS.get(self.cancel_actions.pop(turn.id, "cancel"), "cancelled")
        return {"status": status, "error": outcome.error, "resumed": outcome.resumed,
                "usage": outcome.extra.get("usage") or {}}

    async def _runner(self, session: Session) -> Runner:
        compiled = await asyncio.to_thread(compile_dsl, session.dsl_text or session.dsl)
        models, script = self.models()
        services = self.services(compiled) if callable(self.services) else self.services
        # the tenant scopes what the run may read on its behalf (uploaded files: canvas2graph.runtime.services.files)
        services = {**services, "tenant": session.tenant, "agent_id": session.agent_id or ""}
        name = ""
        if session.agent_id and tracing_enabled():
            agent = await self.store.get_agent(session.tenant, session.agent_id)
            name = agent.title if agent is not None else ""
        runner = await asyncio.to_thread(lambda: Runner(compiled, self.store.checkpointer, models, script,
                                                        services=services, name=name, tenant=session.tenant))
        runner.preflight()
        return runner

    async def _request(self, turn: TurnRecord, runner: Runner) -> tuple[TurnRequest | None, str]:
        """What to run, with where the turn stands (`Runner.turn_standing`): the turn's request; or, once the turn
        has checkpointed a step, only its continuation (None when it is over: a later turn's Runner may have
        finished it first, its own job being lost)."""
        request = TurnRequest.from_dict({**turn.request, "message_id": turn.message_id})
        if request.fork is not None:
            return request, "new"
        standing = await runner.turn_standing(turn.session_id, turn.message_id)
        if standing == "new":
            return request, standing
        if standing == "interrupted":
            return TurnRequest(continue_interrupted=True, message_id=turn.message_id,
                               stream_modes=request.stream_modes, run_id=request.run_id), standing
        return None, standing

    async def _status_now(self, turn: TurnRecord, runner: Runner, standing: str) -> str:
        """How a turn that is over in its checkpoint ended (its worker died before recording it)."""
        if standing in ("paused", "failed"):
            return standing
        state = await runner.graph.aget_state({"configurable": {"thread_id": turn.session_id}})
        if (state.metadata or {}).get(MESSAGE_ID) != turn.message_id:
            return "finished"           # finished by a later turn's Runner: the session went on
        ended = (state.values.get(REQUEST) or {}).get("ended")
        return "cancelled" if ended == "cancelled" else "failed" if ended == "failed" else "finished"

    async def _lease(self, session_id: str) -> None:
        """Hold the session's lease (API requests that change a session's state take it too). A live holder
        renews it, and is waited for; one that died lets go when its lease expires."""
        waited = time.monotonic()
        while not await self.store.acquire_lease(session_id, self.owner):
            if time.monotonic() - waited > 60:
                log.warning("session %s: still waiting for another process to let it go", session_id)
                waited = time.monotonic()
            await asyncio.sleep(0.1)

    async def _log_question(self, turn: TurnRecord, session: Session) -> None:
        request = turn.request
        message: dict[str, Any] = {"role": "user", "content": request.get("query") or "", "id": turn.message_id}
        if request.get("files"):
            message["files"] = request["files"]
        fork = request.get("fork")
        if fork is not None:
            # a fork runs a past turn again: the log says so (a client then need not show the old question
            # as if it were asked again), with the question as edited when the fork changed `sys.query`
            edited = (((fork.get("overrides") or {}).get(fork.get("component_id")) or {}).get("inputs") or {}).get(
                "sys.query")
            message["fork"] = {"component_id": fork.get("component_id"),
                               **({"query": edited} if isinstance(edited, str) else {}),
                               **({"of": fork["forks"]} if fork.get("forks") else {})}      # the turn it runs again
        await self.store.append_messages(session.id, [message])

    async def finish_turn(self, turn: TurnRecord, publisher: Publisher, fold: AnswerFold, end: dict[str, Any]) -> None:
        status = end.get("status") or "failed"
        if fold.started and status != "rejected":
            for message_id in fold.message_ids():
                answer = {"role": "assistant", "content": fold.answer(message_id), "created_at": time.time(),
                          "id": message_id}
                if not await retrying(lambda: self.store.append_messages(turn.session_id, [answer], fold.reference)):
                    # deleted while it ran: drop what the turn checkpointed after the deletion
                    with contextlib.suppress(Exception):
                        await self.store.checkpointer.adelete_thread(turn.session_id)
        if status == "rolled_back":
            await roll_back(self.store, turn)
        # the row first: a reader that sees the end record finds the turn ended (and a worker dying between the
        # two leaves readers the row's end, `EventLog.follow`'s `settled`)
        await retrying(lambda: self.store.end_turn(turn.id, status, end.get("error")))
        record = {k: v for k, v in end.items() if v is not None}
        publisher.put(turn_event("end", **{**record, "status": status, "usage": end.get("usage") or fold.usage}))
        await publisher.close()
        if turn.options.get("on_run_completed") == "delete":    # a LangGraph cron's thread of its own
            await self.store.delete_sessions(turn.tenant, [turn.session_id])

    async def _settle_logged(self, turn: TurnRecord) -> None:
        """The turn's end record is in the log: its row says so too."""
        for event in reversed(await self.events.read_all(turn.id)):
            if ends([event]):
                await self.store.end_turn(turn.id, event.get("status") or "failed", event.get("error"))
                return



class EarlierTurns:
    """The events of a session's earlier turn that a turn's Runner finished first (its worker died and its own job
    was lost): they go to that turn's own stream and record, not this one's, when the turns table has it."""

    def __init__(self, worker: TurnWorker, turn: TurnRecord):
        self.worker, self.turn = worker, turn
        self.current: tuple[TurnRecord, Publisher, AnswerFold] | None = None
        self.unknown: set[str] = set()

    async def take(self, event: dict) -> bool:
        """Route an event of another message id to its turn; False when no open turn of the session has it (the
        caller keeps its text, out of its own stream)."""
        message_id = event["message_id"]
        if message_id in self.unknown:
            return False
        if self.current is None or self.current[0].message_id != message_id:
            await self.close()
            found = [t for t in await self.worker.store.open_turns(self.turn.session_id)
                     if t.message_id == message_id and t.id != self.turn.id]
            if not found:
                log.warning("turn %s: finishing first an earlier turn (message %s) that has no open record",
                            self.turn.id, message_id)
                self.unknown.add(message_id)
                return False
            other = found[0]
            self.current = (other, Publisher(self.worker.events, other.id, await self.worker.events.next_seq(other.id)),
                            AnswerFold())
            self.current[2].add(turn_event("attempt", attempt=other.attempts + 1, owner=self.worker.owner))
        _other, publisher, fold = self.current
        fold.add(event)
        publisher.put(event)
        return True

    async def close(self, status: str = "finished") -> None:
        """The earlier turn's part is over: record how it ended (finished, when this turn's own events follow)."""
        if self.current is None:
            return
        other, publisher, fold = self.current
        self.current = None
        await self.worker.finish_turn(other, publisher, fold, {"status": status if status in ENDED else "failed"})


def _reason(error: BaseException) -> str:
    return str(error) or type(error).__name__


def _diagnostics(error: BaseException) -> dict[str, Any]:
    found = getattr(error, "diagnostics", None)
    return {"diagnostics": [d.to_dict() for d in found]} if found else {}

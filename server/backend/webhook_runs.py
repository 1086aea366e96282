"""Runs of webhook calls for one server process, and the log `/webhook/logs` reads.

Each call is a session of its own (source "webhook"), checkpointed like any other, and a row of
`c2g_webhook_calls` (who called, how the run went; test calls also keep every event, for RAGFlow's
log polling). Its run is a durable turn (server/backend/jobs/): an `Immediately` call's run goes on in the
background after the answer, on whichever worker takes it, and survives the death of the process that
accepted it; a `Streaming` call waits for it.

A call whose follower (the process that accepted it) died stays `running` in the log while its turn goes on.
Every server sweeps for such calls (at startup and every `SWEEP_SECONDS`): a call whose turn has ended is
recorded from the turn's end (and, for a test call, its events from the turn's event log); a `Streaming`
call is marked `interrupted` (its caller is gone), its turn running on to its end.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from dataclasses import dataclass
from typing import Any

from canvas2graph.server.backend.conversations import Conversations, Turn
from canvas2graph.runtime.run.runner import TurnRequest
from canvas2graph.server.backend.jobs.wire import TURN_EVENT
from canvas2graph.server.backend.store import LEASE_SECONDS, Agent, Store, WebhookCall, lease_owner_is_dead
from canvas2graph.server.backend.versions import dsl_for_new_session
from canvas2graph.server.backend.webhook import IMMEDIATELY, run_inputs

log = logging.getLogger("canvas2graph.webhooks")

SWEEP_SECONDS = LEASE_SECONDS
ORPHAN_GRACE = 2 * LEASE_SECONDS      # a call another live process accepted is left alone this long
OUTCOME_STATUS = {"finished": "finished", "paused": "paused", "stopped": "stopped", "cancelled": "cancelled",
                  "failed": "failed", "rejected": "rejected"}


@dataclass
class Outcome:
    """How a call's run ended, as a `Streaming` webhook answers it."""
    success: bool
    code: int                   # the HTTP status to answer with
    message: str                # the answer's text, or why it failed

    def body(self) -> dict[str, Any]:
        return {"message": self.message, "success": self.success, "code": self.code}


class WebhookRuns:
    def __init__(self, store: Store, conversations: Conversations, sweep_seconds: float = SWEEP_SECONDS):
        self.store = store
        self.conversations = conversations
        self.sweep_seconds = sweep_seconds
        self.tasks: dict[str, asyncio.Task] = {}        # call id -> the task following its run
        self.claimed: set[str] = set()                  # calls this process starts or follows: no orphans
        self._sweeper: asyncio.Task | None = None

    @property
    def owner(self) -> str:
        return self.conversations.owner

    async def __aenter__(self) -> "WebhookRuns":
        self._sweeper = asyncio.create_task(self._sweep_forever(), name="webhook-sweep")
        return self

    async def __aexit__(self, *exc) -> None:
        """Stop following runs; their calls stay `running`, and the next server continues them."""
        tasks = [t for t in (self._sweeper, *self.tasks.values()) if t is not None]
        self.claimed.clear()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # --- calls ---------------------------------------------------------------------------------------
    async def start(self, agent: Agent, payload: dict, *, mode: str, is_test: bool, method: str,
                    client: str) -> tuple[WebhookCall, Turn]:
        """Record the call, make its session and start its run (raises what Conversations.start raises)."""
        dsl, version = await dsl_for_new_session(self.store, agent)
        name = f"Webhook {'test ' if is_test else ''}{method}"
        session = await self.store.create_session(agent.tenant, source="webhook", dsl=dsl, agent_id=agent.id,
                                                  name=name, user_id=agent.tenant, version=version)
        request = TurnRequest(query="", inputs=run_inputs(payload), user_id=agent.tenant)
        call = WebhookCall(id=uuid.uuid4().hex, tenant=agent.tenant, agent_id=agent.id, is_test=is_test,
                           mode=mode if mode == IMMEDIATELY else "Streaming", status="running", start_ts=time.time(),
                           session_id=session.id, method=method, client=client, owner=self.owner,
                           request={"query": request.query, "inputs": request.inputs, "user_id": request.user_id})
        self.claimed.add(call.id)                       # not an orphan while it starts
        try:
            await self.store.add_webhook_call(call)
            turn = await self.conversations.start(session, request, source="webhook")
        except BaseException as e:
            self.claimed.discard(call.id)
            await asyncio.shield(self._end(call, "rejected", error=_reason(e)))
            # a run that never started leaves no session behind (the call's log says why)
            await asyncio.shield(self.store.delete_sessions(agent.tenant, [session.id]))
            raise
        return call, turn

    def follow(self, call: WebhookCall, turn: Turn) -> asyncio.Task:
        """Follow the run to its end in its own task (a caller that leaves does not stop the recording)."""
        task = asyncio.create_task(self._follow(call, turn), name=f"webhook-{call.id}")
        self.claimed.add(call.id)
        self.tasks[call.id] = task

        def done(_):
            self.tasks.pop(call.id, None)
            self.claimed.discard(call.id)
        task.add_done_callback(done)
        return task

    async def _follow(self, call: WebhookCall, turn: Turn) -> Outcome:
        seq = await self.store.next_event_seq(call.id) if call.is_test else 0
        pieces: list[str] = []
        status = 200
        try:
            async for batch in turn.batches():
                for event in batch:
                    data = event.get("data") or {}
                    if event.get("event") == "message":
                        piece = ("<think>" if data.get("start_to_think") else "</think>" if data.get("end_to_think")
                                 else data.get("content") or "")
                        if piece:
                            pieces.append(piece)
                    elif event.get("event") == "message_end":
                        status = _status(data.get("status"), status)
                if call.is_test:
                    await self.store.add_webhook_events(call.id, seq, [(time.time(), e) for e in batch])
                    seq += len(batch)
        except asyncio.CancelledError:
            raise                   # the server stops: the call stays running, for the next server
        except Exception as e:      # noqa: BLE001 - the run broke outside its components
            message = _reason(e)
            await self._trace_end(call, seq, success=False, error=(message, type(e).__name__))
            await self._end(call, "failed", error=message)
            return Outcome(False, 500, message)
        result = turn.outcome.status
        if result not in OUTCOME_STATUS:    # the turn was stopped with its server: resumed later
            return Outcome(False, 503, "the server stopped before the run ended; it continues after a restart")
        ok = result in ("finished", "paused")
        error = None if ok else (turn.outcome.error or "the run was cancelled")
        await self._trace_end(call, seq, success=ok, error=(error, "ComponentError") if error else None)
        await self._end(call, OUTCOME_STATUS[result], error=error, http_status=status if ok else 500)
        return Outcome(True, status, "".join(pieces)) if ok else Outcome(False, 500, error)

    async def _trace_end(self, call: WebhookCall, seq: int, *, success: bool, error: tuple[str, str] | None) -> None:
        if not call.is_test:
            return
        events: list[tuple[float, dict]] = []
        if error is not None:
            events.append((time.time(), {"event": "error", "message": error[0], "error_type": error[1]}))
        events.append((time.time(), {"event": "finished", "elapsed_time": time.time() - call.start_ts,
                                     "success": success}))
        with contextlib.suppress(Exception):
            await self.store.add_webhook_events(call.id, seq, events)

    async def _end(self, call: WebhookCall, status: str, *, error: str | None = None,
                   http_status: int | None = None) -> None:
        try:
            fields: dict[str, Any] = {"status": status, "end_ts": time.time(), "error": error}
            if http_status is not None:
                fields["http_status"] = http_status
            await self.store.update_webhook_call(call.id, **fields)
        except Exception:           # noqa: BLE001 - the log is not worth failing the answer for
            log.exception("could not record the end of webhook call %s", call.id)

    # --- calls left by stopped or dead servers --------------------------------------------------------
    async def _sweep_forever(self) -> None:
        while True:
            try:
                await self.resume_orphans()
            except Exception:       # noqa: BLE001 - a database hiccup must not end the sweeps
                log.exception("sweeping webhook calls failed")
            await asyncio.sleep(self.sweep_seconds)

    async def _orphaned(self, call: WebhookCall) -> bool:
        if call.id in self.claimed or not call.session_id:
            return False
        if call.owner == self.owner or (call.owner and lease_owner_is_dead(call.owner)):
            return True
        return time.time() - call.start_ts > ORPHAN_GRACE

    async def resume_orphans(self) -> int:
        """Record the calls no live server follows whose turns have ended; returns how many were settled."""
        settled = 0
        for call in await self.store.running_webhook_calls():
            if not await self._orphaned(call):
                continue
            if call.mode != IMMEDIATELY:
                await self._end(call, "interrupted", error="the server stopped during the run; its caller was gone")
                continue
            if await self._settle(call):
                settled += 1
        return settled

    async def _settle(self, call: WebhookCall) -> bool:
        """Record a call from its turn, once that has ended (it runs on in a worker meanwhile)."""
        turns = await self.store.session_turns(call.tenant, call.session_id or "", limit=1)
        if not turns:
            await self._end(call, "failed", error="the call's run was lost (its session or turn was deleted)")
            return True
        turn = turns[0]
        if turn.open:
            return False
        status = OUTCOME_STATUS.get({"rolled_back": "cancelled", "interrupted": "cancelled"}.get(turn.status, turn.status),
                                    "failed")
        ok = status in ("finished", "paused")
        if call.is_test:            # the events its follower could not record, from the turn's event log
            events = [e for e in await self.conversations.events.read_all(turn.id) if e.get("event") != TURN_EVENT]
            recorded = await self.store.next_event_seq(call.id)
            await self.store.add_webhook_events(call.id, recorded, [(time.time(), e) for e in events[recorded:]])
            await self._trace_end(call, max(recorded, len(events)), success=ok,
                                  error=None if ok else (turn.error or "the run was cancelled", "ComponentError"))
        await self._end(call, status, error=None if ok else (turn.error or "the run was cancelled"))
        log.info("recorded webhook call %s of agent %s from its turn (%s)", call.id, call.agent_id, turn.status)
        return True


def _status(value: Any, current: int) -> int:
    """A Message's `status` as an HTTP status; anything else keeps `current`."""
    try:
        status = int(value)
    except (TypeError, ValueError):
        return current
    return status if 100 <= status <= 599 else current


def _reason(error: BaseException) -> str:
    return str(error) or type(error).__name__

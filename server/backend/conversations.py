"""Turns of stored sessions, asked for through any of the server's APIs and run as jobs by any worker.

`Conversations.start(session, request)` records the turn (`c2g_turns`), queues it on the job engine behind
the session's earlier turns (server/backend/jobs/), and hands back a `Turn` that reads its events from the
event log: the turn runs wherever a worker is free (in this process with `serve --workers N`, or in a
`canvas2graph worker`), and its stream reaches the client through whichever API process the client asked.

- Double texting: a message to a session that is running a turn waits behind it, in arrival order
  (`policy="enqueue"`, the default), or is refused at once (`"reject"`: `SessionBusy`). LangGraph's
  `multitask_strategy` adds `"interrupt"` and `"rollback"`: the running turn is stopped first.
- Cancel (`cancel`, `Turn.cancel`, a client that leaves): a queued turn never runs; a running one stops at
  once, in whichever process runs it (the engine's abort), and ends as RAGFlow ends a cancelled run.
- A turn outlives the API process that asked for it: `attach` reads a running (or recently ended) turn's
  events from the start, from any process.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Callable

from canvas2graph.compiler.canvas import compile_dsl
from canvas2graph.runtime.run.runner import Runner, TurnFailed, TurnOutcome, TurnRejected, TurnRequest
from canvas2graph.server.backend.jobs.engine import JobEngine
from canvas2graph.server.backend.jobs.event_log import EventLog
from canvas2graph.server.backend.jobs.publisher import AnswerFold
from canvas2graph.server.backend.jobs.turn_runs import CANCEL_STATUS
from canvas2graph.server.backend.jobs.wire import TURN_EVENT, turn_event
from canvas2graph.server.backend.store import Session, Store, process_owner
from canvas2graph.server.backend.store_turns import TurnRecord

log = logging.getLogger("canvas2graph.conversations")

POLICIES = ("enqueue", "reject")
STRATEGIES = ("reject", "enqueue", "interrupt", "rollback")

ModelSource = Callable[[], tuple[Any, Any]]     # () -> (ModelFactory, Script | None), one call per turn


class SessionBusy(Exception):
    """The session is running a turn and the request may not wait for it (policy or strategy "reject")."""


@dataclass
class Turn:
    """A turn as its asker sees it: iterate `events()` (or `batches()`) once; `cancel()` stops it."""
    record: TurnRecord
    session: Session
    request: TurnRequest
    conversations: "Conversations"
    usage: dict = field(default_factory=dict)
    # what the events add up to, as the message log keeps it (think tags restored; after a takeover, the dead
    # worker's unfinished step counted once: `content`)
    fold: AnswerFold = field(default_factory=AnswerFold)
    reference: dict = field(default_factory=dict)
    outcome: TurnOutcome = field(default_factory=TurnOutcome)
    end: dict | None = None             # the turn's end record, once read
    first: list[dict] | None = None     # the first batch, read by `Conversations.start`
    # whether a reader that leaves early stops the turn (as a RAGFlow client that leaves does): the asker's
    # reader does, one re-attached to a turn running on does not
    asker: bool = True
    _follow: AsyncIterator[list[dict]] | None = None

    @property
    def id(self) -> str:
        return self.record.id

    def cancel(self, action: str = "cancel") -> None:
        """The reader left early: stop the turn, if this reader asked for it (from a `finally` or a callback:
        the request goes out in the background)."""
        if self.end is None and self.asker:
            self.conversations.cancel_soon(self.record, action)

    async def _batches(self) -> AsyncIterator[list[dict]]:
        if self._follow is None:
            self._follow = self.conversations.events.follow(self.record.id, settled=self._settled)
        async for batch in self._follow:
            yield batch

    async def _settled(self) -> dict | None:
        """The turn's end from its row, once it has ended (for a log that lost its end record)."""
        row = await self.conversations.store.get_turn(self.record.id)
        if row is None:
            return turn_event("end", status="failed", error="the turn was deleted")
        if row.open:
            return None
        return turn_event("end", status=row.status, error=row.error)

    async def read_first(self) -> None:
        """Wait for the turn's first events (it may wait behind the session's earlier turns)."""
        async for batch in self._batches():
            if self._take(batch):
                self.first = batch
                return

    @property
    def content(self) -> str:
        """The answer, as the message log keeps it."""
        return "".join(self.fold.answer(message_id) for message_id in self.fold.message_ids())

    def _take(self, batch: list[dict]) -> bool:
        """Note what a batch says of the turn; True when it holds events a client sees, or the end."""
        seen = False
        for event in batch:
            self.fold.add(event)            # a takeover's `attempt` record included
            if event.get("event") == TURN_EVENT:
                if event.get("kind") == "end":
                    self._ended(event)
                    seen = True
                continue
            seen = True
            self._collect(event)
        return seen

    def _ended(self, end: dict) -> None:
        self.end = end
        status = end.get("status") or "failed"
        self.outcome = TurnOutcome(status="cancelled" if status in CANCEL_STATUS.values() else status,
                                   error=end.get("error"), resumed=end.get("resumed"),
                                   extra={"usage": end.get("usage") or {}, "status": status})
        if isinstance(end.get("usage"), dict) and end["usage"]:
            self.usage = dict(end["usage"])

    def _collect(self, event: dict) -> None:
        kind, data = event.get("event"), event.get("data") or {}
        if kind == "message_end" and isinstance(data.get("reference"), dict):
            self.reference.update(data["reference"])
        elif kind == "workflow_finished" and isinstance(data.get("usage"), dict):
            self.usage = dict(data["usage"])

    async def batches(self) -> AsyncIterator[list[dict]]:
        """The turn's events, in lists of those already waiting (a busy server writes them to the client at
        once, not one write per event); raises what ended it abnormally (a worker or store failure)."""
        first, self.first = self.first, None
        if first is not None:
            shown = _shown(first)
            if shown:
                yield shown
        if self.end is None:
            async for batch in self._batches():
                self._take(batch)
                shown = _shown(batch)
                if shown:
                    yield shown
                if self.end is not None:
                    break
        if self.end is not None and (self.end.get("status") == "failed"):
            raise TurnFailed(self.end.get("error") or "the turn failed")

    async def events(self) -> AsyncIterator[dict]:
        async for batch in self.batches():
            for event in batch:
                yield event


def _shown(batch: list[dict]) -> list[dict]:
    return [e for e in batch if e.get("event") != TURN_EVENT]


def _rejection(end: dict) -> Exception:
    """A turn that could not start, as the exception the routes answer for it."""
    kind, message = end.get("error_type"), end.get("error") or "the turn could not start"
    if kind == "CompileError" and end.get("diagnostics"):
        from canvas2graph.types import CompileError, Diagnostic
        return CompileError([Diagnostic(**d) for d in end["diagnostics"]])
    if kind == "ModelConfigError":
        from canvas2graph.runtime.services.models import ModelConfigError
        return ModelConfigError(message)
    return TurnRejected(message)


class Conversations:
    """Asks for turns of stored sessions, for one API process."""

    def __init__(self, store: Store, engine: JobEngine, events: EventLog, models: ModelSource,
                 services: dict[str, Any] | Callable[[Any], dict[str, Any]] | None = None, *,
                 policy: str = "enqueue", owner: str | None = None):
        if policy not in POLICIES:
            raise ValueError(f"double-texting policy {policy!r}: use one of {', '.join(POLICIES)}")
        self.store, self.engine, self.events, self.models = store, engine, events, models
        self.services = services if callable(services) else dict(services or {})
        self.policy = policy
        self.owner = owner or process_owner()
        self._background: set[asyncio.Task] = set()
        # set when the server starts to stop: the streams it closes then were not left by their clients, and
        # their turns run on (a client re-attaches from another process)
        self.stopping = False

    async def __aenter__(self) -> "Conversations":
        return self

    async def __aexit__(self, *exc) -> None:
        """Cancels sent in the background still go out; the turns themselves run on in their workers."""
        if self._background:
            await asyncio.wait(self._background, timeout=5)

    # --- asking for turns -------------------------------------------------------------------------
    async def start(self, session: Session, request: TurnRequest, *, source: str = "agent",
                    options: dict | None = None, strategy: str | None = None) -> Turn:
        """Queue a turn and wait for its first events.

        Raises before anything is streamed when the turn cannot run: `SessionBusy`, `CompileError` (the
        session's DSL has errors), a model configuration error, or `TurnRejected` (a paused session without
        the inputs it waits for)."""
        # no check here before queueing: the message takes its place in the session's queue as it arrives, and
        # a turn that cannot run (a DSL that no longer compiles, a model without its key) is refused by its
        # worker, before any event, as `_rejection` raises it
        record = await self.submit(session, request, source=source, options=options, strategy=strategy)
        turn = self.attach(record, session, request)
        await turn.read_first()
        if turn.end is not None and turn.end.get("status") == "rejected":
            raise _rejection(turn.end)
        return turn

    async def preflight(self, session: Session) -> None:
        """Refuse at once what no worker could run: a DSL with errors, an ingestion pipeline, a model without
        its configuration (compiled once per content, in a thread)."""
        compiled = await asyncio.to_thread(compile_dsl, session.dsl_text or session.dsl)
        models, script = self.models()
        runner = await asyncio.to_thread(lambda: Runner(compiled, None, models, script))
        runner.preflight()

    async def submit(self, session: Session, request: TurnRequest, *, source: str = "agent",
                     options: dict | None = None, strategy: str | None = None) -> TurnRecord:
        """Record and queue a turn without waiting for it (background runs, schedules, webhooks)."""
        strategy = strategy or self.policy
        if strategy not in STRATEGIES:
            raise ValueError(f"multitask strategy {strategy!r}: use one of {', '.join(STRATEGIES)}")
        if strategy != "enqueue":
            running = await self.store.open_turns(session.id)
            if running and strategy == "reject":
                raise SessionBusy(f"session {session.id} is running a turn; wait for it to end or cancel it")
            for earlier in running:
                await self.cancel_turn(earlier, strategy)
        record = TurnRecord(id=request.run_id or uuid.uuid4().hex, session_id=session.id, tenant=session.tenant,
                            source=source, status="queued", request=request.to_dict(),
                            message_id=request.message_id or str(uuid.uuid4()), options=dict(options or {}),
                            queue=self.engine.queue)
        await self.store.add_turn(record)
        record.job_id = await self.engine.defer_turn(record.id, session.id)
        await self.store.update_turn(record.id, job_id=record.job_id)
        return record

    def attach(self, record: TurnRecord, session: Session, request: TurnRequest | None = None, *,
               asker: bool = True) -> Turn:
        """A reader of a turn's events from its first one, whichever process runs it; `asker=False` for a
        reader that re-attaches (its leaving does not stop the turn)."""
        request = request or TurnRequest.from_dict(record.request)
        return Turn(record=record, session=session, request=request, conversations=self, asker=asker)

    # --- cancelling -------------------------------------------------------------------------------
    async def cancel(self, tenant: str, session_id: str, action: str = "cancel") -> bool:
        """Cancel the session's queued and running turns, wherever they run; False when there were none."""
        cancelled = False
        for turn in await self.store.open_turns(session_id):
            if turn.tenant == tenant:
                cancelled = await self.cancel_turn(turn, action) or cancelled
        return cancelled

    async def cancel_turn(self, turn: TurnRecord, action: str = "cancel") -> bool:
        """Stop one turn: "cancel" (RAGFlow's, LangGraph's `runs.cancel`), "interrupt" or "rollback"."""
        await self.store.update_turn(turn.id, cancel=action, only_open=True)
        state = await self.engine.abort(turn.job_id, turn.id) if turn.job_id is not None else None
        if state == "running" or (state is None and turn.status == "running"):
            return True                 # its worker stops it (told by the engine, or by the turn's row) and ends it
        status = CANCEL_STATUS.get(action, "cancelled")
        # a job cancelled before it ran ends its turn here; without a job, only a turn that never started
        if await self.store.end_turn(turn.id, status, only_queued=state is None):
            # it never ran (or its job is gone): its readers are told here
            end = [{"event": "workflow_finished", "message_id": turn.message_id, "task_id": turn.session_id,
                    "data": {"inputs": (turn.request.get("inputs") or {}), "outputs": "Task has been canceled"}},
                   turn_event("end", status=status)]
            await self.events.append(turn.id, await self.events.next_seq(turn.id), end)
            return True
        return state is not None

    def cancel_soon(self, turn: TurnRecord, action: str = "cancel") -> None:
        if self.stopping:
            return
        task = asyncio.ensure_future(self._cancel_quietly(turn, action))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _cancel_quietly(self, turn: TurnRecord, action: str) -> None:
        try:
            fresh = await self.store.get_turn(turn.id)
            if fresh is not None and fresh.open:
                await self.cancel_turn(fresh, action)
        except Exception:               # noqa: BLE001 - a client that left: nothing to tell it
            log.exception("could not cancel turn %s", turn.id)

    async def running_sessions(self) -> list[str]:
        """Sessions with a queued or running turn (not to be deleted under it)."""
        return list(dict.fromkeys(t.session_id for t in await self.store.open_turns()))

"""Turns of stored sessions, run on behalf of a server: one turn per session at a time, cancellable,
and independent of the client that asked for it.

A turn runs in its own task and hands its events to the caller through a queue. So a client that
goes away does not tear the graph down mid-step: the turn is cancelled at the next node boundary
(`Runner.cancel()`), ends as RAGFlow ends a cancelled run, and the session stays consistent. A
server that stops (or dies) mid-turn leaves the last checkpoint; the next request on that session
continues from it (`Runner` resumes interrupted turns).

Several server processes may share one PostgreSQL database: a turn holds the session's lease
(`Store.acquire_lease`) while it runs, and a cancel request that reaches another process is passed
on through the database (polled every `POLL_SECONDS`).
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Callable

from canvas2graph.compiler.canvas import compile_dsl
from canvas2graph.server.backend.answer_text import message_text
from canvas2graph.runtime.run.checkpoint import is_postgres
from canvas2graph.runtime.run.runner import Runner, TurnFailed, TurnRejected, TurnRequest
from canvas2graph.server.backend.store import LEASE_SECONDS, Session, Store, process_owner
from canvas2graph.runtime.services.observability import tracing_enabled

log = logging.getLogger("canvas2graph.conversations")

POLL_SECONDS = 0.25           # how soon a cancel sent to another process takes effect
# turns starting at once; the others queue for a slot (see Conversations.start). On SQLite a start is all
# CPU on the event loop (statements run in place), so starting two at once is no faster than one after the
# other and only delays the tokens of running streams (200 concurrent streams: p99 98 ms with 8, 21 ms with
# 1, the burst admitted as fast); on PostgreSQL a start waits on the network, so several overlap.
MAX_STARTING = {"sqlite": 1, "postgresql": 8}
RENEW_SECONDS = LEASE_SECONDS / 4

ModelSource = Callable[[], tuple[Any, Any]]     # () -> (ModelFactory, Script | None), one call per turn


class SessionBusy(Exception):
    """Another turn is running on this session (here or in another server process)."""


class _End:
    pass


_END = _End()


@dataclass
class _Failure:
    error: BaseException


@dataclass
class Turn:
    """A running (or finished) turn: iterate `events()` once; `cancel()` stops it at the next node boundary."""
    session: Session
    request: TurnRequest
    runner: Runner
    queue: asyncio.Queue = field(default_factory=asyncio.Queue)
    task: asyncio.Task | None = None
    usage: dict = field(default_factory=dict)
    content: str = ""                   # the answer as the message log keeps it (think tags restored)
    reference: dict = field(default_factory=dict)
    first: Any = None                   # the first queue item, taken by Conversations.start

    @property
    def outcome(self):
        return self.runner.outcome

    def cancel(self) -> None:
        self.runner.cancel()

    async def events(self) -> AsyncIterator[dict]:
        """The turn's events; raises what ended it abnormally (a store failure, a crash)."""
        async for batch in self.batches():
            for event in batch:
                yield event

    async def batches(self) -> AsyncIterator[list[dict]]:
        """The turn's events, in lists of those already waiting: a busy server writes them to the
        client at once instead of one write per event. Never waits for more events than there are."""
        item = self.first
        self.first = None
        while True:
            if item is None:
                item = await self.queue.get()
            batch = []
            while True:
                if item is _END or isinstance(item, _Failure):
                    if batch:
                        yield batch
                    if item is _END:
                        return
                    raise item.error
                batch.append(item)
                if self.queue.empty():
                    break
                item = self.queue.get_nowait()
            yield batch
            item = None


class Conversations:
    """Runs turns of stored sessions for one server process."""

    def __init__(self, store: Store, models: ModelSource,
                 services: dict[str, Any] | Callable[[Any], dict[str, Any]] | None = None, busy_wait: float = 30.0,
                 max_starting: int | None = None):
        self.store = store
        # Starting a turn (loading its checkpoint, the first steps up to its first event) is the costly
        # part; a burst of hundreds of starts would fill the event loop's queue and delay the tokens of
        # every running stream. A few at a time start just as fast overall and keep streams smooth.
        if max_starting is None:
            max_starting = MAX_STARTING["postgresql" if is_postgres(store.url or "") else "sqlite"]
        self._starting = asyncio.Semaphore(max_starting)
        # how long a request waits for the session's running turn to end before it is refused: clients
        # send the next question as soon as they read `message_end`, a moment before the turn ends
        self.busy_wait = busy_wait
        self.models = models
        # run-wide services for `ctx.extras`: a dict, or a function of the compiled canvas (a backend
        # opened only for canvases that need it)
        self.services = services if callable(services) else dict(services or {})
        self.owner = process_owner()
        self.turns: dict[str, Turn] = {}
        self._watcher: asyncio.Task | None = None

    # --- lifecycle ------------------------------------------------------------------------------
    async def __aenter__(self) -> "Conversations":
        self._watcher = asyncio.create_task(self._watch(), name="conversations-watch")
        return self

    async def __aexit__(self, *exc) -> None:
        """Stop at once: running turns keep their last checkpoint and resume on the next request."""
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watcher
        tasks = [t.task for t in self.turns.values() if t.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _watch(self) -> None:
        """Renew the leases of running turns and pass on cancel requests made through other processes."""
        renewed = time.monotonic()
        while True:
            await asyncio.sleep(POLL_SECONDS)
            if not self.turns:
                continue
            try:
                for sid in await self.store.cancel_requests(self.owner):
                    turn = self.turns.get(sid)
                    if turn is not None:
                        turn.cancel()
                if time.monotonic() - renewed >= RENEW_SECONDS:
                    await self.store.renew_leases(self.owner, list(self.turns))
                    renewed = time.monotonic()
            except Exception:           # a database hiccup must not end the watch
                log.exception("lease renewal or cancel polling failed")

    # --- turns ----------------------------------------------------------------------------------
    async def start(self, session: Session, request: TurnRequest) -> Turn:
        """Start a turn and wait for its first event.

        Raises before anything is streamed when the turn cannot run: `SessionBusy`, `CompileError`
        (the session's DSL has errors), a model configuration error, or `TurnRejected` (a paused
        session without the inputs it waits for).
        """
        # compiling (cached by content) and building the graph are CPU work: a thread keeps the loop serving
        compiled = await asyncio.to_thread(compile_dsl, session.dsl_text or session.dsl)
        models, script = self.models()
        services = self.services(compiled) if callable(self.services) else self.services
        # the tenant scopes what the run may read on its behalf (uploaded files: canvas2graph.runtime.services.files)
        services = {**services, "tenant": session.tenant}
        name = await self._trace_name(session)
        # building the graph is CPU work too: a thread keeps the loop serving
        runner = await asyncio.to_thread(lambda: Runner(compiled, self.store.checkpointer, models, script,
                                                        services=services, name=name, tenant=session.tenant))
        runner.preflight()
        await self._take(session.id)
        turn = Turn(session=session, request=request, runner=runner)
        self.turns[session.id] = turn
        try:
            await self._starting.acquire()
        except BaseException:       # cancelled while waiting for a slot: give the session back
            self.turns.pop(session.id, None)
            await asyncio.shield(self.store.release_lease(session.id, self.owner))
            raise
        try:                        # the slot is held until the turn's first event
            turn.task = asyncio.create_task(self._drive(turn), name=f"turn-{session.id}")
            turn.first = await turn.queue.get()
        finally:
            self._starting.release()
        if isinstance(turn.first, _Failure) and isinstance(turn.first.error, TurnRejected):
            raise turn.first.error
        return turn

    async def _trace_name(self, session: Session) -> str:
        """What the turn's trace is named after: its agent's title (read only when tracing is on), else
        the title its DSL came with ("" lets the Runner choose)."""
        if session.agent_id and tracing_enabled():
            agent = await self.store.get_agent(session.tenant, session.agent_id)
            if agent is not None:
                return agent.title
        return ""

    async def _take(self, session_id: str) -> None:
        """Hold the session's lease, waiting up to `busy_wait` seconds for a running turn to end."""
        deadline = time.monotonic() + self.busy_wait
        while True:
            local = self.turns.get(session_id)
            if local is None and await self.store.acquire_lease(session_id, self.owner):
                return
            left = deadline - time.monotonic()
            if left <= 0:
                raise SessionBusy(f"session {session_id} is running a turn; wait for it to end or cancel it")
            if local is not None and local.task is not None:
                await asyncio.wait({local.task}, timeout=left)
            else:                           # held by another process (or just taken here): look again soon
                await asyncio.sleep(min(0.05, left))

    async def cancel(self, tenant: str, session_id: str) -> bool:
        """Cancel the session's running turn, wherever it runs; False when none is running."""
        flagged = await self.store.request_cancel(tenant, session_id)
        turn = self.turns.get(session_id)
        if turn is not None and turn.session.tenant == tenant:
            turn.cancel()
            return True
        return flagged

    async def _drive(self, turn: Turn) -> None:
        sid = turn.session.id
        started = stopping = False
        message_id = ""
        try:
            async for event in turn.runner.run_turn(sid, turn.request):
                if not started:
                    started = True
                    message_id = event.get("message_id", "")
                    turn.usage = turn.runner.outcome.extra.get("usage", turn.usage)
                    if turn.runner.outcome.resumed != "interruption":   # an interrupted turn logged its question
                        await self.store.append_messages(sid, [self._user_message(turn, message_id)])
                self._collect(turn, event)
                turn.queue.put_nowait(event)
        except asyncio.CancelledError:
            stopping = True         # the server is stopping: the checkpoint keeps the turn for later
            raise
        except BaseException as e:  # noqa: BLE001 - every failure reaches the client, never the log only
            if isinstance(e, TurnFailed):
                log.warning("turn on session %s failed: %s", sid, e)
            elif not isinstance(e, TurnRejected):
                log.exception("turn on session %s failed", sid)
            turn.queue.put_nowait(_Failure(e))
        finally:
            try:
                if started and not stopping:    # a stopped turn logs its answer when it resumes
                    answer = {"role": "assistant", "content": turn.content, "created_at": time.time(), "id": message_id}
                    if not await asyncio.shield(self.store.append_messages(sid, [answer], turn.reference)):
                        # deleted while it ran: drop what the turn checkpointed after the deletion
                        await asyncio.shield(self.store.checkpointer.adelete_thread(sid))
            except BaseException:   # noqa: BLE001
                log.exception("could not record the answer of session %s", sid)
            finally:
                self.turns.pop(sid, None)
                with contextlib.suppress(BaseException):
                    await asyncio.shield(self.store.release_lease(sid, self.owner))
                turn.queue.put_nowait(_END)

    @staticmethod
    def _user_message(turn: Turn, message_id: str) -> dict:
        message = {"role": "user", "content": turn.request.query, "id": message_id}
        if turn.request.files:
            message["files"] = turn.request.files
        fork = turn.request.fork
        if fork is not None:
            # a fork runs a past turn again: the log says so (a client then need not show the old question
            # as if it were asked again), with the question as edited when the fork changed `sys.query`
            edited = ((fork.overrides.get(fork.component_id) or {}).get("inputs") or {}).get("sys.query")
            message["fork"] = {"component_id": fork.component_id,
                               **({"query": edited} if isinstance(edited, str) else {})}
        return message

    @staticmethod
    def _collect(turn: Turn, event: dict) -> None:
        """The answer as RAGFlow logs it: message text with the think markers put back."""
        kind, data = event.get("event"), event.get("data") or {}
        if kind == "message":
            turn.content += message_text(data)
        elif kind == "message_end" and isinstance(data.get("reference"), dict):
            turn.reference.update(data["reference"])
        elif kind == "workflow_finished" and isinstance(data.get("usage"), dict):
            turn.usage = dict(data["usage"])

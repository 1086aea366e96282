"""Run one turn of a conversation: read the session, choose how the graph continues, stream its events.

A session is a LangGraph thread (`thread_id` = session id) in the checkpointer, and the Runner drives
the graph with LangGraph's own calls, as any LangGraph user can (`ragflow_events` over `astream`);
the turn's bookkeeping (globals, history, turn count) happens inside the graph. A request is one of:
- a new turn (the last one finished, failed or was cancelled): the request (`CanvasInput`) as input;
- a resumed pause (the last turn stopped at a UserFillUp or Begin form): `Command(resume=...)` with the
  request's inputs and query, refused first when a required field is missing;
- a resumed interruption (the process running the last turn died): input None, which continues from
  the last checkpoint; components that completed are not run again. The interrupted turn keeps its message
  id. A request that carries a message of its own (a query, inputs or files) finishes the interrupted turn
  first and is then answered as a turn of its own, never in place of the dead one; an empty request (or one
  with `continue_interrupted`, as a worker taking a turn over sends) only finishes it.
What the Runner adds: that choice, cancellation (`cancel()`: at once, a model's stream included), a check of
the models before the turn, and closing a turn that was cancelled or that the engine or the checkpointer
broke, so the next request starts afresh.
"""
from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import asdict, dataclass, field
from typing import Any, AsyncIterator

from langgraph._internal._constants import INTERRUPT
from langgraph.constants import END
from langgraph.errors import GraphRecursionError
from langgraph.types import Command

from canvas2graph.text import scrub
from canvas2graph.types import RunContext, TurnRejected
from canvas2graph.compiler.canvas import CompiledCanvas
from canvas2graph.nodes.begin import missing_fields, resume_value
from canvas2graph.runtime.run.events import FINISH, MESSAGE_ID, STREAM_MODES, EventAdapter, TurnEvents, refuse_pipeline
from canvas2graph.runtime.run.retention import compact
from canvas2graph.runtime.run.steps import ForkPlan
from canvas2graph.runtime.graph.state import GLOBALS, HISTORY, REQUEST
from canvas2graph.runtime.services.observability import trace_config
from canvas2graph.runtime.graph.values import unstorable

_log = logging.getLogger(__name__)

__all__ = ["Runner", "TurnRequest", "TurnOutcome", "TurnRejected", "TurnFailed", "STREAM_MODES", "DURABILITY"]

# A step's checkpoint is saved before the next step starts, so a process killed at any moment loses only
# the steps that were running ("async" could lose finished ones).
DURABILITY = "sync"


@dataclass
class TurnRequest:
    query: Any = ""
    inputs: dict[str, Any] | None = None
    user_id: str = ""
    files: list | None = None
    # a fork from a step of the session (runtime/run/steps.py `fork_plan`): the run starts from its checkpoint
    fork: Any = None
    # LangGraph stream modes to pass on raw beside RAGFlow's events (runtime/run/events.py RAW_EVENT)
    stream_modes: list[str] | None = None
    # the run id of the turn's root run (LangGraph Server's run id: astream_events' root `run_id`)
    run_id: str | None = None
    # the turn's message id (RAGFlow's events and the step trace name the turn by it); None: a new one
    message_id: str | None = None
    # only continue the session's interrupted turn, if it has one (a worker taking over a turn whose
    # process died); otherwise a request with a message of its own finishes that turn first
    continue_interrupted: bool = False

    def __post_init__(self) -> None:
        # what a user sends may hold lone surrogates (valid JSON, not text): events must stay encodable;
        # and what no session can store (NaN, integers beyond 64 bits, ...) is refused before it starts
        self.query, self.inputs, self.user_id, self.files = scrub((self.query, self.inputs, self.user_id, self.files))
        problem = unstorable({"query": self.query, "inputs": self.inputs, "files": self.files})
        if problem:
            raise TurnRejected(f"the request cannot be stored: {problem.replace('output ', '')}")

    def to_dict(self) -> dict[str, Any]:
        """The request as JSON values: a queued turn is stored so, and run by another process."""
        value = {k: v for k, v in asdict(self).items() if k != "fork"}
        if self.fork is not None:
            value["fork"] = asdict(self.fork)
        return value

    @classmethod
    def from_dict(cls, value: dict[str, Any]) -> "TurnRequest":
        fields_ = dict(value)
        if fields_.get("fork") is not None:
            fields_["fork"] = ForkPlan(**fields_["fork"])
        return cls(**fields_)

    def carries_message(self) -> bool:
        """Whether the request asks something of its own (not only "go on")."""
        return bool(self.query or self.inputs or self.files) and not self.continue_interrupted

    def graph_input(self) -> dict[str, Any]:
        """The request as the graph's input (`CanvasInput`)."""
        value: dict[str, Any] = {"query": self.query, "inputs": dict(self.inputs or {})}
        if self.user_id:
            value["user_id"] = self.user_id
        if self.files:
            value["files"] = self.files
        return value


@dataclass
class TurnOutcome:
    """How the last turn ended: finished, paused, stopped (a component failed) or cancelled."""
    status: str = "running"
    error: str | None = None
    events: int = 0
    resumed: str | None = None          # "pause" or "interruption" when the turn continued an earlier one
    extra: dict[str, Any] = field(default_factory=dict)




class TurnFailed(Exception):
    """The turn stopped for a reason that is no component's failure (its step limit, an engine or
    checkpointer error). The turn is closed: the next request on the session starts a new one."""


def _request_of(saved) -> dict:
    """The turn's request record in a checkpoint tuple, counting the writes of tasks that finished after
    it: the turn opens in Begin's step, whose checkpoint a killed process or a failed write may not leave."""
    if not saved:
        return {}
    request = saved.checkpoint["channel_values"].get(REQUEST) or {}
    for _task, channel, value in saved.pending_writes or ():
        if channel == REQUEST and isinstance(value, dict):
            request = value
    return request


def _closed(saved) -> bool:
    """Whether the newest checkpoint closed its turn, as far as it tells without the graph: the turn's request
    is closed and this step wrote it. A step that did not write it belongs to a turn that has begun (its input,
    or the step that read the input, is saved) and whose Begin step is not: its process died in between.
    (A checkpoint of an older LangGraph does not list its updated channels: it is taken as closed.)"""
    if not saved or _request_of(saved).get("open") or _paused(saved):
        return False
    updated = saved.checkpoint.get("updated_channels")
    return updated is None or REQUEST in updated


def _stopped(error: Any) -> bool:
    """A task error that only says its run was stopped: LangGraph records the CancelledError of the tasks
    of a run that was cancelled (a server or worker stopping mid-step). Such a task runs again on resume."""
    return "CancelledError" in f"{type(error).__name__} {error}"


def _paused(saved) -> bool:
    """True when a form waits: its step saved an interrupt. (A Begin form pauses the step that opens the turn.)"""
    return bool(saved) and any(channel == INTERRUPT for _task, channel, _value in saved.pending_writes or ())


class Runner:
    def __init__(self, compiled: CompiledCanvas, checkpointer, models, script=None,
                 services: dict[str, Any] | None = None, *, name: str = "", tenant: str = ""):
        refuse_pipeline(compiled)
        self.compiled = compiled
        # what traces are named after (default: the DSL's title) and whose runs they are: runtime/services/observability.py
        self.name = name or compiled.plan.dsl.title
        self.tenant = tenant
        # run-wide services nodes reach through `ctx.services`: "retrieval" (a backend), "mcp" (server
        # configs), "code" (the code-execution policy), ...
        self.services = dict(services or {})
        self.checkpointer = checkpointer
        self.models = models
        self.script = script
        self.graph = compiled.graph(checkpointer)
        self.outcome = TurnOutcome()
        self._context: RunContext | None = None
        self._stop: asyncio.Event | None = None
        self._cancel: bool | None = None        # a cancel asked for (True: at once), kept for a run not yet started
        self._close_cancelled = True

    def preflight(self) -> None:
        """Fail before the turn starts when a model is not configured (a missing key, say)."""
        if self.script is not None:
            return
        for cid, node in self.compiled.plan.nodes.items():
            llm_id = getattr(node.params, "llm_id", None)
            if llm_id:
                self.models.check(llm_id, component_id=cid)

    def cancel(self, at_once: bool = True, close: bool = True) -> None:
        """Stop the running turn: at once (its running components, a model's stream included, are cancelled
        and finish with RAGFlow's cancelled error), or with `at_once=False` at the next node boundary. Either
        way the turn ends as RAGFlow ends a cancelled run, and the session takes the next request. With
        `close=False` the turn is only left, as a process that died leaves it (another runs it on)."""
        self._close_cancelled = close
        self._cancel = True if at_once else self._cancel if self._cancel is not None else False
        if self._context is not None:
            self._context.cancel_requested = True
        if at_once and self._stop is not None:
            self._stop.set()

    async def waiting_for(self, session_id: str) -> dict | None:
        """The form a paused session waits for ({component_id, inputs, tips}), or None."""
        snapshot = await self._open_turn(self._config(session_id))
        if snapshot is None:
            return None
        for task in snapshot.tasks:
            if task.interrupts:
                return dict(task.interrupts[0].value or {})
        return None

    async def interrupted(self, session_id: str) -> dict | None:
        """The session's turn whose process died before it ended ({"message_id", "query"}), or None."""
        snapshot = await self._open_turn(self._config(session_id))
        if snapshot is None or not snapshot.tasks or any(t.interrupts for t in snapshot.tasks) \
                or any(t.error and not _stopped(t.error) for t in snapshot.tasks):
            return None
        values, metadata = snapshot.values, snapshot.metadata or {}
        if (values.get(REQUEST) or {}).get("open"):
            query = (values.get(GLOBALS) or {}).get("sys.query", "")
        else:                   # Begin's step is not saved: the query is the input's (unread when only it is saved)
            query = values.get("query", "") if metadata.get("source") != "input" else ""
        return {"message_id": metadata.get(MESSAGE_ID), "query": query}

    async def abandon(self, session_id: str, message_id: str) -> bool:
        """Close the session's checkpointed turn `message_id` as a failed one if it is still open (a turn that is
        given up mid-way), so that the session's next turn starts afresh instead of continuing it first; False
        when that turn is not the open one."""
        if self.checkpointer is None:
            return False
        if await self.turn_standing(session_id, message_id) != "interrupted":
            return False
        await self._close_turn(self._config(session_id), ended="failed")
        return True

    async def turn_standing(self, session_id: str, message_id: str) -> str:
        """Where the session's turn `message_id` stands in its checkpoints, for a worker that takes it up again:
        "new" (nothing of it is saved: run its request), "interrupted" (it began and its process died: continue
        it), "paused" (a form waits), "failed" (a step failed and nothing closed it) or "over" (it ended, here or
        finished first by the session's next request)."""
        if self.checkpointer is None:
            return "new"
        config = self._config(session_id)
        saved = await self.checkpointer.aget_tuple(config)
        if saved is None:
            return "new"
        if (saved.metadata or {}).get(MESSAGE_ID) != message_id:
            async for _ran in self.checkpointer.alist(config, filter={MESSAGE_ID: message_id}, limit=1):
                return "over"
            return "new"
        snapshot = await self._open_turn(config, saved)
        if snapshot is None or not snapshot.tasks:
            return "over"
        if any(t.interrupts for t in snapshot.tasks):
            return "paused"
        if any(t.error and not _stopped(t.error) for t in snapshot.tasks):
            return "failed"
        return "interrupted"

    async def finished_event(self, session_id: str, message_id: str) -> dict | None:
        """The `workflow_finished` of the session's last turn, `message_id`, if it finished: for a worker taking up a
        turn whose process died after the turn's last checkpoint and before it reported the end. None otherwise."""
        if self.checkpointer is None:
            return None
        state = await self.graph.aget_state(self._config(session_id))
        request = state.values.get(REQUEST) or {}
        if (state.metadata or {}).get(MESSAGE_ID) != message_id or request.get("open") or request.get("ended"):
            return None
        history = state.values.get(HISTORY) or []
        answer = history[-1][1] if history and history[-1][0] == "assistant" else {}
        adapter = EventAdapter(self.compiled, session_id=session_id, request_inputs=request.get("inputs") or {},
                               message_id=message_id)
        return adapter.workflow_finished(answer)

    async def _fail(self, config: dict, message: str, error: Exception) -> None:
        """End a turn that broke outside its components: close it, record why, tell the caller."""
        self.outcome.status, self.outcome.error = "stopped", message
        try:
            await self._close_turn(config, ended="failed")
        except Exception as e:          # the checkpointer itself may be what failed
            message += f" (the turn could not be closed: {type(e).__name__}: {e})"
            self.outcome.error = message
        raise TurnFailed(message) from error

    async def _close_turn(self, config: dict, ended: str | None = None) -> None:
        """Mark the checkpointed turn as over, as the finish node would (without an answer).

        Otherwise the next request would find the turn open with steps still to run, and continue
        it as if its process had died, meeting the same failure again."""
        if self.checkpointer is None:
            return
        # the state with the writes of the tasks that finished: the turn opens in Begin's step, whose own
        # checkpoint may be what failed, and the conversation keeps the broken turn's user line
        state = await self.graph.aget_state(config)
        values = state.values
        request = values.get(REQUEST) or {}
        if request.get("open"):
            update = {key: values[key] for key in (HISTORY, GLOBALS) if key in values}
            # as the finish node, whose only edge leads to the end: the update schedules nothing
            closed = {**request, "open": False, **({"ended": ended} if ended else {})}
            await self.graph.aupdate_state(config, {**update, REQUEST: closed}, as_node=FINISH)
        elif state.tasks and not any(t.interrupts for t in state.tasks):
            # only its input is saved (its process died before Begin's step): LangGraph drops its tasks
            await self.graph.aupdate_state(config, None, as_node=END)

    def _config(self, session_id: str) -> dict:
        return {"configurable": {"thread_id": session_id}, "recursion_limit": self.compiled.recursion_limit}

    async def _open_turn(self, config: dict, saved=None):
        """The snapshot of an unfinished turn (paused, interrupted or failed), else None.

        `saved` is the session's checkpoint tuple when the caller has read it already."""
        if self.checkpointer is None:
            return None
        if saved is None:
            saved = await self.checkpointer.aget_tuple(config)
        if not saved or _closed(saved):
            return None
        return await self.graph.aget_state(config)

    async def _start(self, session_id: str, request: TurnRequest, config: dict):
        """(the graph input for this request, how it resumes an earlier turn, the snapshot it continues)."""
        if request.fork is not None:        # LangGraph's time travel: the step's tasks run again on a new branch
            plan = request.fork
            return (Command(resume=resume_value(plan.resume, "")) if plan.resume is not None else None), "fork", None
        snapshot = await self._open_turn(config)
        # `tasks`, not `next`: `next` leaves out tasks whose writes were saved, and a process killed after
        # a step's writes but before the next checkpoint leaves only such tasks
        if snapshot is not None and snapshot.tasks:
            paused = [t for t in snapshot.tasks if t.interrupts]
            if paused:
                form = paused[0].interrupts[0].value or {}
                missing = missing_fields(form.get("inputs") or {}, request.inputs or {})
                if missing:
                    raise TurnRejected(f"session {session_id} is waiting for {form.get('component_id', 'a form')}: "
                                       f"provide inputs for {', '.join(missing)}")
                return Command(resume=resume_value(request.inputs, request.query)), "pause", snapshot
            if not any(t.error and not _stopped(t.error) for t in snapshot.tasks):
                # the process died (or was stopped) mid-turn: continue from the checkpoint
                return None, "interruption", snapshot
        return request.graph_input(), None, None

    async def run_turn(self, session_id: str, request: TurnRequest) -> AsyncIterator[dict]:
        """The turn's events. A session whose last turn was interrupted (its process died) has that turn
        finished first; a request with a message of its own is then answered in a turn of its own."""
        self.outcome = TurnOutcome()
        config = self._config(session_id)
        graph_input, resumed, snapshot = await self._start(session_id, request, config)
        if resumed == "interruption" and request.carries_message():
            interrupted = (snapshot.metadata or {}).get(MESSAGE_ID)
            _log.info("session %s: finishing its interrupted turn before the new request", session_id)
            self.outcome.extra["finished_first"] = interrupted
            async for event in self._run(session_id, TurnRequest(continue_interrupted=True, message_id=interrupted),
                                         config, None, resumed, snapshot):
                yield event
            if self.outcome.status != "finished":       # it paused, failed or was cancelled: the request waits
                return
            finished_first = self.outcome.extra["finished_first"]
            self.outcome = TurnOutcome(extra={"finished_first": finished_first})
            graph_input, resumed, snapshot = await self._start(session_id, request, config)
        elif resumed == "interruption" and not request.message_id:
            request.message_id = (snapshot.metadata or {}).get(MESSAGE_ID)     # the turn keeps its id
        async for event in self._run(session_id, request, config, graph_input, resumed, snapshot):
            yield event

    async def _run(self, session_id: str, request: TurnRequest, config: dict, graph_input: Any,
                   resumed: str | None, snapshot) -> AsyncIterator[dict]:
        self.outcome.resumed = resumed
        self._stop = asyncio.Event()
        self._context = context = RunContext(models=self.models, script=self.script, session_id=session_id,
                                             services=dict(self.services), cancel_requested=self._cancel is not None)
        if self._cancel:
            self._stop.set()
        start_config = config
        if request.fork is not None:
            context.overrides = dict(request.fork.overrides)
            fork_config = request.fork.config
            if request.fork.resume is not None:
                # a form answered on a new branch: a copy of its checkpoint (LangGraph's "__copy__" fork), which
                # holds no answer yet; time travel to the checkpoint itself would replay the answer it has
                fork_config = await self.graph.aupdate_state(fork_config, None, as_node="__copy__")
            start_config = {**config, "configurable": {**config["configurable"], **fork_config["configurable"]}}
        # tracing: the one place a turn's run config gets the tracers' pieces ({} when tracing is off)
        run_config = {**start_config, **trace_config(self.name, session_id, user_id=request.user_id, tenant=self.tenant)}
        if request.run_id:
            run_config["run_id"] = uuid.UUID(request.run_id)
        events = TurnEvents(self.graph, graph_input, run_config, context=context, snapshot=snapshot,
                            durability=DURABILITY if self.checkpointer is not None else None,
                            request_inputs=request.inputs or {}, fork=request.fork is not None,
                            raw_modes=request.stream_modes, message_id=request.message_id, stop=self._stop)
        self.outcome.extra["usage"] = events.usage      # live model usage, also for turns that pause or stop
        self.outcome.extra["message_id"] = events.adapter.message_id
        try:
            async for event in events:
                self.outcome.events += 1
                yield event
        except GraphRecursionError as e:
            message = (f"the turn exceeded its step limit of {self.compiled.recursion_limit} steps; "
                       "the session is ready for a new turn")
            await self._fail(config, message, e)
        except Exception as e:          # the engine, the checkpointer or a bug, not a component
            await self._fail(config, f"the turn failed: {type(e).__name__}: {e}", e)
        finally:
            self._context = None
            self._cancel = None             # asked of this run: the runner's next turn starts afresh
        self.outcome.status = events.status
        if events.error:
            self.outcome.error = events.error
        if self.checkpointer is not None and self.outcome.status == "cancelled" and self._close_cancelled:
            # stopped mid-step, its tasks look like an interruption: closed, the next request starts afresh
            await self._close_turn(config, ended="cancelled")
        if self.checkpointer is not None and self.outcome.status == "finished":
            await self._compact(session_id)

    async def _compact(self, session_id: str) -> None:
        """Keep every step of the last turns and only the trace of older ones (runtime/run/retention.py). A failure
        leaves the session as it was (each store compacts in one transaction) and is logged, not raised."""
        try:
            await compact(self.graph, session_id)
        except Exception as e:
            _log.warning("session %s: compacting its older turns failed (%s: %s); every step is kept",
                         session_id, type(e).__name__, e)

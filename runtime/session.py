"""Run one turn of a conversation: load the session, start or resume the graph, translate its stream.

A session is a LangGraph thread (`thread_id` = session id) in the checkpointer. A turn is one of:
- a new turn (the last one finished, failed or was cancelled): start from Begin;
- a resumed pause (the last turn stopped at a UserFillUp or Begin form): `Command(resume=...)` with
  the request's inputs;
- a resumed interruption (the process running the last turn died): continue from the last
  checkpoint; components that completed are not run again.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, AsyncIterator

from langgraph.errors import GraphRecursionError, NodeTimeoutError
from langgraph.types import Command

from compiler import CompiledCanvas
from canvas2graph.types import ComponentError
from nodes.begin import resume_value
from nodes.fillup import missing_fields
from canvas2graph.text import scrub
from canvas2graph.types import RunContext, TurnCancelled
from runtime.events import FINISH, EventAdapter
from runtime.state import LAST, LOOPS, OUTPUTS, REQUEST
from runtime.tracing import trace_config
from runtime.turn import prepare_turn, resume_update
from runtime.values import is_pending, unstorable

STREAM_MODES = ["tasks", "custom"]


@dataclass
class TurnRequest:
    query: str = ""
    inputs: dict[str, Any] | None = None
    user_id: str = ""
    files: list | None = None

    def __post_init__(self) -> None:
        # what a user sends may hold lone surrogates (valid JSON, not text): events must stay encodable;
        # and what no session can store (NaN, integers beyond 64 bits, ...) is refused before it starts
        self.query, self.inputs, self.user_id, self.files = scrub((self.query, self.inputs, self.user_id, self.files))
        problem = unstorable({"query": self.query, "inputs": self.inputs, "files": self.files})
        if problem:
            raise TurnRejected(f"the request cannot be stored: {problem.replace('output ', '')}")


@dataclass
class TurnOutcome:
    """How the last turn ended: finished, paused, stopped (a component failed) or cancelled."""
    status: str = "running"
    error: str | None = None
    events: int = 0
    resumed: str | None = None          # "pause" or "interruption" when the turn continued an earlier one
    extra: dict[str, Any] = field(default_factory=dict)


class TurnRejected(Exception):
    """The request cannot run on this session as it is (e.g. a pause needs inputs it did not give)."""


class TurnFailed(Exception):
    """The turn stopped for a reason that is no component's failure (its step limit, an engine or
    checkpointer error). The turn is closed: the next request on the session starts a new one."""


def _unsettled(snapshot, containers: set[str]) -> dict[str, tuple[dict, dict, bool]]:
    """Components of an unfinished turn whose node_finished is still due: id -> (outputs, inputs, container).

    Two kinds wait for something later in the turn: a component whose content is a pending
    generation (until a Message streams it) and an Iteration or Loop that has not finished its
    passes (until it is done). The adapter that held them belonged to the request that paused, or
    to a process that died; the request that continues the turn holds them again. Writes of tasks
    that finished after the last checkpoint count.
    """
    outputs = {cid: dict(v) for cid, v in (snapshot.values.get(OUTPUTS) or {}).items()}
    loops = dict(snapshot.values.get(LOOPS) or {})
    last = snapshot.values.get(LAST) or {}
    for task in snapshot.tasks:
        result = task.result if isinstance(task.result, dict) else {}
        for cid, values in (result.get(OUTPUTS) or {}).items():
            outputs[cid] = {**outputs.get(cid, {}), **values}
        for cid, values in (result.get(LOOPS) or {}).items():
            loops[cid] = {**loops.get(cid, {}), **values}
        last = result.get(LAST) or last
    held = {}
    for cid, values in outputs.items():
        running = cid in containers and cid in loops and not loops[cid].get("done")
        if running or any(is_pending(v) for v in values.values()):
            # a container's own run reports no inputs; a producer's are in `last` if it ran last
            inputs = (last.get("inputs") or {}) if last.get("component_id") == cid and not running else {}
            held[cid] = (values, inputs, running)
    return held


class Runner:
    def __init__(self, compiled: CompiledCanvas, checkpointer, models, script=None,
                 services: dict[str, Any] | None = None, *, name: str = "", tenant: str = ""):
        self.compiled = compiled
        # what traces are named after (default: the DSL's title) and whose runs they are: runtime/tracing.py
        self.name = name or compiled.plan.dsl.title
        self.tenant = tenant
        # run-wide services nodes reach through `ctx.extras`: "retrieval" (a backend), "mcp" (server
        # configs), "code" (the code-execution policy), ...
        self.services = dict(services or {})
        self.checkpointer = checkpointer
        self.models = models
        self.script = script
        self.graph = compiled.graph(checkpointer)
        self.outcome = TurnOutcome()
        self._context: RunContext | None = None
        self._held: dict[str, tuple[dict, dict, bool]] = {}

    def preflight(self) -> None:
        """Fail before the turn starts when a model is not configured (a missing key, say)."""
        if self.script is not None:
            return
        for cid, node in self.compiled.plan.nodes.items():
            llm_id = getattr(node.params, "llm_id", None)
            if llm_id:
                self.models.check(llm_id, component_id=cid)

    def cancel(self) -> None:
        """Stop the running turn at the next node boundary."""
        if self._context is not None:
            self._context.cancel_requested = True

    async def waiting_for(self, session_id: str) -> dict | None:
        """The form a paused session waits for ({component_id, inputs, tips}), or None."""
        snapshot = await self._open_turn(self._config(session_id))
        if snapshot is None:
            return None
        for task in snapshot.tasks:
            if task.interrupts:
                return dict(task.interrupts[0].value or {})
        return None

    async def _fail(self, config: dict, message: str, error: Exception) -> None:
        """End a turn that broke outside its components: close it, record why, tell the caller."""
        self.outcome.status, self.outcome.error = "stopped", message
        try:
            await self._close_turn(config)
        except Exception as e:          # the checkpointer itself may be what failed
            message += f" (the turn could not be closed: {type(e).__name__}: {e})"
            self.outcome.error = message
        raise TurnFailed(message) from error

    async def _close_turn(self, config: dict) -> None:
        """Mark the checkpointed turn as over, as the finish node would (without an answer).

        Otherwise the next request would find the turn open with steps still to run, and continue
        it as if its process had died, meeting the same failure again."""
        if self.checkpointer is None:
            return
        saved = await self.checkpointer.aget_tuple(config)
        request = (saved.checkpoint["channel_values"].get(REQUEST) or {}) if saved else {}
        if request.get("open"):
            # as the finish node, whose only edge leads to the end: the update schedules nothing
            await self.graph.aupdate_state(config, {REQUEST: {**request, "open": False}}, as_node=FINISH)

    def _containers(self) -> set[str]:
        return {cid for cid, node in self.compiled.plan.nodes.items() if node.role == "container"}

    def _config(self, session_id: str) -> dict:
        return {"configurable": {"thread_id": session_id}, "recursion_limit": self.compiled.recursion_limit}

    async def _open_turn(self, config: dict, saved=None):
        """The snapshot of an unfinished turn (paused, interrupted or failed), else None.

        `saved` is the session's checkpoint tuple when the caller has read it already."""
        if self.checkpointer is None:
            return None
        if saved is None:
            saved = await self.checkpointer.aget_tuple(config)
        if not saved or not (saved.checkpoint["channel_values"].get(REQUEST) or {}).get("open"):
            return None
        return await self.graph.aget_state(config)

    async def _start(self, session_id: str, request: TurnRequest, config: dict):
        """The graph input for this request, and whether it resumes an earlier turn."""
        # one read of the session serves both questions: is a turn open, and what did the last one leave
        saved = await self.checkpointer.aget_tuple(config) if self.checkpointer is not None else None
        snapshot = await self._open_turn(config, saved) if saved else None
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
                update = resume_update(snapshot.values, query=request.query, inputs=request.inputs)
                self._held = _unsettled(snapshot, self._containers())
                return Command(resume=resume_value(request.inputs), update=update), "pause"
            if not any(t.error for t in snapshot.tasks):
                self._held = _unsettled(snapshot, self._containers())
                return None, "interruption"      # the process died mid-turn: continue from the checkpoint
        values = saved.checkpoint["channel_values"] if saved else None
        return prepare_turn(values, initial_globals=self.compiled.plan.dsl.initial_globals(),
                            component_ids=self.compiled.component_ids, query=request.query,
                            inputs=request.inputs, user_id=request.user_id, files=request.files), None

    async def run_turn(self, session_id: str, request: TurnRequest) -> AsyncIterator[dict]:
        self.outcome = TurnOutcome()
        config = self._config(session_id)
        self._held = {}
        graph_input, resumed = await self._start(session_id, request, config)
        self.outcome.resumed = resumed
        adapter = EventAdapter(self.compiled, session_id=session_id, request_inputs=request.inputs or {})
        self.outcome.extra["usage"] = adapter.usage     # live model usage, also for turns that pause or stop
        for node in self.compiled.plan.nodes.values():
            if node.id in self._held:     # their node_finished waits for a stream or a container's end
                outputs, inputs, container = self._held[node.id]
                adapter.held[node.id] = {**adapter.node_finished(node, outputs, inputs), "outputs": dict(outputs),
                                         "container": container}
        self._context = context = RunContext(models=self.models, script=self.script, session_id=session_id,
                                                   extras=dict(self.services))
        if resumed is None:
            yield adapter.workflow_started()        # RAGFlow sends none when a turn resumes
        try:
            # "sync": a step's checkpoint is saved before the next step starts, so a process killed
            # at any moment loses only the steps that were running ("async" could lose finished ones)
            # tracing: the one place a turn's run config gets the tracers' pieces ({} when tracing is off)
            run_config = {**config, **trace_config(self.name, session_id, user_id=request.user_id, tenant=self.tenant)}
            async for part in self.graph.astream(graph_input, run_config, context=context,
                                                 durability="sync" if self.checkpointer is not None else None,
                                                 stream_mode=STREAM_MODES, version="v2"):
                for event in adapter.feed(part):
                    self.outcome.events += 1
                    yield event
            for event in adapter.end():
                self.outcome.events += 1
                yield event
        except ComponentError as e:
            for event in adapter.component_failed(e.component_id, e.outputs, e.inputs, e.message):
                yield event
            self.outcome.status, self.outcome.error = "stopped", f"{e.component_id}: {e.message}"
            return
        except NodeTimeoutError as e:
            node = self.compiled.node_by_name().get(e.node)
            cid = node.id if node else e.node
            message = f"{cid} timed out after {e.timeout:g} s"
            for event in adapter.component_failed(cid, {"_ERROR": message, "_elapsed_time": e.elapsed}, {}, message):
                yield event
            self.outcome.status, self.outcome.error = "stopped", message
            return
        except TurnCancelled:
            yield adapter.cancelled()
            self.outcome.status = "cancelled"
            return
        except GraphRecursionError as e:
            message = (f"the turn exceeded its step limit of {self.compiled.recursion_limit} steps; "
                       "the session is ready for a new turn")
            await self._fail(config, message, e)
        except Exception as e:          # the engine, the checkpointer or a bug, not a component
            await self._fail(config, f"the turn failed: {type(e).__name__}: {e}", e)
        finally:
            self._context = None
        if adapter.paused:
            self.outcome.status = "paused"
        else:
            self.outcome.status = "finished" if adapter.finished else "stopped"

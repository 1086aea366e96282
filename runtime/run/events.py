"""LangGraph stream -> RAGFlow events (SPEC 6.1-6.2).

`ragflow_events(graph, input, config)` runs a compiled canvas graph with its own `astream` and yields
RAGFlow's events: what `canvas2graph run --format jsonl` prints, the server's SSE and the Runner are
all made of it. `EventAdapter` is the mapping itself, for a caller that streams the graph.

The graph is streamed with `stream_mode=["tasks", "custom"]`:
- a task start becomes `node_started` (all starts of a superstep come before its results, like
  RAGFlow's batches);
- a task result becomes `node_finished`, except for a component whose `content` is a pending
  generation: its `node_finished` waits until the Message that streams it reports the final
  content (RAGFlow's order: message..., message_end, node_finished(LLM), node_finished(Message));
- custom items written by nodes are `message` / `message_end` events and usage counts;
- the end of the turn (a result that closes the request: the finish node's, or that of the
  component that records it inline) becomes `workflow_finished`, sent by `end()` once the stream is
  over: the finish node can run twice in a turn (see compiler/build.py), and only its last answer counts.

Inside a superstep, the events are put in RAGFlow's order (path order, not LangGraph's task order) by
`canvas2graph.runtime.graph.event_order.BatchOrder` (issue 22): starts sorted, then each task's events once the tasks before
it have finished. `feed` routes every part through it; `end`, `component_failed` and `drain` release what
it still holds.
"""
from __future__ import annotations

import copy
import time
import uuid
from typing import Any, AsyncIterator, Iterable

from canvas2graph.runtime.graph.event_order import TASK_KEY, BatchOrder, bursts
from canvas2graph.runtime.graph.state import HISTORY, INPUTS, LAST, LOOPS, OUTPUTS, REQUEST, merge_values, overwritten, resolved
from canvas2graph.runtime.graph.values import is_pending

STREAM_MODES = ["tasks", "custom"]
# A turn asked for more of LangGraph's stream (server/protocols/langgraph_api.py) yields each part of those
# modes as it comes, as `{"event": RAW_EVENT, "mode": ..., "ns": ..., "data": ...}` beside RAGFlow's events.
RAW_EVENT = "langgraph"
# the raw mode that asks for `astream_events` (LangGraph Server's `events` stream mode): each callback event
# of the run (a node's or a model's start, stream and end) is passed on as a part of this mode
EVENTS_MODE = "events"
INTERRUPT = "__interrupt__"            # langgraph's key of a pause's interrupts in a `values` chunk
FINISH = "__canvas_finish__"
HANDLER_PREFIX = "__error_handler__"
CANCELLED_TEXT = "Task has been canceled"
MESSAGE_ID = "message_id"              # the checkpoint metadata key naming the run's message
MAY_PAUSE = {"UserFillUp", "Begin"}
FUSED = "__fused__"                    # canvas2graph.compiler.fusion.FUSED: the custom items of a fused chain      # their node_started waits until we know they did not pause


# the steps after which producers whose generation ran finish: a Message's (RAGFlow's post-processing releases its
# `partials` after each message_end) and a pass's start item (a pass's unseen generation runs at its end)
_RELEASES_RAN = frozenset({"Message", "IterationItem", "LoopItem"})


def _handled_task(name: str | None) -> str | None:
    """The task an error handler's task goes on with (its own name for any other task)."""
    if name and name.startswith(HANDLER_PREFIX):
        return name[len(HANDLER_PREFIX):]
    return name


def _pending(outputs: dict) -> bool:
    return any(is_pending(v) for v in outputs.values())


def written(result: dict, key: str) -> Any:
    """What a task wrote to a channel; Begin's step, which starts the turn, overwrites some."""
    return overwritten(result.get(key))


class EventAdapter:
    def __init__(self, compiled, *, session_id: str, request_inputs: Any, message_id: str | None = None):
        self.nodes = compiled.node_by_name()
        self.by_id = {node.id: node for node in self.nodes.values()}
        # a fused node (compiler/fusion.py) reports its chain's components through custom items; its task's
        # result is its last component's
        self.fused_last = {name: self.by_id[chain[-1]] for name, chain in getattr(compiled, "fused", {}).items()}
        self.session_id = session_id
        self.message_id = message_id or str(uuid.uuid4())
        self.created_at = int(time.time())
        self.started_at = time.perf_counter()
        self.request_inputs = request_inputs
        self.usage = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0, "calls": 0}
        self.held: dict[str, dict] = {}         # component id -> node_finished awaiting its stream or its container's end
        self.starts: dict[str, dict] = {}       # component id -> node_started held until we know it did not pause
        self.paused = False
        self.finished = False
        self.answer: Any = None                 # the finish node's last answer, sent by end()
        self.ran: set[str] = set()              # tasks of a resumed step that finished before it paused
        self.failed: set[str] = set()           # components whose failure node_finished was sent
        plan = compiled.plan
        self.order_of = (plan.successors, {cid: i for i, cid in enumerate(plan.nodes)})
        self.order = BatchOrder(self._node, *self.order_of)

    def _item(self, ns: tuple) -> "EventAdapter":
        """The adapter of one item of a parallel Iteration: the same turn (message id, usage), with its own
        held starts and finishes, since every item runs the same components at the same time."""
        items = self.__dict__.setdefault("_items", {})
        if ns not in items:
            child = copy.copy(self)
            child.held, child.starts, child.__dict__["_items"] = {}, {}, {}
            child.ran = set()         # `failed` stays shared: a failure the item reported is not reported again
            child.order = BatchOrder(child._node, *self.order_of)      # its own steps, in path order too
            items[ns] = child
        return items[ns]

    def envelope(self, event: str, data: dict) -> dict:
        return {"event": event, "message_id": self.message_id, "created_at": self.created_at,
                "task_id": self.session_id, "data": data}

    def workflow_started(self) -> dict:
        return self.envelope("workflow_started", {"inputs": self.request_inputs})

    def feed(self, part: dict) -> Iterable[dict]:
        """One part of the graph's stream -> the RAGFlow events due now (in path order, see BatchOrder)."""
        if part.get("ns"):        # a step inside one item of a parallel Iteration (compiler/parallel.py)
            yield from self._item(tuple(part["ns"])).feed({**part, "ns": ()})
            return
        kind, data = part["type"], part["data"]
        if kind == "tasks" and "input" in data:
            if data["name"].startswith(HANDLER_PREFIX):
                # LangGraph runs a failed task's error handler in the same step: it goes on with that task
                # (its result finishes the component), it does not begin a new step
                return
            if data["name"] in self.ran:       # finished before the pause: LangGraph announces it again, it does not run
                self.ran.discard(data["name"])
                return
            yield from self.order.start(data["name"], self._task_start(data))
            return
        yield from self.order.close_starts()
        if kind == "custom":
            task = data.get(TASK_KEY) if isinstance(data, dict) else None
            yield from self.order.emit(_handled_task(task), list(self._custom(data)))
        elif kind == "tasks":
            task = _handled_task(data["name"])
            # a failure its handler will finish is not the end of that task's part of the step
            finished = not (data.get("error") and task == data["name"] and self._handles_failure(task))
            yield from self.order.emit(task, list(self._task_result(data)), finished=finished)

    def drain(self) -> Iterable[dict]:
        """What BatchOrder still holds (and the parallel Iteration items' orders): the stream is over (or stopped)."""
        for child in self.__dict__.get("_items", {}).values():
            yield from child.drain()
        yield from self.order.drain()
        yield from self._release_ran()          # a producer whose generation ran with no Message after it

    def _custom(self, data: Any) -> Iterable[dict]:
        if not isinstance(data, dict):
            return
        if FUSED in data:
            yield from self._fused(data)
            return
        if "usage" in data:
            for k, v in data["usage"].items():
                self.usage[k] = self.usage.get(k, 0) + (v or 0)
            self.usage["calls"] += 1
            return
        event = data.get("event")
        if event in ("message", "message_end"):
            yield self.envelope(event, {k: v for k, v in data.items() if k not in ("event", TASK_KEY)})

    def _fused(self, data: dict) -> Iterable[dict]:
        """A component of a fused chain finished, or the next one started (compiler/fusion.py)."""
        node = self.by_id.get(data.get("component_id"))
        if node is None:
            return
        if data[FUSED] == "finished":
            yield self.envelope("node_finished", self.node_finished(node, data.get("outputs") or {},
                                                                    data.get("inputs") or {}))
        else:
            yield self.envelope("node_started", {
                "inputs": None, "created_at": int(time.time()), "component_id": node.id,
                "component_name": node.display_name, "component_type": node.component_type,
                "thoughts": data.get("thoughts") or ""})

    def _handles_failure(self, name: str) -> bool:
        """Whether task `name` has an error handler (its component's `exception_method`, nodes/errors.py)."""
        node = self.nodes.get(name)
        return bool(node is not None and node.params.exception_method)

    def _node(self, name: str):
        """The component behind a task: its own node, or the error handler LangGraph adds for it."""
        if name.startswith(HANDLER_PREFIX):
            return self.nodes.get(name[len(HANDLER_PREFIX):])
        return self.nodes.get(name)

    def _task_start(self, data: dict) -> Iterable[dict]:
        node = self.nodes.get(data["name"])       # error handlers report the component's end, not a start
        if node is None:
            return
        try:
            thoughts = node.thoughts(data["input"])
        except Exception:          # thoughts are informative only; never fail a run for them
            thoughts = ""
        started = self.envelope("node_started", {
            "inputs": None, "created_at": int(time.time()), "component_id": node.id,
            "component_name": node.display_name, "component_type": node.component_type, "thoughts": thoughts})
        if node.component_type in MAY_PAUSE:
            self.starts[node.id] = started      # a pausing form shows no start, as in RAGFlow
            return
        yield started

    def _task_result(self, data: dict) -> Iterable[dict]:
        node = self.fused_last.get(data["name"]) or self._node(data["name"])
        if data.get("interrupts"):
            self.starts.pop(node.id if node else "", None)
            value = data["interrupts"][0].get("value") or {}
            self.paused = True
            yield from self._release_ran()      # what ran before the pause finishes before it, as in RAGFlow
            yield self.envelope("user_inputs", {"inputs": value.get("inputs") or {}, "tips": value.get("tips") or ""})
            return
        if data.get("error"):
            # failures arrive through an error handler or as the exception that ends the stream; but several
            # components of one step may fail, and RAGFlow finishes each of them (in path order) before it
            # stops: a failure without a handler is reported here, at its place, and only once
            yield from self._failed_in_step(node, data["error"])
            return
        result = data.get("result") or {}
        if isinstance(result, list):      # some versions report writes as (channel, value) pairs
            result = dict(result)
        request = result.get(REQUEST)
        if isinstance(request, dict) and request.get("open") is False:
            # the end of the turn: by the finish node, or inline by the last component
            history = resolved(result.get(HISTORY)) or []      # the finish writes its entry as an append
            self.answer = history[-1][1] if history else {}
            self.finished = True
        outputs_written = written(result, OUTPUTS) or {}
        for cid, values in outputs_written.items():     # later writes to held components (collected outputs,
            if cid in self.held and (node is None or cid != node.id):     # loop variables, a streamed LLM's
                self.held[cid]["outputs"] = merge_values(self.held[cid]["outputs"], values)    # final content)
        # producers whose generation has run finish, in the order they were held: after a Message's stream, before
        # the Message itself, as RAGFlow's post-processing releases its `partials` after each message_end (a
        # producer another reader ran waits for the next Message); the finish node's step releases the rest
        if node is None or node.component_type in _RELEASES_RAN:
            yield from self._release_ran()
        if node is None:
            # a parallel Iteration's items, settle and collect nodes (compiler/parallel.py) are no components:
            # the settle node's writes finish the item's unstreamed producers (above), the collect node's
            # finish the Iteration
            yield from self._containers_done(result)
            return
        if node.id in self.starts:
            yield self.starts.pop(node.id)
        outputs = outputs_written.get(node.id) or {}
        inputs = (result.get(LAST) or {}).get("inputs") or {}
        finished = self.node_finished(node, outputs, inputs)
        if node.id in self.held and not self.held[node.id]["container"]:
            yield self.envelope("node_finished", self._release(node.id))      # its last pass's, before this one's
        if node.role == "container" or _pending(outputs):
            self.held[node.id] = {**finished, "outputs": dict(outputs), "container": node.role == "container"}
        else:
            yield self.envelope("node_finished", finished)
        yield from self._containers_done(result)

    def _containers_done(self, result: dict) -> Iterable[dict]:
        """A container that is done finishes last, with what was last written to its outputs."""
        loops = written(result, LOOPS) or {}
        if not any(p.get("done") and cid in self.held for cid, p in loops.items()):
            return
        # (the step's writes to it are in its held outputs already: merged above, or held with them)
        for cid, pass_ in loops.items():
            if pass_.get("done") and cid in self.held:
                yield self.envelope("node_finished", self._release(cid))

    def _release_ran(self) -> Iterable[dict]:
        for cid in [c for c, h in self.held.items() if not h["container"] and not _pending(h["outputs"])]:
            yield self.envelope("node_finished", self._release(cid))

    def end(self) -> Iterable[dict]:
        """The events due when the graph's stream is over: `workflow_finished` if the turn finished."""
        yield from self.drain()
        if self.finished:
            yield self.workflow_finished(self.answer)

    def _release(self, cid: str) -> dict:
        held = self.held.pop(cid)
        held.pop("container", None)
        held["elapsed_time"] = held["outputs"].get("_elapsed_time", held["elapsed_time"])
        held["error"] = held["outputs"].get("_ERROR") or None
        return held

    def node_finished(self, node, outputs: dict, inputs: dict, error: str | None = None) -> dict:
        return {"inputs": inputs, "outputs": outputs, "component_id": node.id,
                "component_name": node.display_name, "component_type": node.component_type,
                "error": error or outputs.get("_ERROR") or None,
                "elapsed_time": outputs.get("_elapsed_time", 0.0), "created_at": outputs.get("_created_time", 0.0)}

    def _failed_in_step(self, node, error: Any) -> Iterable[dict]:
        from canvas2graph.types import ComponentError
        if node is None or not isinstance(error, ComponentError) or error.component_id != node.id \
                or node.params.exception_method or node.id in self.failed:
            return
        self.failed.add(node.id)
        yield from self.component_failed(node.id, error.outputs, error.inputs, error.message, drain=False)

    def _drop_pending_after(self, failed_id: str) -> Iterable[dict]:
        """Producers of the failed component's step, after it in path order, whose generation nobody will
        stream now: RAGFlow finishes each with its content None (`Canvas._run_impl` once `self.error` is set)."""
        tasks = [(name, node.id) for name, node in ((n, self._node(n)) for n in self.order.order) if node is not None]
        ids = [cid for _, cid in tasks]
        if failed_id not in ids:
            return
        for name, cid in tasks[ids.index(failed_id) + 1:]:
            held = self.held.get(cid)
            if held and not held["container"] and _pending(held["outputs"]):
                held["outputs"] = {k: (None if is_pending(v) else v) for k, v in held["outputs"].items()}
                # at its place in the step: the components between the failed one and it finish first
                yield from self.order.emit(name, [self.envelope("node_finished", self._release(cid))])

    def component_failed(self, component_id: str, outputs: dict, inputs: dict, message: str,
                         drain: bool = True) -> Iterable[dict]:
        if drain:
            yield from self.drain()
            if component_id in self.failed:         # reported at its place in the step already
                yield from self._drop_pending_after(component_id)
                return
        node = next((n for n in self.nodes.values() if n.id == component_id), None)
        if node is None:
            return
        self.held.pop(component_id, None)
        if component_id in self.starts:
            yield self.starts.pop(component_id)
        yield self.envelope("node_finished", self.node_finished(node, outputs, inputs, message))
        if node.component_type == "IterationItem" and node.parent_id in self.held:
            # RAGFlow ends an Iteration whose item failed (its pass counter is reset): its node_finished
            # follows, with what it had collected before the failing pass
            yield self.envelope("node_finished", self._release(node.parent_id))
        yield from self._drop_pending_after(component_id)

    def unfinished(self) -> list:
        """The components of the running step that have not finished (a cancel stopped them mid-run)."""
        order = self.order
        names = [n for n in order.order[order.cursor:] if n not in order.done]
        nodes = [self._node(n) for n in names]
        return [n for n in nodes if n is not None and n.role != "container" and n.id not in self.starts]

    def cancelled(self) -> dict:
        """RAGFlow ends a cancelled run with a workflow_finished whose outputs is this text (SPEC 5.8)."""
        self.finished = True
        return self.workflow_finished(CANCELLED_TEXT)

    def workflow_finished(self, outputs: Any) -> dict:
        return self.envelope("workflow_finished", {
            "inputs": self.request_inputs, "outputs": outputs,
            "elapsed_time": time.perf_counter() - self.started_at, "created_at": time.perf_counter(),
            "usage": dict(self.usage)})


# --- one run of a graph ------------------------------------------------------------------------
def unsettled(snapshot, containers: set[str]) -> dict[str, tuple[dict, dict, bool]]:
    """Components of an unfinished turn whose node_finished is still due: id -> (outputs, inputs, container).

    Two kinds wait for something later in the turn: a component whose content is a pending
    generation (until a Message streams it) and an Iteration or Loop that has not finished its
    passes (until it is done). The adapter that held them belonged to the run that paused, or
    to a process that died; the run that continues the turn holds them again. Writes of tasks
    that finished after the last checkpoint count.
    """
    outputs = {cid: dict(v) for cid, v in (snapshot.values.get(OUTPUTS) or {}).items()}
    loops = dict(snapshot.values.get(LOOPS) or {})
    last = snapshot.values.get(LAST) or {}
    for task in snapshot.tasks:
        result = task.result if isinstance(task.result, dict) else {}
        for cid, values in (written(result, OUTPUTS) or {}).items():
            outputs[cid] = merge_values(outputs.get(cid), values)
        for cid, values in (written(result, LOOPS) or {}).items():
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


def _request_inputs(graph_input: Any) -> dict:
    """The request's inputs, as workflow_started and workflow_finished report them."""
    from langgraph.types import Command
    if isinstance(graph_input, dict):
        return dict(graph_input.get(INPUTS) or {})
    if isinstance(graph_input, Command) and graph_input.resume is not None:
        from canvas2graph.nodes.begin import read_answer
        return read_answer(graph_input.resume)[0]
    return {}


class TurnEvents:
    """One run of a compiled canvas graph as RAGFlow's events: `async for event in ragflow_events(...)`.

    Once iterated, `status` says how the run ended: "finished"; "paused" (a form waits for
    `Command(resume=...)`); "stopped" (a component failed: its node_finished carries the error, and
    `error` names it); "cancelled" (`RunContext.cancel_requested` was set; RAGFlow's last event says
    so); "failed" (the engine, a step limit or the checkpointer failed: the exception propagates after
    the events so far). `usage` counts the models' tokens, live.
    """

    def __init__(self, graph, graph_input: Any, config: dict | None = None, *, context: Any = None,
                 durability: str | None = None, request_inputs: dict | None = None, snapshot: Any = None,
                 message_id: str | None = None, fork: bool = False, raw_modes: list[str] | None = None,
                 stop: Any = None):
        from canvas2graph.compiler.canvas import canvas_of
        from langgraph.types import Command

        self.graph = graph
        self.canvas = canvas_of(graph)
        refuse_pipeline(self.canvas)        # its steps write files' chunks, not RAGFlow's agent events
        if isinstance(graph_input, dict):
            # repaired where it comes in, as every input from outside is (canvas2graph/text.py): a lone surrogate in a
            # query would make every event that quotes it unencodable
            from canvas2graph.text import scrub
            from canvas2graph.runtime.graph.values import unstorable
            graph_input = scrub(graph_input)
            problem = unstorable({k: graph_input.get(k) for k in ("query", "inputs", "files")})
            if problem:         # NaN, integers beyond 64 bits, ...: no checkpointer stores them, no event carries them
                from canvas2graph.types import TurnRejected
                raise TurnRejected(f"the request cannot be stored: {problem.replace('output ', '')}")
        self.input = graph_input
        self.config = config or {}
        self.context = context
        self.durability = durability
        self.snapshot = snapshot
        # a run without new input continues a turn: a paused one (Command(resume=...)), one whose process
        # died, or an earlier checkpoint's (a fork); RAGFlow sends no workflow_started then
        self.resumed = graph_input is None or isinstance(graph_input, Command)
        # a fork (runtime/run/steps.py) continues a turn from an earlier checkpoint, but is a run of its own:
        # it starts with workflow_started, as a new request does
        self.fork = fork
        session_id = str((self.config.get("configurable") or {}).get("thread_id") or "")
        inputs = request_inputs if request_inputs is not None else _request_inputs(graph_input)
        self.adapter = EventAdapter(self.canvas, session_id=session_id, request_inputs=inputs, message_id=message_id)
        self.usage = self.adapter.usage
        # LangGraph stream modes whose parts are passed on raw (RAW_EVENT), besides the ones RAGFlow's events need
        self.raw_modes = list(dict.fromkeys(raw_modes or ()))
        self.status = "running"
        self.error: str | None = None
        # an asyncio.Event: once set, the run stops at once and ends as a cancelled one (Runner.cancel)
        self.stop = stop

    def __aiter__(self) -> AsyncIterator[dict]:
        return self._events()

    async def _continue_step(self) -> list[dict]:
        """A continued turn: what its cut-off step had done. Components whose node_finished is still due are held
        again. Tasks of the step that finished before it stopped are announced again by LangGraph, which keeps
        their writes and does not run them: they get no second start. When the step was cut off by its process
        dying (not by a pause), their results may never have been reported: they are reported now (their
        node_finished; the turn's end, when one of them closed it); the events for them returned here come first."""
        snapshot = self.snapshot
        if snapshot is None:
            if self.graph.checkpointer is None:
                return []
            snapshot = await self.graph.aget_state(self.config)
        adapter = self.adapter
        done = [] if self.fork else [task for task in snapshot.tasks if task.result is not None and not task.interrupts]
        # (a fork runs its step again from the checkpoint, whatever that step's tasks wrote on the old branch)
        adapter.ran = {task.name for task in done}
        if (snapshot.values.get(REQUEST) or {}).get("open"):
            containers = {cid for cid, node in self.canvas.plan.nodes.items() if node.role == "container"}
            held = unsettled(snapshot, containers)
            for node in self.canvas.plan.nodes.values():        # in canvas order, as they were held
                if node.id in held:
                    outputs, inputs, container = held[node.id]
                    adapter.held[node.id] = {**adapter.node_finished(node, outputs, inputs), "outputs": dict(outputs),
                                             "container": container}
        if self.input is not None:      # a pause: the process that paused reported them
            return []
        return [event for task in done for event in adapter._task_result({"name": task.name, "result": task.result})]

    async def _events(self) -> AsyncIterator[dict]:
        from langgraph.errors import NodeTimeoutError

        from canvas2graph.types import ComponentError, TurnCancelled

        adapter = self.adapter
        finished_before = await self._continue_step() if self.resumed else []
        if not self.resumed or self.fork:
            yield adapter.workflow_started()
        for event in finished_before:
            yield event
        options = {"durability": self.durability} if self.durability else {}
        # every checkpoint of this run names its message (LangGraph's savers copy a run's configurable values
        # into the metadata of its checkpoints): the step trace groups steps by it (runtime/run/steps.py)
        config = {**self.config,
                  "configurable": {**(self.config.get("configurable") or {}), MESSAGE_ID: adapter.message_id}}
        try:
            modes = list(dict.fromkeys(STREAM_MODES + [m for m in self.raw_modes if m != EVENTS_MODE]))
            if self.canvas.parallel:        # items of a parallel Iteration run in item graphs (compiler/parallel.py)
                options["subgraphs"] = True
            if EVENTS_MODE in self.raw_modes:
                stream = _event_parts(self.graph, self.input, config, context=self.context, stream_mode=modes,
                                      **options)
            else:
                if self.raw_modes:      # as LangGraph Server streams values and updates: the graph's output
                    options["output_keys"] = self.graph.output_channels
                stream = self.graph.astream(self.input, config, context=self.context,
                                            stream_mode=modes, version="v2", **options)
            async for part, idle in bursts(stream, self.stop):
                if part["type"] in self.raw_modes:
                    raw = {"event": RAW_EVENT, "message_id": adapter.message_id, "mode": part["type"],
                           "ns": part.get("ns") or (), "data": part["data"]}
                    if part.get("interrupts"):
                        raw["interrupts"] = part["interrupts"]
                    yield raw
                if part["type"] in STREAM_MODES:
                    for event in adapter.feed(part):
                        yield event
                if idle:            # every task of the step has been announced: their starts, in path order
                    for event in adapter.order.close_starts():
                        yield event
            for event in adapter.end():
                yield event
        except ComponentError as e:
            for event in adapter.component_failed(e.component_id, e.outputs, e.inputs, e.message):
                yield event
            self.status, self.error = "stopped", f"{e.component_id}: {e.message}"
            return
        except NodeTimeoutError as e:
            node = self.canvas.node_by_name().get(e.node)
            cid = node.id if node else e.node
            message = f"{cid} timed out after {e.timeout:g} s"
            for event in adapter.component_failed(cid, {"_ERROR": message, "_elapsed_time": e.elapsed}, {}, message):
                yield event
            self.status, self.error = "stopped", message
            return
        except TurnCancelled:
            stopped = adapter.unfinished() if self.stop is not None and self.stop.is_set() else []
            for event in adapter.drain():
                yield event
            for node in stopped:        # cancelled mid-run, as RAGFlow's check_if_canceled ends a component
                yield adapter.envelope("node_finished", adapter.node_finished(
                    node, {"_ERROR": CANCELLED_TEXT}, {}, CANCELLED_TEXT))
            yield adapter.cancelled()
            self.status = "cancelled"
            return
        except Exception as e:
            self.status, self.error = "failed", f"{type(e).__name__}: {e}"
            raise
        self.status = "paused" if adapter.paused else "finished" if adapter.finished else "stopped"


async def _event_parts(graph, graph_input: Any, config: dict, **options: Any) -> AsyncIterator[dict]:
    """The run as `astream_events` (version v2) sees it, as the parts `astream(version="v2")` yields: the
    root run's own stream chunks are the stream modes' parts, every other callback event is a part of mode
    `events` (LangGraph Server sends them so; events tagged `langsmith:hidden` are left out, as it does)."""
    root = config.get("run_id") or uuid.uuid4()
    config = {**config, "run_id": root}
    async for event in graph.astream_events(graph_input, config, version="v2", **options):
        if event["event"] == "on_chain_stream" and event.get("run_id") == str(root):
            chunk = event["data"]["chunk"]
            ns, mode, data = chunk if len(chunk) == 3 else ((), *chunk)
            part = {"type": mode, "ns": tuple(ns or ()), "data": data}
            if mode == "values" and isinstance(data, dict) and INTERRUPT in data:
                # astream's version v2 keeps a pause's interrupts apart from the values
                part["data"] = {k: v for k, v in data.items() if k != INTERRUPT}
                part["interrupts"] = data[INTERRUPT]
            yield part
        elif "langsmith:hidden" not in (event.get("tags") or ()):
            yield {"type": EVENTS_MODE, "ns": (), "data": event}


def refuse_pipeline(compiled: Any) -> None:
    """A UsageError for an ingestion pipeline, which runs over files, never as a conversation's turn."""
    if getattr(compiled, "kind", "agent") == "pipeline":
        from canvas2graph.types import UsageError
        raise UsageError("this DSL is an ingestion pipeline (File -> Parser -> ...), not an agent: run it over "
                         "files with `canvas2graph ingest PIPELINE FILE_OR_FOLDER... --kb NAME`")


def ragflow_events(graph, graph_input: Any = None, config: dict | None = None, *, context: Any = None,
                   durability: str | None = None) -> TurnEvents:
    """Run a graph compiled by canvas2graph and yield RAGFlow's events, as `canvas2graph run --format jsonl`
    prints them.

        async for event in ragflow_events(graph, {"query": "Hi"}, {"configurable": {"thread_id": "t1"}}):
            print(event["event"], event["data"])

    `graph_input` is what `graph.astream` takes: a request (`CanvasInput`) starts a turn,
    `Command(resume={field: value})` answers a paused form, None continues from the thread's (or
    `config`'s `checkpoint_id`'s) checkpoint. The returned object also tells how the run ended (`status`).
    """
    return TurnEvents(graph, graph_input, config, context=context, durability=durability)

"""The Node base class every component family builds on, and the shared params model.

A Node is built once at compile time (templates parsed, params checked) and called by LangGraph
at run time with the state. It returns a `Result`; the base class stamps RAGFlow's timing
outputs, writes the component's channel and records what `node_finished` reports.
"""
from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping

from pydantic import BaseModel, ConfigDict, Field

from canvas2graph.types import ComponentError, NodeConfigError, TurnCancelled
from canvas2graph.compiler.dsl.refs import Ref, Template, bind_aliases, parse_template, parse_ref, looks_like_ref
from canvas2graph.runtime.graph import calls
from canvas2graph.runtime.graph.state import (LAST, NOT_KEPT, OUT_PREFIX, OUTPUTS, REFERENCE, channel, merge_reference, outputs_of, with_inputs,
                           with_outputs)
from canvas2graph.runtime.graph.values import PENDING, is_pending, unstorable

if TYPE_CHECKING:
    from canvas2graph.compiler.dsl.model import ComponentEntry
    from canvas2graph.compiler.dsl.model import CanvasInfo
    from canvas2graph.types import RunContext


class Params(BaseModel):
    """ComponentParamBase (SPEC 2.2): unknown keys are kept, as RAGFlow sets them as attributes."""

    model_config = ConfigDict(extra="allow", populate_by_name=True, validate_default=True)

    message_history_window_size: int = Field(13, ge=0)
    inputs: Any = Field(default_factory=dict)
    outputs: Any = Field(default_factory=dict)
    description: str | None = ""
    max_retries: int = Field(0, ge=0)
    delay_after_error: float = Field(2.0, ge=0)
    exception_method: str | None = None
    exception_default_value: Any = None
    exception_goto: list[str] | str | None = None
    debug_inputs: Any = Field(default_factory=dict)

    def extra(self, key: str, default: Any = None) -> Any:
        return (self.model_extra or {}).get(key, default)


@dataclass
class Result:
    outputs: dict[str, Any]
    inputs: dict[str, Any] = field(default_factory=dict)
    writes: dict[str, Any] = field(default_factory=dict)      # other channels (globals, other components)
    # the turn's answer if this component ends the turn, when it is not `content` (a Message that showed
    # a model's thinking keeps it in its content, as RAGFlow does; the answer is the text outside it)
    answer: str | None = None


class Node:
    component_type: str = ""
    # the outputs RAGFlow's param class declares whatever the DSL says: a failed component lists them, None
    param_outputs: tuple[str, ...] = ()
    thoughts_text: str = ""
    role: str | None = None        # "container" (Iteration, Loop), "start" (their items), "exit" (ExitLoop)
    start_type: str = ""           # for containers: the component_name of their start item
    path_rank: int = 0             # its place among the components of a step in RAGFlow's path (compiler.plan)
    reads_history: bool = False    # reads the conversation (its last `message_history_window_size` turns)

    def __init__(self, entry: "ComponentEntry", params: Params, canvas: "CanvasInfo"):
        self.id = entry.id
        self.display_name = entry.display_name
        self.params = params
        self.downstream = list(entry.downstream)
        self.parent_id = entry.parent_id
        self.channel = channel(entry.id)
        self.canvas = canvas
        # RAGFlow reports every output the DSL declares, None until the component sets it (SPEC 2.2)
        declared = params.outputs if isinstance(params.outputs, dict) else {}
        self.declared = {k: None for k, v in declared.items() if isinstance(v, dict) and "ref" not in v}
        # ...and a failed one lists every output its param class and the DSL declare, None, beside `_ERROR`
        # (RAGFlow's outputs are its param's `outputs` dict, reset to None at the start of the turn)
        self.absent = {**{k: None for k in self.param_outputs}, **{k: None for k in declared if isinstance(k, str)}}
        self.prepare()

    def outputs_when_failed(self, state: Mapping[str, Any]) -> dict[str, Any]:
        """What a failed component lists beside `_ERROR`: every output it declares at its value so far this
        turn: None until set, the previous pass's value in a later pass of an Iteration or Loop, where the
        keys an earlier pass set are listed too (RAGFlow's outputs are its param's `outputs` dict, reset at
        the start of a turn, not between passes)."""
        now = outputs_of(state, self.id)
        keys = [*self.absent, *(k for k in now if k not in NOT_KEPT and k not in self.absent)]
        return {k: now.get(k) for k in keys}

    # --- compile time -------------------------------------------------------------------
    def prepare(self) -> None:
        """Parse templates and refs from params. Subclasses override."""

    def references(self) -> list[tuple[str, Ref]]:
        """(field, ref) pairs this node reads, for the compiler's reference check."""
        return []

    def text_template(self, text: Any) -> Template:
        """A text param's template; inside an Iteration, {item}/{index}/{result} read its IterationItem."""
        item = self.canvas.iteration_item_for(self.id) if self.parent_id else None
        parsed = parse_template(text if isinstance(text, str) else str(text), iteration_aliases=item is not None)
        return bind_aliases(parsed, item) if item else parsed

    def error_targets(self) -> list[str]:
        """Where a failure goes with `exception_method: goto` (SPEC 5.6)."""
        if self.params.exception_method != "goto":
            return []
        goto = self.params.exception_goto
        return [goto] if isinstance(goto, str) else list(goto or [])

    # --- run time ------------------------------------------------------------------------
    def thoughts(self, state: Mapping[str, Any]) -> str:
        return self.thoughts_text

    async def run(self, state: Mapping[str, Any], ctx: "RunContext") -> Result:
        raise NotImplementedError

    async def __call__(self, state: Mapping[str, Any], runtime, timeout: float | None = None) -> dict[str, Any]:
        """One attempt of the component; `timeout` (seconds) is COMPONENT_EXEC_TIMEOUT, bound at build time.

        The timeout is enforced here with `asyncio.timeout` (a timer handle) rather than LangGraph's
        `add_node(timeout=...)`, which runs every node in an extra task with a watchdog task: about
        0.1 ms per step, a third of canvas2graph's overhead on cheap components. Either way only a
        component that awaits (a model, a tool, a service) can be interrupted.
        """
        ctx = runtime.context
        if ctx is None or ctx.models is None:   # no context (LangGraph Server) or a partial one: the environment's
            from canvas2graph.runtime.services.environment import resolve_context
            ctx = resolve_context(runtime, getattr(self.canvas, "entries", None))
        if ctx.cancel_requested:
            raise TurnCancelled(self.id)          # stop at the node boundary
        step = join_step(ctx)
        try:
            return await self._attempt(state, runtime, ctx, timeout)
        except ComponentError:
            if step is not None and self.params.exception_method:
                step.members.add(handler_due(ctx, self.id))     # its handler is part of the step: wait for it too
            elif step is not None:
                await step.fail_together()
            raise
        finally:
            if step is not None:
                leave_step(ctx, step)

    async def _attempt(self, state: Mapping[str, Any], runtime, ctx, timeout: float | None) -> dict[str, Any]:
        # a fork's edit of this component (runtime/run/steps.py): the outputs to take, or inputs to run with
        override = ctx.overrides.pop(self.id, None) if ctx.overrides else None
        created = time.perf_counter()
        deadline = None
        record, token = calls.open_record()
        try:
            if override is not None and override.get("outputs") is not None:
                result = Result(outputs=dict(override["outputs"]), inputs=dict(override.get("inputs") or {}))
            else:
                if override is not None and override.get("inputs"):
                    state = with_inputs(state, override["inputs"])
                if timeout is None:
                    result = await self.run(state, ctx)
                else:
                    async with (deadline := asyncio.timeout(timeout)):
                        result = await self.run(state, ctx)
            problem = unstorable(result.outputs) or unstorable(result.writes)
            if problem:     # a hostile or runaway canvas stops here, naming this component and the bound
                raise ValueError(problem)
        except ComponentError:
            raise
        except Exception as e:       # any failure inside a component is that component's error
            from langgraph.errors import GraphBubbleUp
            if isinstance(e, GraphBubbleUp):    # interrupt() and friends, not failures
                raise
            message = str(e) or type(e).__name__
            if deadline is not None and deadline.expired():
                message = f"{self.id} timed out after {timeout:g} s"
            raise ComponentError(self.id, message, {
                "_created_time": created, **self.outputs_when_failed(state), "_ERROR": message,
                "_elapsed_time": time.perf_counter() - created}) from e
        finally:
            calls.close_record(token)
        outputs = {"_created_time": created, **self.declared, **result.outputs,
                   "_elapsed_time": time.perf_counter() - created}
        written = {self.id: outputs}
        # `last` names the component for the end of the turn and carries the inputs node_finished
        # reports, riding on a write every node makes anyway
        last = {"component_id": self.id, "inputs": result.inputs}
        step = _step_of(runtime)
        if step is not None:        # several components end in one step: the last in path order is the turn's last
            last["rank"] = [step, self.path_rank]
        if record:              # what the step asked of models and tools, for its trace (runtime/graph/calls.py)
            last["calls"] = record
        if result.answer is not None:
            last["answer"] = result.answer
        update: dict[str, Any] = {OUTPUTS: written, LAST: last}
        for key, value in result.writes.items():
            if key.startswith(OUT_PREFIX):
                written[key[len(OUT_PREFIX):]] = value
            else:
                update[key] = value
        return update


def stream_writer():
    """LangGraph's stream writer, or a no-op when a node runs outside a graph (in unit tests, say)."""
    # imported here, not at the top: `canvas2graph compile` loads every component without LangGraph
    from langgraph.config import get_config, get_stream_writer

    from canvas2graph.runtime.graph.event_order import TASK_KEY
    try:
        write = get_stream_writer()
        task = (get_config().get("metadata") or {}).get("langgraph_node")
    except RuntimeError:
        return lambda item: None
    if not task:
        return write

    def tagged(item: Any) -> None:
        # a message names the graph node that wrote it: the event adapter shows it at that node's place
        # in RAGFlow's path order (runtime/graph/event_order.py), not when LangGraph happens to run it
        if isinstance(item, dict) and item.get("event") in ("message", "message_end"):
            item = {**item, TASK_KEY: task}
        write(item)
    return tagged


def template(text: Any, **kw) -> Template:
    return parse_template(text if isinstance(text, str) else str(text), **kw)


def require_ref(value: Any, field: str, what: str) -> Ref:
    """A param that must be a reference; a compile-time error naming the field otherwise."""
    ref = bare_or_braced_ref(value)
    if ref is None:
        raise NodeConfigError(field, f"{what} must be a variable reference such as 'sys.query', 'env.name' "
                                     f"or 'Component:Id@key', not {value!r}")
    return ref


def bare_or_braced_ref(value: Any) -> Ref | None:
    """RAGFlow's is_reff: a param that is a whole reference, with or without braces."""
    if isinstance(value, str) and looks_like_ref(value):
        return parse_ref(value)
    return None


__all__ = ["Params", "Node", "Result", "ComponentError", "template", "bare_or_braced_ref", "require_ref",
           "PENDING", "is_pending"]


def shared_generation(ctx, producer: str, created: Any) -> tuple[Any, bool]:
    """(the future of a pending generation's final text, whether the caller is the one to run it).

    A Message streaming an LLM or an Agent and a component reading its content in the same step would
    otherwise each run the generation (an Agent's whole tool loop); RAGFlow makes one run. The first reader
    runs the generation and settles the future; the others await its text. Without a run context to share (a node run alone), everyone runs it."""
    registry = getattr(ctx, "generations", None)
    if registry is None:
        return asyncio.get_running_loop().create_future(), True
    key = (producer, created)
    if key in registry:
        return registry[key], False
    future = registry[key] = asyncio.get_running_loop().create_future()
    future.add_done_callback(lambda f: f.cancelled() or f.exception())     # a failure is reported by its runner
    return future, True


class StepTasks:
    """The tasks of one LangGraph step that run a component (and the error handlers still due), in this process:
    what a failure without a handler waits for before it stops the turn."""

    def __init__(self) -> None:
        self.members: set = set()               # asyncio tasks, and futures of handlers not yet run
        self.failing: set = set()               # failed tasks waiting for the rest of the step
        self.arrived: set = set()               # ...that saw the rest finish
        self.settled: asyncio.Future | None = None
        self.go: asyncio.Future | None = None

    def running(self) -> list:
        return [t for t in self.members if not t.done()]

    async def fail_together(self) -> None:
        """Return once the rest of the step has finished, all the step's failures at one turn of the event loop.

        RAGFlow runs a batch to its end before a failure stops the turn (a Message beside it streams its whole
        answer, a handled failure finishes with its default). LangGraph reports the failures that are done when it
        looks and cancels the tasks still running, so the failures leave together: the last to see the step
        finished releases the others (they end on the next turn of the loop, before LangGraph looks again)."""
        me = asyncio.current_task()
        self.members.discard(me)
        self.failing.add(me)
        for _ in range(3):          # let an error handler LangGraph has just scheduled start and join the step
            await asyncio.sleep(0)
        loop = asyncio.get_running_loop()
        self.settled = self.settled or loop.create_future()
        self.go = self.go or loop.create_future()
        while not self.settled.done():
            others = self.running()
            if not others:
                self.settled.set_result(None)
                break
            await asyncio.wait([self.settled, *others], return_when=asyncio.FIRST_COMPLETED)
        self.arrived.add(me)
        if self.arrived >= self.failing:
            if not self.go.done():
                self.go.set_result(None)
        else:
            await self.go


def join_step(ctx) -> StepTasks | None:
    """The tasks of the LangGraph step the running component belongs to, with its task added; None outside a
    step. `leave_step` takes it out."""
    try:
        from langgraph.config import get_config
        metadata = get_config()["metadata"]
    except (RuntimeError, KeyError, ImportError):
        return None
    task = asyncio.current_task()
    running = getattr(ctx, "running", None)
    if task is None or running is None:
        return None
    ns = str(metadata.get("langgraph_checkpoint_ns") or "")
    key = (ns.rsplit("|", 1)[0] if "|" in ns else "", metadata.get("langgraph_step"))
    step = running.get(key)
    if step is None:
        step = running[key] = StepTasks()
    step.members.add(task)
    task.c2g_step = key                 # noqa: B010 - where leave_step finds it
    return step


HANDLER_WAIT_S = 30.0       # at most this long for an error handler LangGraph was to schedule (never a hang)


def handler_due(ctx, component_id: str) -> asyncio.Future:
    """A future that `handler_done` settles once the error handler of `component_id` has run (LangGraph schedules
    it after the failure is reported, so a sibling failing meanwhile would not see it among the step's tasks)."""
    future = asyncio.get_running_loop().create_future()
    ctx.running[("handler", component_id)] = future
    asyncio.get_running_loop().call_later(HANDLER_WAIT_S, lambda: future.done() or future.set_result(None))
    return future


def handler_done(ctx, component_id: str) -> None:
    future = ctx.running.pop(("handler", component_id), None)
    if future is not None and not future.done():
        future.set_result(None)


def leave_step(ctx, step: StepTasks) -> None:
    task = asyncio.current_task()
    step.members.discard(task)
    step.members.difference_update([t for t in step.members if t.done()])
    key = getattr(task, "c2g_step", None)
    if not step.members and ctx.running.get(key) is step:
        del ctx.running[key]


def _step_of(runtime) -> Any:
    """The LangGraph step a node runs in (`langgraph_step` of its config), or None outside a step."""
    try:
        from langgraph.config import get_config
        return get_config()["metadata"].get("langgraph_step")
    except (RuntimeError, KeyError, ImportError):
        return None


async def settle_pending(node: Node, refs, state, ctx):
    """Run, without streaming, any pending generation among `refs` (a non-Message consumer).

    Returns the state as the node should see it and the writes that record the producers' content.
    """
    import time as _time
    writes: dict[str, Any] = {}
    view = None
    for ref in refs:
        if ref.kind != "component" or not ref.name:
            continue
        value = outputs_of(state, ref.name).get(ref.key)
        if not is_pending(value):
            continue
        created = outputs_of(state, ref.name).get("_created_time", _time.perf_counter())
        producer = node.canvas.nodes.get(ref.name)
        future, mine = shared_generation(ctx, ref.name, created)
        if not mine:
            text = await asyncio.shield(future)
        elif value.get("agent") and producer is not None:
            # an Agent's generation is its whole tool loop, run here without being shown
            try:
                text, reference = await drain_pending(producer, value, ctx, state, created)
            except Exception as e:
                future.set_exception(e)
                raise
            future.set_result(text)
            if reference:
                writes[REFERENCE] = merge_reference(writes.get(REFERENCE), reference)
        else:
            from canvas2graph.nodes.llm import complete
            try:
                text = await complete(value["llm_id"], value["component_id"], value["messages"], ctx,
                                      value.get("gen_conf"))
            except Exception as e:
                if not value.get("default"):
                    future.set_exception(e)
                    raise
                # exception_method "comment": the producer's default is its content, for every reader
                # (RAGFlow's LLM yields it in place of the stream)
                text = str(value["default"])
            future.set_result(text)
        view = with_outputs(view if view is not None else state, ref.name, {ref.key: text})
        writes[channel(ref.name)] = {ref.key: text, "_elapsed_time": _time.perf_counter() - created}
    return (view if view is not None else state), writes


async def drain_pending(producer: Node, pending: Mapping[str, Any], ctx, state, created: float) -> tuple[str, dict | None]:
    """Run a pending generation to its end without showing it: (the producer's content, the references its
    tools found). A failure is the producer's, as when a Message streams it; with `exception_method:
    comment` its default is the content."""
    from canvas2graph.nodes.llm import AnswerText
    sink: dict[str, Any] = {}
    answer = AnswerText()
    try:
        async for piece in producer.stream_pending(pending, ctx, sink, state):
            answer.add(piece)
    except Exception as e:
        if pending.get("default"):
            return str(pending["default"]), None
        message = str(e) or type(e).__name__
        raise ComponentError(producer.id, message, {"_created_time": created, **producer.outputs_when_failed(state),
                                                    "_ERROR": message, "_elapsed_time": time.perf_counter() - created}) from e
    return sink.get("answer", answer.text), sink.get("reference")

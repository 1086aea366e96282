"""RAGFlow's event order inside a batch of components that run together (a LangGraph superstep).

RAGFlow runs a canvas in batches: the components on its path that became ready together. It sends
every `node_started` of a batch in path order, runs them, then finishes them one by one in path order;
a Message streams its `message` / `message_end` at its place in that sequence (agent/canvas.py
`_run_impl`). The path order is the order components were appended: the previous batch's components,
in path order, each appending its downstream (or the targets it chose) in the DSL's order.

LangGraph runs the same components as one superstep, but its task order sorts node names (`LLM:L11`
before `LLM:L9`), and results and custom writes stream as the tasks produce them. `BatchOrder` puts
the events back in RAGFlow's order without holding back what can be shown:

- the `node_started` events of a superstep are collected (LangGraph announces every task of a step
  before any of them writes anything) and sent sorted by path rank when the first other part arrives;
- every other event is attributed to the task that caused it (a node's result; a Message's stream,
  tagged with its node by `canvas2graph.nodes.base.stream_writer`) and sent as soon as every task before it in path
  order has finished, so the first task's Message streams live and a later one's waits for its turn;
- a task that is not a component (the finish node, a router) is not ordered: its events pass through.

The path rank of a task is where its component first appears among the successors (`Plan.successors`,
in the DSL's order) of the previous superstep's components, taken in the order they were finished;
one not found there (a join that waited, an error handler's target) follows, in canvas order.

Other helpers may change how components map to LangGraph nodes (fusing several into one): this
module only needs `rank_of` to name the component of a task and `finished` to learn what it released.
"""
from __future__ import annotations

import asyncio
import contextlib
from typing import Any, AsyncIterator, Callable, Iterable

from canvas2graph.types import TurnCancelled

TASK_KEY = "_task"          # the graph node that wrote a custom item (canvas2graph.nodes.base.stream_writer adds it)


class BatchOrder:
    """Re-orders one superstep's events at a time; feed it starts, events per task, and task ends."""

    def __init__(self, component_of: Callable[[str], Any], successors: Callable[[str], list[str]],
                 canvas_order: dict[str, int]):
        self.component_of = component_of        # graph node name -> Node (or None: not a component)
        self.successors = successors            # component id -> ids it goes to, in the DSL's order
        self.canvas_order = canvas_order        # component id -> its place in the DSL
        self.expect: list[str] = []             # successors of the previous superstep, in release order
        self.next_expect: list[str] = []        # ...and of this one, filled as its tasks are released
        self.starting: list[tuple[str, list[dict]]] = []    # this step's tasks and their node_started events
        self.order: list[str] = []              # this step's tasks, in path order
        self.cursor = 0                         # tasks before it are finished and sent
        self.buffers: dict[str, list[dict]] = {}
        self.done: set[str] = set()

    # --- a superstep's starts ------------------------------------------------------------------------
    def start(self, name: str, events: Iterable[dict]) -> Iterable[dict]:
        """A task of a new superstep starts; its `node_started` waits for the rest of the step's starts."""
        if not self.starting:           # the first start of a step: the step before it is over
            yield from self.drain()
            self.expect, self.next_expect = self.next_expect, []
        self.starting.append((name, list(events)))

    def _rank(self, name: str) -> tuple[int, int]:
        node = self.component_of(name)
        if node is None:
            return (1 << 30, 1 << 30)
        try:
            return (self.expect.index(node.id), 0)
        except ValueError:
            return (1 << 29, self.canvas_order.get(node.id, 1 << 29))

    def close_starts(self) -> Iterable[dict]:
        """Send the collected starts in path order (called when a part other than a start arrives)."""
        if not self.starting:
            return
        ranked = sorted(self.starting, key=lambda item: self._rank(item[0]))      # stable: ties keep LangGraph's order
        self.starting = []
        self.order = [name for name, _ in ranked if self.component_of(name) is not None]
        self.cursor, self.buffers, self.done = 0, {}, set()
        for _, events in ranked:
            yield from events

    # --- events while the step runs ------------------------------------------------------------------
    def emit(self, name: str | None, events: Iterable[dict], finished: bool = False) -> Iterable[dict]:
        """Events caused by task `name`; `finished` when it is its result. Sent once the tasks before it are."""
        if name is None or name not in self.order[self.cursor:]:
            yield from events           # not a component of this step (or one already released): no order to keep
            return
        self.buffers.setdefault(name, []).extend(events)
        if finished:
            self.done.add(name)
        yield from self._advance()

    def _advance(self) -> Iterable[dict]:
        while self.cursor < len(self.order):
            name = self.order[self.cursor]
            yield from self.buffers.pop(name, [])
            if name not in self.done:
                return
            self._released(name)
            self.cursor += 1

    def _released(self, name: str) -> None:
        node = self.component_of(name)
        if node is not None:
            self.next_expect.extend(self.successors(node.id))

    def drain(self) -> Iterable[dict]:
        """Everything still held, in path order: the stream is over, failed, or a new step began."""
        yield from self.close_starts()
        while self.cursor < len(self.order):
            name = self.order[self.cursor]
            yield from self.buffers.pop(name, [])
            self._released(name)
            self.cursor += 1
        for events in self.buffers.values():         # tasks that were not ordered (cannot happen; never lose events)
            yield from events
        self.buffers = {}


async def bursts(stream: AsyncIterator[Any], stop: asyncio.Event | None = None) -> AsyncIterator[tuple[Any, bool]]:
    """`(part, idle)` for each part of a LangGraph stream; `idle` when no further part is ready yet.

    LangGraph announces the tasks of a superstep all at once (one synchronous drain of its stream queue),
    then runs them. Iterating the stream in a task of its own, with an unbounded queue between, lets the
    reader see where that burst ends without waiting for the first task to write something: when the
    queue is empty after a part, everything LangGraph had ready was delivered. So `node_started` events
    go out when the step starts, not when its first task finishes. The stream runs in the task's copy
    of the caller's context; closing this generator (or cancelling its reader) cancels it.

    `stop`, once set, cancels the stream at once (LangGraph cancels the step's running tasks: a model's
    stream included) and raises `TurnCancelled`: the turn was cancelled.
    """
    queue: asyncio.Queue = asyncio.Queue()
    end = object()

    async def pump() -> None:
        try:
            async for part in stream:
                queue.put_nowait((part, None))
        except asyncio.CancelledError as e:     # never leave the reader waiting on an empty queue
            queue.put_nowait((end, e))
            raise
        except BaseException as e:      # noqa: BLE001 - handed to the reader, which raises it
            queue.put_nowait((end, e))
            return
        queue.put_nowait((end, None))

    task = asyncio.ensure_future(pump())
    stopped = asyncio.ensure_future(stop.wait()) if stop is not None else None
    try:
        while True:
            if stop is not None and stop.is_set():
                raise TurnCancelled("the turn was cancelled")
            if stopped is not None and queue.empty():
                getter = asyncio.ensure_future(queue.get())
                await asyncio.wait((getter, stopped), return_when=asyncio.FIRST_COMPLETED)
                if not getter.done():
                    getter.cancel()
                    raise TurnCancelled("the turn was cancelled")
                part, error = getter.result()
            else:
                part, error = await queue.get()
            if part is end:
                if error is not None:
                    raise error
                return
            yield part, queue.empty()
    finally:
        if stopped is not None:
            stopped.cancel()
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

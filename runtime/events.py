"""LangGraph stream -> RAGFlow events (SPEC 6.1-6.2).

The graph is streamed with `stream_mode=["tasks", "custom"]`:
- a task start becomes `node_started` (all starts of a superstep come before its results, like
  RAGFlow's batches);
- a task result becomes `node_finished`, except for a component whose `content` is a pending
  generation: its `node_finished` waits until the Message that streams it reports the final
  content (RAGFlow's order: message..., message_end, node_finished(LLM), node_finished(Message));
- custom items written by nodes are `message` / `message_end` events and usage counts;
- the end of the turn (a result that writes the history: the finish node's, or that of the
  component that records it inline) becomes `workflow_finished`, sent by `end()` once the stream is
  over: the finish node can run twice in a turn (see compiler/build.py), and only its last answer counts.
"""
from __future__ import annotations

import time
import uuid
from typing import Any, Iterable

from runtime.state import HISTORY, LAST, LOOPS, OUTPUTS
from runtime.values import is_pending

FINISH = "__canvas_finish__"
HANDLER_PREFIX = "__error_handler__"
CANCELLED_TEXT = "Task has been canceled"
MAY_PAUSE = {"UserFillUp", "Begin"}      # their node_started waits until we know they did not pause


def _pending(outputs: dict) -> bool:
    return any(is_pending(v) for v in outputs.values())


class EventAdapter:
    def __init__(self, compiled, *, session_id: str, request_inputs: Any, message_id: str | None = None):
        self.nodes = compiled.node_by_name()
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

    def envelope(self, event: str, data: dict) -> dict:
        return {"event": event, "message_id": self.message_id, "created_at": self.created_at,
                "task_id": self.session_id, "data": data}

    def workflow_started(self) -> dict:
        return self.envelope("workflow_started", {"inputs": self.request_inputs})

    def feed(self, part: dict) -> Iterable[dict]:
        kind, data = part["type"], part["data"]
        if kind == "custom":
            yield from self._custom(data)
        elif kind == "tasks":
            if "input" in data:
                yield from self._task_start(data)
            else:
                yield from self._task_result(data)

    def _custom(self, data: Any) -> Iterable[dict]:
        if not isinstance(data, dict):
            return
        if "usage" in data:
            for k, v in data["usage"].items():
                self.usage[k] = self.usage.get(k, 0) + (v or 0)
            self.usage["calls"] += 1
            return
        event = data.get("event")
        if event in ("message", "message_end"):
            yield self.envelope(event, {k: v for k, v in data.items() if k != "event"})

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
        node = self._node(data["name"])
        if data.get("interrupts"):
            self.starts.pop(node.id if node else "", None)
            value = data["interrupts"][0].get("value") or {}
            self.paused = True
            yield self.envelope("user_inputs", {"inputs": value.get("inputs") or {}, "tips": value.get("tips") or ""})
            return
        if data.get("error"):
            return                  # failures arrive through an error handler or as the exception that ends the stream
        result = data.get("result") or {}
        if isinstance(result, list):      # some versions report writes as (channel, value) pairs
            result = dict(result)
        if HISTORY in result:      # the end of the turn: by the finish node, or inline by the last component
            history = result[HISTORY] or []
            self.answer = history[-1][1] if history else {}
            self.finished = True
        if node is None:
            return
        if node.id in self.starts:
            yield self.starts.pop(node.id)
        written = result.get(OUTPUTS) or {}
        for cid, values in written.items():       # later writes to held components (collected outputs,
            if cid in self.held and cid != node.id:   # loop variables, a streamed LLM's final content)
                self.held[cid]["outputs"].update(values)
        # producers whose stream this task consumed finish first, in the order they were held
        for cid in [c for c, h in self.held.items() if not h["container"] and not _pending(h["outputs"])]:
            yield self.envelope("node_finished", self._release(cid))
        outputs = written.get(node.id) or {}
        inputs = (result.get(LAST) or {}).get("inputs") or {}
        finished = self.node_finished(node, outputs, inputs)
        if node.role == "container" or _pending(outputs):
            self.held[node.id] = {**finished, "outputs": dict(outputs), "container": node.role == "container"}
        else:
            yield self.envelope("node_finished", finished)
        for cid, pass_ in (result.get(LOOPS) or {}).items():   # a container that is done finishes last
            if pass_.get("done") and cid in self.held:
                yield self.envelope("node_finished", self._release(cid))

    def end(self) -> Iterable[dict]:
        """The events due when the graph's stream is over: `workflow_finished` if the turn finished."""
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

    def component_failed(self, component_id: str, outputs: dict, inputs: dict, message: str) -> Iterable[dict]:
        node = next((n for n in self.nodes.values() if n.id == component_id), None)
        if node is None:
            return
        self.held.pop(component_id, None)
        if component_id in self.starts:
            yield self.starts.pop(component_id)
        yield self.envelope("node_finished", self.node_finished(node, outputs, inputs, message))

    def cancelled(self) -> dict:
        """RAGFlow ends a cancelled run with a workflow_finished whose outputs is this text (SPEC 5.8)."""
        self.finished = True
        return self.workflow_finished(CANCELLED_TEXT)

    def workflow_finished(self, outputs: Any) -> dict:
        return self.envelope("workflow_finished", {
            "inputs": self.request_inputs, "outputs": outputs,
            "elapsed_time": time.perf_counter() - self.started_at, "created_at": time.perf_counter(),
            "usage": dict(self.usage)})

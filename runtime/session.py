"""Run one turn of a conversation: load the session, start the graph, translate its stream.

A session is a LangGraph thread (`thread_id` = session id) in the checkpointer, so a second
turn on the same session sees the history, globals and outputs the first one left.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, AsyncIterator

from compiler import CompiledCanvas
from nodes.base import ComponentError
from runtime.context import RunContext
from runtime.events import EventAdapter
from runtime.turn import prepare_turn

STREAM_MODES = ["tasks", "custom"]


@dataclass
class TurnRequest:
    query: str = ""
    inputs: dict[str, Any] | None = None
    user_id: str = ""
    files: list | None = None


@dataclass
class TurnOutcome:
    """How the last turn ended: finished, stopped (a component failed) or paused."""
    status: str = "running"
    error: str | None = None
    events: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


class Runner:
    def __init__(self, compiled: CompiledCanvas, checkpointer, models, script=None):
        self.compiled = compiled
        self.checkpointer = checkpointer
        self.models = models
        self.script = script
        self.graph = compiled.graph(checkpointer)
        self.outcome = TurnOutcome()

    def preflight(self) -> None:
        """Fail before the turn starts when a model is not configured (a missing key, say)."""
        if self.script is not None:
            return
        for cid, node in self.compiled.plan.nodes.items():
            llm_id = getattr(node.params, "llm_id", None)
            if llm_id:
                self.models.check(llm_id, component_id=cid)

    async def _saved_values(self, config: dict) -> dict | None:
        """The session's last checkpointed channel values (cheaper than building a StateSnapshot)."""
        if self.checkpointer is None:
            return None
        saved = await self.checkpointer.aget_tuple(config)
        return saved.checkpoint["channel_values"] if saved else None

    async def run_turn(self, session_id: str, request: TurnRequest) -> AsyncIterator[dict]:
        self.outcome = TurnOutcome()
        config = {"configurable": {"thread_id": session_id}, "recursion_limit": self.compiled.recursion_limit}
        update = prepare_turn(await self._saved_values(config),
                              initial_globals=self.compiled.plan.dsl.initial_globals(),
                              component_ids=self.compiled.component_ids, query=request.query,
                              inputs=request.inputs, user_id=request.user_id, files=request.files)
        adapter = EventAdapter(self.compiled, session_id=session_id, request_inputs=request.inputs or {})
        context = RunContext(models=self.models, script=self.script, session_id=session_id)
        yield adapter.workflow_started()
        try:
            async for part in self.graph.astream(update, config, context=context,
                                                 stream_mode=STREAM_MODES, version="v2"):
                for event in adapter.feed(part):
                    self.outcome.events += 1
                    yield event
        except ComponentError as e:
            for event in adapter.component_failed(e.component_id, e.outputs, e.inputs, e.message):
                yield event
            self.outcome.status, self.outcome.error = "stopped", f"{e.component_id}: {e.message}"
            return
        self.outcome.status = "finished" if adapter.finished else "stopped"

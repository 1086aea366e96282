"""Pipeline plan -> LangGraph `StateGraph`: one node per component along the File's path.

The state is one file's run: the `file` it is about, every component's `outputs` (RAGFlow keeps each
component's outputs, and an Extractor reads earlier ones by reference), the progress `logs` RAGFlow's
Pipeline keeps (per component: progress, message, time), the `error` that stopped the file, and the
`last` component that finished. Each step runs its component on the outputs of the one before and
writes its progress both to the state (checkpointed with it) and to LangGraph's custom stream (live).
The first error ends the run, as in RAGFlow. A checkpointer makes every step durable: a run that was
killed continues from its last finished component (`graph.astream(None, config)`).
"""
from __future__ import annotations

import operator
import time
from typing import Annotated, Any, TypedDict

from canvas2graph.compiler.pipeline import pipeline_order
from canvas2graph.compiler.plan import Plan


def _merge(left: dict | None, right: dict | None) -> dict:
    return {**(left or {}), **(right or {})}


class PipelineState(TypedDict, total=False):
    file: dict[str, Any]
    kb: dict[str, Any]
    outputs: Annotated[dict[str, dict[str, Any]], _merge]
    logs: Annotated[list[dict[str, Any]], operator.add]
    error: str
    last: str


class PipelineInput(TypedDict, total=False):
    file: dict[str, Any]
    kb: dict[str, Any]


class Step:
    """One component's step: progress callback, timing, outputs, and the error that stops the file."""

    def __init__(self, node, previous: str | None):
        self.node = node
        self.previous = previous

    async def __call__(self, state: dict[str, Any], runtime) -> dict[str, Any]:
        from langgraph.config import get_stream_writer
        from canvas2graph.nodes.pipeline.base import Job
        from canvas2graph.runtime.services.environment import resolve_context
        ctx = runtime.context
        if ctx is None or ctx.models is None:
            ctx = resolve_context(runtime, None)
        writer = get_stream_writer()
        cid = self.node.id
        logs: list[dict[str, Any]] = []
        last_time = [time.time()]

        def progress(value: float, message: str) -> None:
            now = time.time()
            entry = {"component_id": cid, "progress": value, "message": message, "timestamp": now,
                     "elapsed_time": now - last_time[0]}
            last_time[0] = now
            if message.strip():        # RAGFlow keeps no log line for a progress-only update
                logs.append(entry)
            writer({"event": "progress", "data": entry})

        outputs = state.get("outputs") or {}
        upstream = dict(outputs.get(self.previous) or {}) if self.previous else {}
        created = time.perf_counter()
        job = Job(ctx=ctx, file=state.get("file") or {}, outputs=outputs, progress=progress, kb=state.get("kb") or {})
        error = ""
        try:
            own = await self.node.process(upstream, job)
        except Exception as e:              # the component's failure stops this file, named
            own, error = {}, str(e) or type(e).__name__
        result = {**upstream, "_created_time": created, **own, "_elapsed_time": time.perf_counter() - created}
        if error:
            result["_ERROR"] = error
            progress(-1, f"[ERROR]{error}")
        else:
            progress(1, "Done")
        update: dict[str, Any] = {"outputs": {cid: result}, "logs": logs, "last": cid}
        if error:
            update["error"] = error
        return update


def build_pipeline_graph(plan: Plan):
    """The StateGraph of a checked pipeline plan (compile it with a checkpointer to resume)."""
    from langgraph.graph import END, START, StateGraph
    from canvas2graph.types import RunContext
    order = pipeline_order(plan)
    graph = StateGraph(PipelineState, context_schema=RunContext, input_schema=PipelineInput)
    names = [plan.node_names[cid] for cid in order]
    for i, cid in enumerate(order):
        node = plan.nodes[cid]
        graph.add_node(names[i], Step(node, order[i - 1] if i else None),
                       metadata={"component_id": cid, "component_type": node.component_type,
                                 "display_name": node.display_name})
    graph.add_edge(START, names[0])
    for i, name in enumerate(names):
        nxt = names[i + 1] if i + 1 < len(names) else END
        graph.add_conditional_edges(name, _stop_on_error(nxt), [nxt, END] if nxt != END else [END])
    return graph


def _stop_on_error(nxt: str):
    from langgraph.graph import END

    def route(state: dict[str, Any]) -> str:
        return END if state.get("error") else nxt
    return route

"""Fusion: a chain of components that do no I/O, stream nothing and cannot pause runs as one LangGraph node.

Every LangGraph superstep costs a fixed amount (0.41 ms of CPU for a no-op node, `bench/upstream/floor.py`,
and a checkpoint), whatever the component does. StringTransform, VariableAssigner, ListOperations,
DataOperations and VariableAggregator compute their outputs from the state in microseconds, and a Switch
only decides; a run of them, each the only way into the next, needs no superstep of its own each. The
compiler runs such a **chain** inside one node, named after the chain's first component:

- each component runs through its own `Node.__call__` (its timeout, its error naming it), on the state as
  the previous components of the chain left it; the node's update is all of their writes;
- the events stay per component and in RAGFlow's order: the node's task start is the first component's
  `node_started`; after each component the node writes a custom stream item that `canvas2graph.runtime.run.events` turns into
  that component's `node_finished` and the next one's `node_started`; the task's result is the last
  component's `node_finished`; `last.fused` carries every component's inputs, so the step trace lists each
  component as a step (`canvas2graph.runtime.run.steps`);
- a Switch can only end a chain (it routes); a chain never crosses a join, a container's boundary, or a
  component with `exception_method` or `max_retries` (their error handler and retry policy are per node).

Only canvases where one component runs at a time (`canvas2graph.compiler.build.one_at_a_time`) are fused: with
parallel branches, RAGFlow's batches start and finish every branch's component together, and a fused
chain would finish its components ahead of the other branches'. Items of a parallel Iteration are not
fused either. `CANVAS2GRAPH_FUSION=0` turns fusion off (`1`, the default, on); see docs/performance.md
for the measurements behind the default.
"""
from __future__ import annotations

import os
from collections import Counter
from typing import Any

from canvas2graph.compiler.plan import Plan
from canvas2graph.runtime.graph.state import GLOBALS, LAST, LOOPS, OUTPUTS, REFERENCE, merge_globals, merge_outputs, merge_reference

PURE = frozenset({"StringTransform", "VariableAssigner", "ListOperations", "DataOperations", "VariableAggregator",
                  "Switch"})
ENDS_ONLY = frozenset({"Switch"})          # a router: it may end a chain, never continue one
FUSED = "__fused__"                        # the key of the custom stream items a fused node writes
_MERGE = {OUTPUTS: merge_outputs, LOOPS: merge_outputs, GLOBALS: merge_globals, REFERENCE: merge_reference}


def enabled() -> bool:
    """CANVAS2GRAPH_FUSION: 0 turns fusion off; anything else (and unset) leaves it on."""
    return os.environ.get("CANVAS2GRAPH_FUSION", "1").strip().lower() not in ("0", "false", "no", "off")


def _fusible(node) -> bool:
    params = node.params
    return (node.component_type in PURE and node.role not in ("start", "container", "exit")
            and not getattr(params, "exception_method", None) and not getattr(params, "max_retries", 0))


def chains(plan: Plan, *, inline: bool, exclude: set[str] = frozenset()) -> dict[str, list[str]]:
    """First component id -> the chain it starts (two components or more), for the canvas's own graph."""
    if not inline:
        return {}
    outgoing: dict[str, list] = {}
    indegree: Counter = Counter()
    for e in plan.edges:
        outgoing.setdefault(e.source, []).append(e)
        indegree[e.target] += 1
    fusible = {cid for cid, node in plan.nodes.items() if cid != "begin" and cid not in exclude and _fusible(node)}

    def next_of(cid: str) -> str | None:
        """The component `cid` hands over to inside a chain, if it can."""
        if cid not in fusible or plan.nodes[cid].component_type in ENDS_ONLY:
            return None
        edges = outgoing.get(cid, [])
        if len(edges) != 1 or edges[0].kind != "next":
            return None
        target = edges[0].target
        return target if target in fusible and indegree[target] == 1 else None

    absorbed = {t for cid in fusible if (t := next_of(cid))}
    found: dict[str, list[str]] = {}
    for cid in plan.nodes:
        if cid not in fusible or cid in absorbed:
            continue
        chain = [cid]
        while (t := next_of(chain[-1])) and t not in chain:
            chain.append(t)
        if len(chain) > 1:
            found[cid] = chain
    return found


def combine(total: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    """Two updates of consecutive components as one: merged where the channel merges, the later one otherwise."""
    out = dict(total)
    for key, value in update.items():
        merge = _MERGE.get(key)
        out[key] = merge(out[key], value) if merge is not None and key in out and value is not None else value
    return out


def _view(state: dict, update: dict) -> dict:
    """The state the next component of a chain reads: `state` with the previous component's writes."""
    view = dict(state)
    for key, value in update.items():
        merge = _MERGE.get(key)
        view[key] = merge(view.get(key), value) if merge is not None and value is not None else value
    return view


def fused_chains(plan: Plan) -> dict[str, list[str]]:
    """The chains `canvas2graph.compiler.build` fuses for this plan (none when fusion is off)."""
    if not enabled():
        return {}
    from canvas2graph.compiler.build import one_at_a_time
    from canvas2graph.compiler.parallel import hidden, parallel_iterations
    return chains(plan, inline=one_at_a_time(plan), exclude=hidden(plan, parallel_iterations(plan)))


async def fused_step(nodes: list, step, state: dict, runtime, *, timeout: float | None) -> Any:
    """Run a chain: every component but the last through its own call, the last through `step` (its
    node step: routing, the end of the turn), reporting each component to the event stream in between."""
    from langgraph.types import Command

    from canvas2graph.nodes.base import stream_writer
    write = stream_writer()
    view, total, inputs = state, {}, {}
    for node, following in zip(nodes, nodes[1:]):
        update = await type(node).__call__(node, view, runtime, timeout=timeout)
        inputs[node.id] = (update.get(LAST) or {}).get("inputs") or {}
        write({FUSED: "finished", "component_id": node.id, "outputs": update[OUTPUTS][node.id],
               "inputs": inputs[node.id]})
        view, total = _view(view, update), combine(total, update)
        try:
            thoughts = following.thoughts(view)
        except Exception:           # thoughts are informative only, as in canvas2graph.runtime.run.events
            thoughts = ""
        write({FUSED: "started", "component_id": following.id, "thoughts": thoughts})
    result = await step(view, runtime)
    update = result.update if isinstance(result, Command) else result
    update = combine(total, update or {})
    last = update.get(LAST) or {}
    update[LAST] = {**last, "fused": {**inputs, nodes[-1].id: last.get("inputs") or {}}}
    return Command(update=update, goto=result.goto) if isinstance(result, Command) else update

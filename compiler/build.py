"""Plan -> LangGraph StateGraph.

- one node per component; components with several predecessors are `defer`red, so a join runs
  once, after every branch that runs has finished (RAGFlow has no join barrier: see
  docs/compatibility.md);
- Switch and Categorize route with `Command(goto=...)` to the targets in their `_next` output (the
  plan's labelled edges are what exports draw). A conditional edge would cost LangGraph a fresh copy
  of every channel at each routing step;
- an Iteration or Loop enters its start item, which either starts the next pass of the body or
  leaves (also a `Command`); body sinks return to the start item (the cycle);
- `exception_method` becomes a node error handler, `max_retries` a RetryPolicy, and every node gets
  the component timeout (enforced by `Node.__call__`, bound here);
- Begin's step also starts the turn (`canvas2graph.runtime.graph.turn.start_turn`): it reads the request from the input
  channels (`CanvasInput`) and what the previous turn left, so `graph.invoke({"query": ...}, config)`
  on a thread continues its conversation. In Begin's step rather than in a node of its own: a step
  costs a checkpoint, and the canvas keeps its shape (START -> begin);
- the end of the turn records the assistant turn (`canvas2graph.runtime.graph.turn.finish_turn`). When no component
  can start more than one other (no fan-out, the usual canvas), one component at a time runs, so the
  one that leads to the end records it in its own step (`finish_after`). Otherwise everything that
  ends the turn leads to a finish node, deferred so it waits for the branches still running; a join
  released in the same step runs beside it and then triggers it again, so `finish_turn` lets a later
  run replace the answer and the EventAdapter sends one `workflow_finished`, at the end of the stream;
- every node is async, with a synchronous twin (`canvas2graph.runtime.graph.bridge`) for LangGraph's `invoke`/`stream`.

`Wiring` is the per-node part (a node's step, its options, its router): an ejected canvas
(`canvas2graph.compiler.python_writer`, `canvas2graph.eject`) builds its nodes from it too, wired by its own code.
"""
from __future__ import annotations

import os
from collections import Counter, defaultdict
from functools import partial
from typing import Any, Callable

from langgraph._internal._runnable import RunnableCallable
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command

from canvas2graph.compiler.fusion import fused_chains, fused_step
from canvas2graph.compiler.parallel import hidden, parallel_iterations
from canvas2graph.compiler.plan import CONDITIONAL_EDGES, FINISH as PLAN_FINISH, STATIC_EDGES, Plan
from canvas2graph.nodes.errors import error_handler_for, retry_policy_for
from canvas2graph.runtime.graph.bridge import sync_twin
from canvas2graph.runtime.graph.state import (GLOBALS, LOOPS, NOT_KEPT, OUTPUTS, REFERENCE, CanvasInput, CanvasOutput, build_state_schema,
                           combine_updates, merge_outputs, merge_reference, overwrite, with_update)
from canvas2graph.runtime.graph.turn import finish_after, finish_turn, start_turn

FINISH = "__canvas_finish__"
DEFAULT_TIMEOUT_S = 600.0
Router = Callable[[dict, dict], list]       # (state, the node's update) -> component ids (or PLAN_FINISH)


async def _finish(state: dict) -> dict:
    return finish_turn(state)


def _by_next(component_id: str) -> Router:
    """Switch and Categorize: the targets their run chose."""
    def route(state: dict, update: dict) -> list:
        return list(((update.get(OUTPUTS) or {}).get(component_id) or {}).get("_next") or [])
    return route


def _by_pass(container_id: str, body: list[str], exits: list[str]) -> Router:
    """A start item: the body for another pass, or the container's exits when it is done."""
    def route(state: dict, update: dict) -> list:
        progress = {**((state.get(LOOPS) or {}).get(container_id) or {}),
                    **((update.get(LOOPS) or {}).get(container_id) or {})}
        return exits if progress.get("done") else body
    return route


async def _step(node, state: dict, runtime, *, timeout: float | None, names: dict[str, str],
                route: Router | None = None, ends: bool = False, inline_finish: bool = False, goto: bool = True) -> Any:
    """A component that routes (Command goto) or whose step may end the turn (inline finish).
    Without `goto` a routing component returns its update (a conditional edge routes it)."""
    update = await type(node).__call__(node, state, runtime, timeout=timeout)
    if route is None:
        return finish_after(state, update) if ends else update
    targets = route(state, update)
    if inline_finish and PLAN_FINISH in targets:
        update = finish_after(state, update)
        targets = [t for t in targets if t != PLAN_FINISH]
    return Command(update=update, goto=[names[t] for t in targets]) if goto else update


_RESET = {OUTPUTS: merge_outputs, LOOPS: merge_outputs, REFERENCE: merge_reference}   # channels a turn starts empty


async def _begin(call, state: dict, runtime, *, initial_globals: dict) -> Any:
    """Begin's step: start the turn from the request channels, then run Begin (`call`) on the new turn."""
    start = start_turn(state, initial_globals)
    view = {**with_update(state, start), **{key: reduce(None, None) for key, reduce in _RESET.items()}}
    kept = _kept_keys(state)
    if kept:
        view[OUTPUTS] = kept
    result = await call(view, runtime)
    if isinstance(result, Command):
        return Command(update=_after_start(start, result.update or {}, kept), goto=result.goto)
    return _after_start(start, result, kept)


def _kept_keys(state: dict) -> dict:
    """Every component's outputs as a turn starts: RAGFlow's reset keeps each output's key and sets it to None,
    so Begin's form fields that a turn does not send report None (nodes/begin.py), and a component that fails
    lists, beside its `_ERROR`, what it set in an earlier turn (a Switch's `next`), as None."""
    return {cid: {k: None for k in values if k not in NOT_KEPT}
            for cid, values in (state.get(OUTPUTS) or {}).items() if isinstance(values, dict)}


def _after_start(start: dict, update: dict, kept: dict) -> dict:
    """The start of the turn and Begin's writes as one update: Begin's on top of the fresh channels."""
    merged = combine_updates(start, update)          # history and globals: Begin's writes add to the start's
    for key, reduce in _RESET.items():
        fresh = reduce({}, kept) if key == OUTPUTS and kept else reduce(None, None)
        if key in update:                   # written afresh, not merged into the last turn's values
            merged[key] = overwrite(fresh if update[key] is None else reduce(fresh, update[key]))
        elif key == OUTPUTS and kept:
            merged[key] = overwrite(fresh)
        elif key in merged and merged[key] is None:
            # an overwrite, not the reducer's None: LangGraph then stores the (empty) value at this step, so
            # rebuilding the channel later reads back to the start of the turn at most (runtime/graph/delta.py)
            merged[key] = overwrite(reduce(None, None))
    return merged


def _destinations(edges: list, names: dict[str, str], inline: bool) -> dict[str, str]:
    """Where a router may go, with its branch labels: LangGraph draws a `Command` node's edges
    (`get_graph()`, Studio) from these; running does not need them."""
    out: dict[str, str] = {}
    for e in edges:
        target = END if e.target == PLAN_FINISH and inline else names[e.target]
        labels = [x for x in (out.get(target, "").split(" / ") + [e.label]) if x]
        out[target] = " / ".join(dict.fromkeys(labels))
    return out


def _dual(name: str, afn) -> RunnableCallable:
    """The node as LangGraph runs it: `afn` under ainvoke/astream, its twin under invoke/stream."""
    return RunnableCallable(sync_twin(afn), afn, name=name, trace=False)


def one_at_a_time(plan: Plan) -> bool:
    """True when no component can start more than one other: no static fan-out, no route or error
    goto with several targets. Then exactly one component runs at any time."""
    static: dict[str, set] = defaultdict(set)
    chosen: dict[tuple[str, str], set] = defaultdict(set)
    for e in plan.edges:
        if e.kind in STATIC_EDGES:
            static[e.source].add(e.target)
        else:                                   # a route, a pass of a container, an error goto
            chosen[(e.source, e.kind + ":" + e.label)].add(e.target)
    return all(len(t) <= 1 for t in static.values()) and all(len(t) <= 1 for t in chosen.values())


def component_timeout() -> float | None:
    """COMPONENT_EXEC_TIMEOUT (seconds, default 600; 0 disables), as RAGFlow's per-component limit."""
    raw = os.environ.get("COMPONENT_EXEC_TIMEOUT", "")
    try:
        value = float(raw) if raw else DEFAULT_TIMEOUT_S
    except ValueError:
        value = DEFAULT_TIMEOUT_S
    return value if value > 0 else None


class Wiring:
    """What the builder derives from a plan for each node: its step, its options, how it routes.

    `build_graph` and the Python an ejected canvas runs (`canvas2graph.eject`) both read it, so the
    graph a user edits starts out as the compiled one."""

    def __init__(self, plan: Plan):
        self.plan = plan
        self.inline = one_at_a_time(plan)
        self.names = {**plan.node_names, PLAN_FINISH: FINISH}
        self.indegree = Counter(e.target for e in plan.edges if e.kind in STATIC_EDGES + CONDITIONAL_EDGES + ("error",))
        self.timeout = component_timeout()
        self.routed: dict[str, list] = defaultdict(list)
        for e in plan.edges:
            if e.kind in CONDITIONAL_EDGES:
                self.routed[e.source].append(e)
        self.ends = ({e.source for e in plan.edges if e.kind in STATIC_EDGES and e.target == PLAN_FINISH}
                     if self.inline else set())
        self.view = build_state_schema("ComponentState", components_view=True)     # what components read

    def joins(self, cid: str) -> bool:
        """A start item is entered once per turn (from its container) and re-entered from each body
        sink; with several sinks it waits, like a join, until the pass's branches have all finished."""
        return self.indegree[cid] > (2 if self.plan.nodes[cid].role == "start" else 1)

    def router(self, cid: str) -> Router | None:
        if cid not in self.routed:
            return None
        node, edges = self.plan.nodes[cid], self.routed[cid]
        if node.role == "start":
            return _by_pass(node.parent_id, [e.target for e in edges if e.label != "done"],
                            [e.target for e in edges if e.label == "done"])
        return _by_next(cid)

    def step(self, cid: str, *, goto: bool = True) -> Any:
        """The node's step. `goto`: a routing node returns `Command(goto=...)` (the compiled graph);
        without, it returns its update and a conditional edge reads its route (an ejected canvas)."""
        return _dual(self.names[cid], self.call(cid, goto=goto))

    def call(self, cid: str, *, goto: bool = True) -> Any:
        """The node's step as an async callable of (state, runtime)."""
        node = self.plan.nodes[cid]
        route = self.router(cid)
        # a partial() (not a bound method or a closure): LangGraph then skips scanning the callable's
        # bytecode for subgraphs, which dominated compile time for large canvases
        if route is None and cid not in self.ends:
            call = partial(type(node).__call__, node, timeout=self.timeout)
        else:
            call = partial(_step, node, timeout=self.timeout, names=self.names, route=route, ends=cid in self.ends,
                           inline_finish=self.inline, goto=goto)
        if cid == "begin":
            call = partial(_begin, call, initial_globals=self.plan.dsl.initial_globals())
        return call

    def error_handler(self, cid: str, targets: list[str] | None = None):
        handler = error_handler_for(self.plan.nodes[cid], self.plan, self.names, inline_finish=self.inline,
                                    targets=targets)
        return _dual(f"__error_handler__{self.names[cid]}", handler) if handler else None

    def retry_policy(self, cid: str):
        return retry_policy_for(self.plan.nodes[cid])

    def metadata(self, cid: str) -> dict:
        node = self.plan.nodes[cid]
        return {"component_id": cid, "component_type": node.component_type, "component_name": node.display_name}

    def input_schema(self, cid: str):
        return None if cid == "begin" else self.view

    def finish_node(self) -> RunnableCallable:
        return _dual(FINISH, _finish)


def add_components(graph: StateGraph, wiring: Wiring, ids: list[str], *, names: dict[str, str],
                   first: str | None = None) -> None:
    """The nodes of the components `ids` (in order), named by `names`. An Iteration that runs items at once
    becomes its three nodes (`canvas2graph.compiler.parallel`) and its body is left out: it runs in the item graph.
    `first` is the node an item graph starts at, which waits for nothing."""
    from canvas2graph.compiler.parallel import add_parallel_iteration, hidden, parallel_iterations

    plan, inline = wiring.plan, wiring.inline
    parallel = {cid: n for cid, n in parallel_iterations(plan).items() if cid in ids}
    hide = hidden(plan, parallel)
    valid = set(ids) - hide
    chains = fused_chains(plan) if first is None else {}      # the canvas's own graph only, not item graphs
    inside = {cid for chain in chains.values() for cid in chain[1:]}
    for cid in ids:
        if cid in hide or cid in inside:
            continue
        if cid in chains:
            add_fused(graph, wiring, chains[cid], names=names)
            continue
        if cid in parallel:
            add_parallel_iteration(graph, wiring, cid, parallel[cid])
            continue
        node = plan.nodes[cid]
        routes = [e for e in wiring.routed.get(cid, []) if e.target in valid or e.target == PLAN_FINISH
                  or wiring.names.get(e.target) == END]
        graph.add_node(names[cid], wiring.step(cid),
                       input_schema=wiring.input_schema(cid),
                       defer=wiring.joins(cid) and cid != first,
                       destinations=_destinations(routes, wiring.names, inline) if cid in wiring.routed else None,
                       retry_policy=retry_policy_for(node),
                       error_handler=wiring.error_handler(cid),
                       metadata=wiring.metadata(cid))


def add_fused(graph: StateGraph, wiring: Wiring, chain: list[str], *, names: dict[str, str]) -> None:
    """A chain of pure components as one node, named after its first (`canvas2graph.compiler.fusion`)."""
    plan, first, last = wiring.plan, chain[0], chain[-1]
    nodes = [plan.nodes[c] for c in chain]
    call = partial(fused_step, nodes, wiring.call(last), timeout=wiring.timeout)
    routes = wiring.routed.get(last, [])
    graph.add_node(names[first], _dual(names[first], call), input_schema=wiring.view, defer=wiring.joins(first),
                   destinations=_destinations(routes, wiring.names, wiring.inline) if routes else None,
                   metadata={**wiring.metadata(first), "fused": chain})


def build_graph(plan: Plan) -> StateGraph:
    from canvas2graph.types import RunContext

    graph = StateGraph(build_state_schema(), context_schema=RunContext, input_schema=CanvasInput,
                       output_schema=CanvasOutput)
    wiring = Wiring(plan)
    names, inline = wiring.names, wiring.inline
    add_components(graph, wiring, list(plan.nodes), names=names)
    hide = hidden(plan, parallel_iterations(plan))      # what runs inside parallel Iterations' item graphs
    owner = {cid: chain[0] for chain in fused_chains(plan).values() for cid in chain}   # fused: the chain's node
    # the finish node also serves Runner._close_turn (`as_node`) when the components finish inline
    graph.add_node(FINISH, wiring.finish_node(), input_schema=wiring.view, defer=True)
    graph.add_edge(START, names["begin"])
    graph.add_edge(FINISH, END)
    for e in plan.edges:
        if e.source in hide or e.target in hide:
            continue
        if e.source in owner and owner.get(e.target) == owner[e.source]:
            continue                                    # inside a fused chain
        if e.kind in STATIC_EDGES and not (e.target == PLAN_FINISH and inline):
            graph.add_edge(names[owner.get(e.source, e.source)], names[e.target])
    return graph

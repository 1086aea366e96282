"""Parallel Iterations: an Iteration whose `max_concurrency` is above 1 runs its items through LangGraph's fan-out.

RAGFlow's Python engine runs an Iteration's items one after another (what canvas2graph does by default,
`max_concurrency` 1); RAGFlow's Go engine (`internal/agent/canvas/parallel_subgraph.go` at b1b8cd62) runs them
`max_concurrency` at a time and keeps the outputs in the items' order. Here, in LangGraph's own terms:

- the Iteration's body (its IterationItem and every component inside it, nested containers included) is
  compiled once into a graph of its own, the **item graph**, with the components' own steps, retry policies,
  error handlers and timeouts (`canvas2graph.compiler.build.Wiring`), entered at the IterationItem and left at the body's
  sinks;
- the Iteration's step sends the first `max_concurrency` items to the **items node** (`Send`, one task per item,
  all in one superstep: LangGraph runs them at once); each task runs the item graph on a copy of the canvas's
  state with the item's position, and writes back what the item produced: its collected outputs under the
  item's index, and the body components' outputs (the last item's win, as after RAGFlow's last pass);
- the **collect node** runs once the superstep is over: it sends the next `max_concurrency` items, or, once every
  item has run, writes the Iteration's collected lists in the items' order, marks the Iteration done (its
  `node_finished` follows) and goes to the Iteration's downstream.

Items therefore run in waves of `max_concurrency` (a superstep ends when its slowest item does). A process that
dies mid-wave resumes the wave with only the items whose task had not finished: LangGraph keeps the writes of
every finished task of a superstep in the checkpointer and runs only the others again (each from its start: an
item is the unit of durability, the item graph has no checkpoints of its own). How events interleave is in
docs/langgraph.md (Parallel Iterations).
"""
from __future__ import annotations

from functools import partial
from typing import Any

from canvas2graph.compiler.plan import CONDITIONAL_EDGES, FINISH as PLAN_FINISH, STATIC_EDGES, Plan
from canvas2graph.runtime.graph.state import (GLOBALS, HISTORY, LAST, LOOPS, OUTPUTS, REFERENCE, build_state_schema,
                                              merge_values)
from canvas2graph.runtime.graph.turn import finish_after

# LangGraph is imported where it is used: exports and `canvas2graph compile` read `concurrency` without it

ITEMS_PREFIX = "__items__"
COLLECT_PREFIX = "__collect__"
SETTLE_PREFIX = "__settle__"         # an item graph's last node: runs the generations nothing in the item streamed
DURABILITY_KEY = "__pregel_durability"   # where LangGraph 1.2 passes a run's durability on to subgraphs
ITEM_KEY = "#"                       # LOOPS[iteration]["#3"]: what item 3 collected
ITEM_ONLY = "item_only"              # LOOPS[iteration][ITEM_ONLY]: an item graph's pass, which collects nothing
# the channels an item reads: the components' view of the state (canvas2graph.runtime.graph.state.build_state_schema)
# without the turn's request, which only Begin and the end of the turn read
ITEM_CHANNELS = (OUTPUTS, LOOPS, GLOBALS, HISTORY, LAST, REFERENCE)
UNREAD_GLOBALS = ("sys.query", "sys.history")    # globals an item's copy leaves out unless a component names them


def concurrency(node) -> int:
    """An Iteration's `max_concurrency` (0 and 1: one item at a time)."""
    return max(1, int(getattr(node.params, "max_concurrency", 1) or 1)) if node.component_type == "Iteration" else 1


def parallel_iterations(plan: Plan) -> dict[str, int]:
    """Iteration id -> its `max_concurrency`, for every Iteration that runs items at once and has a start item."""
    return {cid: n for cid, node in plan.nodes.items()
            if node.role == "container" and cid in plan.starts and (n := concurrency(node)) > 1}


def members(plan: Plan, container: str) -> list[str]:
    """Every component inside `container` (its start item, its body, nested containers and their bodies),
    in the plan's order."""
    inside: set[str] = {container}
    changed = True
    while changed:            # parents may come after their children in the DSL
        changed = False
        for cid, node in plan.nodes.items():
            if cid not in inside and node.parent_id in inside:
                inside.add(cid)
                changed = True
    return [cid for cid in plan.nodes if cid in inside and cid != container]


def hidden(plan: Plan, parallel: dict[str, int]) -> set[str]:
    """Components that run inside an item graph rather than as nodes of the graph that holds the Iteration."""
    return {cid for container in parallel for cid in members(plan, container)}


PAUSING = ("UserFillUp",)       # components that wait for the user: an item is a task of one superstep, not a session


def check_parallel(plan: Plan, out) -> None:
    """What an item of a parallel Iteration cannot do, as compile errors naming the component: wait for the
    user (an item runs to its end within one task), or leave a Loop that encloses the Iteration (an ExitLoop
    inside the item ends at most the item's own Loops)."""
    for container in parallel_iterations(plan):
        inside = set(members(plan, container))
        for cid in inside:
            node = plan.nodes[cid]
            if node.component_type in PAUSING:
                out.error("pause-in-parallel-item", f"a {node.component_type} cannot wait for the user inside Iteration "
                          f"'{container}', whose items run at once (max_concurrency above 1): set max_concurrency to 1 "
                          "or move it out of the Iteration", cid, "parent_id")
            loop = getattr(node, "loop", None) if node.role == "exit" else None
            if node.role == "exit" and loop and loop not in inside:
                out.error("exit-from-parallel-item", f"this ExitLoop would leave Loop '{loop}' from inside Iteration "
                          f"'{container}', whose items run at once (max_concurrency above 1): set max_concurrency to 1",
                          cid, "parent_id")


def items_node(names: dict[str, str], cid: str) -> str:
    return ITEMS_PREFIX + names[cid]


def collect_node(names: dict[str, str], cid: str) -> str:
    return COLLECT_PREFIX + names[cid]


def item_reads(plan: Plan, container: str, items_ref) -> dict[str, Any]:
    """What an item's copy of the state keeps (`_item_state`): `outputs`, the components whose outputs the body
    names, its own and the Iteration's; `unread_globals`, the globals of `UNREAD_GLOBALS` and the list being
    iterated (when it is a global) that no component names; `history`, the entries of the longest history
    window a component reads (2 per turn)."""
    inside = members(plan, container)
    refs = [ref for cid in inside for _, ref in plan.nodes[cid].references()]
    named = {ref.name for ref in refs}
    big = set(UNREAD_GLOBALS) | ({items_ref.name} if items_ref is not None and items_ref.kind != "component" else set())
    windows = [int(getattr(plan.nodes[cid].params, "message_history_window_size", 0) or 0) for cid in inside
               if plan.nodes[cid].reads_history]
    return {"outputs": {*inside, container, *(ref.name for ref in refs if ref.kind == "component")},
            "unread_globals": big - named, "history": 2 * max(windows, default=0)}


# --- run time ----------------------------------------------------------------------------------------
def _item_state(state: dict, spec: dict, index: int, items: list | None) -> dict:
    """What one item's graph starts from: the canvas's state, with the Iteration at this item.

    LangGraph stores every `Send` with its argument, so an item's copy of the state is stored once per item, and
    what the copy holds must not grow with the items or with the conversation, or a turn's bytes grow with the
    square of its items. So the copy holds what the body reads (`item_reads`): the outputs of the components
    it names and its own, the globals but `sys.query`, `sys.history` and the list being iterated unless a
    component names them, and the history of the longest window a component of it reads. The item itself
    rides along in the Iteration's progress, which its IterationItem reads instead of the list."""
    arg = {key: state[key] for key in ITEM_CHANNELS if key in state}
    container = spec["container"]
    loops = dict(arg.get(LOOPS) or {})
    loops[container] = {"idx": index, "done": False, ITEM_ONLY: True}
    if isinstance(items, list) and index < len(items):
        loops[container]["item"] = items[index]
    arg[LOOPS] = loops
    arg[OUTPUTS] = {cid: values for cid, values in (arg.get(OUTPUTS) or {}).items() if cid in spec["outputs"]}
    if GLOBALS in arg:
        arg[GLOBALS] = {k: v for k, v in (arg[GLOBALS] or {}).items() if k not in spec["unread_globals"]}
    if HISTORY in arg:
        window = spec["history"]
        arg[HISTORY] = list(arg[HISTORY] or [])[-window:] if window else []
    return arg


def _wave(state: dict, spec: dict, start: int, stop: int) -> list:
    from langgraph.types import Send

    from canvas2graph.runtime.graph.values import resolve
    items = resolve(state, spec["items_ref"])
    return [Send(spec["items_node"], _item_state(state, spec, i, items)) for i in range(start, stop)]


def _with(state: dict, update: dict) -> dict:
    """`state` as the Iteration's writes leave it, for the items' copies (outputs and progress merged)."""
    view = dict(state)
    for key in (OUTPUTS, LOOPS):
        if update.get(key):
            merged = dict(view.get(key) or {})
            for cid, values in update[key].items():
                merged[cid] = merge_values(merged.get(cid), values)
            view[key] = merged
    return view


async def _enter(node, state: dict, runtime, *, spec: dict, timeout: float | None, collect: str, limit: int) -> Any:
    """The Iteration's step: resolve the items (the component's own run) and send the first wave."""
    from langgraph.types import Command

    from canvas2graph.runtime.graph.values import resolve
    update = await type(node).__call__(node, state, runtime, timeout=timeout)
    count = len(resolve(state, node.items_ref))          # the component's run has checked it is a list
    first = min(limit, count)
    update[LOOPS] = {node.id: {"idx": first, "count": count, "done": False, "max_concurrency": limit}}
    if count == 0:
        return Command(update=update, goto=collect)
    return Command(update=update, goto=_wave(_with(state, update), spec, 0, first))


def _item_config(config: dict) -> dict:
    """The items node's config for its item graph, without the run's durability: the item graph keeps no
    checkpoints (an item is the unit of durability), and LangGraph 1.2 waits for a checkpoint future that a
    graph without a checkpointer never creates when it inherits `durability="sync"`."""
    configurable = {k: v for k, v in (config.get("configurable") or {}).items() if k != DURABILITY_KEY}
    return {**config, "configurable": configurable}


async def _item(body, spec: dict, arg: dict, runtime) -> Any:
    """One item: the item graph on the item's copy of the state; back with what it produced."""
    from langgraph.config import get_config
    from langgraph.types import Command

    from canvas2graph.runtime.graph.values import resolve
    container = spec["container"]
    index = arg[LOOPS][container]["idx"]
    final = await body.ainvoke(arg, _item_config(get_config()), context=runtime.context)
    outputs = final.get(OUTPUTS) or {}
    collected = {key: resolve(final, ref) for key, ref in spec["collect"]}
    update: dict[str, Any] = {
        OUTPUTS: {cid: outputs[cid] for cid in spec["members"] if cid in outputs},
        LOOPS: {container: {f"{ITEM_KEY}{index}": collected}},
    }
    if final.get(REFERENCE) and final.get(REFERENCE) != arg.get(REFERENCE):
        update[REFERENCE] = final[REFERENCE]
    before = arg.get(GLOBALS) or {}
    changed = {k: v for k, v in (final.get(GLOBALS) or {}).items() if before.get(k) != v}
    if changed:
        update[GLOBALS] = changed
    return Command(update=update, goto=spec["collect_node"])


async def _collect(state: dict, *, spec: dict) -> Any:
    """After a wave: the next wave, or the Iteration's lists in the items' order and its downstream."""
    from langgraph.types import Command

    container = spec["container"]
    progress = (state.get(LOOPS) or {}).get(container) or {}
    sent, count, limit = int(progress.get("idx") or 0), int(progress.get("count") or 0), spec["limit"]
    if sent < count:
        stop = min(count, sent + limit)
        return Command(update={LOOPS: {container: {"idx": stop}}},
                       goto=_wave(state, spec, sent, stop))
    outputs = {key: [((progress.get(f"{ITEM_KEY}{i}") or {}).get(key)) for i in range(count)] if count else None
               for key, _ in spec["collect"]}
    update: dict[str, Any] = {LOOPS: {container: {"done": True}}}
    if outputs:
        update[OUTPUTS] = {container: outputs}
    targets = list(spec["exits"])
    if spec["inline"] and PLAN_FINISH in targets:
        update = finish_after(state, update)
        targets = [t for t in targets if t != PLAN_FINISH]
    return Command(update=update, goto=[spec["names"][t] for t in targets])


# --- build time --------------------------------------------------------------------------------------
def add_parallel_iteration(graph, wiring, cid: str, limit: int) -> None:
    """The Iteration `cid` as three nodes of `graph`: its own step, the items node and the collect node."""
    from canvas2graph.compiler.build import _destinations, _dual

    plan, names = wiring.plan, wiring.names
    node = plan.nodes[cid]
    items, collect = items_node(names, cid), collect_node(names, cid)
    inside = members(plan, cid)
    start = plan.starts[cid]
    exits = [e.target for e in plan.edges if e.source == start and e.kind == "item" and e.label == "done"]
    spec = {"container": cid, "limit": limit, "collect": list(node.collect), "members": inside,
            "items_node": items, "collect_node": collect, "exits": exits, "names": names, "inline": wiring.inline}
    spec.update(item_reads(plan, cid, node.items_ref), items_ref=node.items_ref)
    enter = partial(_enter, node, spec=spec, timeout=wiring.timeout, collect=collect, limit=limit)
    graph.add_node(names[cid], _dual(names[cid], enter), input_schema=wiring.input_schema(cid),
                   defer=wiring.joins(cid), destinations={items: "items", collect: "no items"},
                   retry_policy=wiring.retry_policy(cid), error_handler=wiring.error_handler(cid),
                   metadata={**wiring.metadata(cid), "max_concurrency": limit})
    body = build_item_graph(plan, cid)
    graph.add_node(items, _dual(items, partial(_item, body, spec)), destinations=(collect,),
                   metadata={"component_id": cid, "part": "items", "max_concurrency": limit})
    done = [e for e in plan.edges if e.source == start and e.kind == "item" and e.label == "done"]
    graph.add_node(collect, _dual(collect, partial(_collect, spec=spec)), input_schema=wiring.view,
                   destinations={items: "next items", **_destinations(done, names, wiring.inline)},
                   metadata={"component_id": cid, "part": "collect", "max_concurrency": limit})


async def _settle(state: dict, runtime, *, start, inside: list[str]) -> dict:
    """The end of an item: every generation of the item's components that no Message streamed (an LLM whose
    downstream Message names something else) runs now, unseen, as the sequential IterationItem runs them at
    the start of the next pass; the Iteration collects their text, and their held `node_finished` carries it
    (docs/compatibility.md). A failure is the producer's, as when a Message streams it."""
    from canvas2graph.types import ComponentError
    from canvas2graph.compiler.dsl.refs import parse_ref
    from canvas2graph.nodes.base import settle_pending
    from canvas2graph.runtime.graph.state import OUT_PREFIX
    from canvas2graph.runtime.graph.values import is_pending
    from canvas2graph.runtime.services.environment import resolve_context

    outputs = state.get(OUTPUTS) or {}
    refs = [parse_ref(f"{cid}@{key}") for cid in inside for key, value in (outputs.get(cid) or {}).items()
            if is_pending(value)]
    if not refs:
        return {}
    ctx = runtime.context
    if ctx is None or ctx.models is None:
        ctx = resolve_context(runtime, getattr(start.canvas, "entries", None))
    update: dict[str, Any] = {}
    for ref in refs:                  # one at a time, so that a failure names its producer
        try:
            _view, writes = await settle_pending(start, [ref], state, ctx)
        except ComponentError:
            raise
        except Exception as e:        # noqa: BLE001 - the producer's failure, as a Message streaming it reports it
            message = str(e) or type(e).__name__
            raise ComponentError(ref.name, message, {**{k: (None if is_pending(v) else v) for k, v in
                                                        (outputs.get(ref.name) or {}).items()}, "_ERROR": message}) from e
        for key, values in writes.items():
            if key.startswith(OUT_PREFIX):
                cid = key[len(OUT_PREFIX):]
                update.setdefault(OUTPUTS, {}).setdefault(cid, {}).update(values)
            else:
                update[key] = values
    return update


def build_item_graph(plan: Plan, container: str):
    """The compiled graph one item of a parallel Iteration runs: its IterationItem, then its body, then the
    settle node (`_settle`)."""
    from langgraph.graph import END, START, StateGraph

    from canvas2graph.types import RunContext
    from canvas2graph.compiler.build import Wiring, _dual, add_components

    start = plan.starts[container]
    inside = members(plan, container)
    settle = SETTLE_PREFIX + plan.node_names[container]
    wiring = Wiring(plan)
    wiring.names = {**wiring.names, start: settle}       # where a body's way back to the item leads: its end
    graph = StateGraph(build_state_schema(), context_schema=RunContext)
    add_components(graph, wiring, inside, names=plan.node_names, first=start)
    graph.add_node(settle, _dual(settle, partial(_settle, start=plan.nodes[start], inside=inside)), defer=True)
    graph.add_edge(START, plan.node_names[start])
    graph.add_edge(settle, END)
    hide = hidden(plan, {c: 2 for c in parallel_iterations(plan) if c in inside})
    for e in plan.edges:
        if e.kind not in STATIC_EDGES or e.source not in inside or e.source in hide:
            continue
        if e.target == start:
            graph.add_edge(plan.node_names[e.source], settle)
        elif e.target in inside and e.target not in hide:
            graph.add_edge(plan.node_names[e.source], plan.node_names[e.target])
    return graph.compile(checkpointer=False)


def item_edges(plan: Plan, container: str) -> list:
    """The edges inside an item graph (for pictures and exports): the start item's passes and the body's."""
    inside = set(members(plan, container))
    return [e for e in plan.edges if e.source in inside and e.target in inside
            and (e.kind in STATIC_EDGES + CONDITIONAL_EDGES + ("error",))]

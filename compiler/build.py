"""Plan -> LangGraph StateGraph.

- one node per component; components with several predecessors are `defer`red, so a join runs
  once, after every branch that runs has finished (RAGFlow has no join barrier: see
  docs/compatibility.md);
- Switch and Categorize become conditional edges with a full path map, so exports show every branch;
- an Iteration or Loop enters its start item, whose router either starts the next pass of the body
  or leaves; body sinks return to the start item (the cycle);
- `exception_method` becomes a node error handler, `max_retries` a RetryPolicy, and every node gets
  the component timeout (enforced by `Node.__call__`, bound here);
- everything that ends the turn leads to a finish node that records the assistant turn. It is
  deferred, so it waits for the branches still running; a join released in the same step runs
  beside it and then triggers it again, so `finish_turn` lets a later run replace the answer and the
  EventAdapter sends one `workflow_finished`, at the end of the stream.
"""
from __future__ import annotations

import os
from collections import Counter, defaultdict
from functools import partial

from langgraph.graph import END, START, StateGraph

from compiler.plan import CONDITIONAL_EDGES, FINISH as PLAN_FINISH, STATIC_EDGES, Plan
from nodes.errors import error_handler_for, retry_policy_for
from runtime.state import LOOPS, build_state_schema, outputs_of
from runtime.turn import finish_turn

FINISH = "__canvas_finish__"
DEFAULT_TIMEOUT_S = 600.0


async def _finish(state: dict) -> dict:
    return finish_turn(state)


def _route_by_next(component_id: str):
    async def route(state: dict) -> list[str]:
        return list(outputs_of(state, component_id).get("_next") or [])
    return route


def _route_by_pass(container_id: str, body: list[str], exits: list[str]):
    """A start item's router: the body for another pass, or the container's exits when done."""
    async def route(state: dict) -> list[str]:
        return exits if ((state.get(LOOPS) or {}).get(container_id) or {}).get("done") else body
    return route


def component_timeout() -> float | None:
    """COMPONENT_EXEC_TIMEOUT (seconds, default 600; 0 disables), as RAGFlow's per-component limit."""
    raw = os.environ.get("COMPONENT_EXEC_TIMEOUT", "")
    try:
        value = float(raw) if raw else DEFAULT_TIMEOUT_S
    except ValueError:
        value = DEFAULT_TIMEOUT_S
    return value if value > 0 else None


def build_graph(plan: Plan) -> StateGraph:
    from runtime.context import RunContext

    graph = StateGraph(build_state_schema(), context_schema=RunContext)
    names = {**plan.node_names, PLAN_FINISH: FINISH}
    indegree = Counter(e.target for e in plan.edges if e.kind in STATIC_EDGES + CONDITIONAL_EDGES + ("error",))
    timeout = component_timeout()
    for cid, node in plan.nodes.items():
        # a start item is entered once per turn (from its container) and re-entered from each body
        # sink; with several sinks it waits, like a join, until the pass's branches have all finished
        joins = indegree[cid] > (2 if node.role == "start" else 1)
        # for partial(), LangGraph skips scanning the method's bytecode for subgraphs (that scan dominated
        # compile time for large canvases). The component timeout is enforced inside Node.__call__
        graph.add_node(names[cid], partial(type(node).__call__, node, timeout=timeout),
                       defer=joins,
                       retry_policy=retry_policy_for(node),
                       error_handler=error_handler_for(node, plan, names),
                       metadata={"component_id": cid, "component_type": node.component_type})
    graph.add_node(FINISH, _finish, defer=True)
    graph.add_edge(START, names["begin"])
    graph.add_edge(FINISH, END)

    conditional: dict[str, list] = defaultdict(list)
    for e in plan.edges:
        if e.kind in STATIC_EDGES:
            graph.add_edge(names[e.source], names[e.target])
        elif e.kind in CONDITIONAL_EDGES:
            conditional[e.source].append(e)
    for source, edges in conditional.items():
        node = plan.nodes[source]
        if node.role == "start":
            router = _route_by_pass(node.parent_id, [e.target for e in edges if e.label != "done"],
                                    [e.target for e in edges if e.label == "done"])
        else:
            router = _route_by_next(source)
        graph.add_conditional_edges(names[source], router, {e.target: names[e.target] for e in edges})
    return graph

"""Plan -> LangGraph StateGraph.

- one node per component; components with several predecessors are `defer`red, so a join runs
  once, after every branch that runs has finished (RAGFlow has no join barrier: see
  docs/compatibility.md);
- Switch and Categorize become conditional edges with a full path map, so exports show every branch;
- components without downstream lead to a finish node that records the assistant turn.
"""
from __future__ import annotations

from collections import Counter
from functools import partial
from typing import Any

from langgraph.graph import END, START, StateGraph

from compiler.plan import Plan
from runtime.state import build_state_schema, outputs_of
from runtime.turn import finish_turn

FINISH = "__canvas_finish__"


async def _finish(state: dict) -> dict:
    return finish_turn(state)


def _router(component_id: str):
    async def route(state: dict) -> list[str]:
        return list(outputs_of(state, component_id).get("_next") or [])
    return route


def build_graph(plan: Plan) -> StateGraph:
    from runtime.context import RunContext

    ids = list(plan.nodes)
    state = build_state_schema()
    graph = StateGraph(state, context_schema=RunContext)
    names = plan.node_names
    indegree = Counter(e.target for e in plan.edges)
    for cid, node in plan.nodes.items():
        # partial() of the unbound method: LangGraph then skips scanning the method's bytecode
        # for subgraphs, which dominates compile time for large canvases.
        graph.add_node(names[cid], partial(type(node).__call__, node), defer=indegree[cid] > 1,
                       metadata={"component_id": cid, "component_type": node.component_type})
    graph.add_node(FINISH, _finish, defer=True)
    graph.add_edge(START, names["begin"])
    graph.add_edge(FINISH, END)
    for cid, node in plan.nodes.items():
        if plan.specs[cid].routes:
            targets = sorted({e.target for e in plan.edges if e.source == cid})
            graph.add_conditional_edges(names[cid], _router(cid), {t: names[t] for t in targets})
            continue
        if not node.downstream:
            graph.add_edge(names[cid], FINISH)
        for t in node.downstream:
            graph.add_edge(names[cid], names[t])
    return graph

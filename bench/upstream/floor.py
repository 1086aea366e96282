"""LangGraph's fixed cost per node: a chain of async nodes that do nothing.

    python -m bench.upstream.floor

Streamed as canvas2graph's Runner streams a turn (`stream_mode=["tasks", "custom"]`, v2, an in-memory
checkpointer, `durability="sync"`). No graph on LangGraph runs a node for less; `bench.ragflow` sets it
beside RAGFlow's cost per node.
"""
from __future__ import annotations

import asyncio
import gc
import statistics
import time
from typing import Any, TypedDict

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph

STREAM_MODES = ["tasks", "custom"]


class State(TypedDict, total=False):
    x: int


def noop_chain(nodes: int, checkpointer: Any):
    """START -> n0 -> n1 -> ... -> END, each node adding one to `x`."""
    async def step(state: State) -> State:
        return {"x": state.get("x", 0) + 1}

    builder = StateGraph(State)
    previous = START
    for i in range(nodes):
        builder.add_node(f"n{i}", step)
        builder.add_edge(previous, f"n{i}")
        previous = f"n{i}"
    builder.add_edge(previous, END)
    return builder.compile(checkpointer=checkpointer)


async def cpu_per_node(nodes: int = 50, reps: int = 31, warmup: int = 3) -> float:
    """Median CPU ms per node of one streamed run of the no-op chain."""
    graph = noop_chain(nodes, InMemorySaver())
    cpu = []
    for i in range(warmup + reps):
        gc.collect(1)
        c0 = time.process_time()
        async for _ in graph.astream({"x": 0}, {"configurable": {"thread_id": f"floor-{i}"}},
                                     stream_mode=STREAM_MODES, version="v2", durability="sync"):
            pass
        if i >= warmup:
            cpu.append((time.process_time() - c0) * 1e3)
    return statistics.median(cpu) / nodes


if __name__ == "__main__":
    print(f"LangGraph's floor: {asyncio.run(cpu_per_node()):.3f} ms CPU per no-op node")

"""From a node's `get_stream_writer()` call to the item leaving `graph.astream(stream_mode="custom")`.

    python -m bench.upstream.stream_latency

One node writes an item, stamps the time, then does 200 µs of synchronous work per further item (as a
node does that handles a burst of chunks without awaiting). The consumer stamps the time the first item
arrives. Without a yield, the item waits for the whole node; with `await asyncio.sleep(0)` after each
write it still waits about three event-loop iterations (the stream's waiter task, then `asyncio.wait` in
the runner, then the `astream` loop), each one 200 µs of the node's work here.
"""
from __future__ import annotations

import asyncio
import statistics
import time
from typing import TypedDict

from langgraph.config import get_stream_writer
from langgraph.graph import END, START, StateGraph


class State(TypedDict, total=False):
    x: int


def graph(yield_after_write: bool):
    async def node(state: State) -> State:
        write = get_stream_writer()
        for i in range(5):
            write({"i": i, "t": time.perf_counter()})
            if yield_after_write:
                await asyncio.sleep(0)
            end = time.perf_counter() + 0.0002
            while time.perf_counter() < end:
                pass
        return {"x": 1}
    b = StateGraph(State)
    b.add_node("n", node)
    b.add_edge(START, "n")
    b.add_edge("n", END)
    return b.compile()


async def first_item_delay(g) -> float:
    delays = []
    for _ in range(200):
        async for item in g.astream({"x": 0}, stream_mode="custom"):
            delays.append((time.perf_counter() - item["t"]) * 1e6)
            break
    return statistics.median(delays)


async def main() -> None:
    print(f"write, no yield:   first item after {await first_item_delay(graph(False)):.0f} µs")
    print(f"write, sleep(0):   first item after {await first_item_delay(graph(True)):.0f} µs")


if __name__ == "__main__":
    asyncio.run(main())

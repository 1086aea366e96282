"""AsyncSqliteSaver against SqliteSaver called in place: the same checkpoints, the same SQL.

    python -m bench.upstream.sqlite_saver

A graph of N nodes that do nothing, checkpointed at every step (`durability="sync"`) to a SQLite file,
once through `AsyncSqliteSaver` (aiosqlite: every statement handed to a worker thread) and once through
`SqliteSaver` whose async methods call the sync ones directly. Prints CPU and wall per step.
"""
from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from bench.upstream.floor import noop_chain

NODES, TURNS = 50, 20


class InPlace(SqliteSaver):
    async def aget_tuple(self, config):
        return self.get_tuple(config)

    async def aput(self, config, checkpoint, metadata, new_versions):
        return self.put(config, checkpoint, metadata, new_versions)

    async def aput_writes(self, config, writes, task_id, task_path=""):
        return self.put_writes(config, writes, task_id, task_path)


def chain(saver):
    return noop_chain(NODES, saver)


async def per_step(graph) -> tuple[float, float]:
    cpu, wall = [], []
    for i in range(TURNS):
        c0, t0 = time.process_time(), time.perf_counter()
        await graph.ainvoke({"x": 0}, {"configurable": {"thread_id": str(i)}}, durability="sync")
        cpu.append((time.process_time() - c0) * 1e3 / NODES)
        wall.append((time.perf_counter() - t0) * 1e3 / NODES)
    return statistics.median(cpu), statistics.median(wall)


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        async with AsyncSqliteSaver.from_conn_string(str(Path(tmp) / "a.db")) as saver:
            a = await per_step(chain(saver))
        with InPlace.from_conn_string(str(Path(tmp) / "b.db")) as saver:
            b = await per_step(chain(saver))
    print(f"AsyncSqliteSaver:           {a[0]:.3f} ms CPU, {a[1]:.3f} ms wall per step")
    print(f"SqliteSaver called in place: {b[0]:.3f} ms CPU, {b[1]:.3f} ms wall per step")


if __name__ == "__main__":
    asyncio.run(main())

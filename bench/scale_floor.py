"""The floor under bench.scale's CPU per turn: the same turn in plain, hand-written LangGraph.

One process runs begin -> LLM (the same scripted model: `--tokens` chunks, streamed) -> an answer node that
appends the exchange to the history, on LangGraph's own `AsyncPostgresSaver` in the run's database, with
`stream_mode="messages"`, each token serialised as a server would send it. No HTTP, no queue, no event log, no
second process: only what any LangGraph app on PostgreSQL pays per turn. The model does not pause (CPU is
what is measured). Printed beside canvas2graph's layout as a ratio, with the turns per second the machine's
cores would serve at that cost, and the conversations that makes at the run's pace (model + think time).
"""
from __future__ import annotations

import asyncio
import json
import os
import time
import uuid
from typing import TypedDict

from langchain_core.messages import HumanMessage
from langgraph.graph import END, START, StateGraph

from canvas2graph.runtime.services.scripted import Script, ScriptedChatModel


class ChatState(TypedDict, total=False):
    query: str
    answer: str
    history: list


def chat_graph(model: ScriptedChatModel) -> StateGraph:
    async def begin(state: ChatState) -> dict:
        return {"query": state["query"]}

    async def llm(state: ChatState) -> dict:
        reply = await model.ainvoke([HumanMessage(content=state["query"])])
        return {"answer": reply.content}

    async def answer(state: ChatState) -> dict:
        return {"history": [*state.get("history", []), ["user", state["query"]], ["assistant", state["answer"]]]}

    g = StateGraph(ChatState)
    for name, node in (("begin", begin), ("llm", llm), ("answer", answer)):
        g.add_node(name, node)
    g.add_edge(START, "begin")
    g.add_edge("begin", "llm")
    g.add_edge("llm", "answer")
    g.add_edge("answer", END)
    return g


def _cpu_s(pid: int) -> float:
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _measure(url: str, tokens: int, turns: int, concurrent: int) -> dict:
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from psycopg.rows import dict_row
    from psycopg_pool import AsyncConnectionPool

    script = Script.load({"auto_reply": " ".join(["w"] * tokens), "stream_chunks": tokens})
    model = ScriptedChatModel(script=script)
    async with AsyncConnectionPool(url, min_size=concurrent, max_size=concurrent, open=False,
                                   kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}) as pool:
        saver = AsyncPostgresSaver(pool)
        await saver.setup()
        graph = chat_graph(model).compile(checkpointer=saver)

        async def conversation(n: int) -> int:
            thread = {"configurable": {"thread_id": f"floor-{uuid.uuid4().hex}"}}
            sent = 0
            for i in range(n):
                async for chunk, _meta in graph.astream({"query": f"q{i}"}, thread, stream_mode="messages"):
                    sent += len(json.dumps({"event": "message", "data": {"content": chunk.content}}))
            return sent

        await asyncio.gather(*[conversation(2) for _ in range(concurrent)])        # warm: imports, prepared plans
        async with pool.connection() as conn:
            backends = [r["pid"] for r in await (await conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database()")).fetchall()]
        pg0 = sum(_cpu_s(p) for p in backends)
        cpu0, wall0 = time.process_time(), time.perf_counter()
        per = max(1, turns // concurrent)
        await asyncio.gather(*[conversation(per) for _ in range(concurrent)])
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
        pg = sum(_cpu_s(p) for p in backends) - pg0
    done = per * concurrent
    return {"turns": done, "process_ms": cpu * 1000 / done, "postgresql_ms": pg * 1000 / done,
            "turns_per_s": done / wall}


def floor(server: str, tokens: int, turns: int = 400, concurrent: int = 20) -> dict:
    """The hand-written turn's CPU: {"turns", "process_ms", "postgresql_ms", "turns_per_s"} (per turn), on a
    database of its own on `server` (LangGraph's saver has tables of canvas2graph's names), dropped after."""
    import psycopg
    name = f"c2g_floor_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(server + "/postgres", autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    try:
        return asyncio.run(_measure(f"{server}/{name}", tokens, turns, concurrent))
    finally:
        with psycopg.connect(server + "/postgres", autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def print_floor(found: dict, ours: dict | None, pace_s: float, cores: int) -> None:
    """The floor, canvas2graph's layout beside it, and what each allows on `cores` at the run's pace."""
    def ceiling(ms: float) -> str:
        per_s = cores * 1000 / ms
        return f"{per_s:.0f} turns/s, {per_s * pace_s:,.0f} conversations at this pace"
    hand = found["process_ms"] + found["postgresql_ms"]
    print(f"hand-written LangGraph (one process, AsyncPostgresSaver, no HTTP or queue): {found['process_ms']:.1f} + "
          f"{found['postgresql_ms']:.1f} ms of PostgreSQL = {hand:.1f} ms CPU per turn; {cores} cores at 100% busy: "
          f"{ceiling(hand)}", flush=True)
    if ours:
        cpu = ours["cpu_ms_per_turn"]
        total = cpu["canvas2graph"] + cpu["postgresql"]
        print(f"canvas2graph's layout ({ours['workers']} worker(s), K={ours['conversations']}): {cpu['canvas2graph']:.1f} + "
              f"{cpu['postgresql']:.1f} ms of PostgreSQL = {total:.1f} ms CPU per turn ({total / hand:.1f}x the "
              f"hand-written turn); {cores} cores at 100% busy: {ceiling(total)}", flush=True)

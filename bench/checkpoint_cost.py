"""Section 4 of `python -m bench.run`: what a checkpointer costs per step.

The 50-component Message chain, canvas2graph (`Runner.run_turn`) and hand-written LangGraph, with
InMemorySaver, SQLite (a temp file) and PostgreSQL (CANVAS2GRAPH_BENCH_PG; shown as unavailable when it
cannot be reached): ms per step, the extra over InMemorySaver, and what one turn leaves stored.
"""
from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

from langgraph.checkpoint.memory import InMemorySaver

from bench import dsls, handwritten
from bench.timing import (PG_URL, QUERY, RUNNER_DURABILITY, SCRIPT, Stats, fmt, fresh_id, table,
                          time_async_interleaved)
from canvas2graph.compiler.canvas import compile_dsl
from canvas2graph.runtime.run.checkpoint import open_checkpointer
from canvas2graph.runtime.services.models import ModelFactory
from canvas2graph.runtime.services.scripted import Script
from canvas2graph.runtime.run.runner import Runner, TurnRequest

CHECKPOINT_CHAIN = 50
SAVERS = ("in-memory", "SQLite", "PostgreSQL")


@dataclass
class SaverRow:
    saver: str
    available: bool
    note: str = ""
    steps: int = 0
    durability: str = ""                     # the Runner's, which the "hand" figures use too
    canvas2graph: Stats | None = None        # Runner.run_turn
    handwritten: Stats | None = None         # astream(tasks, custom, v2), the Runner's durability
    hand_default: Stats | None = None        # the same with LangGraph's default durability ("async")
    c2g_ms_step: float = 0.0
    hand_ms_step: float = 0.0
    hand_default_ms_step: float = 0.0
    c2g_extra_ms_step: float = 0.0           # over canvas2graph with InMemorySaver
    hand_extra_ms_step: float = 0.0          # over the hand-written graph with InMemorySaver
    hand_default_extra_ms_step: float = 0.0
    overhead_ms_step: float = 0.0            # canvas2graph - hand-written, same saver and durability
    ratio: float = 0.0                       # canvas2graph / hand-written, same durability
    ratio_default: float = 0.0               # canvas2graph / hand-written, default durability
    c2g_kb_turn: float | None = None         # what one turn leaves in the checkpointer
    hand_kb_turn: float | None = None


async def pg_unavailable(url: str) -> str | None:
    """None if PostgreSQL answers at `url`, else why not."""
    try:
        import psycopg
        conn = await asyncio.wait_for(psycopg.AsyncConnection.connect(url, connect_timeout=3), 5)
        await conn.close()
        return None
    except Exception as e:
        reason = str(e).strip().splitlines()[0] if str(e).strip() else ""
        return f"{type(e).__name__}{': ' + reason if reason else ''}"


async def stored_bytes(saver, thread_id: str) -> int | None:
    """Bytes one thread occupies in the checkpointer: checkpoints, channel blobs, pending writes."""
    if isinstance(saver, InMemorySaver):
        total = sum(len(cp[1]) + len(md[1]) for ns in saver.storage.get(thread_id, {}).values()
                    for cp, md, _ in ns.values())
        total += sum(len(b[1]) for k, b in saver.blobs.items() if k[0] == thread_id)
        total += sum(len(w[2][1]) for k, ws in saver.writes.items() if k[0] == thread_id for w in ws.values())
        return total
    try:
        if type(saver).__name__ == "InlineSqliteSaver":
            total = 0
            for sql in ("SELECT sum(length(checkpoint) + length(metadata)) FROM checkpoints WHERE thread_id = ?",
                        "SELECT sum(length(value)) FROM writes WHERE thread_id = ?"):
                total += saver.conn.execute(sql, (thread_id,)).fetchone()[0] or 0
            return total
        if any(cls.__name__ == "AsyncPostgresSaver" for cls in type(saver).__mro__):
            total = 0
            async with saver.conn.cursor() as cur:
                for sql in ("SELECT sum(pg_column_size(checkpoint) + pg_column_size(metadata)) FROM checkpoints "
                            "WHERE thread_id = %s",
                            "SELECT sum(pg_column_size(blob)) FROM checkpoint_blobs WHERE thread_id = %s",
                            "SELECT sum(pg_column_size(blob)) FROM checkpoint_writes WHERE thread_id = %s"):
                    await cur.execute(sql, (thread_id,))
                    row = await cur.fetchone()
                    value = row[0] if isinstance(row, tuple) else next(iter(row.values()))
                    total += value or 0
            return total
    except Exception as e:        # a schema this version does not know: leave the figure out
        print(f"  (stored bytes unavailable for {type(saver).__name__}: {type(e).__name__}: {e})", file=sys.stderr)
    return None


async def bench_checkpoint(quick: bool) -> list[SaverRow]:
    """The 50-component Message chain, canvas2graph and hand-written, with each checkpointer."""
    n = CHECKPOINT_CHAIN
    reps, warmup = (2, 1) if quick else (25, 2)
    compiled = compile_dsl(dsls.message_chain(n))
    hand = handwritten.message_chain(n)
    script = Script.load(SCRIPT)
    models = ModelFactory(script=script)
    durability = RUNNER_DURABILITY or "async"
    hand_modes = {"hand": durability} | ({"hand default": "async"} if durability != "async" else {})
    rows = {name: SaverRow(name, False, steps=n, durability=durability) for name in SAVERS}
    async with AsyncExitStack() as stack:
        savers = await _open_savers(stack, rows)
        used: dict[str, list[str]] = {name: [] for name in savers}
        variants: dict[str, Callable[[], Callable[[], Awaitable[Any]]]] = {}

        def runner_variant(name: str, saver):
            def make():
                runner = Runner(compiled, saver, models, script=script)
                sid = fresh_id("k")
                used[name].append(sid)

                async def run():
                    async for _ in runner.run_turn(sid, TurnRequest(query=QUERY)):
                        pass
                return run
            return make

        def hand_variant(name: str, graph, mode: str):
            def make():
                sid = fresh_id("h")
                used[name].append(sid)
                config = {"configurable": {"thread_id": sid}}

                async def run():
                    async for _ in graph.astream({"query": QUERY}, config, durability=mode,
                                                 stream_mode=["tasks", "custom"], version="v2"):
                        pass
                return run
            return make

        try:
            for name, saver in savers.items():
                hand_graph = hand.compile(checkpointer=saver)
                variants[f"c2g {name}"] = runner_variant(name, saver)
                for label, mode in hand_modes.items():
                    variants[f"{label} {name}"] = hand_variant(name, hand_graph, mode)
                # one checked turn each way: it finishes; what it leaves in the checkpointer
                runner = Runner(compiled, saver, models, script=script)
                sid = fresh_id("k")
                used[name].append(sid)
                _ = [e async for e in runner.run_turn(sid, TurnRequest(query=QUERY))]
                if runner.outcome.status != "finished":
                    raise RuntimeError(f"checkpoint cost, {name}: the turn did not finish: {runner.outcome}")
                rows[name].c2g_kb_turn = _kb(await stored_bytes(saver, sid))
                await variants[f"hand {name}"]()()
                rows[name].hand_kb_turn = _kb(await stored_bytes(saver, used[name][-1]))
            stats = await time_async_interleaved(variants, reps, warmup)
        finally:
            if "PostgreSQL" in savers:            # leave the shared database as we found it
                await _delete_threads(savers["PostgreSQL"], used["PostgreSQL"])
    _fill_rows(rows, stats, hand_modes, n)
    return list(rows.values())


async def _open_savers(stack: AsyncExitStack, rows: dict[str, SaverRow]) -> dict[str, Any]:
    """The checkpointers that can be had, closed with `stack`; a row whose saver cannot says why."""
    savers: dict[str, Any] = {"in-memory": InMemorySaver()}
    rows["in-memory"].available = True
    folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="canvas2graph-bench-"))
    try:
        savers["SQLite"] = await stack.enter_async_context(open_checkpointer(os.path.join(folder, "bench.sqlite")))
        rows["SQLite"].available = True
    except Exception as e:
        rows["SQLite"].note = f"unavailable: {type(e).__name__}: {e}"
    note = await pg_unavailable(PG_URL)
    if note is None:
        try:
            savers["PostgreSQL"] = await stack.enter_async_context(open_checkpointer(PG_URL))
            rows["PostgreSQL"].available = True
        except Exception as e:
            note = f"{type(e).__name__}: {e}"
    if note:
        rows["PostgreSQL"].note = f"unavailable at {PG_URL} ({note})"
        print(f"  PostgreSQL unavailable at {PG_URL}: {note}; its row is left out", file=sys.stderr)
    print(f"  checkpointers: {', '.join(savers)}...", file=sys.stderr, flush=True)
    return savers


async def _delete_threads(saver, thread_ids: list[str]) -> None:
    for sid in thread_ids:
        try:
            await saver.adelete_thread(sid)
        except Exception:
            break


def _fill_rows(rows: dict[str, SaverRow], stats: dict[str, Stats], hand_modes: dict[str, str], n: int) -> None:
    """Each available row's figures per step, and the extra over the same variant with InMemorySaver."""
    base = {label: stats[f"{label} in-memory"].median_ms for label in ["c2g", *hand_modes]}
    for name, row in rows.items():
        if not row.available:
            continue
        row.canvas2graph, row.handwritten = stats[f"c2g {name}"], stats[f"hand {name}"]
        row.hand_default = stats.get(f"hand default {name}", row.handwritten)
        row.c2g_ms_step = row.canvas2graph.median_ms / n
        row.hand_ms_step = row.handwritten.median_ms / n
        row.hand_default_ms_step = row.hand_default.median_ms / n
        row.c2g_extra_ms_step = (row.canvas2graph.median_ms - base["c2g"]) / n
        row.hand_extra_ms_step = (row.handwritten.median_ms - base["hand"]) / n
        row.hand_default_extra_ms_step = (row.hand_default.median_ms - base.get("hand default", base["hand"])) / n
        row.overhead_ms_step = row.c2g_ms_step - row.hand_ms_step
        row.ratio = row.canvas2graph.median_ms / row.handwritten.median_ms
        row.ratio_default = row.canvas2graph.median_ms / row.hand_default.median_ms


def _kb(n: int | None) -> float | None:
    return None if n is None else n / 1024


def report_checkpoint(rows: list[SaverRow]) -> list[str]:
    n = rows[0].steps if rows else CHECKPOINT_CHAIN
    d = rows[0].durability if rows else "async"
    out = ["", f"4. Checkpoint cost: the {n}-component Message chain, one turn, median ms per step (per component).",
           f"   canvas2graph = Runner.run_turn (durability \"{d}\"); hand = hand-written astream(tasks, custom, v2)",
           f"   with the same durability; hand default = LangGraph's default durability (\"async\"); extra = over the",
           "   same graph with InMemorySaver; KB/turn = what one turn leaves in the checkpointer."]
    kb = lambda v: "-" if v is None else f"{v:,.0f}"
    same = d == "async"
    cells = []
    for r in rows:
        if not r.available:
            cells.append([r.saver, "unavailable"] + [""] * (7 if same else 10))
            continue
        line = [r.saver, fmt(r.c2g_ms_step), fmt(r.hand_ms_step)] + ([] if same else [fmt(r.hand_default_ms_step)])
        line += [f"{r.c2g_extra_ms_step:+.3f}", f"{r.hand_extra_ms_step:+.3f}"]
        line += [] if same else [f"{r.hand_default_extra_ms_step:+.3f}"]
        line += [f"{r.overhead_ms_step:.3f}", f"{r.ratio:.2f}"] + ([] if same else [f"{r.ratio_default:.2f}"])
        line += [kb(r.c2g_kb_turn), kb(r.hand_kb_turn)]
        cells.append(line)
    heads = ["checkpointer", "canvas2graph", "hand"] + ([] if same else ["hand default"])
    heads += ["c2g extra", "hand extra"] + ([] if same else ["default extra"])
    heads += ["c2g - hand", "ratio"] + ([] if same else ["ratio vs default"]) + ["c2g KB/turn", "hand KB/turn"]
    out += table(heads, cells)
    out += [f"   {r.saver}: {r.note}" for r in rows if r.note]
    return out

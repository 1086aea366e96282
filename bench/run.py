"""canvas2graph benchmark: compile time and per-node run overhead, versus hand-written LangGraph.

    python -m bench.run            # full run (about 2.5 minutes on 2 cores)
    python -m bench.run --quick    # smoke test: few repetitions
    python -m bench.run --json bench-results.json

1. Compile: `compile_dsl(dsl).graph(None)` (JSON dict -> compiled LangGraph graph) for generated
   chains of 10, 50 and 1,000 components, versus building and compiling the same StateGraph by hand.
2. Run: one turn through `Runner.run_turn` consuming every RAGFlow event, versus the same graph
   written by hand and streamed with `astream(stream_mode=["tasks", "custom"], version="v2")` and an
   InMemorySaver (the baseline of the ratio); `ainvoke` without a checkpointer is printed for reference.
3. Loops and iterations: a 1,000-pass Loop (VariableAssigner `+=` and one cheap component per pass)
   and a 100-item Iteration (one StringTransform merge per item), measured like 2., per pass / item.
4. Checkpoint cost: the 50-component Message chain with InMemorySaver, SQLite (a temp file) and
   PostgreSQL (CANVAS2GRAPH_BENCH_PG, default postgresql://postgres@127.0.0.1:5432/test; shown as
   unavailable when it cannot be reached), canvas2graph and hand-written, ms per step.

See docs/performance.md for what the figures mean.
"""
from __future__ import annotations

import argparse
import asyncio
import gc
import itertools
import json
import os
import platform
import statistics
import sys
import tempfile
import time
import uuid
from contextlib import AsyncExitStack
from dataclasses import asdict, dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import Any, Awaitable, Callable

if __package__ in (None, ""):          # `python bench/run.py`: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402

import canvas2graph.compiler.canvas  # noqa: E402
from bench import dsls, handwritten  # noqa: E402
from canvas2graph.compiler.canvas import compile_dsl  # noqa: E402
from canvas2graph.runtime.run.checkpoint import open_checkpointer  # noqa: E402
from canvas2graph.types import RunContext  # noqa: E402
from canvas2graph.runtime.services.models import ModelFactory  # noqa: E402
from canvas2graph.runtime.services.scripted import Script  # noqa: E402
from canvas2graph.runtime.run.runner import STREAM_MODES, Runner, TurnRequest  # noqa: E402

COMPILE_TARGET_S = 1.0        # 1,000-component compile
RATIO_TARGET = 1.3            # canvas2graph / hand-written, per turn
SCRIPT = {"auto_reply": "reply {n} from {component}"}
QUERY = "hello"

LOOP_PASSES = 1000
ITERATION_ITEMS = 100
CHECKPOINT_CHAIN = 50
PG_URL = os.environ.get("CANVAS2GRAPH_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/test")



def runner_durability() -> str | None:
    """The `durability` Runner.run_turn streams with (None: LangGraph's default, "async").

    The graph-only variant and the checkpoint section's hand-written "same durability" variant use it,
    so the comparison follows runtime/run/runner.py as it changes."""
    import inspect
    import re

    import canvas2graph.runtime.run.runner as session
    if isinstance(getattr(session, "DURABILITY", None), str):
        return session.DURABILITY
    found = re.search(r"durability\s*=\s*[\"'](\w+)[\"']", inspect.getsource(session.Runner.run_turn))
    return found.group(1) if found else None


RUNNER_DURABILITY = runner_durability()
DURABILITY_KW = {"durability": RUNNER_DURABILITY} if RUNNER_DURABILITY else {}

_ids = itertools.count()
_RUN = uuid.uuid4().hex[:8]           # session ids unique across runs: a PostgreSQL database outlives us


def fresh_id(prefix: str = "s") -> str:
    return f"{prefix}{_RUN}-{next(_ids)}"


# --------------------------------------------------------------------------------------------
# timing helpers
# --------------------------------------------------------------------------------------------

@dataclass
class Stats:
    median_ms: float
    p25_ms: float
    p75_ms: float
    n: int

    @classmethod
    def of(cls, seconds: list[float]) -> "Stats":
        ms = sorted(s * 1000 for s in seconds)
        if len(ms) >= 4:
            q = statistics.quantiles(ms, n=4)
            p25, p75 = q[0], q[2]
        else:
            p25, p75 = ms[0], ms[-1]
        return cls(statistics.median(ms), p25, p75, len(ms))


def time_sync(make: Callable[[], Callable[[], Any]], reps: int, warmup: int) -> Stats:
    """`make()` prepares one repetition outside the timer and returns the callable that is timed."""
    for _ in range(warmup):
        make()()
    samples = []
    for _ in range(reps):
        fn = make()
        gc.collect()
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return Stats.of(samples)


async def time_async_interleaved(variants: dict[str, Callable[[], Callable[[], Awaitable[Any]]]],
                                 reps: int, warmup: int) -> dict[str, Stats]:
    """Run the variants round-robin (rotating their order) so drift hits them all alike."""
    names = list(variants)
    for _ in range(warmup):
        for name in names:
            await variants[name]()()
    samples: dict[str, list[float]] = {n: [] for n in names}
    for r in range(reps):
        order = names[r % len(names):] + names[:r % len(names)]
        gc.collect()               # a full collection per round (~80 ms: once per round, not per turn)
        for name in order:
            run = variants[name]()
            gc.collect(1)          # young garbage one variant left is not collected while another is timed
            t0 = time.perf_counter()
            await run()
            samples[name].append(time.perf_counter() - t0)
    return {n: Stats.of(s) for n, s in samples.items()}


# --------------------------------------------------------------------------------------------
# 1. compile time
# --------------------------------------------------------------------------------------------

@dataclass
class CompileRow:
    components: int
    canvas2graph: Stats
    handwritten: Stats
    ratio: float
    per_node_ms: float
    target: str = ""
    ok: bool | None = None


def bench_compile(sizes: list[int], reps_of: Callable[[int], int], warmup: int) -> tuple[list[CompileRow], dict]:
    rows = []
    for n in sizes:
        reps = reps_of(n)

        def make_compiled():
            dsl = dsls.message_chain(n, salt=fresh_id("c"))   # unique content: no cache hit
            return lambda: compile_dsl(dsl).graph(None)

        def make_hand():
            return lambda: handwritten.message_chain(n).compile()

        c = time_sync(make_compiled, reps, warmup)
        h = time_sync(make_hand, reps, warmup)
        row = CompileRow(n, c, h, c.median_ms / h.median_ms, c.median_ms / n)
        if n >= 1000:
            row.target, row.ok = f"< {COMPILE_TARGET_S:g} s", c.median_ms / 1000 < COMPILE_TARGET_S
        rows.append(row)
    canvas2graph.compiler.canvas._CACHE.clear()
    big = max(sizes)
    breakdown = compile_breakdown(big, reps=max(1, min(3, reps_of(big))))
    return rows, {"components": big, "phases_ms": breakdown}


def compile_breakdown(n: int, reps: int) -> dict[str, float]:
    """Where the end-to-end compile of an n-component chain goes, phase by phase (median of reps)."""
    from canvas2graph.compiler.build import build_graph
    from canvas2graph.compiler.check import check_plan
    from canvas2graph.compiler.dsl.diagnostics import Collector
    from canvas2graph.compiler.dsl.load import load_dsl
    from canvas2graph.compiler.plan import make_plan

    phases: dict[str, list[float]] = {k: [] for k in
                                      ("content hash", "load", "plan (params, nodes, templates)", "check",
                                       "build StateGraph", "StateGraph.compile")}
    for _ in range(reps):
        dsl = dsls.message_chain(n, salt=fresh_id("b"))
        t = [time.perf_counter()]
        canvas2graph.compiler.canvas._digest(dsl); t.append(time.perf_counter())
        loaded = load_dsl(dsl); t.append(time.perf_counter())
        out = Collector()
        plan = make_plan(loaded, out); t.append(time.perf_counter())
        check_plan(plan, out); t.append(time.perf_counter())
        g = build_graph(plan); t.append(time.perf_counter())
        g.compile(checkpointer=None); t.append(time.perf_counter())
        for (name, xs), a, b in zip(phases.items(), t, t[1:]):
            xs.append((b - a) * 1000)
    return {k: statistics.median(v) for k, v in phases.items()}


# --------------------------------------------------------------------------------------------
# 2. run overhead
# --------------------------------------------------------------------------------------------

@dataclass
class RunRow:
    case: str
    components: int
    executed: int                      # components that run in the turn
    runner: Stats                      # canvas2graph: Runner.run_turn, all events consumed
    graph_only: Stats                  # canvas2graph's compiled graph streamed without Runner/EventAdapter
    hand_stream: Stats                 # hand-written, astream tasks+custom, InMemorySaver (baseline)
    hand_invoke: Stats                 # hand-written, ainvoke, no checkpointer (reference)
    events: int = 0
    ratio: float = 0.0                 # runner / hand_stream
    overhead_ms_per_node: float = 0.0  # (runner - hand_stream) / executed
    ok: bool = False
    extra: dict = field(default_factory=dict)


def _final_text(events: list[dict]) -> Any:
    for e in reversed(events):
        if e["event"] == "workflow_finished":
            out = e["data"]["outputs"] or {}
            return out.get("content", out.get("result"))
    return None


class Recycler:
    """Deletes a variant's previous session when its next repetition is prepared (outside the timer),
    so long turns (thousands of checkpoints each) do not pile up in memory across repetitions."""

    def __init__(self, saver, enabled: bool):
        self.saver, self.enabled, self.previous = saver, enabled, None

    def next(self, sid: str) -> str:
        if self.enabled and self.previous is not None:
            self.saver.delete_thread(self.previous)
        self.previous = sid
        return sid


async def bench_run_case(case: str, dsl: dict, hand_graph, executed: int, query: str, reps: int,
                         warmup: int, check_equal: bool, hand_limit: int | None = None,
                         recycle: bool = False) -> RunRow:
    compiled = compile_dsl(dsl)
    runner_saver, graph_saver, hand_saver = InMemorySaver(), InMemorySaver(), InMemorySaver()
    compiled.graph(runner_saver)
    lg_graph = compiled.graph(graph_saver)
    hand_stream_graph = hand_graph.compile(checkpointer=hand_saver)
    hand_invoke_graph = hand_graph.compile()
    limit = {"recursion_limit": hand_limit} if hand_limit else {}
    sessions = {name: Recycler(saver, recycle) for name, saver in
                (("runner", runner_saver), ("graph", graph_saver), ("hand", hand_saver))}
    counts: dict[str, int] = {}
    # One model factory per process, as the CLI and the server hold it; the hand-written LLM graph
    # likewise builds its chat models once, when the graph is built.
    script = Script.load(SCRIPT)
    models = ModelFactory(script=script)

    def runner_variant():
        runner = Runner(compiled, runner_saver, models, script=script)
        sid = sessions["runner"].next(fresh_id())

        async def run():
            n = 0
            async for _ in runner.run_turn(sid, TurnRequest(query=query)):
                n += 1
            counts["runner"] = n
        return run

    def graph_variant():
        sid = sessions["graph"].next(fresh_id())
        ctx = RunContext(models=models, script=script, session_id=sid)
        config = {"configurable": {"thread_id": sid}, "recursion_limit": compiled.recursion_limit}
        update = {"query": query}          # the turn starts inside the graph, in Begin's step

        async def run():
            async for _ in lg_graph.astream(update, config, context=ctx, stream_mode=STREAM_MODES, version="v2",
                                            **DURABILITY_KW):
                pass
        return run

    def hand_stream_variant():
        config = {"configurable": {"thread_id": sessions["hand"].next(fresh_id())}, **limit}

        async def run():
            n = 0
            async for _ in hand_stream_graph.astream({"query": query}, config,
                                                     stream_mode=["tasks", "custom"], version="v2"):
                n += 1
            counts["hand"] = n
        return run

    def hand_invoke_variant():
        async def run():
            await hand_invoke_graph.ainvoke({"query": query}, limit or None)
        return run

    # one checked turn each way: the turn finishes and, where the answer is deterministic, both agree
    script = Script.load(SCRIPT)
    runner = Runner(compiled, InMemorySaver(), ModelFactory(script=script), script=script)
    events = [e async for e in runner.run_turn(fresh_id(), TurnRequest(query=query))]
    if runner.outcome.status != "finished":
        raise RuntimeError(f"{case}: the turn did not finish: {runner.outcome}")
    final = await hand_invoke_graph.ainvoke({"query": query}, limit or None)
    if check_equal and _final_text(events) != final["text"]:
        raise RuntimeError(f"{case}: canvas2graph answered {_final_text(events)!r}, hand-written {final['text']!r}")

    stats = await time_async_interleaved({
        "runner": runner_variant, "graph_only": graph_variant,
        "hand_stream": hand_stream_variant, "hand_invoke": hand_invoke_variant}, reps, warmup)
    # Free what the case stored (every turn's checkpoints, the compiled graphs holding the savers), so
    # a bigger heap does not make the garbage collector slower for the cases that follow.
    for saver in (runner_saver, graph_saver, hand_saver):
        saver.storage.clear(), saver.writes.clear(), saver.blobs.clear()
    compiled._graphs.clear()
    canvas2graph.compiler.canvas._CACHE.clear()
    gc.collect()
    row = RunRow(case, len(compiled.plan.nodes), executed, stats["runner"], stats["graph_only"],
                 stats["hand_stream"], stats["hand_invoke"], events=counts.get("runner", 0))
    row.ratio = row.runner.median_ms / row.hand_stream.median_ms
    row.overhead_ms_per_node = (row.runner.median_ms - row.hand_stream.median_ms) / executed
    row.ok = row.ratio <= RATIO_TARGET
    row.extra["hand_stream_parts"] = counts.get("hand", 0)
    return row


async def bench_runs(quick: bool) -> list[RunRow]:
    reps = (lambda n: 3) if quick else (lambda n: 40 if n <= 10 else 20)
    warmup = 1 if quick else 3
    # (name, components, DSL, hand-written graph, query, answers must agree, optional)
    cases = [
        ("Message chain", 10, lambda: dsls.message_chain(10), lambda: handwritten.message_chain(10), QUERY, True, False),
        ("Message chain", 50, lambda: dsls.message_chain(50), lambda: handwritten.message_chain(50), QUERY, True, False),
    ]
    if dsls.string_transform_available():     # nodes/transforms.py is new: use it only if it imports
        cases += [
            ("StringTransform chain", 10, lambda: dsls.transform_chain(10), lambda: handwritten.transform_chain(10),
             QUERY, True, True),
            ("StringTransform chain", 50, lambda: dsls.transform_chain(50), lambda: handwritten.transform_chain(50),
             QUERY, True, True),
        ]
    cases += [
        ("LLM chain (scripted)", 10, lambda: dsls.llm_chain(10), lambda: handwritten.llm_chain(10), QUERY, False, False),
        ("LLM chain (scripted)", 50, lambda: dsls.llm_chain(50), lambda: handwritten.llm_chain(50), QUERY, False, False),
        ("Switch -> 3 x 5 Messages", 17, lambda: dsls.branch(5), lambda: handwritten.branch(5), dsls.BRANCH_QUERY,
         True, False),
    ]
    rows = []
    for name, n, make_dsl, make_hand, query, check, optional in cases:
        executed = dsls.branch_executed(5) if name.startswith("Switch") else n
        try:
            rows.append(await bench_run_case(name, make_dsl(), make_hand(), executed, query,
                                             reps(executed), warmup, check))
        except Exception as e:
            if not optional:
                raise
            print(f"skipped {name} {n}: {type(e).__name__}: {e}", file=sys.stderr)
    return rows


# --------------------------------------------------------------------------------------------
# 3. loops and iterations
# --------------------------------------------------------------------------------------------

async def bench_containers(quick: bool) -> list[RunRow]:
    """The Loop and the Iteration, measured like the chains; `executed` is the passes / items."""
    rows = []
    reps, warmup = (1, 0) if quick else (7, 1)
    kind = dsls.loop_body_kind()
    print(f"  Loop, {LOOP_PASSES:,} passes...", file=sys.stderr, flush=True)
    row = await bench_run_case(
        f"Loop: {LOOP_PASSES:,} passes (LoopItem, VariableAssigner +=, {kind})", dsls.loop_counter(LOOP_PASSES),
        handwritten.loop_counter(LOOP_PASSES, show_body=kind == "Message"), LOOP_PASSES, QUERY, reps, warmup,
        True, hand_limit=handwritten.loop_recursion_limit(LOOP_PASSES), recycle=True)
    row.extra["steps_per_unit"] = 3
    rows.append(row)
    if not dsls.string_transform_available():
        print("skipped the Iteration case: nodes/transforms.py does not import", file=sys.stderr)
        return rows
    print(f"  Iteration, {ITERATION_ITEMS} items...", file=sys.stderr, flush=True)
    reps, warmup = (2, 1) if quick else (15, 2)
    row = await bench_run_case(
        f"Iteration: {ITERATION_ITEMS} items (IterationItem, StringTransform merge)", dsls.iteration_map(),
        handwritten.iteration_map(), ITERATION_ITEMS, dsls.iteration_query(ITERATION_ITEMS), reps, warmup,
        True, hand_limit=handwritten.iteration_recursion_limit(ITERATION_ITEMS), recycle=True)
    row.extra["steps_per_unit"] = 2
    rows.append(row)
    return rows


# --------------------------------------------------------------------------------------------
# 4. checkpoint cost per step
# --------------------------------------------------------------------------------------------

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
        if type(saver).__name__ == "AsyncPostgresSaver":
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
                for sid in used["PostgreSQL"]:
                    try:
                        await savers["PostgreSQL"].adelete_thread(sid)
                    except Exception:
                        break
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
    return list(rows.values())


def _kb(n: int | None) -> float | None:
    return None if n is None else n / 1024


# --------------------------------------------------------------------------------------------
# report
# --------------------------------------------------------------------------------------------

def header() -> list[str]:
    return [
        "canvas2graph benchmark",
        f"  Python {platform.python_version()} ({platform.python_implementation()}), "
        f"LangGraph {version('langgraph')}, langchain-core {version('langchain-core')}, "
        f"pydantic {version('pydantic')}",
        f"  {platform.system()} {platform.machine()}, {os.cpu_count()} CPU(s)",
    ]


def table(headers: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    line = lambda cells: "  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths)))
    return [line(headers), line(["-" * w for w in widths])] + [line(r) for r in rows]


def fmt(ms: float) -> str:
    return f"{ms:.3f}" if ms < 1 else f"{ms:.2f}" if ms < 100 else f"{ms:.0f}"


def report(compile_rows: list[CompileRow], breakdown: dict, run_rows: list[RunRow]) -> list[str]:
    out = [""]
    out.append("1. Compile: JSON dict -> compiled graph (compile_dsl(dsl).graph(None)), median ms")
    out += table(
        ["components", "canvas2graph", "ms/component", "hand-written", "ratio", "target"],
        [[f"{r.components:,}", fmt(r.canvas2graph.median_ms), fmt(r.per_node_ms), fmt(r.handwritten.median_ms),
          f"{r.ratio:.1f}x", (f"{r.target} {'ok' if r.ok else 'MISSED'}" if r.target else "")]
         for r in compile_rows])
    phases = breakdown["phases_ms"]
    total = sum(phases.values())
    out.append(f"   phases for {breakdown['components']:,} components: " + ", ".join(
        f"{k} {fmt(v)} ({v / total:.0%})" for k, v in phases.items()))
    out.append("")
    out.append("2. Run one turn, median ms per turn [ms per executed component]")
    out.append("   canvas2graph = Runner.run_turn, all RAGFlow events consumed; graph only = the compiled graph")
    out.append("   streamed without Runner/EventAdapter (same durability as the Runner: "
               f"{RUNNER_DURABILITY or 'default'}); hand = same graph in")
    out.append("   plain LangGraph, astream(tasks, custom, v2) + InMemorySaver, LangGraph's default durability (the")
    out.append("   ratio's baseline); hand ainvoke = no stream, no checkpointer.")
    per = lambda s, n: f"{fmt(s.median_ms)} [{fmt(s.median_ms / n)}]"
    out += table(
        ["case", "comps", "run", "canvas2graph", "graph only", "hand astream", "hand ainvoke",
         "overhead ms/comp", "ratio", f"target <= {RATIO_TARGET}"],
        [[r.case, str(r.components), str(r.executed), per(r.runner, r.executed), per(r.graph_only, r.executed),
          per(r.hand_stream, r.executed), per(r.hand_invoke, r.executed), fmt(r.overhead_ms_per_node),
          f"{r.ratio:.2f}", "ok" if r.ok else "MISSED"] for r in run_rows])
    return out


def report_containers(rows: list[RunRow]) -> list[str]:
    out = ["", "3. Loops and iterations: one turn, median ms per turn [ms per pass / item], measured as in 2.",
           "   Each Loop pass is 3 steps (LoopItem, VariableAssigner, work), each Iteration item 2 (IterationItem,",
           "   StringTransform); the hand-written graphs take the same steps (head node + conditional edge)."]
    per = lambda s, n: f"{fmt(s.median_ms)} [{fmt(s.median_ms / n)}]"
    out += table(
        ["case", "passes", "canvas2graph", "graph only", "hand astream", "hand ainvoke", "overhead ms/pass",
         "ratio", f"target <= {RATIO_TARGET}"],
        [[r.case, f"{r.executed:,}", per(r.runner, r.executed), per(r.graph_only, r.executed),
          per(r.hand_stream, r.executed), per(r.hand_invoke, r.executed), fmt(r.overhead_ms_per_node),
          f"{r.ratio:.2f}", "ok" if r.ok else "MISSED"] for r in rows])
    return out


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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="few repetitions: a smoke test, figures are noisy")
    ap.add_argument("--json", metavar="PATH", help="also write the figures to PATH as JSON")
    args = ap.parse_args(argv)

    started = time.perf_counter()
    lines = header()
    print("\n".join(lines), flush=True)
    if args.quick:
        compile_reps, warmup = (lambda n: 2 if n < 1000 else 1), 1
    else:
        compile_reps, warmup = (lambda n: 30 if n <= 10 else 15 if n <= 50 else 5), 2
    sizes = [10, 50, 1000]
    print("compiling...", file=sys.stderr, flush=True)
    compile_rows, breakdown = bench_compile(sizes, compile_reps, warmup)
    print("running...", file=sys.stderr, flush=True)
    run_rows = asyncio.run(bench_runs(args.quick))
    print("loops and iterations...", file=sys.stderr, flush=True)
    container_rows = asyncio.run(bench_containers(args.quick))
    print("checkpointers...", file=sys.stderr, flush=True)
    saver_rows = asyncio.run(bench_checkpoint(args.quick))
    body = report(compile_rows, breakdown, run_rows) + report_containers(container_rows) + report_checkpoint(saver_rows)
    elapsed = time.perf_counter() - started
    body.append("")
    body.append(f"({'quick run, ' if args.quick else ''}benchmark took {elapsed:.0f} s)")
    print("\n".join(body))

    if args.json:
        data = {
            "meta": {"python": platform.python_version(), "langgraph": version("langgraph"),
                     "langchain_core": version("langchain-core"), "cpus": os.cpu_count(),
                     "platform": platform.platform(), "quick": args.quick, "seconds": elapsed,
                     "compile_target_s": COMPILE_TARGET_S, "ratio_target": RATIO_TARGET},
            "compile": [asdict(r) for r in compile_rows],
            "compile_breakdown": breakdown,
            "run": [asdict(r) for r in run_rows],
            "containers": [asdict(r) for r in container_rows],
            "checkpoint": [asdict(r) for r in saver_rows],
        }
        Path(args.json).write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

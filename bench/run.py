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

Section 4 is bench/checkpoint_cost.py; the timing helpers are bench/timing.py.
See docs/performance.md for what the figures mean.
"""
from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import platform
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import Any, Callable

if __package__ in (None, ""):          # `python bench/run.py`: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402

import canvas2graph.compiler.canvas  # noqa: E402
from bench import dsls, handwritten  # noqa: E402
from bench.checkpoint_cost import CHECKPOINT_CHAIN, bench_checkpoint, report_checkpoint  # noqa: E402,F401
from bench.timing import (DURABILITY_KW, PG_URL, QUERY, RUNNER_DURABILITY, SCRIPT, Stats, fmt,  # noqa: E402,F401
                          fresh_id, table, time_async_interleaved, time_sync)
from canvas2graph.compiler.canvas import compile_dsl  # noqa: E402
from canvas2graph.types import RunContext  # noqa: E402
from canvas2graph.runtime.services.models import ModelFactory  # noqa: E402
from canvas2graph.runtime.services.scripted import Script  # noqa: E402
from canvas2graph.runtime.run.runner import STREAM_MODES, Runner, TurnRequest  # noqa: E402

COMPILE_TARGET_S = 1.0        # 1,000-component compile
RATIO_TARGET = 1.3            # canvas2graph / hand-written, per turn

LOOP_PASSES = 1000
ITERATION_ITEMS = 100


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

    await _checked_turn(case, compiled, hand_invoke_graph, query, limit, check_equal)
    stats = await time_async_interleaved({
        "runner": runner_variant, "graph_only": graph_variant,
        "hand_stream": hand_stream_variant, "hand_invoke": hand_invoke_variant}, reps, warmup)
    _free(compiled, (runner_saver, graph_saver, hand_saver))
    row = RunRow(case, len(compiled.plan.nodes), executed, stats["runner"], stats["graph_only"],
                 stats["hand_stream"], stats["hand_invoke"], events=counts.get("runner", 0))
    row.ratio = row.runner.median_ms / row.hand_stream.median_ms
    row.overhead_ms_per_node = (row.runner.median_ms - row.hand_stream.median_ms) / executed
    row.ok = row.ratio <= RATIO_TARGET
    row.extra["hand_stream_parts"] = counts.get("hand", 0)
    return row


async def _checked_turn(case: str, compiled, hand_invoke_graph, query: str, limit: dict, check_equal: bool) -> None:
    """One checked turn each way: the turn finishes and, where the answer is deterministic, both agree."""
    script = Script.load(SCRIPT)
    runner = Runner(compiled, InMemorySaver(), ModelFactory(script=script), script=script)
    events = [e async for e in runner.run_turn(fresh_id(), TurnRequest(query=query))]
    if runner.outcome.status != "finished":
        raise RuntimeError(f"{case}: the turn did not finish: {runner.outcome}")
    final = await hand_invoke_graph.ainvoke({"query": query}, limit or None)
    if check_equal and _final_text(events) != final["text"]:
        raise RuntimeError(f"{case}: canvas2graph answered {_final_text(events)!r}, hand-written {final['text']!r}")


def _free(compiled, savers) -> None:
    """Free what a case stored (every turn's checkpoints, the compiled graphs holding the savers), so
    a bigger heap does not make the garbage collector slower for the cases that follow."""
    for saver in savers:
        saver.storage.clear(), saver.writes.clear(), saver.blobs.clear()
    compiled._graphs.clear()
    canvas2graph.compiler.canvas._CACHE.clear()
    gc.collect()


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

"""Where canvas2graph's overhead over hand-written LangGraph comes from, step by step.

    python -m bench.decompose [--quick]
    python -m bench.decompose --runtime [--quick]     # timeout and durability what-ifs

Run overhead: the hand-written 50-node Message chain of bench/handwritten.py is made more like the
compiled graph one feature at a time (the wide state: one channel per component; three writes per
step: own outputs, `last`, `trace`; the deferred finish node, which the compiled chain no longer
takes: without fan-out its last component ends the turn), then compared with the compiled graph
streamed directly and with the full Runner. For the scripted-LLM chain, the effect of building the
chat models anew every turn (a fresh ModelFactory per turn, as the benchmark's Runner does) is isolated.

Run-time what-ifs (`--runtime`; the loops and iterations of bench.run included): the Runner as
built, without the per-component timeout (COMPONENT_EXEC_TIMEOUT=0 when the graph is built), and
also with LangGraph's default durability instead of the Runner's (patched in this process only),
next to the hand-written graph with either durability.

Compile: a what-if that hands LangGraph the bound method `node.__call__` instead of the
`functools.partial(Node.__call__, node, ...)` the builder uses (patched in this process only): the
partial skips LangGraph's bytecode scan for subgraphs and its type-hint inference on every node.
"""
from __future__ import annotations

import argparse
import asyncio
import functools
import statistics
import sys
import time
from pathlib import Path
from typing import Annotated, TypedDict

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from langchain_core.messages import HumanMessage  # noqa: E402
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402
from langgraph.config import get_stream_writer  # noqa: E402
from langgraph.graph import END, START, StateGraph  # noqa: E402

from bench import dsls  # noqa: E402
from bench.handwritten import ChainState  # noqa: E402
from bench.run import QUERY, SCRIPT, fresh_id, table, time_async_interleaved, fmt  # noqa: E402
from canvas2graph.compiler.canvas import compile_dsl  # noqa: E402
from canvas2graph.runtime.services.models import ModelFactory  # noqa: E402
from canvas2graph.runtime.services.scripted import Script, ScriptedChatModel  # noqa: E402
from canvas2graph.runtime.run.runner import STREAM_MODES, Runner, TurnRequest  # noqa: E402
from canvas2graph.runtime.graph.state import take_last  # noqa: E402


def drop(old, new):
    """The reducer of the former `trace` channel (runtime/graph/state.py no longer has one): keep nothing."""
    return {}


def merge_outputs(old, new):
    """The former per-component channel's reducer: merge key by key, None resets (runtime/graph/state.py's
    merge_outputs now merges the one `outputs` channel, component by component)."""
    return {} if new is None else {**(old or {}), **new}


def message_chain_like_compiled(n: int, *, channels: bool, writes: bool, finish: bool):
    """The hand-written Message chain with some of the compiled graph's structure added."""
    fields: dict = {"query": str, "text": str, "history": list}
    if channels:
        fields.update({f"out:{i}": Annotated[dict, merge_outputs] for i in range(n + 6)})
    if writes:
        fields.update({"last": Annotated[str, take_last], "trace": Annotated[dict, drop]})
    State = TypedDict("State", fields, total=False)  # type: ignore[misc]
    g = StateGraph(State)

    async def begin(state):
        return {"text": state["query"]}

    def message(i: int):
        async def node(state):
            text = f"m{i}<-{state['text']}"
            get_stream_writer()({"event": "message", "content": text})
            update = {"text": text}
            if writes:
                update.update({f"out:{i}" if channels else "trace": {"content": text, "_elapsed_time": 0.0},
                               "last": str(i), "trace": {str(i): {"prev": state["text"]}}})
            return update
        return node

    async def finish_node(state):
        return {"history": [["user", state["query"]], ["assistant", state["text"]]]}

    g.add_node("begin", begin)
    g.add_edge(START, "begin")
    prev = "begin"
    for i in range(1, n):
        g.add_node(f"m{i}", message(i))
        g.add_edge(prev, f"m{i}")
        prev = f"m{i}"
    if finish:
        g.add_node("finish", finish_node, defer=True)
        g.add_edge(prev, "finish")
        prev = "finish"
    g.add_edge(prev, END)
    graph = g.compile(checkpointer=InMemorySaver())
    start = {"query": QUERY, **({f"out:{i}": None for i in range(n + 6)} if channels else {})}

    def variant():
        async def run():
            async for _ in graph.astream(start, {"configurable": {"thread_id": fresh_id()}},
                                         stream_mode=STREAM_MODES, version="v2"):
                pass
        return run
    return variant


def runner_variant(dsl: dict, *, shared_models: bool):
    compiled = compile_dsl(dsl)
    saver = InMemorySaver()
    shared = ModelFactory(script=Script.load(SCRIPT))

    def variant():
        script = Script.load(SCRIPT)
        runner = Runner(compiled, saver, shared if shared_models else ModelFactory(script=script), script=script)

        async def run():
            async for _ in runner.run_turn(fresh_id(), TurnRequest(query=QUERY)):
                pass
        return run
    return variant


def graph_variant(dsl: dict):
    from canvas2graph.types import RunContext
    compiled = compile_dsl(dsl)
    graph = compiled.graph(InMemorySaver())

    def variant():
        script = Script.load(SCRIPT)
        sid = fresh_id()
        ctx = RunContext(models=ModelFactory(script=script), script=script, session_id=sid)
        update = {"query": QUERY}          # the turn starts inside the graph, in Begin's step

        async def run():
            async for _ in graph.astream(update, {"configurable": {"thread_id": sid}}, context=ctx,
                                         stream_mode=STREAM_MODES, version="v2"):
                pass
        return run
    return variant


def hand_llm_chain(n: int, *, fresh_models: bool):
    script = Script.load(SCRIPT)
    g = StateGraph(ChainState)

    async def begin(state):
        return {"text": state["query"]}

    def llm(i: int):
        model = ScriptedChatModel(script=script, component_id=f"LLM:L{i}")

        async def node(state):
            m = ScriptedChatModel(script=script, component_id=f"LLM:L{i}") if fresh_models else model
            message = await m.ainvoke([HumanMessage(content=f"Question: {state['query']}")])
            return {"text": message.content}
        return node

    g.add_node("begin", begin)
    g.add_edge(START, "begin")
    prev = "begin"
    for i in range(1, n):
        g.add_node(f"l{i}", llm(i))
        g.add_edge(prev, f"l{i}")
        prev = f"l{i}"
    g.add_edge(prev, END)
    graph = g.compile(checkpointer=InMemorySaver())

    def variant():
        async def run():
            async for _ in graph.astream({"query": QUERY}, {"configurable": {"thread_id": fresh_id()}},
                                         stream_mode=STREAM_MODES, version="v2"):
                pass
        return run
    return variant


def compile_what_if(n: int, reps: int) -> dict[str, float]:
    def once() -> float:
        dsl = dsls.message_chain(n, salt=fresh_id("w"))
        t0 = time.perf_counter()
        compile_dsl(dsl).graph(None)
        return (time.perf_counter() - t0) * 1000

    results = {"as built: functools.partial(Node.__call__, node, timeout=...)": statistics.median(once() for _ in range(reps))}
    original = StateGraph.add_node

    def add_node(self, node, action=None, **kw):
        # back to the bound method `node.__call__` (how nodes were first added; the timeout is not
        # bound then, which does not matter for compile time)
        if isinstance(action, functools.partial) and getattr(action.func, "__name__", "") == "__call__" and action.args:
            action = action.args[0].__call__
        return original(self, node, action, **kw)

    StateGraph.add_node = add_node
    try:
        results["what-if: the bound method node.__call__"] = statistics.median(once() for _ in range(reps))
    finally:
        StateGraph.add_node = original
    return results


async def run_decomposition(reps: int, warmup: int, n: int = 50) -> list[tuple[str, dict]]:
    sections = []
    msg = {
        "hand-written (bench/handwritten.py)": message_chain_like_compiled(n, channels=False, writes=False, finish=False),
        f"+ one channel per component ({n + 6} channels)": message_chain_like_compiled(n, channels=True, writes=False, finish=False),
        "+ 3 writes per step (outputs, last, trace)": message_chain_like_compiled(n, channels=True, writes=True, finish=False),
        "+ deferred finish node": message_chain_like_compiled(n, channels=True, writes=True, finish=True),
        "canvas2graph graph, no Runner": graph_variant(dsls.message_chain(n)),
        "canvas2graph Runner.run_turn": runner_variant(dsls.message_chain(n), shared_models=True),
    }
    sections.append((f"{n}-component Message chain", await time_async_interleaved(msg, reps, warmup)))
    llm = {
        "hand-written, models built once": hand_llm_chain(n, fresh_models=False),
        "hand-written, models built every turn": hand_llm_chain(n, fresh_models=True),
        "canvas2graph Runner, one ModelFactory for all turns": runner_variant(dsls.llm_chain(n), shared_models=True),
        "canvas2graph Runner, a ModelFactory per turn": runner_variant(dsls.llm_chain(n), shared_models=False),
    }
    sections.append((f"{n}-component scripted-LLM chain", await time_async_interleaved(llm, reps, warmup)))
    return sections


class _WithDurability:
    """A compiled graph whose astream uses another durability (what-if; the Runner passes its own)."""

    def __init__(self, graph, mode: str):
        self._graph, self._mode = graph, mode

    def astream(self, *args, **kw):
        kw["durability"] = self._mode
        return self._graph.astream(*args, **kw)

    def __getattr__(self, name):
        return getattr(self._graph, name)


def runtime_what_ifs(case: str, dsl, hand, query: str, hand_limit: int | None):
    """Variants for one case: hand-written (two durabilities), the Runner as built and two what-ifs."""
    import os

    from bench.run import RUNNER_DURABILITY, Recycler
    script = Script.load(SCRIPT)
    models = ModelFactory(script=script)
    durability = RUNNER_DURABILITY or "async"

    def runner(timeout: bool, mode: str | None):
        compiled = compile_dsl(dsl(f"{case}-{timeout}-{mode}"))
        saver = InMemorySaver()
        previous = os.environ.get("COMPONENT_EXEC_TIMEOUT")
        if not timeout:
            os.environ["COMPONENT_EXEC_TIMEOUT"] = "0"          # read when the graph is built
        try:
            compiled.graph(saver)
        finally:
            if not timeout:
                if previous is None:
                    os.environ.pop("COMPONENT_EXEC_TIMEOUT", None)
                else:
                    os.environ["COMPONENT_EXEC_TIMEOUT"] = previous
        sessions = Recycler(saver, True)

        def variant():
            r = Runner(compiled, saver, models, script=script)
            if mode is not None:
                r.graph = _WithDurability(r.graph, mode)
            sid = sessions.next(fresh_id())

            async def run():
                async for _ in r.run_turn(sid, TurnRequest(query=query)):
                    pass
            return run
        return variant

    def handwritten(mode: str):
        saver = InMemorySaver()
        graph = hand.compile(checkpointer=saver)
        sessions = Recycler(saver, True)

        def variant():
            config = {"configurable": {"thread_id": sessions.next(fresh_id())},
                      **({"recursion_limit": hand_limit} if hand_limit else {})}

            async def run():
                async for _ in graph.astream({"query": query}, config, durability=mode,
                                             stream_mode=STREAM_MODES, version="v2"):
                    pass
            return run
        return variant

    variants = {"hand-written, default durability (async)": handwritten("async")}
    if durability != "async":
        variants[f"hand-written, durability {durability}"] = handwritten(durability)
    variants[f"canvas2graph Runner as built (timeout, {durability})"] = runner(True, None)
    variants[f"Runner, no per-component timeout ({durability})"] = runner(False, None)
    if durability != "async":
        variants["Runner, no timeout, durability async"] = runner(False, "async")
    return variants


async def run_runtime_what_ifs(quick: bool) -> list[tuple[str, dict, int]]:
    from bench import handwritten as hw
    from bench.run import ITERATION_ITEMS, LOOP_PASSES
    cases = [("50-component Message chain", lambda salt: dsls.message_chain(50, salt=salt), hw.message_chain(50),
              QUERY, None, 50, (3, 1) if quick else (20, 3))]
    if dsls.string_transform_available():
        cases.append((f"Iteration, {ITERATION_ITEMS} items", lambda salt: dsls.iteration_map(salt=salt),
                      hw.iteration_map(), dsls.iteration_query(ITERATION_ITEMS),
                      hw.iteration_recursion_limit(ITERATION_ITEMS), ITERATION_ITEMS, (2, 1) if quick else (10, 2)))
    cases.append((f"Loop, {LOOP_PASSES:,} passes", lambda salt: dsls.loop_counter(LOOP_PASSES, salt=salt),
                  hw.loop_counter(LOOP_PASSES, show_body=dsls.loop_body_kind() == "Message"), QUERY,
                  hw.loop_recursion_limit(LOOP_PASSES), LOOP_PASSES, (1, 0) if quick else (3, 1)))
    sections = []
    for title, dsl, hand, query, limit, units, (reps, warmup) in cases:
        print(f"  {title}...", file=sys.stderr, flush=True)
        variants = runtime_what_ifs(title, dsl, hand, query, limit)
        sections.append((title, await time_async_interleaved(variants, reps, warmup), units))
    return sections


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.decompose", description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--runtime", action="store_true",
                    help="only the run-time what-ifs (timeout, durability) for the chain, Iteration and Loop")
    args = ap.parse_args(argv)
    if args.runtime:
        for title, stats, units in asyncio.run(run_runtime_what_ifs(args.quick)):
            base = next(iter(stats.values())).median_ms
            print(f"\n{title}: median ms per turn, per step unit (component / item / pass)")
            print("\n".join(table(["variant", "ms", "ms/unit", "vs hand-written default"],
                                  [[k, fmt(s.median_ms), fmt(s.median_ms / units), f"{s.median_ms / base:.2f}"]
                                   for k, s in stats.items()])))
        return 0
    reps, warmup = (3, 1) if args.quick else (25, 3)
    for title, stats in asyncio.run(run_decomposition(reps, warmup)):
        base = next(iter(stats.values())).median_ms
        print(f"\n{title}: median ms per turn")
        print("\n".join(table(["variant", "ms", "vs first"],
                              [[k, fmt(s.median_ms), f"{s.median_ms / base:.2f}"] for k, s in stats.items()])))
    print("\ncompile of 1,000 components, median ms")
    what_if = compile_what_if(1000, 1 if args.quick else 5)
    print("\n".join(table(["variant", "ms"], [[k, fmt(v)] for k, v in what_if.items()])))
    return 0


if __name__ == "__main__":
    sys.exit(main())

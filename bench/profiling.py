"""Profile one benchmark case with cProfile: where a canvas2graph turn spends its time.

    python -m bench.profiling                      # 50-component Message chain, Runner.run_turn
    python -m bench.profiling --case llm50         # 50 scripted LLMs
    python -m bench.profiling --case compile1000   # compile_dsl(...).graph(None) of 1,000 components
    python -m bench.profiling --case msg50 --hand  # the hand-written graph, for comparison

Prints the functions with the most cumulative time, the project's own functions separately
(compiler/, nodes/, runtime/), so hot spots in project code are visible among LangGraph's.
"""
from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import pstats
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402

from bench import dsls, handwritten  # noqa: E402
from bench.run import QUERY, SCRIPT, fresh_id  # noqa: E402
from compiler import compile_dsl  # noqa: E402
from runtime.models import ModelFactory  # noqa: E402
from runtime.scripted import Script  # noqa: E402
from runtime.session import Runner, TurnRequest  # noqa: E402

ROOT = str(Path(__file__).resolve().parent.parent)
PROJECT = tuple(f"{ROOT}/{d}/" for d in ("compiler", "nodes", "runtime"))

CASES = {
    "msg10": (lambda: dsls.message_chain(10), lambda: handwritten.message_chain(10), QUERY),
    "msg50": (lambda: dsls.message_chain(50), lambda: handwritten.message_chain(50), QUERY),
    "llm10": (lambda: dsls.llm_chain(10), lambda: handwritten.llm_chain(10), QUERY),
    "llm50": (lambda: dsls.llm_chain(50), lambda: handwritten.llm_chain(50), QUERY),
    "branch": (lambda: dsls.branch(5), lambda: handwritten.branch(5), dsls.BRANCH_QUERY),
}


async def turns(case: str, hand: bool, reps: int, prof: cProfile.Profile) -> float:
    make_dsl, make_hand, query = CASES[case]
    if hand:
        graph = make_hand().compile(checkpointer=InMemorySaver())

        async def one():
            async for _ in graph.astream({"query": query}, {"configurable": {"thread_id": fresh_id()}},
                                         stream_mode=["tasks", "custom"], version="v2"):
                pass
    else:
        compiled = compile_dsl(make_dsl())
        saver = InMemorySaver()

        async def one():
            script = Script.load(SCRIPT)
            runner = Runner(compiled, saver, ModelFactory(script=script), script=script)
            async for _ in runner.run_turn(fresh_id(), TurnRequest(query=query)):
                pass
    for _ in range(3):
        await one()
    t0 = time.perf_counter()
    prof.enable()
    for _ in range(reps):
        await one()
    prof.disable()
    return (time.perf_counter() - t0) / reps


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.profiling", description=__doc__.split("\n\n")[0])
    ap.add_argument("--case", default="msg50", choices=[*CASES, "compile1000"])
    ap.add_argument("--hand", action="store_true", help="profile the hand-written graph instead")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--sort", default="cumulative", choices=["cumulative", "tottime"])
    args = ap.parse_args(argv)

    prof = cProfile.Profile()
    if args.case == "compile1000":
        for _ in range(max(1, args.reps // 10)):
            dsl = dsls.message_chain(1000, salt=fresh_id("p"))
            prof.enable()
            compile_dsl(dsl).graph(None)
            prof.disable()
        print(f"compile of 1,000 components, {max(1, args.reps // 10)} run(s)")
    else:
        per_turn = asyncio.run(turns(args.case, args.hand, args.reps, prof))
        print(f"{args.case} ({'hand-written' if args.hand else 'canvas2graph Runner'}): "
              f"{per_turn * 1000:.2f} ms per turn under the profiler, {args.reps} turns")

    for title, restrict in (("all functions", ()), ("project code (compiler/, nodes/, runtime/)", (PROJECT,))):
        buf = io.StringIO()
        stats = pstats.Stats(prof, stream=buf)
        if restrict:
            keep = {k: v for k, v in stats.stats.items() if k[0].startswith(PROJECT)}   # type: ignore[attr-defined]
            stats.stats = keep                                                          # type: ignore[attr-defined]
        stats.sort_stats(args.sort).print_stats(args.top)
        text = buf.getvalue().replace(ROOT + "/", "").replace(str(Path(sys.prefix)) + "/lib/", "")
        print(f"\n=== {title} ===")
        print(text[text.find("   ncalls"):] if "   ncalls" in text else text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

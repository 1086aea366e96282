"""Profile one benchmark case with cProfile: where a canvas2graph turn spends its time.

    python -m bench.profiling                      # 50-component Message chain, Runner.run_turn
    python -m bench.profiling --case llm50         # 50 scripted LLMs
    python -m bench.profiling --case compile1000   # compile_dsl(...).graph(None) of 1,000 components
    python -m bench.profiling --case msg50 --hand  # the hand-written graph, for comparison
    python -m bench.profiling --case loop1000 --reps 3     # the 1,000-pass Loop (iter100: the Iteration)
    python -m bench.profiling --case msg50 --saver sqlite  # with a checkpointer (sqlite, postgres)
    python -m bench.profiling --case iter100 --diff        # canvas2graph minus hand-written, per function

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

from bench import dsls, handwritten  # noqa: E402
from bench.run import ITERATION_ITEMS, LOOP_PASSES, PG_URL, QUERY, SCRIPT, fresh_id  # noqa: E402
from canvas2graph.runtime.run.checkpoint import open_checkpointer  # noqa: E402
from canvas2graph.compiler.canvas import compile_dsl  # noqa: E402
from canvas2graph.runtime.services.models import ModelFactory  # noqa: E402
from canvas2graph.runtime.services.scripted import Script  # noqa: E402
from canvas2graph.runtime.run.runner import Runner, TurnRequest  # noqa: E402

ROOT = str(Path(__file__).resolve().parent.parent)
PROJECT = tuple(f"{ROOT}/{d}/" for d in ("compiler", "nodes", "runtime"))

# case -> (DSL, hand-written graph, query, the hand-written graph's recursion limit or None)
CASES = {
    "msg10": (lambda: dsls.message_chain(10), lambda: handwritten.message_chain(10), QUERY, None),
    "msg50": (lambda: dsls.message_chain(50), lambda: handwritten.message_chain(50), QUERY, None),
    "llm10": (lambda: dsls.llm_chain(10), lambda: handwritten.llm_chain(10), QUERY, None),
    "llm50": (lambda: dsls.llm_chain(50), lambda: handwritten.llm_chain(50), QUERY, None),
    "branch": (lambda: dsls.branch(5), lambda: handwritten.branch(5), dsls.BRANCH_QUERY, None),
    "loop1000": (lambda: dsls.loop_counter(LOOP_PASSES),
                 lambda: handwritten.loop_counter(LOOP_PASSES, show_body=dsls.loop_body_kind() == "Message"),
                 QUERY, handwritten.loop_recursion_limit(LOOP_PASSES)),
    "iter100": (lambda: dsls.iteration_map(), lambda: handwritten.iteration_map(),
                dsls.iteration_query(ITERATION_ITEMS), handwritten.iteration_recursion_limit(ITERATION_ITEMS)),
}
SAVER_URLS = {"memory": None, "sqlite": "sqlite", "postgres": PG_URL}


async def turns(case: str, hand: bool, reps: int, prof: cProfile.Profile, saver_name: str = "memory") -> float:
    import tempfile
    make_dsl, make_hand, query, limit = CASES[case]
    with tempfile.TemporaryDirectory(prefix="canvas2graph-profile-") as folder:
        url = SAVER_URLS[saver_name]
        url = f"{folder}/profile.sqlite" if url == "sqlite" else url
        async with open_checkpointer(url) as saver:
            used: list[str] = []
            if hand:
                graph = make_hand().compile(checkpointer=saver)

                async def one():
                    used.append(fresh_id())
                    config = {"configurable": {"thread_id": used[-1]}, **({"recursion_limit": limit} if limit else {})}
                    async for _ in graph.astream({"query": query}, config, stream_mode=["tasks", "custom"], version="v2"):
                        pass
            else:
                compiled = compile_dsl(make_dsl())
                script = Script.load(SCRIPT)
                models = ModelFactory(script=script)      # one per process, as in bench.run

                async def one():
                    used.append(fresh_id())
                    runner = Runner(compiled, saver, models, script=script)
                    async for _ in runner.run_turn(used[-1], TurnRequest(query=query)):
                        pass
            try:
                for _ in range(3):
                    await one()
                t0 = time.perf_counter()
                prof.enable()
                for _ in range(reps):
                    await one()
                prof.disable()
                return (time.perf_counter() - t0) / reps
            finally:
                if saver_name == "postgres":
                    for sid in used:
                        await saver.adelete_thread(sid)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.profiling", description=__doc__.split("\n\n")[0])
    ap.add_argument("--case", default="msg50", choices=[*CASES, "compile1000"])
    ap.add_argument("--hand", action="store_true", help="profile the hand-written graph instead")
    ap.add_argument("--saver", default="memory", choices=list(SAVER_URLS),
                    help="checkpointer: in memory, a temp SQLite file, or PostgreSQL at CANVAS2GRAPH_BENCH_PG")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--sort", default="cumulative", choices=["cumulative", "tottime"])
    ap.add_argument("--diff", action="store_true",
                    help="profile both and list the functions by how much more time canvas2graph spends in them")
    args = ap.parse_args(argv)

    if args.diff:
        return diff(args)
    prof = cProfile.Profile()
    if args.case == "compile1000":
        for _ in range(max(1, args.reps // 10)):
            dsl = dsls.message_chain(1000, salt=fresh_id("p"))
            prof.enable()
            compile_dsl(dsl).graph(None)
            prof.disable()
        print(f"compile of 1,000 components, {max(1, args.reps // 10)} run(s)")
    else:
        per_turn = asyncio.run(turns(args.case, args.hand, args.reps, prof, args.saver))
        print(f"{args.case} ({'hand-written' if args.hand else 'canvas2graph Runner'}, {args.saver} saver): "
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


def _label(key) -> str:
    filename, line, func = key
    filename = filename.replace(ROOT + "/", "").replace(str(Path(sys.prefix)) + "/lib/", "")
    filename = filename.split("site-packages/", 1)[-1]
    if "/lib/python3" in filename:                 # the standard library: asyncio/..., selectors.py
        filename = filename.split("/lib/python3", 1)[1].split("/", 1)[-1]
    return f"{filename}:{line}({func})"


def diff(args) -> int:
    """Per function, canvas2graph's time minus the hand-written graph's, in ms per turn."""
    per: dict[bool, dict] = {}
    for hand in (False, True):
        prof = cProfile.Profile()
        per_turn = asyncio.run(turns(args.case, hand, args.reps, prof, args.saver))
        print(f"{args.case} ({'hand-written' if hand else 'canvas2graph Runner'}, {args.saver} saver): "
              f"{per_turn * 1000:.2f} ms per turn under the profiler, {args.reps} turns")
        per[hand] = {k: (v[1] / args.reps, v[2] / args.reps * 1000, v[3] / args.reps * 1000)
                     for k, v in pstats.Stats(prof).stats.items()}          # type: ignore[attr-defined]
    c2g, hand = per[False], per[True]
    rows = []
    for key in set(c2g) | set(hand):
        cn, ct, cc = c2g.get(key, (0, 0.0, 0.0))
        hn, ht, hc = hand.get(key, (0, 0.0, 0.0))
        rows.append((ct - ht, cc - hc, cn, hn, key))
    key_index = 0 if args.sort == "tottime" else 1
    rows.sort(key=lambda r: -r[key_index])
    print(f"\n=== canvas2graph - hand-written, ms per turn under the profiler, by {args.sort} ===")
    print(f"{'tottime':>8}  {'cumtime':>8}  {'calls c2g/hand':>15}  function")
    for dt, dc, cn, hn, key in rows[:args.top]:
        print(f"{dt:8.2f}  {dc:8.2f}  {cn:>7.0f}/{hn:<7.0f}  {_label(key)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

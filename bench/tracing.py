"""What tracing costs per turn: off (the default) against the code path before tracing existed, and on.

    python -m bench.tracing            # about a minute on 2 cores
    python -m bench.tracing --quick    # smoke test: few repetitions

Each case runs whole turns through `Runner.run_turn` (InMemorySaver, scripted model), the variants
interleaved round-robin so drift hits them alike:
- off: the code as it is, no tracer configured (`trace_config` returns {} and the Agent's tool
  calls go straight to the tool);
- previous path: the same turn with the tracing hooks taken out (`canvas2graph.runtime.run.runner.trace_config`
  and `canvas2graph.nodes.agent.tool_run` replaced by what the code did before: nothing, and a direct call);
- LangSmith on / Langfuse on: each tracer sending to a local stand-in collector on 127.0.0.1
  (tests/runtime/trace_collectors.py), for scale.

Cases: a chain of 10 Messages, and the data-analyst demo (an Agent whose model calls a tool, then
answers; the tool's result is scripted so no child process runs). See docs/performance.md#tracing.
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import time
import timeit
from pathlib import Path
from typing import Any

if __package__ in (None, ""):          # `python bench/tracing.py`: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# LangSmith reads (and caches) its endpoint once: point it at the local collector before anything asks.
# Tracing stays off until a variant switches it on with `tracing_context(enabled=True)`.
for _key in [k for k in os.environ if k.startswith(("LANGSMITH_", "LANGCHAIN_", "LANGFUSE_"))]:
    del os.environ[_key]

from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402
from langsmith.run_helpers import tracing_context  # noqa: E402

import canvas2graph.nodes.agent  # noqa: E402
import canvas2graph.runtime.run.runner  # noqa: E402
from bench import dsls  # noqa: E402
from bench.run import Stats, fresh_id, time_async_interleaved  # noqa: E402
from canvas2graph.compiler.canvas import compile_dsl  # noqa: E402
from canvas2graph.runtime.services.models import ModelFactory  # noqa: E402
from canvas2graph.runtime.services.scripted import Script  # noqa: E402
from canvas2graph.runtime.run.runner import Runner, TurnRequest  # noqa: E402
from canvas2graph.runtime.services.observability import flush, tool_run, trace_config  # noqa: E402
from tests.runtime.trace_collectors import LangfuseCollector, LangSmithCollector  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
ANALYST = REPO / "fixtures" / "demo" / "data_analyst.json"
ANALYST_SCRIPT = {**json.loads((REPO / "fixtures" / "demo" / "data_analyst.script.json").read_text()),
                  "tool_results": {"CodeExec": [{"outputs": {"result": {"mean": 14.2, "median": 8}},
                                                 "return": "{\"mean\": 14.2, \"median\": 8}"}]}}
CHAIN_SCRIPT = {"auto_reply": "reply {n} from {component}"}


def _previous_trace_config(*args, **kwargs) -> dict:
    return {}


async def _previous_tool_run(name, args, call_id, call, **kwargs) -> str:
    return await call()


@contextlib.contextmanager
def previous_code_path():
    """The turn as it ran before tracing existed: no trace_config, tools called directly."""
    saved = canvas2graph.runtime.run.runner.trace_config, canvas2graph.nodes.agent.tool_run
    canvas2graph.runtime.run.runner.trace_config, canvas2graph.nodes.agent.tool_run = _previous_trace_config, _previous_tool_run
    try:
        yield
    finally:
        canvas2graph.runtime.run.runner.trace_config, canvas2graph.nodes.agent.tool_run = saved


@contextlib.contextmanager
def langsmith_on():
    with tracing_context(enabled=True):
        yield


@contextlib.contextmanager
def langfuse_on(collector: LangfuseCollector):
    keys = {"LANGFUSE_PUBLIC_KEY": "pk-lf-bench", "LANGFUSE_SECRET_KEY": "sk-lf-bench", "LANGFUSE_HOST": collector.url}
    os.environ.update(keys)
    try:
        yield
    finally:
        for key in keys:
            del os.environ[key]


async def bench_case(dsl: Any, script: dict, query: str, reps: int, warmup: int, modes: dict) -> dict[str, Stats]:
    compiled = compile_dsl(dsl)
    saver = InMemorySaver()
    compiled.graph(saver)

    def variant(mode):
        def make():
            fresh = Script.load(script)
            runner = Runner(compiled, saver, ModelFactory(script=fresh), fresh, services={"code": {"allow_local": True}})
            sid = fresh_id("t")

            async def run():
                with modes[mode]():
                    async for _ in runner.run_turn(sid, TurnRequest(query=query)):
                        pass
                if runner.outcome.status != "finished":
                    raise RuntimeError(f"{mode}: the turn did not finish: {runner.outcome}")
            return run
        return make

    stats = await time_async_interleaved({mode: variant(mode) for mode in modes}, reps, warmup)
    saver.storage.clear(), saver.writes.clear(), saver.blobs.clear()
    return stats


CASES = {
    "10-Message chain": (dsls.message_chain(10), CHAIN_SCRIPT, "hello"),
    "Agent + tool call (demo)": (ANALYST.read_bytes(), ANALYST_SCRIPT, "Mean and median of 3, 8, 8, 12, 40?"),
}


def hook_costs() -> dict[str, float]:
    """Microseconds per call of what tracing added to a turn, with tracing off: `trace_config` (once per
    turn) and `tool_run` (once per Agent tool call)."""
    async def call() -> str:
        return ""

    async def tool_calls(n: int) -> None:
        for _ in range(n):
            await tool_run("t_0", {}, "c", call)

    async def direct_calls(n: int) -> None:
        for _ in range(n):
            await call()

    n = 20000
    config = min(timeit.repeat(lambda: trace_config("agent", "session"), number=n, repeat=5)) / n * 1e6
    loop = asyncio.new_event_loop()
    try:
        wrapped = min(timeit.repeat(lambda: loop.run_until_complete(tool_calls(n)), number=1, repeat=5)) / n * 1e6
        direct = min(timeit.repeat(lambda: loop.run_until_complete(direct_calls(n)), number=1, repeat=5)) / n * 1e6
    finally:
        loop.close()
    return {"trace_config": config, "tool_run": wrapped - direct}


def report(off_rows: dict[str, dict[str, Stats]], on_rows: dict[str, dict[str, Stats]]) -> list[str]:
    lines = ["| case | previous path | tracing off | off - previous | LangSmith on | Langfuse on |",
             "|---|---|---|---|---|---|"]
    for case, stats in off_rows.items():
        prev, off = stats["previous path"], stats["off"]
        # the interquartile half-range of the two: a difference inside it is no difference
        noise = max(prev.p75_ms - prev.p25_ms, off.p75_ms - off.p25_ms) / 2
        on = on_rows.get(case, {})
        cells = [f"{on[m].median_ms:.2f} ms" if m in on else "-" for m in ("LangSmith on", "Langfuse on")]
        lines.append(f"| {case} | {prev.median_ms:.2f} ms | {off.median_ms:.2f} ms | "
                     f"{off.median_ms - prev.median_ms:+.3f} ms (IQR/2 {noise:.3f}) | {cells[0]} | {cells[1]} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.tracing", description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="few repetitions: a smoke test, figures are noisy")
    args = ap.parse_args(argv)
    reps, warmup = (5, 1) if args.quick else (150, 10)
    started = time.perf_counter()
    # 1. off against the previous path, before any tracer has started a background thread
    off_modes = {"off": contextlib.nullcontext, "previous path": previous_code_path}
    off_rows = {case: asyncio.run(bench_case(*spec, reps, warmup, off_modes)) for case, spec in CASES.items()}
    # 2. each tracer on, sending to a local collector (their export threads share the 2 cores)
    with LangSmithCollector() as ls, LangfuseCollector() as lf:
        # LangSmith's client reads its endpoint when it is first made: set it before the first traced run
        os.environ.update(LANGSMITH_ENDPOINT=ls.url, LANGSMITH_API_KEY="ls-bench-key")
        on_modes = {"LangSmith on": langsmith_on, "Langfuse on": lambda: langfuse_on(lf)}
        on_rows = {case: asyncio.run(bench_case(*spec, max(reps // 5, 3), warmup, on_modes))
                   for case, spec in CASES.items()}
        with langsmith_on(), langfuse_on(lf):
            flush()
    print(f"Per-turn time, median of {reps} turns each (tracers on: {max(reps // 5, 3)}), "
          "InMemorySaver, scripted model\n")
    print("\n".join(report(off_rows, on_rows)))
    costs = hook_costs()
    print(f"\nWith tracing off, trace_config costs {costs['trace_config']:.2f} µs per turn and tool_run "
          f"{costs['tool_run']:.2f} µs per Agent tool call (against a direct call).")
    print(f"\n(runs received: LangSmith {len(ls.runs)}, Langfuse {len(lf.spans)} spans; "
          f"{'quick run, ' if args.quick else ''}benchmark took {time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

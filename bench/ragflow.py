"""canvas2graph against RAGFlow's own engine, through the oracle's side-by-side driver.

    python -m bench.ragflow                  # every case, ~4 min; prints the driver's tables and a summary
    python -m bench.ragflow --quick          # few repetitions: a smoke run, noisy figures
    python -m bench.ragflow --cases llm10,switch --json out.json

RAGFlow's engine runs offline from `../shared/oracle` (set up once with its `setup.sh`, see
docs/performance.md). Its `perf/driver.py` starts one long-lived worker per engine, each in its own
virtualenv, and feeds them the same DSLs and scripted replies one turn at a time, interleaved:
RAGFlow, canvas2graph with the in-memory checkpointer, canvas2graph with the durable SQLite store.
This module runs it, then measures canvas2graph with PostgreSQL on the same DSLs in this process
(the driver's worker knows memory and SQLite only), and lays the ratios out per case.

Two measures per node (a turn's median divided by the components that ran):
- "engine run": consuming RAGFlow's `Canvas.run()` against consuming `Runner.run_turn()`;
- "whole turn": what one request costs each engine: RAGFlow also rebuilds its `Canvas` from the DSL and
  serializes it at the end of every turn (it keeps no compiled canvas); canvas2graph builds a `Runner`.
"""
from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):          # `python bench/ragflow.py`: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

REPO = Path(__file__).resolve().parent.parent
PERF = Path(os.environ.get("CANVAS2GRAPH_ORACLE_PERF", REPO.parent / "shared" / "oracle" / "perf"))
ORACLE_HOME = Path(os.environ.get("ORACLE_HOME", Path.home() / ".cache" / "ragflow-oracle"))
PG_URL = os.environ.get("CANVAS2GRAPH_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/test")
CASES = "llm10,llm50,st10,st50,va10,va50,msg10,msg50,switch,categorize"


def missing() -> str | None:
    """Why the side-by-side cannot run here, or None."""
    if not (PERF / "driver.py").exists():
        return f"RAGFlow's oracle is not beside this checkout ({PERF} is missing)"
    if not (ORACLE_HOME / "venv" / "bin" / "python").exists():
        return f"RAGFlow's engine is not set up: run `bash {PERF.parent}/setup.sh RAGFLOW_GIT_DIR` (docs/performance.md)"
    return None


def run_driver(cases: str, reps: int, warmup: int, ttft_reps: int, out: Path) -> dict:
    """The oracle's driver, interleaved turns of both engines; its tables go to stdout."""
    cmd = [sys.executable, str(PERF / "driver.py"), "--cases", cases, "--reps", str(reps), "--warmup", str(warmup),
           "--ttft-reps", str(ttft_reps), "--json", str(out), "--project", str(REPO)]
    env = {**os.environ, "C2G_PY": os.environ.get("C2G_PY", sys.executable)}
    subprocess.run(cmd, check=True, env=env)
    return json.loads(out.read_text())


async def postgres_turns(cases: list[str], reps: int, warmup: int) -> dict[str, dict]:
    """canvas2graph with the PostgreSQL store on the driver's DSLs, timed as its worker times a turn."""
    sys.path.insert(0, str(PERF))
    import proto                                    # the driver's case loader
    from canvas2graph.compiler.canvas import compile_dsl
    from canvas2graph.runtime.run.checkpoint import open_checkpointer
    from canvas2graph.runtime.services.models import ModelFactory
    from canvas2graph.runtime.services.scripted import Script
    from canvas2graph.runtime.run.runner import Runner, TurnRequest
    from bench.checkpoint_cost import pg_unavailable

    reason = await pg_unavailable(PG_URL)
    if reason:
        return {"unavailable": reason}
    results: dict[str, dict] = {}
    token = f"bench-{os.getpid()}-{int(time.time())}"
    async with open_checkpointer(PG_URL) as saver:
        for name in cases:
            dsl, script_obj, meta = proto.load_case(name)
            compiled, script = compile_dsl(dsl), Script.load(script_obj)
            models = ModelFactory(script=script)
            cpu, wall, threads = [], [], []
            for i in range(warmup + reps):
                script.__dict__.update(Script.load(script_obj).__dict__)
                thread = f"{token}-{name}-{i}"
                threads.append(thread)
                gc.collect(1)
                c0, t0 = time.process_time(), time.perf_counter()
                runner = Runner(compiled, saver, models, script=script)
                async for event in runner.run_turn(thread, TurnRequest(query=meta["query"])):
                    json.dumps(event, ensure_ascii=False)
                if i >= warmup:
                    cpu.append((time.process_time() - c0) * 1e3)
                    wall.append((time.perf_counter() - t0) * 1e3)
            ran = meta["components_run"]
            results[name] = {"ran": ran, "cpu_turn_ms": statistics.median(cpu), "turn_ms": statistics.median(wall),
                             "cpu_turn_per_node_ms": statistics.median(cpu) / ran}
            for thread in threads:
                await saver.adelete_thread(thread)
    return results


async def langgraph_floor(nodes: int, reps: int, warmup: int) -> dict:
    """What LangGraph itself costs per node (`bench/upstream/floor.py`): no compiler to LangGraph can run
    a node for less; compare it with RAGFlow's per-node figures."""
    from bench.upstream.floor import STREAM_MODES, cpu_per_node
    from canvas2graph.runtime.run.events import STREAM_MODES as RUNNER_MODES
    from canvas2graph.runtime.run.runner import DURABILITY
    assert STREAM_MODES == RUNNER_MODES and DURABILITY == "sync", "the floor must stream as the Runner does"
    return {"nodes": nodes, "cpu_per_node_ms": await cpu_per_node(nodes, reps, warmup)}


def summary(driver: dict, postgres: dict, floor: dict | None = None) -> list[str]:
    """Per case: CPU ms per node of each engine and the ratios, both measures."""
    lines = ["", "## canvas2graph / RAGFlow, CPU per node (median of per-round ratios; PostgreSQL: ratio of medians)", "",
             "| case | ran | RAGFlow run | c2g memory run | ratio | c2g SQLite run | ratio | RAGFlow turn | c2g memory turn "
             "| ratio | c2g SQLite turn | ratio | c2g PostgreSQL turn | ratio |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for row in driver["rows"]:
        rf, mem, sq = row["ragflow"], row["c2g-memory"], row["c2g-sqlite"]
        pg = postgres.get(row["case"]) or {}
        pg_cells = (f"{pg['cpu_turn_per_node_ms']:.3f} | {pg['cpu_turn_per_node_ms'] / rf['cpu_turn_per_node_ms']:.2f}"
                    if pg else "- | -")
        lines.append(
            f"| {row['case']} | {row['ran']} | {rf['cpu_run_per_node_ms']:.3f} | {mem['cpu_run_per_node_ms']:.3f} "
            f"| {mem['cpu_run_ratio_paired']:.2f} | {sq['cpu_run_per_node_ms']:.3f} | {sq['cpu_run_ratio_paired']:.2f} "
            f"| {rf['cpu_turn_per_node_ms']:.3f} | {mem['cpu_turn_per_node_ms']:.3f} | {mem['cpu_turn_ratio_paired']:.2f} "
            f"| {sq['cpu_turn_per_node_ms']:.3f} | {sq['cpu_turn_ratio_paired']:.2f} | {pg_cells} |")
    if floor:
        lines.append(f"\nLangGraph's floor: {floor['cpu_per_node_ms']:.3f} ms CPU per node ({floor['nodes']} nodes that do "
                     "nothing, streamed as the Runner streams, in memory)")
    if "unavailable" in postgres:
        lines.append(f"\nPostgreSQL: not measured ({postgres['unavailable']})")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.ragflow", description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="few repetitions: a smoke run, noisy figures")
    ap.add_argument("--cases", default=CASES)
    ap.add_argument("--json", metavar="PATH", help="also write every figure to PATH")
    args = ap.parse_args(argv)
    reason = missing()
    if reason:
        print(f"bench.ragflow: {reason}", file=sys.stderr)
        return 2
    result = measure(args.cases, quick=args.quick)
    print("\n".join(summary(result["driver"], result["postgres"], result["floor"])))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


def measure(cases: str, *, quick: bool) -> dict[str, Any]:
    reps, warmup, ttft = (5, 1, 9) if quick else (31, 3, 41)
    with tempfile.TemporaryDirectory() as tmp:
        driver = run_driver(cases, reps, warmup, ttft, Path(tmp) / "driver.json")
    postgres = asyncio.run(postgres_turns(cases.split(","), reps, warmup))
    floor = asyncio.run(langgraph_floor(50, reps, warmup))
    return {"driver": driver, "postgres": postgres, "floor": floor}


if __name__ == "__main__":
    sys.exit(main())

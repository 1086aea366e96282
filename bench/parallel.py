"""Where users wait for models: a parallel Iteration and parallel branches, wall time per turn.

    python -m bench.parallel [--reps 3] [--json OUT] [--skip-ragflow]

The model is the scripted one answering after a delay (`delay_ms`, docs/models.md), so the figures are the
waiting a canvas adds up, not a network's. Cases:
- `iteration50`: begin -> Split -> Iteration over 50 items (IterationItem -> LLM answering after 200 ms) ->
  Message, at `max_concurrency` 1 (RAGFlow's Python engine: one item after another) and 10;
- `branches4`: begin -> four LLMs side by side, each answering after 500 ms -> a join -> Message.

canvas2graph runs each turn through the Runner (in memory and with SQLite); RAGFlow's engine (the oracle,
`../shared/oracle`) runs the same DSLs when it is set up, its scripted provider made to answer after the same
delay (the oracle's own `fake_llm`, wrapped here in the oracle's process). RAGFlow's Python engine has no
`max_concurrency`: it runs the Iteration one item at a time whatever the DSL says.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import ragflow       # noqa: E402  (the oracle's location and whether it is set up)

ITEMS, ITEM_DELAY_MS = 50, 200
BRANCHES, BRANCH_DELAY_MS = 4, 500
LLM_PARAMS = {"llm_id": "scripted@Scripted", "sys_prompt": "Echo.", "cite": False}


def _cpn(name: str, params: dict, downstream: list[str], **extra: Any) -> dict:
    return {"obj": {"component_name": name, "params": params}, "downstream": downstream, "upstream": [], **extra}


def iteration_dsl(concurrency: int) -> dict:
    return {"components": {
        "begin": _cpn("Begin", {"mode": "conversational"}, ["StringTransform:Split"]),
        "StringTransform:Split": _cpn("StringTransform", {"method": "split", "split_ref": "sys.query", "delimiters": [","],
                                                          "outputs": {"result": {"type": "Array<string>", "value": []}}},
                                      ["Iteration:Each"]),
        "Iteration:Each": _cpn("Iteration", {"items_ref": "StringTransform:Split@result", "max_concurrency": concurrency,
                                             "outputs": {"answers": {"type": "Array<string>", "ref": "LLM:Ask@content"}}},
                               ["Message:Out"]),
        "IterationItem:Start": _cpn("IterationItem", {}, ["LLM:Ask"], parent_id="Iteration:Each"),
        "LLM:Ask": _cpn("LLM", {**LLM_PARAMS, "prompts": [{"role": "user", "content": "About {IterationItem:Start@item}"}]},
                        [], parent_id="Iteration:Each"),
        "Message:Out": _cpn("Message", {"content": ["{Iteration:Each@answers}"]}, []),
    }}


def branches_dsl() -> dict:
    names = [f"LLM:B{i}" for i in range(BRANCHES)]
    return {"components": {
        "begin": _cpn("Begin", {"mode": "conversational"}, names),
        **{n: _cpn("LLM", {**LLM_PARAMS, "prompts": [{"role": "user", "content": f"{n}: {{sys.query}}"}]},
                   ["StringTransform:Join"]) for n in names},
        "StringTransform:Join": _cpn("StringTransform", {"method": "merge", "delimiters": [","],
                                                         "script": " ".join(f"{{{n}@content}}" for n in names)},
                                     ["Message:Out"]),
        "Message:Out": _cpn("Message", {"content": ["{StringTransform:Join@result}"]}, []),
    }}


def cases() -> dict[str, tuple[dict, str, int]]:
    """name -> (DSL, query, model delay in ms)."""
    query = ",".join(f"item{i}" for i in range(ITEMS))
    return {"iteration50-c1": (iteration_dsl(1), query, ITEM_DELAY_MS),
            "iteration50-c10": (iteration_dsl(10), query, ITEM_DELAY_MS),
            "branches4": (branches_dsl(), "go", BRANCH_DELAY_MS)}


# --- canvas2graph --------------------------------------------------------------------------------
async def _c2g_turn(dsl: dict, query: str, delay_ms: int, db: str | None) -> tuple[float, str]:
    from canvas2graph.compiler.canvas import compile_dsl
    from canvas2graph.runtime.run.checkpoint import open_checkpointer
    from canvas2graph.runtime.services.models import ModelFactory
    from canvas2graph.runtime.services.scripted import Script
    from canvas2graph.runtime.run.runner import Runner, TurnRequest

    script = Script.load({"auto_reply": "answer {n}", "delay_ms": delay_ms})
    async with open_checkpointer(db) as saver:
        runner = Runner(compile_dsl(dsl), saver, ModelFactory(script=script), script)
        start = time.perf_counter()
        events = [e async for e in runner.run_turn(f"s{time.monotonic_ns()}", TurnRequest(query=query))]
        wall = time.perf_counter() - start
    assert events[-1]["event"] == "workflow_finished", events[-1]
    return wall, str(events[-1]["data"]["outputs"].get("content"))[:80]


def c2g(reps: int, tmp: Path) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for name, (dsl, query, delay) in cases().items():
        row = {}
        for store, db in (("memory", None), ("sqlite", str(tmp / "sessions.db"))):
            runs = 1 if name.endswith("-c1") else reps       # 10 s a turn: once is enough to see it
            walls = [asyncio.run(_c2g_turn(dsl, query, delay, db))[0] for _ in range(runs)]
            row[store] = {"wall_s": statistics.median(walls), "runs": walls}
        out[name] = row
    return out


# --- RAGFlow's engine ----------------------------------------------------------------------------
_RAGFLOW = r'''
import asyncio, json, sys, time
sys.path.insert(0, sys.argv[1])
from run_oracle import Oracle, load_dsl
oracle = Oracle()
completions = oracle.fake_llm._Completions
original = completions.create
DELAY = float(sys.argv[3]) / 1000

async def slow(self, **kw):        # the scripted provider answers after the delay, as canvas2graph's does
    await asyncio.sleep(DELAY)
    return await original(self, **kw)

completions.create = slow
dsl, query, reps = load_dsl(sys.argv[2]), sys.argv[4], int(sys.argv[5])     # the DSL as RAGFlow stores it
walls = []
for _ in range(reps):
    start = time.perf_counter()
    events, _, canvas = oracle.run(dsl, query=query, script={"auto_reply": "answer {n}"})
    walls.append(time.perf_counter() - start)
    assert events[-1]["event"] == "workflow_finished", events[-3:]
print(json.dumps({"walls": walls, "answer": str(events[-1]["data"]["outputs"].get("content"))[:80]}))
'''


def ragflow_side(reps: int, tmp: Path) -> dict[str, dict]:
    problem = ragflow.missing()
    if problem:
        return {"unavailable": problem}
    python = ragflow.ORACLE_HOME / "venv" / "bin" / "python"
    harness = ragflow.PERF.parent / "harness"
    out: dict[str, dict] = {}
    for name, (dsl, query, delay) in cases().items():
        if name.endswith("-c10"):
            continue                        # RAGFlow's Python engine has no max_concurrency: the c1 run is its figure
        path = tmp / f"{name}.json"
        path.write_text(json.dumps(dsl))
        runs = 1 if name.endswith("-c1") else reps
        proc = subprocess.run([str(python), "-c", _RAGFLOW, str(harness), str(path), str(delay), query, str(runs)],
                              capture_output=True, text=True, timeout=600)
        try:
            data = json.loads(proc.stdout.strip().splitlines()[-1])
            out[name] = {"wall_s": statistics.median(data["walls"]), "runs": data["walls"]}
        except (IndexError, json.JSONDecodeError, KeyError):
            out[name] = {"error": (proc.stderr or proc.stdout)[-500:]}
    return out


def measure(reps: int = 3, with_ragflow: bool = True) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        result = {"c2g": c2g(reps, Path(tmp))}
        result["ragflow"] = ragflow_side(reps, Path(tmp)) if with_ragflow else {"unavailable": "skipped"}
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--skip-ragflow", action="store_true")
    args = parser.parse_args(argv)
    result = measure(args.reps, not args.skip_ragflow)
    for name, row in result["c2g"].items():
        rf = result["ragflow"].get(name.replace("-c10", "-c1"), {})
        rf_text = f"{rf['wall_s']:.2f} s" if "wall_s" in rf else "-"
        print(f"{name:18} c2g memory {row['memory']['wall_s']:.2f} s, SQLite {row['sqlite']['wall_s']:.2f} s; RAGFlow {rf_text}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

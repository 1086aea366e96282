"""Every speed and memory target in one command, each with its measured figure and whether it is met.

    python -m bench.targets                  # the full run, about 33 min on 2 cores: run it alone on the machine
    python -m bench.targets --quick          # few repetitions: a smoke run, noisy figures (about 7 min)
    python -m bench.targets --json out.json  # also write every figure
    python -m bench.targets --skip server    # leave parts out: ragflow, parallel, handwritten, cli, server, scale,
                                             # storage, log, memory

The parts, each a benchmark of its own that this command runs and reads:
- `ragflow`: `python -m bench.ragflow`, RAGFlow's own engine side by side (needs `../shared/oracle` set up),
  with LangGraph's floor: a chain of nodes that do nothing, streamed as canvas2graph streams;
- `parallel`: `python -m bench.parallel`, where users wait for models: a 50-item Iteration whose model answers
  after 200 ms at `max_concurrency` 1 and 10, and four parallel branches of 500 ms, beside RAGFlow's engine;
- `handwritten`: `python -m bench.run`, the same graphs written by hand in plain LangGraph;
- `cli`: whole processes: `--help`, `compile` of a shipped template, and one `run` turn of the 10-LLM chain
  against RAGFlow's engine run the same way (`../shared/oracle/perf/cold.py`);
- `server`: `python -m bench.server_load`, concurrent streaming conversations against one `serve` process;
- `scale`: `python -m bench.scale`, production's layout (2 API processes and workers on PostgreSQL): 1,000
  conversations on 2 workers, a takeover after SIGKILL and 10 random worker kills (about 8 min; `--quick`: its
  smoke run, 20 conversations and 2 kills, about 3 min; `python -m bench.scale` alone runs 1, 2 and 4 workers);
- `storage`: `python -m bench.storage`, the bytes a session stores (1,000 turns, 10,000 items, about 2.5 min;
  `--quick`: 100 turns and 1,000 items, targets it cannot reach are judged when already exceeded);
- `log`: `python -m bench.message_log`, what logging a turn's messages costs at turn 5,000 against turn 10
  (`--quick`: 1,000);
- `memory`: `python -m bench.memory`, RAGFlow's memories on LangGraph's stores (SQLite and PostgreSQL): saves at
  10,000 messages against 1,000, FIFO forgetting within memory_size, and search's growth, stated (about 13 min;
  `--quick`: 400 messages, about 35 s).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):          # `python bench/targets.py`: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import ragflow              # noqa: E402  (after the path fix above)

REPO = Path(__file__).resolve().parent.parent
PARTS = ("ragflow", "parallel", "handwritten", "cli", "server", "scale", "storage", "log", "memory")
TEMPLATE = REPO / "canvas2graph" / "templates" / "ragflow" / "cajal_scientific_paper_agent.json"


class Row:
    """One target: what is measured, the figure, the goal and whether it is met."""

    def __init__(self, target: str, measured: str, goal: str, met: bool | None):
        self.target, self.measured, self.goal, self.met = target, measured, goal, met

    def cells(self) -> str:
        verdict = "-" if self.met is None else "met" if self.met else "NOT MET"
        return f"| {self.target} | {self.measured} | {self.goal} | {verdict} |"


def _json_of(cmd: list[str], out: Path, **kwargs: Any) -> dict:
    subprocess.run(cmd, cwd=REPO, check=False, **kwargs)
    return json.loads(out.read_text()) if out.exists() else {}


def ragflow_rows(result: dict) -> list[Row]:
    rows: list[Row] = []
    driver, postgres, floor = result["driver"], result["postgres"], result.get("floor") or {}
    cases = driver["rows"]
    for measure, key, label in (("run", "cpu_run_ratio_paired", "engine run"), ("turn", "cpu_turn_ratio_paired", "whole turn")):
        memory = {r["case"]: r["c2g-memory"][key] for r in cases}
        sqlite = {r["case"]: r["c2g-sqlite"][key] for r in cases}
        worst_m, worst_s = max(memory, key=memory.get), max(sqlite, key=sqlite.get)
        rows.append(Row(f"in memory / RAGFlow, CPU per node, {label}, every case",
                        f"max {memory[worst_m]:.2f} ({worst_m}); " + ", ".join(f"{c} {v:.2f}" for c, v in memory.items()),
                        "<= 1.0", memory[worst_m] <= 1.0))
        rows.append(Row(f"SQLite / RAGFlow, CPU per node, {label}, every case",
                        f"max {sqlite[worst_s]:.2f} ({worst_s}); " + ", ".join(f"{c} {v:.2f}" for c, v in sqlite.items()),
                        "<= 1.3", sqlite[worst_s] <= 1.3))
    if "unavailable" not in postgres:
        pg = {r["case"]: postgres[r["case"]]["cpu_turn_per_node_ms"] / r["ragflow"]["cpu_turn_per_node_ms"]
              for r in cases if r["case"] in postgres}
        worst_p = max(pg, key=pg.get)
        rows.append(Row("PostgreSQL / RAGFlow, CPU per node, whole turn, every case",
                        f"max {pg[worst_p]:.2f} ({worst_p}); " + ", ".join(f"{c} {v:.2f}" for c, v in pg.items()),
                        "<= 1.5", pg[worst_p] <= 1.5))
    if floor:
        per_case = {r["case"]: floor["cpu_per_node_ms"] / r["ragflow"]["cpu_run_per_node_ms"] for r in cases}
        rows.append(Row("LangGraph's floor (no-op nodes, streamed as canvas2graph streams) / RAGFlow engine run",
                        f"{floor['cpu_per_node_ms']:.3f} ms per node; " + ", ".join(f"{c} {v:.2f}" for c, v in per_case.items()),
                        "context", None))
    for engine in ("c2g-memory", "c2g-sqlite"):
        ttft = driver["ttft"][engine]["chunk_to_first_model_message_ms"]
        rows.append(Row(f"first model chunk -> first `message` event ({engine[4:]})",
                        f"{ttft:.3f} ms (RAGFlow {driver['ttft']['ragflow']['chunk_to_first_model_message_ms']:.3f})",
                        "<= 0.1 ms", ttft <= 0.1))
    first, end = driver.get("rss_after_first_turn") or {}, driver.get("rss_end") or {}
    if all(d.get(k, {}).get("ok") for d in (first, end) for k in ("ragflow", "c2g")):
        rows.append(Row("worker memory (RSS): after the first turn / after every case",
                        f"canvas2graph {first['c2g']['rss_mb']:.0f} / {end['c2g']['rss_mb']:.0f} MB, RAGFlow "
                        f"{first['ragflow']['rss_mb']:.0f} / {end['ragflow']['rss_mb']:.0f} MB (canvas2graph's in-memory "
                        "checkpointer keeps every session of the run; RAGFlow's worker keeps none)", "stated", None))
    return rows


def handwritten_rows(data: dict) -> list[Row]:
    runs = {f"{r['case']} {r['components']}": r["ratio"] for r in data.get("run", [])}
    containers = {r["case"].split(":")[0] + f" {r.get('passes', '')}".rstrip(): r["ratio"] for r in data.get("containers", [])}
    everything = {**runs, **containers}
    if not everything:
        return [Row("canvas2graph / hand-written LangGraph", "not measured (bench.run failed)", "<= 1.2", False)]
    worst = max(everything, key=everything.get)
    return [Row("canvas2graph / hand-written LangGraph, per turn, every case",
                f"max {everything[worst]:.2f} ({worst}); " + ", ".join(f"{c} {v:.2f}" for c, v in everything.items()),
                "<= 1.2", everything[worst] <= 1.2)]


def parallel_rows(data: dict) -> list[Row]:
    """`bench.parallel`: wall time per turn of the cases where a canvas waits for its models."""
    c2g, rf = data.get("c2g") or {}, data.get("ragflow") or {}
    if not c2g:
        return [Row("parallel Iteration and branches", "not measured (bench.parallel failed)", "", False)]

    def ragflow_text(case: str) -> str:
        return f"; RAGFlow {rf[case]['wall_s']:.2f} s" if "wall_s" in (rf.get(case) or {}) else ""

    def walls(case: str) -> tuple[float, str]:
        row = c2g[case]
        best = row["memory"]["wall_s"]
        return best, f"{best:.2f} s in memory, {row['sqlite']['wall_s']:.2f} s SQLite"

    c1, c1_text = walls("iteration50-c1")
    c10, c10_text = walls("iteration50-c10")
    b4, b4_text = walls("branches4")
    return [Row("50-item Iteration, model 200 ms, max_concurrency 1, wall per turn", c1_text + ragflow_text("iteration50-c1"),
                "stated (RAGFlow's Python engine runs items one at a time)", None),
            Row("50-item Iteration, model 200 ms, max_concurrency 10, wall per turn",
                c10_text + ragflow_text("iteration50-c1") + " (no max_concurrency)", "<= 1.5 s", c10 <= 1.5),
            Row("four parallel branches of 500 ms, wall per turn", b4_text + ragflow_text("branches4"), "<= 0.7 s", b4 <= 0.7)]


def _wall(cmd: list[str], runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def cli_rows(quick: bool) -> tuple[list[Row], dict]:
    runs = 3 if quick else 7
    exe = [sys.executable, "-m", "canvas2graph.cli"]
    help_s = _wall(exe + ["--help"], runs)
    compile_s = _wall(exe + ["compile", str(TEMPLATE)], runs)
    rows = [Row("`canvas2graph --help`, whole process (median wall)", f"{help_s:.2f} s", "< 0.5 s", help_s < 0.5),
            Row(f"`canvas2graph compile {TEMPLATE.name}`, whole process", f"{compile_s:.2f} s", "< 0.5 s", compile_s < 0.5)]
    figures: dict[str, Any] = {"help_s": help_s, "compile_s": compile_s}
    if ragflow.missing() is None:
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "cold.json"
            cold = _json_of([sys.executable, str(ragflow.PERF / "cold.py"), "--cases", "llm10", "--runs", str(runs),
                             "--json", str(out), "--project", str(REPO)], out,
                            env={**os.environ, "C2G_PY": sys.executable})
        figures["cold"] = cold
        ratio = _cold_ratio(cold)
        rows.append(Row("one `run` turn of the 10-LLM chain, whole process / RAGFlow's",
                        f"{ratio['wall']:.2f} wall, {ratio['cpu']:.2f} CPU" if ratio else "not measured",
                        "<= 1.0", bool(ratio) and ratio["wall"] <= 1.0))
    return rows, figures


def _cold_ratio(cold: dict) -> dict | None:
    """Median wall and CPU of canvas2graph's process over RAGFlow's, from cold.py's JSON."""
    try:
        c2g, rf = cold["llm10"]["c2g"], cold["llm10"]["ragflow"]
        med = lambda runs, key: statistics.median(r[key] for r in runs)  # noqa: E731
        return {"wall": med(c2g, "wall_s") / med(rf, "wall_s"), "cpu": med(c2g, "cpu_s") / med(rf, "cpu_s")}
    except (KeyError, TypeError, statistics.StatisticsError):
        return None


def server_rows(quick: bool) -> tuple[list[Row], dict]:
    conversations = 200 if quick else 1000
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "server.json"
        data = _json_of([sys.executable, "-m", "bench.server_load", "--conversations", str(conversations),
                         "--json", str(out)], out)
    if not data:
        return [Row(f"`serve`: {conversations} concurrent streams", "not measured (bench.server_load failed)", "", False)], {}
    delay = (data.get("token_delay_ms") or {}).get("p99", float("inf"))
    idle = data["idle_session_kb"]
    return [Row(f"`serve`: {conversations} concurrent streaming conversations, errors", str(data["errors"]), "0",
                data["errors"] == 0),
            Row(f"`serve`: {conversations} concurrent streams, p99 token delay", f"{delay:.1f} ms", "< 50 ms", delay < 50),
            Row("memory per idle stored session", f"server {idle['server_memory']:.0f} KB (allocator growth, nothing "
                f"is kept per session); SQLite {idle['database'] or 0:.0f} KB on disk", "stated", None)], data


def scale_rows(quick: bool) -> tuple[list[Row], dict]:
    options = ["--quick"] if quick else ["--workers", "2", "--conversations", "1000", "--seconds", "30", "--takeovers", "1"]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "scale.json"
        data = _json_of([sys.executable, "-m", "bench.scale", *options, "--json", str(out)], out)
    if not data:
        return [Row("production's layout (bench.scale)", "not measured (bench.scale failed)", "", False)], {}
    return [Row(f"API processes + workers on PostgreSQL: {name}", t["measured"], t["goal"], t["met"])
            for name, t in data["targets"].items()], data


def storage_rows(quick: bool) -> tuple[list[Row], dict]:
    from bench import storage
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "storage.json"
        data = _json_of([sys.executable, "-m", "bench.storage", *(["--quick"] if quick else []), "--json", str(out)], out)
    if not data:
        return [Row("session storage", "not measured (bench.storage failed)", "", False)], {}
    turns, items = storage.quick_sizes(data)
    return [Row(*row) for row in storage.rows(storage.from_json(data), turns, items, full=not quick)], data


def message_log_rows(quick: bool) -> tuple[list[Row], dict]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "log.json"
        data = _json_of([sys.executable, "-m", "bench.message_log", "--turns", "1000" if quick else "5000",
                         "--json", str(out)], out)
    if not data:
        return [Row("the message log", "not measured (bench.message_log failed)", "", False)], {}
    return [Row(f"logging a turn's messages at turn {data['last']:,}, against turn {data['first']}",
                f"{data['ratio']:.1f}x", f"<= {data['limit']:.0f}x", data["met"])], data


def memory_rows(quick: bool) -> tuple[list[Row], dict]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "memory.json"
        data = _json_of([sys.executable, "-m", "bench.memory", *(["--quick"] if quick else []), "--json", str(out)], out)
    if not data:
        return [Row("memories", "not measured (bench.memory failed)", "", False)], {}
    rows = []
    names = {"save": "a save at {hi:,} messages against one at {lo:,} (median)", "fifo_usage": "FIFO: a memory's usage",
             "fifo_order": "FIFO: what is forgotten", "read_back": "every message read back once"}
    for result in data["results"]:
        store = {"sqlite": "SQLite", "postgres": "PostgreSQL"}[result["store"]]
        marks = result["growth"]["marks"]
        lo, hi = min(marks, key=int), max(marks, key=int)
        for key, goal in result["goals"].items():
            rows.append(Row(f"memories on {store}: " + names[key].format(lo=int(lo), hi=int(hi)), goal["measured"],
                            goal["goal"], goal["met"]))
        first, last = marks[lo], marks[hi]
        rows.append(Row(f"memories on {store}: search p50 at {int(hi):,} / at {int(lo):,} messages (text ranking)",
                        f"{last['search_p50_ms']:.0f} / {first['search_p50_ms']:.1f} ms = "
                        f"{last['search_p50_ms'] / first['search_p50_ms']:.0f}x",
                        "stated (a search reads the whole memory)", None))
    return rows, data


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.targets", description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="few repetitions: a smoke run, noisy figures")
    ap.add_argument("--skip", default="", help=f"comma-separated parts to leave out: {', '.join(PARTS)}")
    ap.add_argument("--json", metavar="PATH", help="also write every figure to PATH")
    args = ap.parse_args(argv)
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    rows: list[Row] = []
    figures: dict[str, Any] = {}
    started = time.perf_counter()
    if "ragflow" not in skip:
        reason = ragflow.missing()
        if reason:
            rows.append(Row("against RAGFlow's engine", f"not measured: {reason}", "", None))
        else:
            result = ragflow.measure(ragflow.CASES, quick=args.quick)
            print("\n".join(ragflow.summary(result["driver"], result["postgres"], result["floor"])), flush=True)
            rows += ragflow_rows(result)
            figures["ragflow"] = result
    if "parallel" not in skip:
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "parallel.json"
            data = _json_of([sys.executable, "-m", "bench.parallel", "--reps", "2" if args.quick else "5",
                             "--json", str(out)], out)
        rows += parallel_rows(data)
        figures["parallel"] = data
    if "handwritten" not in skip:
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "run.json"
            data = _json_of([sys.executable, "-m", "bench.run", "--json", str(out)] + (["--quick"] if args.quick else []), out)
        rows += handwritten_rows(data)
        figures["handwritten"] = data
    if "cli" not in skip:
        cli, figures["cli"] = cli_rows(args.quick)
        rows += cli
    if "server" not in skip:
        server, figures["server"] = server_rows(args.quick)
        rows += server
    if "scale" not in skip:
        scale_part, figures["scale"] = scale_rows(args.quick)
        rows += scale_part
    if "log" not in skip:
        log_part, figures["log"] = message_log_rows(args.quick)
        rows += log_part
    if "storage" not in skip:
        storage_part, figures["storage"] = storage_rows(args.quick)
        rows += storage_part
    if "memory" not in skip:
        memory_part, figures["memory"] = memory_rows(args.quick)
        rows += memory_part
    print(f"\n## Targets ({'quick run, noisy; ' if args.quick else ''}{time.perf_counter() - started:.0f} s)\n")
    print("| target | measured | goal | |\n|---|---|---|---|")
    print("\n".join(r.cells() for r in rows))
    if args.json:
        figures["targets"] = [vars(r) for r in rows]
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Run an agent over a dataset, score every row, and report (`canvas2graph eval`, the server's evaluations).

Each row is one new session (a first turn: the row's query and Begin inputs) on a LangGraph
`InMemorySaver`, run by the same `Runner` as `canvas2graph run`, at most `concurrency` rows at a time.
With a script, the rows share it: replies are taken in the order rows call models (in row order at
concurrency 1, which makes a scripted evaluation reproducible). A report:

    {"format": "canvas2graph-eval", "version": 1, "dsl": ..., "metric": ..., "judge": ...,
     "summary": {"rows", "scored", "score", "passed", "failed_runs", "tokens": {prompt, completion, total},
                 "judge_tokens": {...}, "cost": USD or None, "latency_ms": {p50, p90, p95, p99, max}},
     "rows": [{"row", "query", "inputs", "expected", "answer", "score", "reason", "status", "error",
               "path", "tokens", "cost", "latency_ms"}]}

Cost is counted where the models config prices the model (`[prices."model@Factory"]` with `input` and
`output` in USD per million tokens); an unpriced model makes the cost None rather than a wrong total.

A run that resumes (the server's evaluations, taken over by another worker) passes the rows it has already
scored (`scored`): they are not run again, and the report holds them as they were; `on_row` is awaited with each
row's result as soon as it is scored, which is where the server keeps it.
"""
from __future__ import annotations

import asyncio
import math
import time
import tomllib
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Awaitable, Callable, Mapping

from canvas2graph.server.backend.agent_tests.datasets import Row
from canvas2graph.server.backend.agent_tests.metrics import MetricError, ajudge, score
from canvas2graph.server.backend.agent_tests.observe import observe_session

__all__ = ["EvalSetup", "evaluate", "compare_reports", "read_prices", "percentiles", "PriceError"]

REPORT_FORMAT = "canvas2graph-eval"


class PriceError(ValueError):
    """A `[prices]` table that cannot be read: names the model and the field."""


@dataclass
class EvalSetup:
    metric: str = "contains"
    judge: str | None = None                # the judge's llm_id (metric "judge")
    concurrency: int = 1
    prices: dict[str, dict] = field(default_factory=dict)
    label: str = ""                         # what the report calls the DSL (its file, a version)


def read_prices(models_config: str | None) -> dict[str, dict]:
    """`[prices."model@Factory"]` tables of the models config: {llm_id: {"input": usd, "output": usd}} per
    million tokens."""
    if not models_config:
        return {}
    try:
        data = tomllib.loads(Path(models_config).read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        return {}                           # the model factory reports the file's problem itself
    prices = data.get("prices") or {}
    if not isinstance(prices, dict):
        raise PriceError(f"{models_config}: `prices` must be a table of [prices.\"model@Factory\"]")
    for llm_id, price in prices.items():
        if not isinstance(price, dict) or any(not isinstance(price.get(k, 0), (int, float)) for k in ("input", "output")):
            raise PriceError(f"{models_config}: [prices.{llm_id!r}]: `input` and `output` are USD per million tokens")
    return prices


def _cost(prices: dict, llm_id: str | None, usage: dict) -> float | None:
    price = prices.get(llm_id or "")
    if price is None:
        return None
    prompt = usage.get("prompt_tokens", usage.get("input_tokens", 0)) or 0
    completion = usage.get("completion_tokens", usage.get("output_tokens", 0)) or 0
    return (prompt * price.get("input", 0) + completion * price.get("output", 0)) / 1_000_000


def percentiles(values: list[float]) -> dict[str, float]:
    """Nearest-rank percentiles (p50, p90, p95, p99) and the maximum; {} for no values."""
    if not values:
        return {}
    ordered = sorted(values)

    def pick(p: int) -> float:
        return ordered[max(math.ceil(p / 100 * len(ordered)) - 1, 0)]
    return {"p50": pick(50), "p90": pick(90), "p95": pick(95), "p99": pick(99), "max": ordered[-1]}


def _row_cost(compiled, observed: dict, prices: dict) -> float | None:
    """The row's cost: every model call priced, else None (an unpriced model would make a wrong total)."""
    total = 0.0
    for cid, seen in observed.get("components", {}).items():
        usage = seen.get("usage")
        if not usage:
            continue
        node = compiled.plan.nodes.get(cid)
        cost = _cost(prices, getattr(getattr(node, "params", None), "llm_id", None), usage)
        if cost is None:
            return None
        total += cost
    return total


RowSink = Callable[[dict], Awaitable[None]]


class _Evaluation:
    def __init__(self, compiled, setup: EvalSetup, factory, script, services: dict, progress: Callable | None,
                 on_row: RowSink | None = None):
        from langgraph.checkpoint.memory import InMemorySaver
        self.compiled, self.setup, self.factory, self.script, self.services = compiled, setup, factory, script, services
        self.saver = InMemorySaver()
        self.progress = progress
        self.on_row = on_row
        self.done = 0
        self.judge = factory.chat_model(setup.judge, component_id="judge") if setup.metric == "judge" else None

    async def run_row(self, row: Row, limit: asyncio.Semaphore, total: int) -> dict:
        async with limit:
            result = await self._run(row)
            if self.on_row is not None:     # kept before the next row starts: a takeover never scores it again
                await self.on_row(result)
        self.done += 1
        if self.progress is not None:
            self.progress(self.done, total, result)
        return result

    async def _run(self, row: Row) -> dict:
        from canvas2graph.runtime.run.runner import Runner, TurnFailed, TurnRejected, TurnRequest
        runner = Runner(self.compiled, self.saver, self.factory, self.script, services=self.services,
                        name=self.setup.label)
        session = f"eval-{uuid.uuid4()}"
        error = None
        started = time.perf_counter()
        try:
            async for _event in runner.run_turn(session, TurnRequest(query=row.query, inputs=row.inputs or None)):
                pass
        except TurnFailed:
            pass
        except TurnRejected as e:
            error = str(e)
        latency = (time.perf_counter() - started) * 1000
        turns = await observe_session(runner.graph, session)
        observed = turns[-1] if turns else {"status": "failed", "answer": "", "path": [], "components": {}}
        usage = dict(runner.outcome.extra.get("usage") or {})
        out = {"row": row.index, "query": row.query, "inputs": row.inputs, "expected": row.expected,
               "answer": observed["answer"], "score": None, "status": observed["status"],
               "error": error or observed.get("error") or runner.outcome.error, "path": observed["path"],
               "tokens": {k: usage.get(k, 0) for k in ("prompt_tokens", "completion_tokens", "total_tokens")},
               "cost": _row_cost(self.compiled, observed, self.setup.prices), "latency_ms": round(latency, 3)}
        await self._score(row, out)
        return out

    async def _score(self, row: Row, out: dict) -> None:
        try:
            if self.judge is None:
                out["score"] = score(self.setup.metric, out["answer"], row.expected)
                return
            value, reason, usage = await ajudge(self.judge, row.query, row.expected, out["answer"])
            out["score"], out["reason"] = value, reason
            out["judge_tokens"] = {"prompt_tokens": usage.get("input_tokens", 0),
                                   "completion_tokens": usage.get("output_tokens", 0),
                                   "total_tokens": usage.get("total_tokens", 0)}
            judge_cost = _cost(self.setup.prices, self.setup.judge, out["judge_tokens"])
            out["judge_cost"] = judge_cost
        except MetricError as e:
            out["score"], out["reason"] = 0.0, f"not scored: {e}"
        except Exception as e:          # the judge's provider failed: the row says so, the others go on
            out["score"], out["reason"] = None, f"the judge failed: {type(e).__name__}: {e}"


def _summary(rows: list[dict]) -> dict:
    scored = [r["score"] for r in rows if r["score"] is not None]
    tokens = {k: sum(r["tokens"][k] for r in rows) for k in ("prompt_tokens", "completion_tokens", "total_tokens")}
    costs = [r["cost"] for r in rows] + [r["judge_cost"] for r in rows if "judge_cost" in r]
    summary = {"rows": len(rows), "scored": len(scored),
               "score": round(sum(scored) / len(scored), 4) if scored else None,
               "passed": sum(1 for s in scored if s >= 1), "failed_runs": sum(1 for r in rows if r["status"] != "finished"),
               "tokens": tokens, "cost": None if any(c is None for c in costs) else round(sum(costs), 6),
               "latency_ms": percentiles([r["latency_ms"] for r in rows])}
    if any("judge_tokens" in r for r in rows):
        summary["judge_tokens"] = {k: sum(r.get("judge_tokens", {}).get(k, 0) for r in rows)
                                   for k in ("prompt_tokens", "completion_tokens", "total_tokens")}
    return summary


async def evaluate(compiled, rows: list[Row], setup: EvalSetup, *, factory, script=None, services: dict | None = None,
                   progress: Callable[[int, int, dict], None] | None = None,
                   scored: Mapping[int, dict] | None = None, on_row: RowSink | None = None) -> dict:
    """The report of `compiled` run over `rows` (see the module's docstring). `scored`: the results of rows
    already scored, by row index (not run again); `on_row`: awaited with each new row's result."""
    scored = dict(scored or {})
    run = _Evaluation(compiled, setup, factory, script, dict(services or {}), progress, on_row)
    run.done = sum(1 for row in rows if row.index in scored)
    limit = asyncio.Semaphore(max(setup.concurrency, 1))
    results = [scored[row.index] for row in rows if row.index in scored]
    results += await asyncio.gather(*(run.run_row(row, limit, len(rows)) for row in rows if row.index not in scored))
    results.sort(key=lambda r: r["row"])
    return {"format": REPORT_FORMAT, "version": 1, "dsl": setup.label, "metric": setup.metric, "judge": setup.judge,
            "summary": _summary(results), "rows": results}


def compare_reports(a: dict, b: dict) -> dict:
    """Two reports over the same rows, side by side: the rows whose answer or score changed, better or worse."""
    b_rows = {r["row"]: r for r in b["rows"]}
    changed = []
    for left in a["rows"]:
        right = b_rows.get(left["row"])
        if right is None or (left["answer"] == right["answer"] and left["score"] == right["score"]):
            continue
        ls, rs = left["score"], right["score"]
        change = "same score" if ls == rs else "better" if (rs or 0) > (ls or 0) else "worse"
        changed.append({"row": left["row"], "query": left["query"], "expected": left["expected"], "change": change,
                        "a": {k: left[k] for k in ("answer", "score", "status", "path")},
                        "b": {k: right[k] for k in ("answer", "score", "status", "path")}})
    return {"format": "canvas2graph-eval-comparison", "version": 1,
            "a": {"dsl": a["dsl"], "summary": a["summary"]}, "b": {"dsl": b["dsl"], "summary": b["summary"]},
            "summary": {"rows": len(a["rows"]), "changed": len(changed),
                        "better": sum(c["change"] == "better" for c in changed),
                        "worse": sum(c["change"] == "worse" for c in changed)},
            "changed": changed, "reports": {"a": a, "b": b}}

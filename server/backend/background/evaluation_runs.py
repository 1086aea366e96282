"""Evaluations as background jobs (`c2g.job("evaluation", evaluation_id)`): any API process queues and lists them,
any worker runs them, another one takes over an evaluation whose worker died and scores only the rows not scored yet.

The evaluation's row (agent_tests/eval_store.py) keeps its `request`: the DSL of each version it runs (as it was when
it was asked for: saving the agent meanwhile changes nothing), the dataset's rows and the options. Each row's result is
kept as soon as it is scored; a worker that takes the evaluation over reads them back and runs the others. With
`--llm-script`, a worker's script starts from its first replies (a takeover does not know how many replies the rows
scored before it took), so a scripted evaluation taken over is reproducible only when its replies do not depend on
their order (`by_message`, `auto_reply`, one reply repeated).
"""
from __future__ import annotations

import asyncio
import functools
import json
from typing import Any, Callable

from canvas2graph.compiler.canvas import compile_dsl
from canvas2graph.server.backend.agent_tests.datasets import Row
from canvas2graph.server.backend.agent_tests.eval_store import Evaluation, EvaluationStore
from canvas2graph.server.backend.agent_tests.evaluate import EvalSetup, compare_reports, evaluate
from canvas2graph.server.backend.background.runs import RunRow
from canvas2graph.server.backend.jobs.engine import JobEngine

__all__ = ["EVALUATION", "EvaluationRuns"]

EVALUATION = "evaluation"
ModelSource = Callable[[], tuple[Any, Any]]     # () -> (ModelFactory, Script | None), one call per version run


class EvaluationRuns:
    """The `evaluation` kind: queue one (`queue`), cancel one (`cancel`), and what a worker does with it."""

    kind = EVALUATION

    def __init__(self, store: EvaluationStore, engine: JobEngine, models: ModelSource,
                 services: dict[str, Any] | Callable[[Any], dict[str, Any]] | None):
        self.store, self.table, self.engine = store, store.runs, engine
        self.models, self.services = models, services if callable(services) else dict(services or {})

    # --- from an API process ----------------------------------------------------------------------
    async def queue(self, tenant: str, agent_id: str, *, dataset: str, plans: list[tuple[Any, str]], rows: list[Row],
                    options: dict[str, Any], version_id: str | None, compare_version_id: str | None) -> Evaluation:
        """Record an evaluation of `plans` (each a DSL and its label) over `rows`, and queue its job."""
        request = {"plans": [{"dsl": dsl, "label": label} for dsl, label in plans], "options": options,
                   "rows": [{"index": r.index, "query": r.query, "inputs": r.inputs, "expected": r.expected} for r in rows]}
        evaluation = await self.store.create(tenant, agent_id, dataset=dataset, metric=options["metric"],
                                             judge=options.get("judge"), version_id=version_id,
                                             compare_version_id=compare_version_id, request=request,
                                             total=len(rows) * len(plans))
        await self.table.set_job(evaluation.id, await self.defer(evaluation.id))
        return evaluation

    async def cancel(self, evaluation_id: str, tenant: str) -> str | None:
        """"cancelled", "cancelling" (its worker stops it within a second) or None (it is not running)."""
        state = await self.table.request_cancel(evaluation_id, tenant)
        if state == "cancelled":
            await self.store.forget_work(evaluation_id)
        return state

    # --- the kind, for the handler and the sweep --------------------------------------------------
    async def defer(self, run_id: str) -> int:
        return await self.engine.defer_job(EVALUATION, run_id)

    async def work(self, run: RunRow) -> dict[str, Any]:
        request = run.request or {}
        options = request["options"]
        rows = [Row(index=r["index"], query=r["query"], inputs=r.get("inputs") or {}, expected=r.get("expected"))
                for r in request["rows"]]
        scored = await self.store.scored_rows(run.id)
        reports = []
        for plan, found in enumerate(request["plans"]):
            dsl = found["dsl"]
            compiled = await asyncio.to_thread(compile_dsl, json.loads(dsl) if isinstance(dsl, str) else dsl)
            factory, script = self.models()         # a fresh copy of the script for each version
            services = self.services(compiled) if callable(self.services) else self.services
            setup = EvalSetup(metric=options["metric"], judge=options.get("judge"),
                              concurrency=int(options.get("concurrency") or 1), label=found["label"])
            reports.append(await evaluate(compiled, rows, setup, factory=factory, script=script, services=services,
                                          scored=scored.get(plan),
                                          on_row=functools.partial(self.store.add_row, run.id, plan)))
        report = reports[0] if len(reports) == 1 else compare_reports(*reports)
        return {"summary": json.dumps(report["summary"], ensure_ascii=False),
                "report": json.dumps(report, ensure_ascii=False, default=str)}

    async def ended(self, run: RunRow, status: str, error: str | None) -> None:
        await self.store.forget_work(run.id)

    async def tidy(self) -> None:
        pass

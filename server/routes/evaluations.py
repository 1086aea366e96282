"""Evaluations of an agent over an uploaded dataset, kept per tenant (server/backend/agent_tests/evaluate.py).

- `POST /agents/{id}/evaluations` (multipart): `file` (a .csv or .jsonl dataset), and the fields `metric`
  (exact, contains, regex, json, judge), `judge` (the judge's model@Factory), `version_id` (a stored
  version; default the agent's current DSL), `compare_version_id` (run this version on the same rows too),
  `query_column`, `expected_column`, `concurrency`. The run goes on in the background, as a job any worker runs
  (server/backend/background/evaluation_runs.py: it survives the process that asked for it and the worker that ran
  it); the reply is the evaluation, `running`.
- `GET /agents/{id}/evaluations`: the agent's evaluations, newest first, with their summaries.
- `GET /agents/{id}/evaluations/{eid}`: one, with its report (rows and scores, or a comparison); while it
  runs, its `progress` ({done, total} rows).
- `POST /agents/{id}/evaluations/{eid}/cancel`: stop a running one (from any process); it ends `cancelled`.
- `GET /agents/{id}/evaluations/{eid}/compare/{other}`: two finished evaluations (of two versions, say)
  row by row: the rows whose answer or score changed.
Runs use the server's models (its `--models`, or its `--llm-script`: one script for the whole run).
"""
from __future__ import annotations

import asyncio
import json
from typing import Any

from fastapi import APIRouter, Depends, Request

from canvas2graph.types import CompileError
from canvas2graph.compiler.canvas import compile_dsl
from canvas2graph.server.backend.agent_tests.datasets import DatasetError, parse_dataset
from canvas2graph.server.backend.agent_tests.eval_store import EvaluationStore
from canvas2graph.server.backend.agent_tests.evaluate import compare_reports
from canvas2graph.server.backend.agent_tests.metrics import METRICS
from canvas2graph.server.auth import tenant
from canvas2graph.server.errors import argument_error, not_found, ok
from canvas2graph.server.deps import owned_agent, store
from canvas2graph.server.routes.traces import http_status
from canvas2graph.server.turns import diagnostics_error

router = APIRouter(prefix="/api/v1", tags=["evaluations"], dependencies=[Depends(http_status)])

MAX_CONCURRENCY = 8
DATASET_FIELDS = ("file", "dataset")


def evaluations(request: Request) -> EvaluationStore:
    return request.app.state.background.evaluations.store


async def _dsl_of(request: Request, tenant_id: str, agent, version_id: str | None) -> tuple[Any, str]:
    """(the DSL, its label): a stored version's, or the agent's current one."""
    if not version_id:
        return agent.dsl, "current"
    version = await store(request).get_version(tenant_id, agent.id, version_id)
    if version is None:
        raise not_found(f"version {version_id} of agent {agent.id}")
    return version.dsl, f"version {version.title or version.id}"


async def _compiled(dsl: Any, label: str):
    try:
        return await asyncio.to_thread(compile_dsl, dsl if not isinstance(dsl, str) else json.loads(dsl))
    except CompileError as e:
        raise diagnostics_error([d.to_dict() for d in e.diagnostics], f"the {label} DSL")


def _field(form, name: str, default: str | None = None) -> str | None:
    value = form.get(name)
    return value.strip() if isinstance(value, str) and value.strip() else default


async def _read_form(request: Request) -> tuple[dict, bytes, str]:
    try:
        form = await request.form(max_files=1, max_fields=50)
    except Exception as e:          # not multipart, or more files than one
        raise argument_error(f"send the dataset as multipart/form-data with a `file` part ({e})")
    upload = next((form.get(name) for name in DATASET_FIELDS if hasattr(form.get(name), "read")), None)
    if upload is None:
        raise argument_error("`file`: the dataset (a .csv or .jsonl file) is missing")
    data = await upload.read()
    return form, data, upload.filename or "dataset"


def _options(form) -> dict:
    metric = _field(form, "metric", "contains")
    if metric not in METRICS:
        raise argument_error(f"`metric` must be one of {', '.join(METRICS)}")
    judge = _field(form, "judge")
    if metric == "judge" and not judge:
        raise argument_error("`judge`: the judge metric needs the judge's model (model@Factory)")
    try:
        concurrency = int(_field(form, "concurrency", "1"))
    except ValueError:
        raise argument_error("`concurrency` must be a whole number")
    if not 1 <= concurrency <= MAX_CONCURRENCY:
        raise argument_error(f"`concurrency` must be from 1 to {MAX_CONCURRENCY}")
    return {"metric": metric, "judge": judge, "concurrency": concurrency,
            "query_column": _field(form, "query_column", "query"), "expected_column": _field(form, "expected_column", "expected")}


@router.post("/agents/{agent_id}/evaluations", summary="Evaluate the agent over an uploaded dataset (in the background)")
async def create_evaluation(request: Request, agent_id: str, tenant_id: str = Depends(tenant)):
    agent = await owned_agent(request, tenant_id, agent_id)
    form, data, name = await _read_form(request)
    options = _options(form)
    version_id, compare_id = _field(form, "version_id"), _field(form, "compare_version_id")
    plans, sources = [], []
    for vid in [version_id] + ([compare_id] if compare_id else []):
        dsl, label = await _dsl_of(request, tenant_id, agent, vid)
        plans.append((await _compiled(dsl, label), label))
        sources.append((dsl, label))        # what the job runs: the DSL as it is now
    begin = plans[0][0].plan.nodes.get("begin")
    inputs = getattr(getattr(begin, "params", None), "inputs", None)
    try:
        rows = parse_dataset(data, name, query_column=options["query_column"],
                             expected_column=options["expected_column"],
                             input_names=list(inputs) if isinstance(inputs, dict) else [])
    except DatasetError as e:
        raise argument_error(f"`file`: {e}")
    evaluation = await request.app.state.background.evaluations.queue(
        tenant_id, agent_id, dataset=name, plans=sources, rows=rows, options=options, version_id=version_id,
        compare_version_id=compare_id)
    return ok({**evaluation.view(), "rows": len(rows)})


@router.get("/agents/{agent_id}/evaluations", summary="The agent's evaluations, newest first, with their summaries")
async def list_evaluations(request: Request, agent_id: str, tenant_id: str = Depends(tenant)):
    await owned_agent(request, tenant_id, agent_id)
    return ok([e.view() for e in await evaluations(request).list(tenant_id, agent_id)])


async def _evaluation(request: Request, tenant_id: str, agent_id: str, evaluation_id: str):
    await owned_agent(request, tenant_id, agent_id)
    found = await evaluations(request).get(tenant_id, agent_id, evaluation_id)
    if found is None:
        raise not_found(f"evaluation {evaluation_id} of agent {agent_id}")
    return found


@router.get("/agents/{agent_id}/evaluations/{evaluation_id}", summary="One evaluation with its report")
async def get_evaluation(request: Request, agent_id: str, evaluation_id: str, tenant_id: str = Depends(tenant)):
    return ok((await _evaluation(request, tenant_id, agent_id, evaluation_id)).view())


@router.post("/agents/{agent_id}/evaluations/{evaluation_id}/cancel",
             summary="Stop a running evaluation, wherever it runs; it ends `cancelled`")
async def cancel_evaluation(request: Request, agent_id: str, evaluation_id: str, tenant_id: str = Depends(tenant)):
    found = await _evaluation(request, tenant_id, agent_id, evaluation_id)
    if await request.app.state.background.evaluations.cancel(found.id, tenant_id) is None:
        raise argument_error(f"evaluation {found.id} is {found.status}: only a running evaluation can be cancelled")
    return ok(True)


@router.get("/agents/{agent_id}/evaluations/{evaluation_id}/compare/{other_id}",
            summary="Two finished evaluations row by row: the rows whose answer or score changed")
async def compare_evaluations(request: Request, agent_id: str, evaluation_id: str, other_id: str,
                              tenant_id: str = Depends(tenant)):
    a = await _evaluation(request, tenant_id, agent_id, evaluation_id)
    b = await _evaluation(request, tenant_id, agent_id, other_id)
    for e in (a, b):
        if e.status != "finished" or not e.report or e.report.get("format") != "canvas2graph-eval":
            raise argument_error(f"evaluation {e.id} is {e.status}: compare two finished evaluations of one version each")
    comparison = compare_reports(a.report, b.report)
    comparison.pop("reports")
    return ok(comparison)

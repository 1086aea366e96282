"""LangGraph Server's crons under `/langgraph/runs/crons`: langgraph-sdk's `crons.create`, `create_for_thread`,
`search`, `count`, `update` and `delete`, kept as the server's schedules (`c2g_schedules`, kind "langgraph") and
fired by its workers once per time (server/backend/schedules.py). A cron without a thread runs each time on a
new thread, deleted once the run ends unless `on_run_completed` is "keep"; a thread's cron runs the thread's
next turn."""
from __future__ import annotations

import time
import uuid
from datetime import datetime
from typing import Any

from fastapi import APIRouter, Body, FastAPI, Request
from fastapi.responses import Response

from canvas2graph.server.backend.schedules import ScheduleError, check_cron, next_fire
from canvas2graph.server.backend.store import Schedule
from canvas2graph.server.protocols.langgraph_api import PREFIX, LangGraphRoute, find_assistant, own_thread, request_tenant
from canvas2graph.server.protocols.langgraph_runs import LangGraphError, input_fields
from canvas2graph.server.protocols.langgraph_views import iso

router = APIRouter(prefix=PREFIX, tags=["langgraph"], route_class=LangGraphRoute)
SORTABLE = {"created_at", "updated_at", "next_run_date", "cron_id", "schedule"}


def cron_view(schedule: Schedule) -> dict[str, Any]:
    return {"cron_id": schedule.id, "assistant_id": schedule.agent_id, "thread_id": schedule.thread_id,
            "on_run_completed": schedule.on_run_completed, "end_time": iso(schedule.end_time),
            "schedule": schedule.schedule, "timezone": schedule.timezone, "created_at": iso(schedule.created_at),
            "updated_at": iso(schedule.updated_at), "payload": schedule.payload.get("body") or {},
            "user_id": None, "next_run_date": iso(schedule.next_run_at), "metadata": schedule.metadata,
            "enabled": schedule.enabled}


def _end_time(value: Any) -> float | None:
    if value is None:
        return None
    try:
        return datetime.fromisoformat(str(value)).timestamp()
    except ValueError:
        raise LangGraphError(422, "`end_time` must be an ISO 8601 date and time") from None


def _cron_fields(body: dict, current: Schedule | None = None) -> dict[str, Any]:
    """The schedule's fields from a cron body (422 naming the field when one is wrong)."""
    try:
        schedule, tz = check_cron(body.get("schedule", current.schedule if current else None),
                                  body.get("timezone", current.timezone if current else None))
    except ScheduleError as e:
        raise LangGraphError(422, str(e))
    enabled = body.get("enabled", current.enabled if current else True)
    if not isinstance(enabled, bool):
        raise LangGraphError(422, "`enabled` must be true or false")
    end = _end_time(body["end_time"]) if "end_time" in body else (current.end_time if current else None)
    metadata = body.get("metadata", current.metadata if current else {}) or {}
    if not isinstance(metadata, dict):
        raise LangGraphError(422, "`metadata` must be an object")
    payload = dict(current.payload) if current else {}
    if current is None or "input" in body or "multitask_strategy" in body:
        run_body = {k: v for k, v in body.items() if k in ("assistant_id", "input", "multitask_strategy", "metadata",
                                                           "stream_mode", "config", "context")}
        value = body.get("input")
        request = input_fields(value) if value is not None else {}
        payload = {"body": {**payload.get("body", {}), **run_body}, "request": request,
                   "multitask_strategy": body.get("multitask_strategy") or payload.get("multitask_strategy")}
    on_completed = body.get("on_run_completed", current.on_run_completed if current else None)
    if on_completed not in (None, "delete", "keep"):
        raise LangGraphError(422, "`on_run_completed` must be delete or keep")
    nxt = next_fire(schedule, tz, time.time()) if enabled else None
    if end is not None and nxt is not None and nxt > end:
        nxt, enabled = None, False
    return {"schedule": schedule, "timezone": tz, "enabled": enabled, "end_time": end, "metadata": metadata,
            "payload": payload, "on_run_completed": on_completed, "next_run_at": nxt}


async def _create(request: Request, body: Any, thread_id: str | None) -> dict:
    tenant = await request_tenant(request)
    if not isinstance(body, dict) or not body.get("assistant_id"):
        raise LangGraphError(422, "the body must be an object with `assistant_id` and `schedule`")
    agent = await find_assistant(request, tenant, str(body["assistant_id"]))
    if thread_id is not None:
        await own_thread(request, thread_id)
    fields = _cron_fields(body)
    if thread_id is None:
        fields["on_run_completed"] = fields["on_run_completed"] or "delete"
    else:
        fields["on_run_completed"] = None
    schedule = Schedule(id=str(uuid.uuid4()), tenant=tenant, kind="langgraph", agent_id=agent.id,
                        thread_id=thread_id, **fields)
    return cron_view(await request.app.state.store.add_schedule(schedule))


@router.post("/runs/crons")
async def create_cron(request: Request, body: Any = Body(...)):
    return await _create(request, body, None)


@router.post("/threads/{thread_id}/runs/crons")
async def create_thread_cron(request: Request, thread_id: str, body: Any = Body(...)):
    return await _create(request, body, thread_id)


async def _own_cron(request: Request, cron_id: str) -> tuple[str, Schedule]:
    tenant = await request_tenant(request)
    schedule = await request.app.state.store.get_schedule(tenant, cron_id)
    if schedule is None or schedule.kind != "langgraph":
        raise LangGraphError(404, f"cron {cron_id} not found")
    return tenant, schedule


@router.get("/runs/crons/{cron_id}")
async def get_cron(request: Request, cron_id: str):
    return cron_view((await _own_cron(request, cron_id))[1])


@router.patch("/runs/crons/{cron_id}")
async def update_cron(request: Request, cron_id: str, body: Any = Body(...)):
    tenant, current = await _own_cron(request, cron_id)
    if not isinstance(body, dict):
        raise LangGraphError(422, "the body must be an object")
    fields = _cron_fields(body, current)
    if current.thread_id is not None:
        fields["on_run_completed"] = None
    return cron_view(await request.app.state.store.update_schedule(tenant, cron_id, **fields))


@router.delete("/runs/crons/{cron_id}", status_code=204)
async def delete_cron(request: Request, cron_id: str):
    tenant, _schedule = await _own_cron(request, cron_id)
    await request.app.state.store.delete_schedule(tenant, cron_id)
    return Response(status_code=204)


async def _search(request: Request, body: dict) -> list[Schedule]:
    tenant = await request_tenant(request)
    if not isinstance(body, dict):
        raise LangGraphError(422, "the body must be an object")
    found = await request.app.state.store.list_schedules(
        tenant, kind="langgraph", agent_id=body.get("assistant_id") or None, thread_id=body.get("thread_id") or None,
        enabled=body.get("enabled"))
    wanted = body.get("metadata") or {}
    return [s for s in found if all(s.metadata.get(k) == v for k, v in wanted.items())]


@router.post("/runs/crons/search")
async def search_crons(request: Request, body: Any = Body(default_factory=dict)):
    found = await _search(request, body)
    key = body.get("sort_by") or "created_at"
    if key not in SORTABLE:
        raise LangGraphError(422, f"`sort_by` must be one of {', '.join(sorted(SORTABLE))}")
    views = sorted((cron_view(s) for s in found), key=lambda v: (v[key] is None, str(v[key] or "")),
                   reverse=body.get("sort_order") == "desc")
    offset, limit = body.get("offset") or 0, body.get("limit", 10)
    if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in (offset, limit)):
        raise LangGraphError(422, "`offset` and `limit` must be whole numbers >= 0")
    return views[offset:offset + limit]


@router.post("/runs/crons/count")
async def count_crons(request: Request, body: Any = Body(default_factory=dict)):
    return len(await _search(request, body))


def install(app: FastAPI) -> None:
    app.include_router(router)

"""An agent's schedules (`/agents/{id}/schedules`): the agent runs on a cron expression with the inputs given,
each firing in a session of its own, run by the workers once however many processes there are
(server/backend/schedules.py). RAGFlow has no schedules (infiniflow/ragflow #7920): the routes are ours,
in RAGFlow's envelope, and docs/compatibility.md lists them."""
from __future__ import annotations

import time
from typing import Any

from fastapi import APIRouter, Body, Depends, Request

from canvas2graph.server.auth import tenant
from canvas2graph.server.backend.schedules import ScheduleError, check_cron, next_fire
from canvas2graph.server.backend.store import Schedule
from canvas2graph.server.deps import owned_agent, store
from canvas2graph.server.errors import argument_error, not_found, ok

router = APIRouter(prefix="/api/v1", tags=["schedules"])
MAX_SCHEDULES = 100                  # per agent


def schedule_view(schedule: Schedule) -> dict[str, Any]:
    request = schedule.payload.get("request") or {}
    ms = lambda t: int(t * 1000) if t else None     # noqa: E731 - RAGFlow's times are milliseconds
    return {"id": schedule.id, "agent_id": schedule.agent_id, "cron": schedule.schedule, "timezone": schedule.timezone,
            "query": request.get("query") or "", "inputs": request.get("inputs") or {}, "enabled": schedule.enabled,
            "end_time": ms(schedule.end_time), "next_run_time": ms(schedule.next_run_at),
            "last_run_time": ms(schedule.last_run_at), "last_session_id": schedule.last_session_id,
            "last_error": schedule.last_error, "runs": schedule.runs, "create_time": ms(schedule.created_at),
            "update_time": ms(schedule.updated_at)}


def _fields(body: dict, current: Schedule | None = None) -> dict[str, Any]:
    """The schedule's fields from a body, checked; each problem names its field."""
    if not isinstance(body, dict):
        raise argument_error("the body must be an object: {cron, timezone, query, inputs, enabled, end_time}")
    unknown = set(body) - {"cron", "schedule", "timezone", "query", "inputs", "enabled", "end_time", "user_id"}
    if unknown:
        raise argument_error(f"unknown fields: {', '.join(sorted(unknown))}")
    request = dict((current.payload.get("request") if current else None) or {})
    try:
        cron = body.get("cron", body.get("schedule", current.schedule if current else None))
        tz = body.get("timezone", current.timezone if current else None)
        cron, tz = check_cron(cron, tz)
    except ScheduleError as e:          # this API calls the expression `cron`
        raise argument_error(str(e).replace("schedule:", "cron:", 1))
    if "query" in body:
        if not isinstance(body["query"], str):
            raise argument_error("query: must be a string (the message each run is asked)")
        request["query"] = body["query"]
    if "inputs" in body:
        if not isinstance(body["inputs"], dict):
            raise argument_error("inputs: must be an object of Begin's fields: {field: value} or {field: {type, value}}")
        request["inputs"] = body["inputs"]
    if "user_id" in body:
        request["user_id"] = str(body["user_id"])
    enabled = body.get("enabled", current.enabled if current else True)
    if not isinstance(enabled, bool):
        raise argument_error("enabled: must be true or false")
    end_time = body.get("end_time", (current.end_time * 1000 if current and current.end_time else None))
    if end_time is not None and (isinstance(end_time, bool) or not isinstance(end_time, (int, float))):
        raise argument_error("end_time: must be a time in milliseconds since 1970, or null")
    end = end_time / 1000 if end_time is not None else None
    nxt = next_fire(cron, tz, time.time()) if enabled else None
    if end is not None and nxt is not None and nxt > end:
        nxt, enabled = None, False
    return {"schedule": cron, "timezone": tz, "payload": {"request": request}, "enabled": enabled, "end_time": end,
            "next_run_at": nxt}


@router.post("/agents/{agent_id}/schedules", summary="Run the agent on a cron expression, with these inputs")
async def create_schedule(request: Request, agent_id: str, body: Any = Body(...), tenant_id: str = Depends(tenant)):
    await owned_agent(request, tenant_id, agent_id)
    if len(await store(request).list_schedules(tenant_id, kind="agent", agent_id=agent_id)) >= MAX_SCHEDULES:
        raise argument_error(f"agent {agent_id} has {MAX_SCHEDULES} schedules already: delete one first")
    fields = _fields(body)
    schedule = await store(request).add_schedule(Schedule(id="", tenant=tenant_id, kind="agent", agent_id=agent_id,
                                                          **fields))
    return ok(schedule_view(schedule))


@router.get("/agents/{agent_id}/schedules", summary="An agent's schedules, oldest first")
async def list_schedules(request: Request, agent_id: str, tenant_id: str = Depends(tenant)):
    await owned_agent(request, tenant_id, agent_id)
    # the agent's LangGraph crons are listed and changed through `/langgraph/runs/crons`, not here
    return ok([schedule_view(s) for s in await store(request).list_schedules(tenant_id, kind="agent", agent_id=agent_id)])


async def _owned(request: Request, tenant_id: str, agent_id: str, schedule_id: str) -> Schedule:
    await owned_agent(request, tenant_id, agent_id)
    schedule = await store(request).get_schedule(tenant_id, schedule_id)
    if schedule is None or schedule.agent_id != agent_id or schedule.kind != "agent":
        raise not_found(f"schedule {schedule_id} of agent {agent_id}")
    return schedule


@router.get("/agents/{agent_id}/schedules/{schedule_id}", summary="One schedule, with its last run")
async def get_schedule(request: Request, agent_id: str, schedule_id: str, tenant_id: str = Depends(tenant)):
    return ok(schedule_view(await _owned(request, tenant_id, agent_id, schedule_id)))


@router.put("/agents/{agent_id}/schedules/{schedule_id}", summary="Change a schedule (cron, inputs, enabled, ...)")
async def update_schedule(request: Request, agent_id: str, schedule_id: str, body: Any = Body(...),
                          tenant_id: str = Depends(tenant)):
    current = await _owned(request, tenant_id, agent_id, schedule_id)
    updated = await store(request).update_schedule(tenant_id, schedule_id, **_fields(body, current))
    return ok(schedule_view(updated))


@router.delete("/agents/{agent_id}/schedules/{schedule_id}", summary="Delete a schedule (its past runs stay)")
async def delete_schedule(request: Request, agent_id: str, schedule_id: str, tenant_id: str = Depends(tenant)):
    await _owned(request, tenant_id, agent_id, schedule_id)
    await store(request).delete_schedule(tenant_id, schedule_id)
    return ok(True)

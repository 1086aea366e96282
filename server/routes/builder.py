"""Building and fixing agents (RAGFlow's routes): one component's input form and debug run, reset and
tags. The work is in runtime/ (component_debug, dsl_reset); files agents produced are in routes/files.py."""
from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Body, Depends, Request
from pydantic import BaseModel, ConfigDict, Field

from canvas2graph.server.backend.component_debug import DebugError, debug_component, input_form, plan_canvas
from canvas2graph.server.backend.dsl_reset import reset_dsl
from canvas2graph.server.backend.versions import record_version
from canvas2graph.server.auth import tenant
from canvas2graph.server.errors import argument_error, data_error, not_found, ok
from canvas2graph.server.deps import owned_agent, store

router = APIRouter(prefix="/api/v1", tags=["build and fix"])


class DebugRequest(BaseModel):
    model_config = ConfigDict(extra="allow")
    params: dict[str, Any] = Field(description='the inputs, as the input form names them: {key: {"value": ...}}')


class TagsUpdate(BaseModel):
    model_config = ConfigDict(extra="allow")
    tags: list[Any] | str = Field("", description="a list of tags or a comma-separated text")


def _debug_error(e: DebugError):
    return data_error(str(e), data={"diagnostics": [d.to_dict() for d in e.diagnostics]} if e.diagnostics else None)


async def _planned(request: Request, tenant_id: str, agent_id: str):
    agent = await owned_agent(request, tenant_id, agent_id)
    try:
        return await asyncio.to_thread(plan_canvas, agent.dsl)      # planning a large DSL takes a while
    except DebugError as e:
        raise _debug_error(e)


@router.get("/agents/{agent_id}/components/{component_id}/input-form",
            summary="What a component reads: the form its debug run takes")
async def component_input_form(request: Request, agent_id: str, component_id: str, tenant_id: str = Depends(tenant)):
    canvas = await _planned(request, tenant_id, agent_id)
    try:
        return ok(input_form(canvas, component_id))
    except DebugError as e:
        raise _debug_error(e)


@router.post("/agents/{agent_id}/components/{component_id}/debug",
             summary="Run one component alone with the given inputs; the reply is its outputs")
async def component_debug(request: Request, agent_id: str, component_id: str, body: DebugRequest,
                          tenant_id: str = Depends(tenant)):
    canvas = await _planned(request, tenant_id, agent_id)
    conversations = request.app.state.conversations
    models, script = conversations.models()
    services = conversations.services(canvas) if callable(conversations.services) else conversations.services
    try:
        outputs = await debug_component(canvas, component_id, body.params, models=models, script=script,
                                        services=services)
    except DebugError as e:
        raise _debug_error(e)
    return ok(outputs)


@router.post("/agents/{agent_id}/reset", summary="Clear what earlier runs left in the agent's DSL; the reply is the DSL")
async def reset_agent(request: Request, agent_id: str, tenant_id: str = Depends(tenant)):
    agent = await owned_agent(request, tenant_id, agent_id)
    dsl = reset_dsl(agent.dsl)
    agent = await store(request).update_agent(tenant_id, agent_id, dsl=dsl)
    if agent is None:                   # deleted meanwhile
        raise not_found(f"agent {agent_id}")
    await record_version(store(request), agent, author=tenant_id)
    return ok(dsl)


@router.get("/agents/tags", summary="The tenant's tags with the number of agents that carry each")
async def list_tags(request: Request, tenant_id: str = Depends(tenant)):
    category = request.query_params.get("canvas_category")
    if category and category != "agent_canvas":     # every agent here is an agent canvas
        return ok([])
    return ok([{"tag": tag, "count": count} for tag, count in await store(request).tag_counts(tenant_id)])


@router.put("/agents/{agent_id}/tags", summary="Replace an agent's tags")
async def update_tags(request: Request, agent_id: str, body: TagsUpdate | None = Body(None),
                      tenant_id: str = Depends(tenant)):
    body = body or TagsUpdate()
    if isinstance(body.tags, list) and not all(isinstance(t, (str, int, float)) for t in body.tags):
        raise argument_error("`tags` must be a list of strings or a comma-separated text")
    if await store(request).set_tags(tenant_id, agent_id, body.tags) is None:
        raise not_found(f"agent {agent_id}")
    return ok(True)


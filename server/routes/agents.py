"""Agents and their sessions (RAGFlow's `/api/v1/agents` routes)."""
from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Body, Depends, Request
from pydantic import BaseModel, ConfigDict, Field

from canvas2graph.server.backend.store import StoreError
from canvas2graph.server.backend.versions import NoReleasedVersion, dsl_for_new_session, record_version, truthy
from canvas2graph.server.auth import tenant
from canvas2graph.server.deps import int_param, owned_agent, parse_dsl, store
from canvas2graph.server.errors import argument_error, data_error, not_found, ok
from canvas2graph.server.protocols.common import endpoints
from canvas2graph.server.turns import check, memory_warnings, refuse_unreadable
from canvas2graph.server.views import agent_view, checked_view, last_turn_view, session_view

router = APIRouter(prefix="/api/v1", tags=["agents"])


class AgentCreate(BaseModel):
    model_config = ConfigDict(extra="allow")
    title: str = Field(description="unique among the tenant's agents")
    dsl: Any = Field(description="the canvas DSL: an object (or its JSON text), a template or an agent record")
    description: str | None = None
    avatar: str | None = None
    canvas_type: str | None = None
    tags: Any = Field(None, description="a list of tags or a comma-separated text")
    release: Any = Field(False, description="publish this DSL: sessions asked for with `release` run it")


class AgentUpdate(BaseModel):
    model_config = ConfigDict(extra="allow")
    title: str | None = None
    dsl: Any = None
    description: str | None = None
    avatar: str | None = None
    canvas_type: str | None = None
    release: Any = Field(False, description="publish the new DSL (with `dsl`)")


class SessionCreate(BaseModel):
    model_config = ConfigDict(extra="allow")
    name: str | None = None
    user_id: str | None = None
    release: Any = Field(None, description="run the agent's newest published version instead of its draft")


class SessionsDelete(BaseModel):
    model_config = ConfigDict(extra="allow")
    ids: list[str] | None = None
    delete_all: bool = False


def flag(value: str | None, default: bool = True) -> bool:
    """RAGFlow's boolean query parameters: anything but "false"/"False" counts as the default's opposite."""
    if value is None:
        return default
    return value.lower() not in ("false", "0", "no")


# --- agents ---------------------------------------------------------------------------------------
@router.post("/agents", summary="Create an agent; the reply lists the DSL's diagnostics")
async def create_agent(request: Request, body: AgentCreate, tenant_id: str = Depends(tenant)):
    if not body.title.strip():
        raise argument_error("`title` must not be empty")
    if body.tags is not None and not (isinstance(body.tags, str) or (
            isinstance(body.tags, list) and all(isinstance(t, (str, int, float)) for t in body.tags))):
        raise argument_error("`tags` must be a list of strings or a comma-separated text")
    dsl = parse_dsl(body.dsl, request)
    # in a compile worker, within its budget; a DSL nested past the limit is refused before it is stored
    checked = checked_view(refuse_unreadable(await check(request, dsl)))
    checked["diagnostics"] = checked["diagnostics"] + await memory_warnings(request, tenant_id, dsl)
    try:
        agent = await store(request).create_agent(tenant_id, body.title, dsl, body.description, body.avatar,
                                                  canvas_type=body.canvas_type)
    except StoreError as e:
        raise data_error(str(e))
    if body.tags is not None:
        agent.tags = await store(request).set_tags(tenant_id, agent.id, body.tags) or ""
    await record_version(store(request), agent, author=tenant_id, released=truthy(body.release), diagnostics=checked)
    return ok(agent_view(agent, checked=checked))


@router.get("/agents", summary="List agents: {canvas, total} (a plain list when filtered by id or title)")
async def list_agents(request: Request, tenant_id: str = Depends(tenant)):
    q = request.query_params
    agents, total = await store(request).list_agents(
        tenant_id, page=int_param(q.get("page"), "page", 1), page_size=int_param(q.get("page_size"), "page_size", 30),
        orderby=q.get("orderby", "update_time"), desc=flag(q.get("desc")), agent_id=q.get("id"), title=q.get("title"),
        tags=[t.strip() for t in q.get("tags", "").split(",") if t.strip()], keywords=q.get("keywords") or None)
    views = [agent_view(a) for a in agents]
    if q.get("id") or q.get("title"):
        # ragflow-sdk <= 0.22 finds agents by id or title and expects the list itself (RAGFlow 0.22's
        # reply); later SDKs never send these filters and read {"canvas": [...], "total": n}
        if not views:
            raise not_found(f"agent {q.get('id') or q.get('title')}")
        return ok(views)
    return ok({"canvas": views, "total": total})


@router.get("/agents/{agent_id}", summary="An agent, with its DSL's diagnostics")
async def get_agent(request: Request, agent_id: str, tenant_id: str = Depends(tenant)):
    agent = await owned_agent(request, tenant_id, agent_id)
    checked = checked_view(await check(request, agent.dsl))
    checked["diagnostics"] = checked["diagnostics"] + await memory_warnings(request, tenant_id, agent.dsl)
    view = agent_view(agent, checked=checked)
    view["endpoints"] = endpoints(str(request.base_url), agent)     # MCP, A2A and LangGraph (docs/protocols.md)
    return ok(view)


@router.put("/agents/{agent_id}", summary="Update an agent; the reply lists the DSL's diagnostics")
async def update_agent(request: Request, agent_id: str, body: AgentUpdate, tenant_id: str = Depends(tenant)):
    changes: dict[str, Any] = {k: v for k, v in (("title", body.title), ("description", body.description),
                                                 ("avatar", body.avatar), ("canvas_type", body.canvas_type))
                               if v is not None}
    if "title" in changes and not changes["title"].strip():
        raise argument_error("`title` must not be empty")
    if body.dsl is not None:
        changes["dsl"] = parse_dsl(body.dsl, request)
        refuse_unreadable(await check(request, changes["dsl"]))     # before it is stored (the verdict is cached)
    try:
        agent = await store(request).update_agent(tenant_id, agent_id, **changes)
    except StoreError as e:
        raise data_error(str(e))
    if agent is None:
        raise not_found(f"agent {agent_id}")
    checked = checked_view(await check(request, agent.dsl))
    checked["diagnostics"] = checked["diagnostics"] + await memory_warnings(request, tenant_id, agent.dsl)
    if "dsl" in changes:        # every save of a DSL is kept as a version
        await record_version(store(request), agent, author=tenant_id, released=truthy(body.release),
                             diagnostics=checked)
    return ok(agent_view(agent, checked=checked))


@router.delete("/agents/{agent_id}", summary="Delete an agent with its sessions")
async def delete_agent(request: Request, agent_id: str, tenant_id: str = Depends(tenant)):
    await owned_agent(request, tenant_id, agent_id)
    conversations = request.app.state.conversations
    running = set(await conversations.running_sessions())
    for session_id in await store(request).agent_session_ids(tenant_id, agent_id):
        if session_id in running:
            await conversations.cancel(tenant_id, session_id)
    await store(request).delete_agent(tenant_id, agent_id)
    return ok(True)


# --- sessions -------------------------------------------------------------------------------------
@router.post("/agents/{agent_id}/sessions", summary="Start a session; its first message is Begin's prologue")
async def create_session(request: Request, agent_id: str, body: SessionCreate | None = Body(None),
                         tenant_id: str = Depends(tenant)):
    body = body or SessionCreate()
    agent = await owned_agent(request, tenant_id, agent_id)
    release = truthy(body.release if body.release is not None else request.query_params.get("release"))
    try:
        dsl, version = await dsl_for_new_session(store(request), agent, release=release)
    except NoReleasedVersion as e:
        raise data_error(str(e))
    verdict = await check(request, dsl)
    if not verdict.ok:
        raise data_error(f"agent {agent_id} does not compile: fix its DSL first",
                         data={"diagnostics": verdict.diagnostics})
    prologue = verdict.prologue
    session = await store(request).create_session(
        tenant_id, source="agent", dsl=dsl, agent_id=agent_id, name=body.name or "New session",
        user_id=body.user_id or request.query_params.get("user_id") or tenant_id,
        messages=[{"role": "assistant", "content": prologue}], version=version)
    view = session_view(session)
    view["message"] = view["messages"]       # RAGFlow names it `message` in this one reply
    return ok(view)


@router.get("/agents/{agent_id}/sessions", summary="List an agent's sessions")
async def list_sessions(request: Request, agent_id: str, tenant_id: str = Depends(tenant)):
    await owned_agent(request, tenant_id, agent_id)
    q = request.query_params
    with_dsl = flag(q.get("dsl"))
    sessions = await store(request).list_sessions(
        tenant_id, agent_id, page=int_param(q.get("page"), "page", 1),
        page_size=int_param(q.get("page_size"), "page_size", 30), orderby=q.get("orderby", "update_time"),
        desc=flag(q.get("desc")), session_id=q.get("id"), user_id=q.get("user_id"), with_dsl=with_dsl)
    last = await store(request).last_turns(tenant_id, [s.id for s in sessions])
    return ok([{**session_view(s, with_dsl=with_dsl), "last_turn": last_turn_view(last.get(s.id))} for s in sessions])


@router.get("/agents/{agent_id}/sessions/{session_id}", summary="One session with its message log")
async def get_session(request: Request, agent_id: str, session_id: str, tenant_id: str = Depends(tenant)):
    await owned_agent(request, tenant_id, agent_id)
    session = await store(request).get_session(tenant_id, session_id, with_messages=True)
    if session is None or session.agent_id != agent_id:
        raise not_found(f"session {session_id} of agent {agent_id}")
    return ok({**session_view(session, with_dsl=flag(request.query_params.get("dsl"))),
               "last_turn": last_turn_view((await store(request).last_turns(tenant_id, [session.id])).get(session.id))})


async def _delete_sessions(request: Request, tenant_id: str, agent_id: str, ids: list[str]) -> dict:
    conversations = request.app.state.conversations
    running = set(await conversations.running_sessions())
    owned, errors = [], []
    for i, sid in enumerate(dict.fromkeys(ids)):
        if i % 200 == 199:          # thousands of ids: let the server answer other requests meanwhile
            await asyncio.sleep(0)
        session = await store(request).get_session(tenant_id, sid)
        if session is None or session.agent_id != agent_id:
            errors.append(f"The agent doesn't own the session {sid}")
        else:
            owned.append(sid)
            if sid in running:
                await conversations.cancel(tenant_id, sid)
    deleted = await store(request).delete_sessions(tenant_id, owned)
    if errors and not deleted:
        raise data_error("; ".join(errors))
    if errors:
        return ok({"success_count": len(deleted), "errors": errors},
                  message=f"Partially deleted {len(deleted)} sessions with {len(errors)} errors")
    return ok(True)


@router.delete("/agents/{agent_id}/sessions", summary='Delete sessions: {"ids": [...]} or {"delete_all": true}')
async def delete_sessions(request: Request, agent_id: str, body: SessionsDelete | None = Body(None),
                          tenant_id: str = Depends(tenant)):
    await owned_agent(request, tenant_id, agent_id)
    body = body or SessionsDelete()
    ids = body.ids
    if not ids and body.delete_all:
        ids, page = [], 1
        while True:
            batch = await store(request).list_sessions(tenant_id, agent_id, page=page, page_size=1000, with_dsl=False,
                                                        with_messages=False)
            ids += [s.id for s in batch]
            if len(batch) < 1000:
                break
            page += 1
    if not ids:
        return ok(True)
    return await _delete_sessions(request, tenant_id, agent_id, ids)


@router.delete("/agents/{agent_id}/sessions/{session_id}", summary="Delete one session")
async def delete_session(request: Request, agent_id: str, session_id: str, tenant_id: str = Depends(tenant)):
    await owned_agent(request, tenant_id, agent_id)
    return await _delete_sessions(request, tenant_id, agent_id, [session_id])

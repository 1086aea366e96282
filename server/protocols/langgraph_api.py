"""LangGraph Server's API under `/langgraph`: the subset langgraph-sdk's client uses for a compiled agent,
so `get_client(url=server + "/langgraph", headers={"Authorization": "Bearer ..."})` works unchanged.

Assistants are the tenant's agents (read-only: agents are made through RAGFlow's API); threads are
sessions (a thread's first run creates its session, with the thread's id); runs are turns
(`langgraph_runs.py`); a thread's state and history are the session's checkpoints, read and updated with
LangGraph's own calls on the agent's compiled graph. What is served and what is not:
docs/compatibility.md ("LangGraph Server's API").
"""
from __future__ import annotations

import json
import uuid
from typing import Callable

from fastapi import APIRouter, Body, FastAPI, Query, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from fastapi.routing import APIRoute
from langgraph.errors import InvalidUpdateError

from canvas2graph.server.backend.store import Agent, Session
from canvas2graph.server.compiling import compile_in_thread
from canvas2graph.server.errors import ApiError
from canvas2graph.server.protocols import common
from canvas2graph.server.backend.store_turns import TurnRecord
from canvas2graph.server.protocols.langgraph_runs import (LangGraphError, error_value, frames, start_run, stream_modes,
                                                       wait_end)
from canvas2graph.server.protocols.langgraph_views import (SCHEMA, assistant_view, checkpoint_view, empty_state, final_values,
                                              graph_id, jsonable, now, run_view, state_view, thread_view)

PREFIX = "/langgraph"
MAX_BATCH = 100                 # runs one `/runs/batch` request may create
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


class LangGraphRoute(APIRoute):
    """Errors as LangGraph Server answers them: `{"detail": ...}` with the HTTP status."""

    def get_route_handler(self) -> Callable:
        handler = super().get_route_handler()

        async def guarded(request: Request) -> Response:
            try:
                return await handler(request)
            except LangGraphError as e:
                return JSONResponse({"detail": e.message}, status_code=e.status)
            except ApiError as e:
                return JSONResponse({"detail": e.message}, status_code=e.status if e.status >= 400 else 422)
        return guarded


router = APIRouter(prefix=PREFIX, tags=["langgraph"], route_class=LangGraphRoute)


async def request_tenant(request: Request) -> str:
    if not getattr(request.app.state, "langgraph_ready", False):     # this module's tables, made once
        for statement in SCHEMA:
            await request.app.state.store.db.execute(statement)
        request.app.state.langgraph_ready = True
    return await common.tenant_of(request)


def _page(body: dict, default_limit: int = 10) -> tuple[int, int]:
    """(offset, limit) of a search body, refused with 422 when they are not whole numbers >= 0."""
    values = []
    for name, default in (("offset", 0), ("limit", default_limit)):
        value = body.get(name)
        value = default if value is None else value
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise LangGraphError(422, f"`{name}` must be a whole number >= 0, got {value!r}")
        values.append(value)
    return values[0], values[1]


def _checkpoint_id(body: dict, key: str = "checkpoint") -> str | None:
    """`checkpoint_id`, or `checkpoint.checkpoint_id`, of a body."""
    checkpoint = body.get(key)
    if checkpoint is not None and not isinstance(checkpoint, dict):
        raise LangGraphError(422, f"`{key}` must be an object with `checkpoint_id`")
    found = body.get("checkpoint_id") or (checkpoint or {}).get("checkpoint_id")
    if found is not None and not isinstance(found, str):
        raise LangGraphError(422, "`checkpoint_id` must be a string")
    return found


# --- assistants ------------------------------------------------------------------------------------
async def find_assistant(request: Request, tenant: str, assistant_id: str) -> Agent:
    """An agent by id, or by graph id (the title in snake_case), as LangGraph takes either."""
    agent = await request.app.state.store.get_agent(tenant, assistant_id)
    if agent is None:
        agent = next((a for a in await common.tenant_agents(request, tenant) if graph_id(a) == assistant_id), None)
    if agent is None:
        raise LangGraphError(404, f"assistant {assistant_id} not found")
    return agent


@router.post("/assistants/search")
async def search_assistants(request: Request, body: dict = Body(default_factory=dict)):
    tenant = await request_tenant(request)
    agents = await common.tenant_agents(request, tenant)
    if body.get("graph_id"):
        agents = [a for a in agents if graph_id(a) == body["graph_id"]]
    if body.get("name"):
        agents = [a for a in agents if str(body["name"]).lower() in a.title.lower()]
    offset, limit = _page(body)
    return [assistant_view(a) for a in agents[offset:offset + limit]]


@router.post("/assistants/count")
async def count_assistants(request: Request, body: dict = Body(default_factory=dict)):
    return len(await search_assistants(request, {**body, "offset": 0, "limit": 1_000_000}))


@router.get("/assistants/{assistant_id}")
async def get_assistant(request: Request, assistant_id: str):
    return assistant_view(await find_assistant(request, await request_tenant(request), assistant_id))


async def _graph(session_or_agent: Session | Agent, checkpointer=None):
    dsl = getattr(session_or_agent, "dsl_text", None) or session_or_agent.dsl
    return (await compile_in_thread(dsl)).graph(checkpointer)


@router.get("/assistants/{assistant_id}/graph")
async def assistant_graph(request: Request, assistant_id: str, xray: bool = False):
    graph = await _graph(await find_assistant(request, await request_tenant(request), assistant_id))
    return jsonable(graph.get_graph(xray=xray).to_json())


@router.get("/assistants/{assistant_id}/schemas")
async def assistant_schemas(request: Request, assistant_id: str):
    agent = await find_assistant(request, await request_tenant(request), assistant_id)
    graph = await _graph(agent)
    return {"graph_id": graph_id(agent), "input_schema": graph.get_input_jsonschema(),
            "output_schema": graph.get_output_jsonschema(), "state_schema": graph.get_input_jsonschema(),
            "config_schema": {}, "context_schema": graph.get_context_jsonschema()}


# --- threads ---------------------------------------------------------------------------------------
async def thread_row(request: Request, tenant: str, thread_id: str) -> dict | None:
    """A thread's record; a session of the tenant made through RAGFlow's API is a thread too."""
    store = request.app.state.store
    rows = await store.db.fetchall("SELECT * FROM c2g_lg_threads WHERE tenant = ? AND thread_id = ?", (tenant, thread_id))
    if rows:
        return rows[0]
    session = await store.get_session(tenant, thread_id)
    if session is None:
        return None
    return {"thread_id": thread_id, "metadata": "{}", "created_at": session.create_time / 1000,
            "updated_at": session.update_time / 1000}


async def add_thread(request: Request, tenant: str, thread_id: str, metadata: dict) -> dict:
    row = {"thread_id": thread_id, "tenant": tenant, "metadata": json.dumps(metadata, default=str),
           "created_at": now(), "updated_at": now()}
    await request.app.state.store.db.execute(
        "INSERT INTO c2g_lg_threads (thread_id, tenant, metadata, created_at, updated_at) VALUES (?, ?, ?, ?, ?)",
        tuple(row.values()))
    return row


async def _state(request: Request, tenant: str, thread_id: str, checkpoint_id: str | None = None) -> dict:
    session = await request.app.state.store.get_session(tenant, thread_id)
    if session is None:
        return empty_state(thread_id)
    graph = await _graph(session, request.app.state.store.checkpointer)
    config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": "",
                               **({"checkpoint_id": checkpoint_id} if checkpoint_id else {})}}
    return state_view(await graph.aget_state(config), thread_id)


async def _thread(request: Request, tenant: str, row: dict) -> dict:
    store = request.app.state.store
    state = await _state(request, tenant, row["thread_id"])
    busy = bool(await store.open_turns(row["thread_id"]))
    status = "busy" if busy else "interrupted" if state["interrupts"] else "idle"
    return thread_view(row, state, status)


@router.post("/threads")
async def create_thread(request: Request, body: dict = Body(default_factory=dict)):
    tenant = await request_tenant(request)
    thread_id = str(body.get("thread_id") or uuid.uuid4())
    found = await thread_row(request, tenant, thread_id)
    if found is not None:
        if body.get("if_exists") == "do_nothing":
            return await _thread(request, tenant, found)
        raise LangGraphError(409, f"thread {thread_id} exists")
    if await request.app.state.store.session_exists(thread_id):
        raise LangGraphError(409, f"thread id {thread_id} is not available: choose another")
    return await _thread(request, tenant, await add_thread(request, tenant, thread_id, body.get("metadata") or {}))


async def own_thread(request: Request, thread_id: str) -> tuple[str, dict]:
    tenant = await request_tenant(request)
    row = await thread_row(request, tenant, thread_id)
    if row is None:
        raise LangGraphError(404, f"thread {thread_id} not found")
    return tenant, row


@router.get("/threads/{thread_id}")
async def get_thread(request: Request, thread_id: str):
    tenant, row = await own_thread(request, thread_id)
    return await _thread(request, tenant, row)


@router.post("/threads/search")
async def search_threads(request: Request, body: dict = Body(default_factory=dict)):
    tenant = await request_tenant(request)
    rows = await request.app.state.store.db.fetchall(
        "SELECT * FROM c2g_lg_threads WHERE tenant = ? ORDER BY created_at DESC", (tenant,))
    wanted = body.get("metadata") or {}
    rows = [r for r in rows if all(json.loads(r["metadata"]).get(k) == v for k, v in wanted.items())]
    if body.get("ids"):
        rows = [r for r in rows if r["thread_id"] in set(body["ids"])]
    threads = [await _thread(request, tenant, r) for r in rows]
    if body.get("status"):
        threads = [t for t in threads if t["status"] == body["status"]]
    offset, limit = _page(body)
    return threads[offset:offset + limit]


@router.delete("/threads/{thread_id}", status_code=204)
async def delete_thread(request: Request, thread_id: str):
    tenant, _row = await own_thread(request, thread_id)
    store = request.app.state.store
    await request.app.state.conversations.cancel(tenant, thread_id)
    await store.delete_sessions(tenant, [thread_id])
    await store.db.execute("DELETE FROM c2g_lg_threads WHERE tenant = ? AND thread_id = ?", (tenant, thread_id))
    return Response(status_code=204)


@router.get("/threads/{thread_id}/state")
async def thread_state(request: Request, thread_id: str):
    tenant, _row = await own_thread(request, thread_id)
    return await _state(request, tenant, thread_id)


@router.get("/threads/{thread_id}/state/{checkpoint_id}")
async def thread_state_at(request: Request, thread_id: str, checkpoint_id: str):
    tenant, _row = await own_thread(request, thread_id)
    return await _state(request, tenant, thread_id, checkpoint_id)


@router.post("/threads/{thread_id}/state/checkpoint")
async def thread_state_at_checkpoint(request: Request, thread_id: str, body: dict = Body(default_factory=dict)):
    """`get_state(thread, checkpoint={"checkpoint_id": ...})`: the state at that checkpoint."""
    tenant, _row = await own_thread(request, thread_id)
    if not isinstance(body.get("checkpoint"), dict):
        raise LangGraphError(422, "`checkpoint` must be an object with `checkpoint_id`")
    return await _state(request, tenant, thread_id, _checkpoint_id({"checkpoint": body["checkpoint"]}))


@router.post("/threads/{thread_id}/history")
async def thread_history(request: Request, thread_id: str, body: dict = Body(default_factory=dict)):
    tenant, _row = await own_thread(request, thread_id)
    session = await request.app.state.store.get_session(tenant, thread_id)
    if session is None:
        return []
    graph = await _graph(session, request.app.state.store.checkpointer)
    config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    checkpoint_id = _checkpoint_id({"checkpoint": body.get("checkpoint")})
    if checkpoint_id:
        config["configurable"]["checkpoint_id"] = checkpoint_id
    before = body.get("before")
    before_id = _checkpoint_id({"before": before}, "before") if isinstance(before, dict) else before
    if before_id is not None and not isinstance(before_id, str):
        raise LangGraphError(422, "`before` must be a checkpoint id or an object with `checkpoint_id`")
    before_config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": "", "checkpoint_id": before_id}} \
        if before_id else None
    _offset, limit = _page({"limit": body.get("limit")})
    return [state_view(s, thread_id) async for s in graph.aget_state_history(
        config, limit=limit, before=before_config, filter=body.get("metadata") or None)]


@router.post("/threads/{thread_id}/state")
async def update_thread_state(request: Request, thread_id: str, body: dict = Body(default_factory=dict)):
    """Write values at the thread's newest (or a given) checkpoint, as a node would: a new checkpoint to
    run on (a fork, when it is an earlier one). The session's lease is held meanwhile."""
    tenant, _row = await own_thread(request, thread_id)
    store = request.app.state.store
    session = await store.get_session(tenant, thread_id)
    if session is None:
        raise LangGraphError(409, f"thread {thread_id} has no state yet: run it first")
    owner = request.app.state.conversations.owner
    if await store.open_turns(thread_id) or not await store.acquire_lease(thread_id, owner):
        raise LangGraphError(409, f"thread {thread_id} is running a run: wait for it to end or cancel it")
    try:
        graph = await _graph(session, store.checkpointer)
        checkpoint_id = _checkpoint_id(body)
        config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": "",
                                   **({"checkpoint_id": checkpoint_id} if checkpoint_id else {})}}
        try:
            written = await graph.aupdate_state(config, body.get("values"), as_node=body.get("as_node"))
        except (InvalidUpdateError, ValueError, KeyError, TypeError) as e:
            raise LangGraphError(422, f"the state cannot be updated so: {e}")
    finally:
        await store.release_lease(thread_id, owner)
    return {"checkpoint": checkpoint_view(written, thread_id)}


# --- runs ------------------------------------------------------------------------------------------
async def _run_session(request: Request, tenant: str, thread_id: str, agent: Agent, body: dict) -> Session:
    """The thread's session, created at its first run (with the thread's id) for the run's agent."""
    store = request.app.state.store
    session = await store.get_session(tenant, thread_id)
    if session is not None:
        if session.agent_id != agent.id:
            raise LangGraphError(409, f"thread {thread_id} runs another assistant ({session.agent_id})")
        return session
    if await thread_row(request, tenant, thread_id) is None:
        if body.get("if_not_exists") != "create":
            raise LangGraphError(404, f"thread {thread_id} not found")
        await add_thread(request, tenant, thread_id, {})
    return await common.new_session(request, tenant, agent, session_id=thread_id, name=f"LangGraph: {agent.title}")


async def _start(request: Request, thread_id: str | None, body: dict) -> tuple[str, Session, TurnRecord]:
    tenant = await request_tenant(request)
    if not isinstance(body, dict):
        raise LangGraphError(422, "the run's body must be an object")
    if not body.get("assistant_id"):
        raise LangGraphError(422, "`assistant_id` is required")
    agent = await find_assistant(request, tenant, str(body["assistant_id"]))
    if thread_id is None:               # a stateless run: on a thread of its own
        thread_id = str(uuid.uuid4())
        body = {**body, "if_not_exists": "create"}
    session = await _run_session(request, tenant, thread_id, agent, body)
    return tenant, session, await start_run(request, tenant, session, agent, body)


def _location(run: TurnRecord) -> dict[str, str]:
    return {"Content-Location": f"{PREFIX}/threads/{run.session_id}/runs/{run.id}"}


async def _stream(request: Request, thread_id: str | None, body: dict):
    _tenant_id, session, run = await _start(request, thread_id, body)
    stream = frames(request, run, session, asker=True)
    return StreamingResponse(stream, media_type="text/event-stream", headers={**SSE_HEADERS, **_location(run)})


async def _answer_values(request: Request, tenant: str, run: TurnRecord, result) -> JSONResponse:
    failed = error_value(result)
    if failed is not None:
        return JSONResponse({"__error__": failed}, headers=_location(run))
    state = await _state(request, tenant, run.session_id)
    return JSONResponse(final_values(state), headers=_location(run))


async def _wait(request: Request, thread_id: str | None, body: dict):
    tenant, session, run = await _start(request, thread_id, body)
    return await _answer_values(request, tenant, run, await wait_end(request, run, session))


@router.post("/threads/{thread_id}/runs/stream")
async def stream_run(request: Request, thread_id: str, body: dict = Body(...)):
    return await _stream(request, thread_id, body)


@router.post("/runs/stream")
async def stream_stateless_run(request: Request, body: dict = Body(...)):
    return await _stream(request, None, body)


@router.post("/threads/{thread_id}/runs/wait")
async def wait_run(request: Request, thread_id: str, body: dict = Body(...)):
    return await _wait(request, thread_id, body)


@router.post("/runs/wait")
async def wait_stateless_run(request: Request, body: dict = Body(...)):
    return await _wait(request, None, body)


@router.post("/threads/{thread_id}/runs")
async def create_run(request: Request, thread_id: str, body: dict = Body(...)):
    """A background run: queued as a durable job, it runs on whether or not this process lives on."""
    _tenant_id, _session, run = await _start(request, thread_id, body)
    return JSONResponse(run_view(run), headers=_location(run))


@router.post("/runs")
async def create_stateless_run(request: Request, body: dict = Body(...)):
    _tenant_id, _session, run = await _start(request, None, body)
    return JSONResponse(run_view(run), headers=_location(run))


@router.post("/runs/batch")
async def create_runs(request: Request, body: list = Body(...)):
    """Background stateless runs, one per payload (langgraph-sdk's `runs.create_batch`)."""
    if not body or not all(isinstance(item, dict) for item in body):
        raise LangGraphError(422, "the body must be a non-empty list of run payloads (objects)")
    if len(body) > MAX_BATCH:
        raise LangGraphError(422, f"at most {MAX_BATCH} runs per batch")
    return [run_view((await _start(request, None, item))[2]) for item in body]


async def _run_of(request: Request, tenant: str, thread_id: str, run_id: str) -> TurnRecord:
    run = await request.app.state.store.get_turn(run_id, tenant)
    if run is None or run.session_id != thread_id or run.status == "rolled_back":     # a rolled back run is gone
        raise LangGraphError(404, f"run {run_id} not found")
    return run


@router.get("/threads/{thread_id}/runs")
async def list_runs(request: Request, thread_id: str, limit: int = 10, offset: int = 0, status: str | None = None):
    tenant, _row = await own_thread(request, thread_id)
    if limit < 0 or offset < 0:
        raise LangGraphError(422, "`limit` and `offset` must be whole numbers >= 0")
    turns = await request.app.state.store.session_turns(tenant, thread_id, limit=10_000)
    views = [run_view(t) for t in turns if t.status != "rolled_back"]
    views = [v for v in views if status is None or v["status"] == status]
    return views[offset:offset + limit]


@router.get("/threads/{thread_id}/runs/{run_id}")
async def get_run(request: Request, thread_id: str, run_id: str):
    tenant, _row = await own_thread(request, thread_id)
    return run_view(await _run_of(request, tenant, thread_id, run_id))


@router.delete("/threads/{thread_id}/runs/{run_id}", status_code=204)
async def delete_run(request: Request, thread_id: str, run_id: str):
    """Delete a run's record and its kept stream (one still running is cancelled first)."""
    tenant, _row = await own_thread(request, thread_id)
    run = await _run_of(request, tenant, thread_id, run_id)
    if run.open:
        await request.app.state.conversations.cancel_turn(run)
        session = await request.app.state.store.get_session(tenant, thread_id)
        if session is not None:
            await wait_end(request, run, session)
    await request.app.state.conversations.events.forget([run.id])
    await request.app.state.store.delete_turns([run.id])
    return Response(status_code=204)


async def _session_of_run(request: Request, tenant: str, thread_id: str) -> Session:
    session = await request.app.state.store.get_session(tenant, thread_id)
    if session is None:
        raise LangGraphError(404, f"thread {thread_id} has no runs")
    return session


@router.get("/threads/{thread_id}/runs/{run_id}/join")
async def join_run(request: Request, thread_id: str, run_id: str):
    tenant, _row = await own_thread(request, thread_id)
    run = await _run_of(request, tenant, thread_id, run_id)
    session = await _session_of_run(request, tenant, thread_id)
    return await _answer_values(request, tenant, run, await wait_end(request, run, session))


@router.get("/threads/{thread_id}/runs/{run_id}/stream")
async def join_run_stream(request: Request, thread_id: str, run_id: str,
                          stream_mode: list[str] | None = Query(None), cancel_on_disconnect: bool = False):
    """A run's stream from its first event (after `Last-Event-ID`, when sent), from any server process, while
    it runs and for an hour after it ended."""
    tenant, _row = await own_thread(request, thread_id)
    run = await _run_of(request, tenant, thread_id, run_id)
    session = await _session_of_run(request, tenant, thread_id)
    asked = list(run.options.get("stream_mode") or ["values"])
    wanted = [m for m in stream_mode or [] if m]
    modes = [m for m in stream_modes(wanted) if m in asked] if wanted else asked
    last = request.headers.get("last-event-id")
    if last is not None and not last.strip().isdigit():
        raise LangGraphError(422, "Last-Event-ID must be the id of an event of this run's stream")
    if cancel_on_disconnect:
        run.options = {**run.options, "on_disconnect": "cancel"}
    stream = frames(request, run, session, asker=cancel_on_disconnect, modes=modes or asked,
                    after=int(last) if last is not None else None)
    return StreamingResponse(stream, media_type="text/event-stream", headers=SSE_HEADERS)


@router.post("/threads/{thread_id}/runs/{run_id}/cancel")
async def cancel_run(request: Request, thread_id: str, run_id: str, wait: bool = False, action: str = "interrupt"):
    """Stop the run at once, wherever it runs: `action` "interrupt" keeps what it did, "rollback" undoes it."""
    tenant, _row = await own_thread(request, thread_id)
    if action not in ("interrupt", "rollback"):
        raise LangGraphError(422, "`action` must be interrupt or rollback")
    run = await _run_of(request, tenant, thread_id, run_id)
    if run.open:
        await request.app.state.conversations.cancel_turn(run, action)
        if wait:
            await wait_end(request, run, await _session_of_run(request, tenant, thread_id))
    return Response(status_code=202 if not wait else 204)


@router.get("/ok")
async def ok_route():
    return {"ok": True}


@router.get("/info")
async def info():
    return {"version": "canvas2graph", "flags": {"assistants": True, "crons": True, "langsmith": False}}


def install(app: FastAPI) -> None:
    """Add LangGraph Server's API under `/langgraph` to `app`."""
    app.include_router(router)

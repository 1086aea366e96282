"""RAGFlow's memory API (`/api/v1/memories`, `/api/v1/messages`), as ragflow-sdk 0.27 calls it, over the server's
memory store (LangGraph's: runtime/services/memory). Each tenant sees its own memories: another tenant's ids answer
"not found", as ids that do not exist do.

| route                                                | what                                                    |
|------------------------------------------------------|---------------------------------------------------------|
| POST /api/v1/memories                                | create (name, memory_type, embd_id, llm_id)             |
| GET /api/v1/memories                                 | list (page, page_size, memory_type, keywords, storage_type) |
| PUT /api/v1/memories/{id}                            | update its settings                                     |
| DELETE /api/v1/memories/{id}                         | delete it with its messages                             |
| GET /api/v1/memories/{id}/config                     | its settings                                            |
| GET /api/v1/memories/{id}                            | its raw messages with their extracts (agent_id, keywords, page, page_size) |
| POST /api/v1/messages                                | save an exchange to memories                            |
| GET /api/v1/messages/search                          | search memories (query, similarity_threshold, keywords_similarity_weight, top_n, ...) |
| GET /api/v1/messages                                 | recent messages (memory_id, agent_id, session_id, limit) |
| PUT /api/v1/messages/{memory_id}:{message_id}        | enable or disable a message (`status`)                  |
| DELETE /api/v1/messages/{memory_id}:{message_id}     | forget a message                                        |
| GET /api/v1/messages/{memory_id}:{message_id}/content | one message, whole                                     |
"""
from __future__ import annotations

from typing import Any, Awaitable

from fastapi import APIRouter, Body, Depends, Request

from canvas2graph.runtime.services.memory import MemoryBook, MemoryNotFound, MemoryRefused
from canvas2graph.server.auth import tenant
from canvas2graph.server.deps import int_param
from canvas2graph.server.errors import ApiError, RetCode, argument_error, ok

router = APIRouter(prefix="/api/v1", tags=["memories"])
MAX_PAGE_SIZE = 100
MAX_IDS = 100


def book(request: Request, tenant_id: str) -> MemoryBook:
    store = getattr(getattr(request.app.state, "background", None), "memory", None)
    if store is None:
        raise ApiError(RetCode.SERVER_ERROR, "the memory store is not open", status=503)
    return MemoryBook(store, tenant_id, embedder=request.app.state.run_services.memory_embedder)


def _ids(request: Request, name: str) -> list[str]:
    """A list parameter as RAGFlow reads it: repeated, or one comma-separated value."""
    out: list[str] = []
    for value in request.query_params.getlist(name):
        out += [v.strip() for v in value.split(",") if v.strip()]
    if len(out) > MAX_IDS:
        raise argument_error(f"`{name}`: at most {MAX_IDS} ids")
    return list(dict.fromkeys(out))


def _float(request: Request, name: str, default: float) -> float:
    value = request.query_params.get(name)
    if value in (None, ""):
        return default
    try:
        number = float(value)
    except ValueError:
        raise argument_error(f"`{name}` must be a number, got {value[:40]!r}") from None
    if not 0 <= number <= 1:
        raise argument_error(f"`{name}` must be from 0 to 1, got {number}")
    return number


async def answered(call: Awaitable[Any]) -> Any:
    """What a MemoryBook call returns; its refusal as RAGFlow answers it (404 for what is not found, else 101)."""
    try:
        return await call
    except MemoryRefused as e:
        raise _failed(e) from None


def _failed(e: MemoryRefused) -> ApiError:
    if isinstance(e, MemoryNotFound):
        return ApiError(RetCode.NOT_FOUND, str(e), status=404)
    return argument_error(str(e))


def _body(body: Any) -> dict:
    if body is None:
        return {}
    if not isinstance(body, dict):
        raise argument_error("the request body must be a JSON object")
    return body


def _required(body: dict, *names: str) -> None:
    missing = [n for n in names if n not in body]
    if missing:
        raise argument_error(f"required argument are missing: {', '.join(missing)}; ")


# --- memories --------------------------------------------------------------------------------------------
@router.post("/memories")
async def create_memory(request: Request, body: Any = Body(None), tenant_id: str = Depends(tenant)) -> dict:
    body = _body(body)
    _required(body, "name", "memory_type", "embd_id", "llm_id")
    memory = await answered(book(request, tenant_id).create(body["name"], body["memory_type"],
                                                            body.get("embd_id") or "", body.get("llm_id") or ""))
    return {"code": 0, "message": True, "data": memory.api()}


@router.get("/memories")
async def list_memories(request: Request, tenant_id: str = Depends(tenant)) -> dict:
    q = request.query_params
    page = int_param(q.get("page"), "page", 1, 1)
    page_size = int_param(q.get("page_size"), "page_size", 30, 1, MAX_PAGE_SIZE)
    try:
        found, total = await book(request, tenant_id).list(
            page=page, page_size=page_size, memory_type=_ids(request, "memory_type") or None,
            keywords=q.get("keywords") or None, storage_type=q.get("storage_type") or None)
    except ValueError as e:
        raise argument_error(str(e)) from None
    keys = ("id", "name", "avatar", "tenant_id", "owner_name", "memory_type", "storage_type", "embd_id", "llm_id",
            "permissions", "description", "create_time", "create_date")
    rows = [{**{k: v for k, v in m.api().items() if k in keys}, "embd_name": m.embd_id.rsplit("@", 1)[0]} for m in found]
    return {"code": 0, "message": True, "data": {"memory_list": rows, "total_count": total}}


@router.put("/memories/{memory_id}")
async def update_memory(request: Request, memory_id: str, body: Any = Body(None),
                        tenant_id: str = Depends(tenant)) -> dict:
    body = _body(body)
    allowed = ("name", "permissions", "llm_id", "embd_id", "memory_type", "memory_size", "forgetting_policy",
               "temperature", "avatar", "description", "system_prompt", "user_prompt")
    memory = await answered(book(request, tenant_id).update(memory_id, {k: v for k, v in body.items() if k in allowed}))
    return {"code": 0, "message": True, "data": memory.api()}


@router.delete("/memories/{memory_id}")
async def delete_memory(request: Request, memory_id: str, tenant_id: str = Depends(tenant)) -> dict:
    await answered(book(request, tenant_id).delete(memory_id))
    return {"code": 0, "message": True, "data": None}


@router.get("/memories/{memory_id}/config")
async def memory_config(request: Request, memory_id: str, tenant_id: str = Depends(tenant)) -> dict:
    memory = await answered(book(request, tenant_id).get(memory_id))
    return {"code": 0, "message": True, "data": memory.api()}


@router.get("/memories/{memory_id}")
async def memory_messages(request: Request, memory_id: str, tenant_id: str = Depends(tenant)) -> dict:
    q = request.query_params
    page = int_param(q.get("page"), "page", 1, 1)
    page_size = int_param(q.get("page_size"), "page_size", 50, 1, MAX_PAGE_SIZE)
    rows, total = await answered(book(request, tenant_id).page(
        memory_id, page=page, page_size=page_size, agent_ids=_ids(request, "agent_id") or None,
        keywords=(q.get("keywords") or "").strip() or None))
    titles = await _agent_titles(request, tenant_id, {r["agent_id"] for r in rows} |
                                 {x["agent_id"] for r in rows for x in r["extract"]})
    for row in rows:
        row["agent_name"] = titles.get(row["agent_id"], "Unknown")
        row["task"] = {}
        for extract in row["extract"]:
            extract["agent_name"] = titles.get(extract["agent_id"], "Unknown")
    return {"code": 0, "message": True,
            "data": {"messages": {"message_list": rows, "total_count": total}, "storage_type": "table"}}


async def _agent_titles(request: Request, tenant_id: str, agent_ids: set[str]) -> dict[str, str]:
    out = {}
    for agent_id in agent_ids:
        if agent_id:
            agent = await request.app.state.store.get_agent(tenant_id, agent_id)
            if agent is not None:
                out[agent_id] = agent.title
    return out


# --- messages --------------------------------------------------------------------------------------------
@router.post("/messages")
async def add_message(request: Request, body: Any = Body(None), tenant_id: str = Depends(tenant)) -> dict:
    body = _body(body)
    _required(body, "memory_id", "agent_id", "session_id", "user_input", "agent_response")
    ids = body["memory_id"]
    ids = [i.strip() for i in ids.split(",")] if isinstance(ids, str) else ids
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise argument_error("`memory_id` must be a memory id or a list of them")
    if len(ids) > MAX_IDS:
        raise argument_error(f"`memory_id`: at most {MAX_IDS} ids")
    memories = book(request, tenant_id)
    try:
        await memories.add_exchange(ids, user_input=str(body["user_input"]), agent_response=str(body["agent_response"]),
                                    agent_id=str(body["agent_id"]), session_id=str(body["session_id"]),
                                    user_id=str(body.get("user_id") or ""))
    except MemoryNotFound as e:
        raise ApiError(RetCode.SERVER_ERROR, f"Some messages failed to add. Detail:{e}", status=404) from None
    if any(m.extracted_types for m in await memories.find(ids)):
        await request.app.state.background.extraction.queue(tenant_id)      # their typed memories, by a worker
    return {"code": 0, "message": "All add to task.", "data": None}


@router.get("/messages/search")
async def search_messages(request: Request, tenant_id: str = Depends(tenant)) -> dict:
    q = request.query_params
    query = q.get("query")
    if query is None:
        raise argument_error("required argument are missing: query; ")
    found = await book(request, tenant_id).search(
        _ids(request, "memory_id"), query, similarity_threshold=_float(request, "similarity_threshold", 0.2),
        keywords_similarity_weight=_float(request, "keywords_similarity_weight", 0.7),
        top_n=int_param(q.get("top_n"), "top_n", 5, 1, MAX_PAGE_SIZE), agent_id=q.get("agent_id") or "",
        session_id=q.get("session_id") or "", user_id=q.get("user_id") or "")
    return {"code": 0, "message": True, "data": [m.api() for m in found]}


@router.get("/messages")
async def recent_messages(request: Request, tenant_id: str = Depends(tenant)) -> dict:
    q = request.query_params
    ids = _ids(request, "memory_id")
    if not ids:
        raise argument_error("memory_ids is required.")
    found = await book(request, tenant_id).recent(ids, agent_id=q.get("agent_id") or "",
                                                  session_id=q.get("session_id") or "",
                                                  limit=int_param(q.get("limit"), "limit", 10, 1, MAX_PAGE_SIZE))
    return {"code": 0, "message": True, "data": [m.api() for m in found]}


def _split(memory_message: str) -> tuple[str, str]:
    memory_id, sep, message_id = memory_message.rpartition(":")
    if not sep or not memory_id or not message_id.isdigit():
        raise argument_error("the path must be {memory_id}:{message_id}, the message id an integer")
    return memory_id, message_id


@router.put("/messages/{memory_message}")
async def set_message_status(request: Request, memory_message: str, body: Any = Body(None),
                             tenant_id: str = Depends(tenant)) -> dict:
    body = _body(body)
    _required(body, "status")
    if not isinstance(body["status"], bool):
        raise argument_error("Status must be a boolean.")
    await answered(book(request, tenant_id).set_status(*_split(memory_message), body["status"]))
    return ok(True, message=True)


@router.delete("/messages/{memory_message}")
async def forget_message(request: Request, memory_message: str, tenant_id: str = Depends(tenant)) -> dict:
    await answered(book(request, tenant_id).forget(*_split(memory_message)))
    return {"code": 0, "message": True, "data": None}


@router.get("/messages/{memory_message}/content")
async def message_content(request: Request, memory_message: str, tenant_id: str = Depends(tenant)) -> dict:
    message = await answered(book(request, tenant_id).message(*_split(memory_message)))
    return {"code": 0, "message": True,
            "data": {**message.api(), "content_embed": message.embedding or [], "id": f"{message.memory_id}_{message.message_id}"}}

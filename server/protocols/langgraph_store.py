"""LangGraph Server's store API under `/langgraph/store`: langgraph-sdk's `store.put_item`, `get_item`,
`delete_item`, `search_items` and `list_namespaces`, over the server's memory store (LangGraph's own store class,
runtime/services/memory/stores.py). Each tenant sees the part of the store under its own top namespace: a client's
namespace `["a", "b"]` is `(tenant, "a", "b")` in the store. A tenant's RAGFlow memories are there too
(`["memories"]`: their settings; `["memory", <memory id>]`: their messages), so a LangGraph client reads them."""
from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Body, FastAPI, Request
from fastapi.responses import Response

from canvas2graph.runtime.services.memory.book import label
from canvas2graph.server.protocols.langgraph_api import PREFIX, LangGraphRoute, request_tenant
from canvas2graph.server.protocols.langgraph_runs import LangGraphError
from canvas2graph.server.protocols.langgraph_views import iso

router = APIRouter(prefix=PREFIX, tags=["langgraph"], route_class=LangGraphRoute)
MAX_LIMIT = 1000


def _store(request: Request) -> Any:
    store = getattr(getattr(request.app.state, "background", None), "memory", None)
    if store is None:
        raise LangGraphError(503, "the store is not open")
    return store


def _namespace(value: Any, name: str, *, empty: bool = False) -> tuple[str, ...]:
    if isinstance(value, str):
        value = value.split(".") if value else []
    if value is None and empty:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) and v and "." not in v for v in value):
        raise LangGraphError(422, f"`{name}` must be a list of non-empty labels without periods")
    if not value and not empty:
        raise LangGraphError(422, f"`{name}` must not be empty")
    return tuple(value)


def _key(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise LangGraphError(422, "`key` must be a non-empty string")
    return value


def _bounded(body: dict, name: str, default: int, highest: int) -> int:
    value = body.get(name, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= highest:
        raise LangGraphError(422, f"`{name}` must be an integer from 0 to {highest}")
    return value


def _item(item: Any, root: str) -> dict[str, Any]:
    view = {"namespace": list(item.namespace)[1:] if item.namespace and item.namespace[0] == root else list(item.namespace),
            "key": item.key, "value": item.value, "created_at": _time(item.created_at),
            "updated_at": _time(item.updated_at)}
    if getattr(item, "score", None) is not None:
        view["score"] = item.score
    return view


def _time(value: Any) -> Any:
    return value.isoformat() if hasattr(value, "isoformat") else iso(value) if isinstance(value, (int, float)) else value


@router.put("/store/items", status_code=204)
async def put_item(request: Request, body: Any = Body(None)) -> Response:
    root = label(await request_tenant(request))
    if not isinstance(body, dict):
        raise LangGraphError(422, "the body must be a JSON object")
    namespace, key = _namespace(body.get("namespace"), "namespace"), _key(body.get("key"))
    if not isinstance(body.get("value"), dict):
        raise LangGraphError(422, "`value` must be an object")
    await _store(request).aput((root, *namespace), key, body["value"], index=False)
    return Response(status_code=204)


@router.get("/store/items")
async def get_item(request: Request) -> dict[str, Any]:
    root = label(await request_tenant(request))
    namespace = _namespace(request.query_params.get("namespace", ""), "namespace", empty=True)
    key = _key(request.query_params.get("key"))
    item = await _store(request).aget((root, *namespace), key)
    if item is None:
        raise LangGraphError(404, f"item {key!r} not found in namespace {list(namespace)}")
    return _item(item, root)


@router.delete("/store/items", status_code=204)
async def delete_item(request: Request, body: Any = Body(None)) -> Response:
    root = label(await request_tenant(request))
    if not isinstance(body, dict):
        raise LangGraphError(422, "the body must be a JSON object")
    namespace = _namespace(body.get("namespace"), "namespace", empty=True)
    await _store(request).adelete((root, *namespace), _key(body.get("key")))
    return Response(status_code=204)


@router.post("/store/items/search")
async def search_items(request: Request, body: Any = Body(None)) -> dict[str, Any]:
    root = label(await request_tenant(request))
    body = body if isinstance(body, dict) else {}
    prefix = _namespace(body.get("namespace_prefix"), "namespace_prefix", empty=True)
    wanted = body.get("filter")
    if wanted is not None and not isinstance(wanted, dict):
        raise LangGraphError(422, "`filter` must be an object")
    query = body.get("query")
    if query is not None and not isinstance(query, str):
        raise LangGraphError(422, "`query` must be a string")
    items = await _store(request).asearch((root, *prefix), filter=wanted, query=query,
                                          limit=_bounded(body, "limit", 10, MAX_LIMIT),
                                          offset=_bounded(body, "offset", 0, 10 ** 9))
    return {"items": [_item(i, root) for i in items]}


@router.post("/store/namespaces")
async def list_namespaces(request: Request, body: Any = Body(None)) -> dict[str, Any]:
    root = label(await request_tenant(request))
    body = body if isinstance(body, dict) else {}
    prefix = _namespace(body.get("prefix"), "prefix", empty=True)
    suffix = _namespace(body.get("suffix"), "suffix", empty=True)
    depth = body.get("max_depth")
    if depth is not None and (isinstance(depth, bool) or not isinstance(depth, int) or depth < 1):
        raise LangGraphError(422, "`max_depth` must be a positive integer")
    found = await _store(request).alist_namespaces(prefix=(root, *prefix), suffix=suffix or None,
                                                   max_depth=depth + 1 if depth else None,
                                                   limit=_bounded(body, "limit", 100, MAX_LIMIT),
                                                   offset=_bounded(body, "offset", 0, 10 ** 9))
    return {"namespaces": [list(n)[1:] for n in found]}


def install(app: FastAPI) -> None:
    app.include_router(router)

"""Webhook triggers (RAGFlow's `/agents/{id}/webhook` routes): the rules are in server/backend/webhook.py, the
runs in runtime/webhook_runs.py.

`/webhook` is public: the agent's Begin says who may call it (its security settings). `/webhook/test`
is the same for the agent's owner, with the run's events kept for `/webhook/logs`. Refusals are HTTP
errors with `{"code": <status>, "message"}`, as RAGFlow answers them: webhook senders read the status.
A multipart body's file parts go into the run file store, as the agent owner's uploads (under its upload
limits), once the call is let in; the body carries their entries under the parts' names.
"""
from __future__ import annotations

import asyncio
import time

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response

from canvas2graph.types import CompileError
from canvas2graph.compiler.canvas import compile_dsl
from canvas2graph.server.backend.conversations import SessionBusy
from canvas2graph.runtime.services.file_text import with_contents
from canvas2graph.runtime.services.files import FileStoreError
from canvas2graph.runtime.services.models import ModelConfigError
from canvas2graph.runtime.services.scripted import ScriptError
from canvas2graph.runtime.run.runner import TurnRejected
from canvas2graph.server.backend.store import Agent, webhook_bucket
from canvas2graph.server.backend.webhook import (IMMEDIATELY, WebhookRefused, WebhookRequest, check_method, check_security,
                             immediate_response, is_immediate, parse_request, run_payload, webhook_settings)
from canvas2graph.server.auth import tenant
from canvas2graph.server.errors import ApiError, argument_error, ok
from canvas2graph.server.deps import int_param, owned_agent, store
from canvas2graph.server.uploads import Incoming, store_uploads
from canvas2graph.server.views import webhook_call_view

router = APIRouter(prefix="/api/v1", tags=["webhooks"])
METHODS = ["POST", "GET", "PUT", "PATCH", "DELETE", "HEAD"]
FORM_TYPES = ("multipart/form-data", "application/x-www-form-urlencoded")


def refused(message: str, status: int = 400) -> JSONResponse:
    return JSONResponse({"code": status, "message": message}, status_code=status)


async def _request(request: Request) -> tuple[WebhookRequest, list[tuple[str, Incoming]]]:
    """The request as the webhook rules read it, and its file parts (stored only once the call is let in)."""
    found = WebhookRequest(method=request.method, client_ip=request.client.host if request.client else "",
                           headers=list(request.headers.items()), query=list(request.query_params.multi_items()),
                           body=await request.body())
    parts: list[tuple[str, Incoming]] = []
    if found.content_type in FORM_TYPES:
        try:
            form = await request.form()
        except Exception as e:      # noqa: BLE001 - a malformed form is the caller's mistake
            raise WebhookRefused(f"the form body cannot be read: {e}")
        found.form = {k: v for k, v in form.multi_items() if isinstance(v, str)}
        for key, value in form.multi_items():
            if not isinstance(value, str):
                parts.append((key, Incoming(value.filename or key, await value.read(), value.content_type)))
    return found, parts


async def _store_files(request: Request, agent: Agent, parts: list[tuple[str, Incoming]]) -> dict[str, list[dict]]:
    """The file parts, stored for the agent's owner under its upload limits, each entry with its content
    (RAGFlow hands Begin a webhook's files parsed): {field: [entries]}."""
    if not parts:
        return {}
    store = request.app.state.files
    limits = request.app.state.upload_policy.of(agent.tenant)
    try:
        entries = await store_uploads(store, agent.tenant, [part for _, part in parts], limits)
        read = await asyncio.to_thread(with_contents, entries, store, agent.tenant)
    except ApiError as e:
        raise WebhookRefused(e.message, e.status if 400 <= e.status < 500 else 400)
    except FileStoreError as e:
        raise WebhookRefused(f"a file part cannot be read: {e}")
    files: dict[str, list[dict]] = {}
    for (key, _), entry in zip(parts, read):
        files.setdefault(key, []).append(entry)
    return files


async def _check_compiles(agent: Agent) -> None:
    try:
        await asyncio.to_thread(compile_dsl, agent.dsl)
    except CompileError as e:
        errors = [d for d in e.diagnostics if d.severity == "error"]
        raise WebhookRefused(f"agent {agent.id} does not compile: {errors[0] if errors else 'fix its DSL'}")


async def _webhook(request: Request, agent: Agent, *, is_test: bool) -> Response:
    settings = webhook_settings(agent.dsl)
    if settings is None:
        return refused(f"agent {agent.id} has no webhook: its Begin is not in Webhook mode")
    try:
        check_method(settings, request.method)
        incoming, parts = await _request(request)

        async def take_token(limit: int, per: int) -> bool:
            return await store(request).take_token(webhook_bucket(agent.id), limit, per)

        await check_security(settings, incoming, take_token)
        await _check_compiles(agent)
        incoming.files = await _store_files(request, agent, parts)
        payload = run_payload(settings, parse_request(settings, incoming))
        answer = immediate_response(settings) if is_immediate(settings) else None
    except WebhookRefused as e:
        return refused(e.message, e.status)
    webhooks = request.app.state.webhooks
    try:
        call, turn = await webhooks.start(agent, payload, mode=IMMEDIATELY if answer else "Streaming",
                                          is_test=is_test, method=request.method, client=incoming.client_ip)
    except SessionBusy as e:
        return refused(str(e), 409)
    except (CompileError, TurnRejected, ModelConfigError, ScriptError) as e:
        return refused(f"the run cannot start: {e}")
    following = webhooks.follow(call, turn)
    if answer is not None:
        status, body, media_type = answer
        return Response(body, status_code=status, media_type=media_type)
    outcome = await asyncio.shield(following)      # a caller that leaves does not stop the run's record
    return JSONResponse(outcome.body(), status_code=outcome.code)


async def webhook(request: Request, agent_id: str):
    agent = await store(request).find_agent(agent_id)
    if agent is None:
        return refused(f"agent {agent_id} not found")
    return await _webhook(request, agent, is_test=False)


async def webhook_test(request: Request, agent_id: str, tenant_id: str = Depends(tenant)):
    agent = await owned_agent(request, tenant_id, agent_id)
    return await _webhook(request, agent, is_test=True)


for _method in METHODS:        # one route per method: OpenAPI wants an operation id each
    router.add_api_route("/agents/{agent_id}/webhook", webhook, methods=[_method],
                         operation_id=f"webhook_{_method.lower()}",
                         summary="Run an agent whose Begin is in Webhook mode (public: its security settings decide)")
    router.add_api_route("/agents/{agent_id}/webhook/test", webhook_test, methods=[_method],
                         operation_id=f"webhook_test_{_method.lower()}",
                         summary="The agent owner's test call of its webhook: the run's events go to /webhook/logs")


@router.get("/agents/{agent_id}/webhook/logs",
            summary="Recent webhook calls, and RAGFlow's polling of a test call's events (since_ts, webhook_id)")
async def webhook_logs(request: Request, agent_id: str, tenant_id: str = Depends(tenant)):
    await owned_agent(request, tenant_id, agent_id)
    q = request.query_params
    calls = await store(request).webhook_calls(tenant_id, agent_id, limit=int_param(q.get("limit"), "limit", 20))
    reply = {"webhook_id": None, "events": [], "next_since_ts": time.time(), "finished": False,
             "calls": [webhook_call_view(c) for c in calls]}
    if q.get("since_ts") in (None, ""):
        return ok(reply)
    try:
        since = float(q["since_ts"])
    except ValueError:
        raise argument_error(f"`since_ts` must be a timestamp in seconds, got {q['since_ts']!r}")
    reply["next_since_ts"] = since
    webhook_id = q.get("webhook_id")
    if not webhook_id:
        # the first test call after since_ts: its id is what the client polls next
        first = await store(request).webhook_calls(tenant_id, agent_id, is_test=True, after_ts=since,
                                                   oldest_first=True, limit=1)
        if first:
            reply.update(webhook_id=first[0].id, next_since_ts=first[0].start_ts)
        return ok(reply)
    reply["webhook_id"] = webhook_id
    call = await store(request).webhook_call(tenant_id, agent_id, webhook_id)
    if call is None:
        reply["finished"] = True
        return ok(reply)
    events = await store(request).webhook_events(call.id, since)
    reply.update(events=events, next_since_ts=max([since, *(e["ts"] for e in events)]),
                 finished=any(e.get("event") == "finished" for e in events))
    return ok(reply)

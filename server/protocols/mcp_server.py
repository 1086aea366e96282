"""Every stored agent as an MCP tool, over streamable HTTP (the `mcp` package's server and session manager).

Two endpoints share one MCP server:
- `/api/v1/agents/{agent_id}/mcp`: one tool, the agent;
- `/api/v1/mcp`: one tool per agent of the token's tenant.

A request must carry the tenant's Bearer token (the same tokens as RAGFlow's routes); an MCP session
belongs to the tenant that opened it (any other tenant's request naming it gets 404, as from the SDK).
A tool's name and description come from the agent's title and description, its input schema from
Begin's form plus `query`, the user's message. A call runs one turn of a canvas2graph session, through
the same turn machinery as the RAGFlow routes; later calls on the same MCP session continue that
conversation. Components report their start and end as progress notifications. A UserFillUp pause is
asked through elicitation when the client offers it (the answer resumes the run in the same call);
otherwise the call answers the form's question, and the next call on the MCP session answers the form.
Cancelling the call (`notifications/cancelled`) cancels the turn at its next node boundary.

MCP sessions are shared by every server process on the database (`mcp_sessions.py`): which canvas2graph
session an MCP session talks to, per agent, and the form it left waiting are kept in the store, and so is
the call running on it, so that an elicitation answer or a cancellation reaching another process is passed
on to the one that runs the call (`mcp_relay.py`).
"""
from __future__ import annotations

import hashlib
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext
from typing import Any, AsyncIterator

import mcp_types as types
from fastapi import FastAPI
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.lowlevel.server import Server
from mcp.shared.exceptions import MCPError
from mcp.shared.jsonrpc_dispatcher import progress_token_from_params
from starlette.requests import HTTPConnection, Request
from starlette.responses import JSONResponse

from canvas2graph.types import CompileError
from canvas2graph.runtime.run.runner import TurnRejected, TurnRequest
from canvas2graph.server.backend.store import Agent
from canvas2graph.server.errors import ApiError
from canvas2graph.server.protocols import common
from canvas2graph.server.protocols.mcp_sessions import DEFAULT_TTL, TENANT_KEY, SharedSessions

ROUTE_AGENT = "/api/v1/agents/{agent_id}/mcp"
ROUTE_TENANT = "/api/v1/mcp"
AGENT_KEY = "c2g.agent_id"


# --- tools ------------------------------------------------------------------------------------------
async def _tools(request: Request) -> dict[str, tuple[Agent, types.Tool]]:
    """The tools the request may see, by name: its agent, or every agent of its tenant that compiles."""
    tenant, agent_id = request.scope[TENANT_KEY], request.scope.get(AGENT_KEY)
    if agent_id:
        agents = [await common.owned_agent(request, tenant, agent_id)]
    else:
        agents = await common.tenant_agents(request, tenant)
    tools: dict[str, tuple[Agent, types.Tool]] = {}
    for agent in agents:
        try:
            mode, fields = await common.begin_form(agent.dsl)
        except CompileError:
            continue            # an agent that does not compile cannot run: no tool for it
        name = common.slug(agent.title) or "agent"
        if name in tools:       # titles are unique per tenant, their slugs need not be
            name = f"{name}_{agent.id[:8]}"
        tools[name] = (agent, _tool(agent, name, mode, fields))
    return tools


def _tool(agent: Agent, name: str, mode: str, fields: dict[str, dict]) -> types.Tool:
    properties, required = common.form_schema(fields)
    query = {"type": "string", "description": "The user's message to the agent (also the answer to a form it asked)"}
    properties = {"query": query, **{k: v for k, v in properties.items() if k != "query"}}
    if mode == "conversational" and "query" not in required:
        required = ["query", *required]
    description = agent.description or f"Runs the agent “{agent.title}” and answers with its reply."
    return types.Tool(name=name, title=agent.title, description=description,
                      input_schema={"type": "object", "properties": properties, "required": required})


async def list_tools(ctx, params) -> types.ListToolsResult:
    try:
        tools = await _tools(ctx.request)
    except ApiError as e:
        raise _mcp_error(e)
    return types.ListToolsResult(tools=[tool for _agent, tool in tools.values()])


def _mcp_error(error: ApiError) -> MCPError:
    return MCPError(code=types.INVALID_PARAMS, message=error.message)


# --- calls ------------------------------------------------------------------------------------------
class _Progress:
    """Components reported as progress notifications, when the call asked for them."""

    def __init__(self, ctx) -> None:
        self.ctx, self.token, self.count = ctx, progress_token_from_params(ctx.params), 0

    async def __call__(self, event: dict) -> None:
        kind = event.get("event")
        if self.token is None or kind not in ("node_started", "node_finished"):
            return
        data = event.get("data") or {}
        self.count += 1
        what = "started" if kind == "node_started" else "failed" if data.get("error") else "finished"
        name = data.get("component_name") or data.get("component_id")
        message = f"{name} ({data.get('component_type', '')}) {what}"
        await self.ctx.session.send_progress_notification(self.token, float(self.count), None, message,
                                                          related_request_id=self.ctx.request_id)


def _can_elicit(ctx) -> bool:
    capabilities = ctx.session.client_capabilities
    return bool(capabilities and capabilities.elicitation is not None) and ctx.session.can_send_request


async def _ask(ctx, pause: dict, waiting: AbstractAsyncContextManager) -> dict[str, Any] | None:
    """The form asked through MCP elicitation: its answers, or None when the user declined or cancelled.
    `waiting` is entered while the answer is awaited (it may reach another server process)."""
    properties, required = common.form_schema(pause.get("inputs") or {})
    schema = {"type": "object", "properties": properties, "required": required}
    async with waiting:
        answer = await ctx.session.elicit_form(message=pause.get("tips") or "Please fill up the form",
                                               requested_schema=schema, related_request_id=ctx.request_id)
    if answer.action != "accept":
        return None
    return dict(answer.content or {})


async def call_tool(ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
    request: Request = ctx.request
    try:
        tools = await _tools(request)
    except ApiError as e:
        return _error_result(e.message)
    if params.name not in tools:
        return _error_result(f"no tool named {params.name!r}: list the tools to see this endpoint's agents")
    agent = tools[params.name][0]
    arguments = dict(params.arguments or {})
    # the 2026 protocol has no MCP sessions: each of its calls starts a conversation
    mcp_session = request.headers.get("mcp-session-id") or ""
    sessions: SharedSessions = request.app.state.mcp_sessions
    store = request.app.state.store
    known = await store.get_mcp_conversation(mcp_session, agent.id) if mcp_session else None
    tenant = request.scope[TENANT_KEY]
    try:
        session = None
        if known is not None:
            session = await store.get_session(tenant, known["session_id"])
        if session is None:
            known = None
            session = await common.new_session(request, tenant, agent, name=f"MCP: {agent.title}")
        if mcp_session:
            # kept at once: a call cancelled mid-turn leaves the conversation to the next; the running call
            # is named, so that its cancellation reaching another process finds where it runs
            await store.put_mcp_conversation(mcp_session, agent.id, session.id, None, str(ctx.request_id),
                                             sessions.owner)
        _mode, fields = await common.begin_form(session.dsl)
        turn_request = common.form_request(arguments, fields, (known or {}).get("pause"))
        progress = _Progress(ctx)
        while True:
            result = await common.run_to_end(await common.start(request, session, turn_request), progress)
            if result.status != "paused" or not _can_elicit(ctx):
                break
            waiting = sessions.waiting_for_answer(mcp_session, agent.id) if mcp_session else nullcontext()
            answers = await _ask(ctx, result.pause or {}, waiting)
            if answers is None:
                result.content += "\n\n[The form was declined: answer it in your next call to continue.]"
                break
            turn_request = TurnRequest(inputs=answers)
    except (ApiError, TurnRejected) as e:
        return _error_result(e.message if isinstance(e, ApiError) else str(e))
    if mcp_session:
        await store.put_mcp_conversation(mcp_session, agent.id, session.id,
                                         result.pause if result.status == "paused" else None)
    return _result(request, result)


def _error_result(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=message)], is_error=True)


def _result(request: Request, result: common.TurnResult) -> types.CallToolResult:
    """The turn's answer as text, its cited chunks as embedded resources and produced files as links."""
    text = result.content
    if result.status == "paused":
        text = (text + "\n\n" if text else "") + common.pause_text(result.pause or {})
    elif result.status in ("stopped", "failed", "cancelled") and result.error:
        text = (text + "\n\n" if text else "") + f"[The run {result.status}: {result.error}]"
    content: list[Any] = [types.TextContent(type="text", text=text)]
    for chunk in common.chunks(result.reference):
        uri = f"canvas2graph://chunks/{chunk.get('id') or chunk.get('chunk_id') or len(content)}"
        content.append(types.EmbeddedResource(type="resource", resource=types.TextResourceContents(
            uri=uri, mime_type="text/plain", text=str(chunk.get("content") or ""),
            meta={"document_id": chunk.get("document_id") or chunk.get("doc_id"),
                  "document_name": chunk.get("document_name") or chunk.get("docnm_kwd")})))
    base = str(request.base_url)
    for entry in result.downloads:
        content.append(types.ResourceLink(type="resource_link", name=str(entry.get("filename") or "file"),
                                          uri=common.download_url(base, entry), mime_type=entry.get("mime_type")))
    structured = {"answer": result.content, "status": result.status, "session_id": result.session_id}
    if result.pause is not None:
        structured["waiting_for"] = result.pause
    return types.CallToolResult(content=content, structured_content=structured,
                                is_error=result.status in ("stopped", "failed"))


# --- the endpoints ----------------------------------------------------------------------------------
class _Endpoint:
    """The ASGI endpoint of both routes: checks the token (and the agent) before the MCP sessions see the request."""

    def __init__(self, sessions: SharedSessions):
        self.sessions = sessions

    async def __call__(self, scope, receive, send) -> None:
        conn = HTTPConnection(scope)
        try:
            tenant = await common.tenant_of(conn)
            agent_id = (scope.get("path_params") or {}).get("agent_id")
            if agent_id:
                await common.owned_agent(conn, tenant, agent_id)
        except ApiError as e:
            headers = {"WWW-Authenticate": 'Bearer realm="canvas2graph"'} if e.status == 401 else None
            response = JSONResponse({"error": e.message}, status_code=e.status if e.status >= 400 else 400,
                                    headers=headers)
            await response(scope, receive, send)
            return
        # an MCP session belongs to the tenant that opened it: `SharedSessions` refuses it to any other
        scope[TENANT_KEY], scope[AGENT_KEY] = tenant, agent_id
        # the SDK's own notion of who asks (the 2026 protocol, which the SDK serves, binds state to it)
        token = hashlib.sha256(conn.headers.get("authorization", "").encode()).hexdigest()
        scope["user"] = AuthenticatedUser(AccessToken(token=token, client_id=tenant, scopes=[]))
        await self.sessions.handle(scope, receive, send)


def mcp_server() -> Server:
    return Server("canvas2graph", version="0.1.0", instructions="Each tool runs one canvas2graph agent.",
                  on_list_tools=list_tools, on_call_tool=call_tool)


def install(app: FastAPI, session_ttl: float = DEFAULT_TTL):
    """Add the MCP routes to `app`; returns the context manager the app's lifespan runs them in (inside the
    store and the conversations). MCP sessions idle for `session_ttl` seconds are deleted."""
    sessions = SharedSessions(mcp_server(), session_ttl)
    endpoint = _Endpoint(sessions)
    for path in (ROUTE_AGENT, ROUTE_TENANT):
        app.add_route(path, endpoint, methods=["GET", "POST", "DELETE"], include_in_schema=False)
    app.state.mcp_sessions = sessions

    async def cancel_turn(tenant: str, session_id: str) -> None:
        await app.state.conversations.cancel(tenant, session_id)

    @asynccontextmanager
    async def running() -> AsyncIterator[None]:
        async with sessions.run(app.state.store, cancel_turn):
            yield

    return running

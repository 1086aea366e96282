"""Every stored agent as an A2A agent (`a2a-sdk`'s request handler, JSON-RPC dispatcher and card serializer).

- `GET /api/v1/agents/{agent_id}/a2a/.well-known/agent-card.json`: the agent's card (its title, description,
  one skill, streaming, Bearer auth);
- `POST /api/v1/agents/{agent_id}/a2a`: JSON-RPC. A2A 1.0's `SendMessage`, `SendStreamingMessage`, `GetTask`,
  `CancelTask`, ... and, on the same endpoint, A2A 0.3's `message/send`, `message/stream`, `tasks/get`,
  `tasks/cancel` (the SDK's compatibility layer).

A context id is a canvas2graph session (the client's context id becomes the session's id; without one, the
SDK's new id does). A message runs one turn of that session through the same turn machinery as the RAGFlow
routes. Components report their start and end as `working` status updates, the answer streams as chunks of
one artifact (`answer`), and the task ends `completed`, `failed` or `canceled`; a UserFillUp pause is the
state `input-required`, whose message carries the form's tips (and the form as a data part), and the next
message on that task (or context) answers it: a data part with the form's fields, or text for a form with
one field left. `tasks/cancel` cancels the turn at its next node boundary, in whichever process runs it.

Tasks live in the server's database (`a2a_tasks.py`: the SDK's versioned task store and event stream over the
store's tables), each tenant's and agent's apart, so every server process on the database answers for every
task: `tasks/get`, `tasks/list`, the answer to a paused task, `tasks/cancel` (the turn is cancelled through the
database wherever it runs) and `tasks/resubscribe` (the events the running process logs).
"""
from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

from a2a.helpers.proto_helpers import new_data_part, new_message, new_task_from_user_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.request_handlers.request_handler import validate_request_params
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.server.routes import DefaultServerCallContextBuilder, create_jsonrpc_routes
from a2a.server.context import ServerCallContext
from a2a.server.tasks import TaskUpdater
from a2a.types import (AgentCapabilities, AgentCard, AgentInterface, AgentSkill, CancelTaskRequest,
                       HTTPAuthSecurityScheme, Role, SecurityScheme, SubscribeToTaskRequest, Task, TaskState)
from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse
from google.protobuf.json_format import MessageToDict
from starlette.authentication import SimpleUser

from canvas2graph.server.backend.store import Agent
from canvas2graph.server.errors import ApiError
from canvas2graph.server.protocols import common
from canvas2graph.server.protocols.a2a_tasks import SharedEventStream, SharedTaskStore, follow

ROUTE = "/api/v1/agents/{agent_id}/a2a"
CARD_ROUTE = ROUTE + "/.well-known/agent-card.json"
STATE_KEY = "c2g"           # the call context's state entry: {"request", "tenant", "agent"}
ANSWER_ARTIFACT = "answer"
# a task waiting for input keeps the SDK's in-memory runner of its process this long; the next message
# (to any process) starts a new one from the stored task, so holding it longer only holds memory
PARKED_SECONDS = 60.0


def agent_card(agent: Agent, base_url: str) -> AgentCard:
    url = base_url.rstrip("/") + ROUTE.format(agent_id=agent.id)
    description = agent.description or f"The canvas2graph agent “{agent.title}”."
    interfaces = [AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version=v) for v in ("1.0", "0.3")]
    return AgentCard(
        name=agent.title, description=description, version="1.0.0", supported_interfaces=interfaces,
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain", "application/json"], default_output_modes=["text/plain", "application/json"],
        skills=[AgentSkill(id=common.slug(agent.title) or agent.id, name=agent.title, description=description,
                           tags=["canvas2graph", "ragflow-agent"])],
        security_schemes={"bearer": SecurityScheme(http_auth_security_scheme=HTTPAuthSecurityScheme(
            scheme="bearer", description="a canvas2graph API token (canvas2graph tokens create)"))})


class _CallContextBuilder(DefaultServerCallContextBuilder):
    """The SDK's call context, with the authenticated tenant, its agent and the request (set by the route)."""

    def build(self, request):
        context = super().build(request)
        context.state[STATE_KEY] = request.scope[STATE_KEY]
        return context


def task_scope(context: ServerCallContext) -> tuple[str, str]:
    """(tenant, agent id) of a call: whose tasks it may see."""
    call = context.state[STATE_KEY]
    return call["tenant"], call["agent"].id


class CanvasRequestHandler(DefaultRequestHandler):
    """The SDK's handler, with `tasks/cancel` reaching the turn wherever it runs and `tasks/resubscribe`
    following the task through the database wherever it runs.

    The SDK cancels a task that runs in another process by writing `canceled` over it, which that
    process sees at its next write; the turn itself is also told through the database (as RAGFlow's
    cancel route does), so it stops at its next node boundary even while no event is being written."""

    def __init__(self, *, tasks: SharedTaskStore, events: SharedEventStream, **options: Any):
        super().__init__(task_store=tasks, event_stream=events, **options)
        self.tasks, self.events = tasks, events

    async def on_cancel_task(self, params: CancelTaskRequest, context: ServerCallContext) -> Task | None:
        task = await super().on_cancel_task(params, context)
        if task is not None:
            call = context.state[STATE_KEY]
            await call["request"].app.state.conversations.cancel(call["tenant"], task.context_id)
        return task

    @validate_request_params
    async def on_subscribe_to_task(self, params: SubscribeToTaskRequest,
                                   context: ServerCallContext) -> AsyncGenerator[Any, None]:
        async for event in follow(self.tasks, self.events, params.id, context):
            yield event


def _message_values(message) -> dict[str, Any]:
    """A user message as form values: its data parts' objects, and its text as `query`."""
    values: dict[str, Any] = {}
    texts = []
    for part in message.parts if message is not None else ():
        if part.HasField("data"):
            data = MessageToDict(part.data)
            if isinstance(data, dict):
                values.update(data)
        elif part.HasField("text"):
            texts.append(part.text)
    if texts:
        values["query"] = "\n".join(texts)
    return values


class CanvasExecutor(AgentExecutor):
    """Runs a turn of the context's session for each message, reporting it as the task's updates."""

    async def execute(self, context: RequestContext, event_queue) -> None:
        call = context.call_context.state[STATE_KEY]
        request, tenant, agent = call["request"], call["tenant"], call["agent"]
        if context.current_task is None:
            await event_queue.enqueue_event(new_task_from_user_message(context.message))
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        try:
            session, turn_request = await self._prepare(request, tenant, agent, context)
            await updater.start_work()
            report = _Reporter(updater, context)
            result = await common.run_to_end(await common.start(request, session, turn_request), report)
        except ApiError as e:
            await updater.failed(self._text(context, e.message))
            return
        await report.close()
        await self._finish(updater, context, result)

    async def _prepare(self, request: Request, tenant: str, agent: Agent, context: RequestContext):
        session = await request.app.state.store.get_session(tenant, context.context_id)
        if session is not None and session.agent_id != agent.id:
            raise ApiError(404, f"context {context.context_id} belongs to another agent", status=404)
        if session is None:
            session = await common.new_session(request, tenant, agent, session_id=context.context_id,
                                               name=f"A2A: {agent.title}")
        _mode, fields = await common.begin_form(session.dsl)
        pause = await common.waiting_for(request, session)
        return session, common.form_request(_message_values(context.message), fields, pause)

    @staticmethod
    def _text(context: RequestContext, text: str, data: dict | None = None):
        parts = [new_text_part(text)] + ([new_data_part(data)] if data is not None else [])
        return new_message(parts, context_id=context.context_id, task_id=context.task_id, role=Role.ROLE_AGENT)

    async def _finish(self, updater: TaskUpdater, context: RequestContext, result: common.TurnResult) -> None:
        if result.status == "paused":
            pause = result.pause or {}
            await updater.requires_input(self._text(context, pause.get("tips") or "Please fill up the form",
                                                    {"form": pause.get("inputs") or {}}))
        elif result.status == "finished":
            await updater.complete(self._text(context, result.content, _extras(result)))
        elif result.status == "cancelled":
            await updater.cancel(self._text(context, "The run was cancelled."))
        else:
            await updater.failed(self._text(context, f"The run {result.status}: {result.error or 'no reason given'}"))

    async def cancel(self, context: RequestContext, event_queue) -> None:
        """`tasks/cancel`: the SDK has cancelled `execute` here; a turn running in another process is told
        through the database, as RAGFlow's cancel route does."""
        call = context.call_context.state[STATE_KEY]
        await call["request"].app.state.conversations.cancel(call["tenant"], context.context_id)
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        await updater.cancel(self._text(context, "The run was cancelled."))


def _extras(result: common.TurnResult) -> dict | None:
    """What a finished answer carries beside its text: the cited chunks and the produced files."""
    extras: dict[str, Any] = {}
    if common.chunks(result.reference):
        extras["reference"] = result.reference
    if result.downloads:
        extras["downloads"] = result.downloads
    return extras or None


class _Reporter:
    """Turn events as task updates: components as `working` status messages, the answer as artifact chunks."""

    def __init__(self, updater: TaskUpdater, context: RequestContext):
        self.updater, self.context, self.chunks = updater, context, 0
        self.thinking = False       # between a message's start_to_think and end_to_think: the model's reasoning

    async def __call__(self, event: dict) -> None:
        kind, data = event.get("event"), event.get("data") or {}
        if kind == "message" and (data.get("start_to_think") or data.get("end_to_think")):
            self.thinking = bool(data.get("start_to_think"))
        if kind == "message" and self.thinking:
            # the reasoning is no part of the answer: it goes out as working status, marked as thinking
            if data.get("content"):
                await self.updater.update_status(
                    TaskState.TASK_STATE_WORKING, CanvasExecutor._text(self.context, data["content"]),
                    metadata={"event": "thinking"})
            return
        if kind in ("node_started", "node_finished"):
            what = "started" if kind == "node_started" else "finished"
            name = data.get("component_name") or data.get("component_id")
            await self.updater.update_status(
                TaskState.TASK_STATE_WORKING, CanvasExecutor._text(self.context, f"{name} {what}"),
                metadata={"event": kind, "component_id": data.get("component_id"),
                          "component_type": data.get("component_type")})
        elif kind == "message" and data.get("content"):
            await self.updater.add_artifact([new_text_part(data["content"])], artifact_id=self._artifact_id(),
                                            name=ANSWER_ARTIFACT, append=self.chunks > 0, last_chunk=False)
            self.chunks += 1

    def _artifact_id(self) -> str:
        return f"{self.context.task_id}-{ANSWER_ARTIFACT}"

    async def close(self) -> None:
        if self.chunks:
            await self.updater.add_artifact([new_text_part("")], artifact_id=self._artifact_id(),
                                            name=ANSWER_ARTIFACT, append=True, last_chunk=True)


async def _authorized(request: Request, agent_id: str) -> tuple[str, Agent] | JSONResponse:
    try:
        tenant = await common.tenant_of(request)
        return tenant, await common.owned_agent(request, tenant, agent_id)
    except ApiError as e:
        headers = {"WWW-Authenticate": 'Bearer realm="canvas2graph"'} if e.status == 401 else None
        return JSONResponse({"error": e.message}, status_code=e.status if e.status >= 400 else 400, headers=headers)


def install(app: FastAPI) -> None:
    """Add the A2A routes (the agent card and the JSON-RPC endpoint) to `app`."""
    # the handler's card stands for every agent (each request is answered with its own agent's card); complete,
    # so that the SDK finds nothing missing in it at startup
    template = agent_card(Agent(id="agent", tenant="", title="canvas2graph agent", dsl={}), "http://127.0.0.1")
    store_of = lambda: app.state.store         # noqa: E731 - opened by the app's lifespan, after install
    handler = CanvasRequestHandler(agent_executor=CanvasExecutor(), tasks=SharedTaskStore(store_of, task_scope),
                                   events=SharedEventStream(store_of), agent_card=template,
                                   interrupted_task_timeout=PARKED_SECONDS)
    dispatch = create_jsonrpc_routes(handler, rpc_url=ROUTE, context_builder=_CallContextBuilder(),
                                     enable_v0_3_compat=True)[0].endpoint
    router = APIRouter(tags=["a2a"])

    @router.get(CARD_ROUTE, summary="A2A: the agent's card")
    async def card(request: Request, agent_id: str):
        found = await _authorized(request, agent_id)
        if isinstance(found, JSONResponse):
            return found
        return JSONResponse(agent_card_to_dict(agent_card(found[1], str(request.base_url))))

    @router.post(ROUTE, summary="A2A: JSON-RPC (message/send, message/stream, tasks/get, tasks/cancel, ...)")
    async def rpc(request: Request, agent_id: str):
        found = await _authorized(request, agent_id)
        if isinstance(found, JSONResponse):
            return found
        tenant, agent = found
        request.scope[STATE_KEY] = {"request": request, "tenant": tenant, "agent": agent}
        request.scope["user"] = SimpleUser(tenant)      # the SDK keeps each tenant's tasks apart
        return await dispatch(request)

    app.include_router(router)

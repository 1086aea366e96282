"""What the protocol adapters share: a tenant from a Bearer token, a session for an agent, and a turn
run to its end through the same machinery as RAGFlow's completion routes (`canvas2graph.server.turns`, leases,
cancellation, checkpoints).

The adapters speak other protocols, so they never answer in RAGFlow's envelope: failures come out as
`ApiError`s (the message names what is wrong) which each adapter turns into its protocol's error.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

from starlette.requests import HTTPConnection, Request

from canvas2graph.server.backend.answer_text import without_thinking
from canvas2graph.server.backend.conversations import Turn
from canvas2graph.runtime.run.runner import TurnRejected, TurnRequest
from canvas2graph.runtime.run.runner import Runner
from canvas2graph.server.backend.store import Agent, Session, StoreError
from canvas2graph.server.backend.versions import NoReleasedVersion, dsl_for_new_session
from canvas2graph.server.compiling import compile_in_thread
from canvas2graph.server.errors import ApiError, RetCode, data_error, not_found
from canvas2graph.server.turns import require_compiles, start_turn

# Begin's form field types as JSON Schema (a file field cannot travel as a plain value: left out)
FIELD_TYPES = {"line": "string", "paragraph": "string", "options": "string", "integer": "integer",
               "float": "number", "number": "number", "boolean": "boolean"}


async def tenant_of(conn: HTTPConnection) -> str:
    """The tenant of the request's Bearer token (as `canvas2graph.server.auth.tenant`), or an `ApiError` 401."""
    header = conn.headers.get("authorization", "").strip()
    if not header:
        raise ApiError(RetCode.AUTHENTICATION_ERROR, "Authorization is missing: send `Authorization: Bearer <token>`",
                       status=401)
    token = header[7:].strip() if header[:7].lower() == "bearer " else header
    found = await conn.app.state.store.tenant_of(token) if token else None
    if found is None:
        raise ApiError(RetCode.AUTHENTICATION_ERROR, "Authentication error: API key is invalid!", status=401)
    return found


async def owned_agent(conn: HTTPConnection, tenant: str, agent_id: str) -> Agent:
    agent = await conn.app.state.store.get_agent(tenant, agent_id)
    if agent is None:
        raise not_found(f"agent {agent_id}")
    return agent


async def tenant_agents(conn: HTTPConnection, tenant: str) -> list[Agent]:
    """Every agent of the tenant, oldest first (a stable order for tool names and listings)."""
    store, agents, page = conn.app.state.store, [], 1
    while True:
        batch, _total = await store.list_agents(tenant, page=page, page_size=1000, orderby="create_time", desc=False)
        agents += batch
        if len(batch) < 1000:
            return agents
        page += 1


async def new_session(request: Request, tenant: str, agent: Agent, *, source: str = "agent",
                      user_id: str = "", name: str | None = None, session_id: str | None = None) -> Session:
    """A session of the agent's current DSL, refused (naming the problems) when it does not compile.
    `session_id` is an id the client chose (an A2A context id, a LangGraph thread id)."""
    store = request.app.state.store
    try:
        dsl, version = await dsl_for_new_session(store, agent, release=False)
    except NoReleasedVersion as e:
        raise data_error(str(e))
    await require_compiles(request, dsl, f"agent {agent.id}")
    try:
        return await store.create_session(tenant, source=source, dsl=dsl, agent_id=agent.id, user_id=user_id,
                                          name=name or "New session", version=version, session_id=session_id)
    except StoreError as e:
        raise data_error(str(e))


async def own_session(request: Request, tenant: str, session_id: str, agent_id: str | None = None) -> Session:
    session = await request.app.state.store.get_session(tenant, session_id)
    if session is None or (agent_id is not None and session.agent_id != agent_id):
        raise not_found(f"session {session_id}")
    return session


async def begin_form(dsl: Any) -> tuple[str, dict[str, dict]]:
    """(Begin's mode, its form fields) of a DSL that compiles (compiled once per content, in a thread)."""
    compiled = await compile_in_thread(dsl)
    begin = compiled.plan.nodes.get("begin")
    params = getattr(begin, "params", None)
    if params is None or not hasattr(params, "form"):
        return "conversational", {}
    return params.mode, params.form()


async def waiting_for(request: Request, session: Session) -> dict | None:
    """The form a paused session waits for (`{component_id, inputs, tips}`), read from its checkpoint (so it
    holds whichever server process ran the turn), or None."""
    compiled = await compile_in_thread(session.dsl_text or session.dsl)
    runner = Runner(compiled, request.app.state.store.checkpointer, None)
    return await runner.waiting_for(session.id)


def form_request(arguments: dict[str, Any], fields: dict[str, dict], pause: dict | None) -> TurnRequest:
    """A client's values as a turn request: `query`, and the form's fields (Begin's, or those of the form
    the session waits for). A waiting form with one required field left unanswered takes `query` for it,
    so a chat client can answer a one-question form with its next message."""
    query = arguments.get("query")
    query = "" if query is None else query if isinstance(query, str) else str(query)
    form = (pause or {}).get("inputs") or fields
    inputs = {k: v for k, v in arguments.items() if k in form}
    if pause is not None:
        missing = [k for k, spec in form.items() if k not in inputs and not (spec or {}).get("optional")]
        if len(missing) == 1 and query:
            inputs[missing[0]] = query
    try:
        return TurnRequest(query=query, inputs=inputs or None)
    except TurnRejected as e:
        raise data_error(str(e))


def form_schema(fields: dict[str, dict]) -> tuple[dict[str, Any], list[str]]:
    """JSON Schema properties and required names for form fields (Begin's or a UserFillUp's)."""
    properties: dict[str, Any] = {}
    required: list[str] = []
    for key, spec in fields.items():
        kind = FIELD_TYPES.get(str(spec.get("type", "line")))
        if kind is None:
            continue
        prop: dict[str, Any] = {"type": kind, "title": str(spec.get("name") or key)}
        if spec.get("type") == "options" and isinstance(spec.get("options"), list):
            prop["enum"] = [str(o) for o in spec["options"]]
        if spec.get("description"):
            prop["description"] = str(spec["description"])
        properties[key] = prop
        if not spec.get("optional"):
            required.append(key)
    return properties, required


def slug(text: str) -> str:
    """A protocol-safe name from a title: letters, digits and `_`, at most 64 characters."""
    return re.sub(r"_+", "_", re.sub(r"[^A-Za-z0-9]+", "_", text)).strip("_").lower()[:64]


@dataclass
class TurnResult:
    """How a turn ended, with what it answered."""
    status: str = "running"             # finished, paused, stopped, cancelled or failed
    content: str = ""
    reference: dict = field(default_factory=dict)
    downloads: list[dict] = field(default_factory=list)
    pause: dict | None = None           # the form it waits for: {"inputs": {...}, "tips": "..."}
    error: str | None = None
    session_id: str = ""


EventHook = Callable[[dict], Awaitable[None]]


async def start(request: Request, session: Session, turn_request: TurnRequest) -> Turn:
    """Start a turn (`canvas2graph.server.turns.start_turn`: busy sessions, compile and model errors are `ApiError`s)."""
    return await start_turn(request, session, turn_request)


async def run_to_end(turn: Turn, on_event: EventHook | None = None) -> TurnResult:
    """Read the turn's events to its end; `on_event` sees each one as it comes. Leaving early (the
    caller was cancelled) cancels the turn at its next node boundary, as a RAGFlow client leaving does."""
    result = TurnResult(session_id=turn.session.id)
    done = False
    try:
        try:
            async for event in turn.events():
                add_event(result, event)
                if on_event is not None:
                    await on_event(event)
        except Exception as e:      # noqa: BLE001 - the turn crashed: told to the client, never lost
            result.status, result.error = "failed", f"{type(e).__name__}: {e}"
            result.content = without_thinking(turn.content)
            done = True
            return result
        done = True
    finally:
        if not done:
            turn.cancel()
    # the text as the turn's events add up to it (a turn taken over streams its cut-off step again, and the
    # answer holds it once, as the session's message log does), less the model's thinking
    result.content = without_thinking(turn.content)
    outcome = turn.outcome
    result.status = "paused" if result.pause is not None else outcome.status
    result.error = result.error or outcome.error
    return result


def add_event(result: TurnResult, event: dict) -> None:
    """Fold one RAGFlow event into what the turn answered, but its text (`Turn.content` folds that)."""
    kind, data = event.get("event"), event.get("data") or {}
    if kind == "message_end":
        if isinstance(data.get("reference"), dict):
            result.reference.update(data["reference"])
        result.downloads += [d for d in data.get("downloads") or [] if isinstance(d, dict)]
    elif kind == "user_inputs":
        result.pause = {"inputs": data.get("inputs") or {}, "tips": data.get("tips") or ""}


def chunks(reference: dict) -> list[dict]:
    """The cited chunks of a reference (a list, or a dict keyed by position)."""
    found = reference.get("chunks") if isinstance(reference, dict) else None
    if isinstance(found, dict):
        found = list(found.values())
    return [c for c in found or [] if isinstance(c, dict)]


def download_url(base_url: str, entry: dict) -> str:
    """Where a produced file (a DocGenerator document, a CodeExec chart) is downloaded from."""
    return f"{base_url.rstrip('/')}/api/v1/agents/attachments/{entry.get('doc_id', '')}/download"


def pause_text(pause: dict) -> str:
    """A paused form as text, for clients that cannot be asked through their protocol."""
    fields = ", ".join(f"{k} ({(v or {}).get('name') or k})" for k, v in (pause.get("inputs") or {}).items())
    tips = pause.get("tips") or "The agent waits for a form."
    return f"{tips}\n\n[The agent waits for: {fields}. Answer in your next call.]" if fields else tips


def turn_error(error: ApiError) -> str:
    return str(getattr(error, "message", "") or error)


def endpoints(base_url: str, agent: Agent) -> dict[str, Any]:
    """Where the agent is served over MCP, A2A and LangGraph's API, with a client snippet for each (shown in
    `GET /api/v1/agents/<id>` and the run inspector). The snippets read the token from `$C2G_TOKEN`."""
    base = base_url.rstrip("/")
    mcp, a2a, langgraph = f"{base}/api/v1/agents/{agent.id}/mcp", f"{base}/api/v1/agents/{agent.id}/a2a", f"{base}/langgraph"
    auth = '{"Authorization": f"Bearer {os.environ[\'C2G_TOKEN\']}"}'
    return {
        "mcp": {"url": mcp, "tenant_url": f"{base}/api/v1/mcp", "snippet": (
            "import os, httpx2\nfrom mcp.client.session import ClientSession\n"
            "from mcp.client.streamable_http import streamable_http_client\n\n"
            f"async with httpx2.AsyncClient(headers={auth}) as http:\n"
            f"    async with streamable_http_client(\"{mcp}\", http_client=http) as (read, write, *_):\n"
            "        async with ClientSession(read, write) as session:\n"
            "            await session.initialize()\n"
            "            tool = (await session.list_tools()).tools[0]\n"
            "            print(await session.call_tool(tool.name, {\"query\": \"Hello\"}))")},
        "a2a": {"url": a2a, "card_url": f"{a2a}/.well-known/agent-card.json", "snippet": (
            "import os, httpx\nfrom a2a.client import ClientConfig, create_client\n"
            "from a2a.helpers.proto_helpers import new_text_message\nfrom a2a.types import Role, SendMessageRequest\n\n"
            f"async with httpx.AsyncClient(headers={auth}) as http:\n"
            f"    client = await create_client(\"{a2a}\", client_config=ClientConfig(httpx_client=http))\n"
            "    message = new_text_message(\"Hello\", role=Role.ROLE_USER)\n"
            "    async for response in client.send_message(SendMessageRequest(message=message)):\n"
            "        print(response)")},
        "langgraph": {"url": langgraph, "assistant_id": agent.id, "snippet": (
            "import os\nfrom langgraph_sdk import get_client\n\n"
            f"client = get_client(url=\"{langgraph}\", headers={auth})\n"
            "thread = await client.threads.create()\n"
            f"print(await client.runs.wait(thread[\"thread_id\"], \"{agent.id}\", input={{\"query\": \"Hello\"}}))")},
    }

"""Running agents: RAGFlow's completion routes, the OpenAI-compatible mode and cancellation."""
from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, ConfigDict, Field

from canvas2graph.server.backend.versions import NoReleasedVersion, dsl_for_new_session, truthy
from canvas2graph.server.auth import tenant
from canvas2graph.server.errors import argument_error, data_error, not_found, ok
from canvas2graph.server.deps import owned_agent, store
from canvas2graph.server.turns import answer, answer_openai, require_compiles, start_turn, turn_request
from canvas2graph.server.uploads import require_own_files

router = APIRouter(prefix="/api/v1", tags=["completions"])


class Completion(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)
    agent_id: str | None = None
    query: Any = Field(None, description="the user's message (or an object of Begin inputs)")
    question: Any = Field(None, description="alias of query")
    stream: bool = False
    session_id: str | None = Field(None, description="continue this session; without it a new session starts")
    inputs: dict | None = Field(None, description="Begin's form, or the fields a paused session waits for")
    files: list | None = None
    user_id: str | None = None
    return_trace: bool = False
    openai_compatible: bool = Field(False, alias="openai-compatible")
    messages: list | None = Field(None, description="OpenAI-compatible mode: the chat; its last user message is asked")
    id: str | None = Field(None, description="OpenAI-compatible mode: alias of session_id")
    metadata: dict | None = None
    model: str | None = Field(None, description="OpenAI-compatible mode: ignored")
    release: Any = Field(None, description="a new session runs the agent's newest published version")


class LegacyCompletion(Completion):
    stream: bool = True          # RAGFlow's deprecated route streams unless told not to


class OpenAICompletion(BaseModel):
    model_config = ConfigDict(extra="allow")
    messages: list
    stream: bool = False
    model: str | None = None
    session_id: str | None = None
    id: str | None = None
    metadata: dict | None = None
    inputs: dict | None = None
    user_id: str | None = None


async def _session_of(request: Request, tenant_id: str, agent_id: str, session_id: str):
    session = await store(request).get_session(tenant_id, session_id)
    if session is None:
        raise not_found(f"session {session_id}")
    if session.agent_id != agent_id:
        raise data_error(f"session {session_id} is not a session of agent {agent_id}")
    return session


async def _new_session(request: Request, tenant_id: str, agent, source: str, user_id: str | None,
                       release: Any = None):
    try:
        dsl, version = await dsl_for_new_session(store(request), agent, release=truthy(release))
    except NoReleasedVersion as e:
        raise data_error(str(e))
    await require_compiles(request, dsl, f"agent {agent.id}")
    return await store(request).create_session(tenant_id, source=source, dsl=dsl, agent_id=agent.id,
                                               user_id=user_id or "", version=version)


async def _run(request: Request, tenant_id: str, agent_id: str, body: Completion, *, legacy: bool):
    agent = await owned_agent(request, tenant_id, agent_id)
    query = body.query if body.query is not None else body.question
    await require_own_files(request, tenant_id, body.files, body.inputs)
    if body.session_id:
        session = await _session_of(request, tenant_id, agent_id, body.session_id)
        style = "agent" if session.source == "agent" else "events"
    else:
        # a run without a session starts one: a "workflow" session here, an "agent" one on the legacy
        # route (as RAGFlow's completion() does)
        session = await _new_session(request, tenant_id, agent, "agent" if legacy else "workflow", body.user_id,
                                     body.release)
        style = "agent" if legacy else "events"
    if legacy:
        style = "legacy"
    turn = await start_turn(request, session, turn_request(query, body.inputs, body.user_id, body.files))
    return await answer(turn, stream=body.stream, style=style, return_trace=body.return_trace)


def _question(messages: Any) -> str:
    """The last user message's text (OpenAI content may be a list of parts)."""
    if not isinstance(messages, list) or not messages:
        raise argument_error("`messages` must be a non-empty list of {role, content}")
    for message in reversed(messages):
        if not isinstance(message, dict):
            raise argument_error("every item of `messages` must be an object with `role` and `content`")
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):
                return "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
            return content if isinstance(content, str) else ""
    raise argument_error("`messages` has no user message to answer")


async def _run_openai(request: Request, tenant_id: str, agent_id: str, body: Completion | OpenAICompletion):
    request.state.openai = True         # errors carry an HTTP status: the openai client reads it
    question = _question(body.messages)
    agent = await owned_agent(request, tenant_id, agent_id)
    session_id = body.session_id or body.id or (body.metadata or {}).get("id")
    if session_id:
        session = await _session_of(request, tenant_id, agent_id, session_id)
    else:
        session = await _new_session(request, tenant_id, agent, "agent", body.user_id)
    turn = await start_turn(request, session, turn_request(question, body.inputs, body.user_id, None))
    return await answer_openai(turn, stream=body.stream, model=agent_id)


@router.post("/agents/chat/completions", summary="Run an agent: SSE of RAGFlow events or the JSON reply")
async def chat_completions(request: Request, body: Completion, tenant_id: str = Depends(tenant)):
    if body.openai_compatible:
        request.state.openai = True
    if not body.agent_id:
        raise argument_error("`agent_id` is required")
    if body.openai_compatible:
        return await _run_openai(request, tenant_id, body.agent_id, body)
    return await _run(request, tenant_id, body.agent_id, body, legacy=False)


@router.post("/agents/{agent_id}/completions", summary="Deprecated RAGFlow route (ragflow-sdk 0.22): message events only")
async def legacy_completions(request: Request, agent_id: str, body: LegacyCompletion,
                             tenant_id: str = Depends(tenant)):
    return await _run(request, tenant_id, agent_id, body, legacy=True)


@router.post("/agents_openai/{agent_id}/chat/completions", summary="OpenAI-compatible chat completion of an agent")
async def openai_completions(request: Request, agent_id: str, body: OpenAICompletion,
                             tenant_id: str = Depends(tenant)):
    return await _run_openai(request, tenant_id, agent_id, body)


@router.get("/agents/{agent_id}/sessions/{session_id}/stream",
            summary="Re-attach to a session's turn: its events from the first, as the completion streamed them")
async def reattach(request: Request, agent_id: str, session_id: str, message_id: str | None = None,
                   tenant_id: str = Depends(tenant)):
    """The session's running turn (else its newest, or the one of `message_id`) as the SSE stream its completion
    sent, from its first event, whichever process runs it: a client whose connection (or API process) was lost
    reads the rest of the answer here. Leaving this stream does not stop the turn. The events of an ended turn
    are kept for an hour."""
    session = await _session_of(request, tenant_id, agent_id, session_id)
    turns = await store(request).session_turns(tenant_id, session_id, limit=50)
    found = next((t for t in turns if t.message_id == message_id), None) if message_id else \
        next((t for t in turns if t.open), turns[0] if turns else None)
    if found is None:
        raise not_found(f"a turn of session {session_id}" + (f" with message id {message_id}" if message_id else ""))
    turn = request.app.state.conversations.attach(found, session, asker=False)
    style = "agent" if session.source == "agent" else "events"
    return await answer(turn, stream=True, style=style)


@router.post("/tasks/{task_id}/cancel", summary="Cancel a session's running turn (task id = session id)")
async def cancel(request: Request, task_id: str, tenant_id: str = Depends(tenant)):
    if await store(request).get_session(tenant_id, task_id) is None:
        raise not_found(f"task {task_id}")
    return ok(await request.app.state.conversations.cancel(tenant_id, task_id))

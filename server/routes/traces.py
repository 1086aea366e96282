"""A session's step trace and forks from its steps; RAGFlow's `logs/{message_id}` and `rerun` routes.

Everything is read from the session's LangGraph checkpoints (runtime/run/steps.py): no log is kept aside.
A fork runs through the same turn machinery as a completion (one turn per session at a time, the
message log, cancellation) and answers the same way: RAGFlow's SSE, or the final JSON reply. Errors carry
RAGFlow's code and their HTTP status (404 not found, 400 a request that does not fit, 409 a busy session).
"""
from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel, ConfigDict, Field

from canvas2graph.types import CompileError
from canvas2graph.compiler.canvas import compile_dsl
from canvas2graph.runtime.run.runner import TurnRequest
from canvas2graph.runtime.run.steps import ForkError, abranches, atrace, atrace_message, fork_plan
from canvas2graph.server.auth import tenant
from canvas2graph.server.errors import ApiError, argument_error, not_found, ok
from canvas2graph.server.deps import owned_agent, store
from canvas2graph.server.turns import answer, diagnostics_error, start_turn

def http_status(request: Request) -> None:
    """Errors of these routes carry their HTTP status besides RAGFlow's code: 404 for a session, agent or
    message that is not the tenant's (another tenant's answers as an unknown one), 400 for a request that
    does not fit (a web UI reads the status first)."""
    request.state.http_status = True


router = APIRouter(prefix="/api/v1", tags=["traces"], dependencies=[Depends(http_status)])


# --- reply models (what OpenAPI shows) ------------------------------------------------------------
class ToolCall(BaseModel):
    id: str | None = Field(None, description="the model's id for the call")
    name: str = Field(description="the tool's function name")
    arguments: dict = Field(description="the arguments the model gave")
    result: str = Field(description="what the tool answered (its first 2,000 characters)")
    elapsed: float = Field(description="seconds the tool took")


class Step(BaseModel):
    model_config = ConfigDict(extra="allow")
    step: int = Field(description="LangGraph's superstep that ran the component (parallel components share it)")
    checkpoint_id: str = Field(description="the checkpoint the step ran from: fork from it to run the step again")
    component_id: str
    component_name: str
    component_type: str
    inputs: dict = Field(description="what the component read, as its node_finished event reports it")
    outputs: dict = Field(description="the component's outputs (a streamed generation's final text)")
    elapsed: float = Field(description="seconds the component took")
    error: str | None = None
    messages: list[dict] | None = Field(None, description="the prompt sent to the model (role, content): "
                                                          "only for components that called one")
    usage: dict | None = Field(None, description="token usage of the component's model calls "
                                                 "(prompt_tokens, completion_tokens, total_tokens, calls)")
    reasoning: str | None = Field(None, description="the model's reasoning, when it gave any")
    tool_calls: list[ToolCall] | None = Field(None, description="the tool calls an Agent made, in order")
    form: dict | None = Field(None, description="for a step that paused: the form it waits for")


class Turn(BaseModel):
    model_config = ConfigDict(extra="allow")
    turn: int = Field(description="1 for the session's first run on the current branch")
    query: str
    status: str = Field(description="finished, paused, failed, cancelled or running")
    message_id: str | None = Field(description="the run's message id (its events' `message_id`)")
    started_at: float = Field(description="when the run's first step started (UNIX seconds)")
    steps: list[Step]
    fork_of: int | None = Field(None, description="for a fork: the turn whose step it ran again")


class Branch(BaseModel):
    checkpoint_id: str = Field(description="the branch's newest checkpoint: trace it with `?checkpoint_id=`")
    current: bool = Field(description="the branch the session continues from (the newest one)")
    turns: int
    query: str = Field(description="its last turn's question (a fork's edited one)")
    status: str
    started_at: float
    fork_of: int | None = None


class Trace(BaseModel):
    session_id: str
    agent_id: str
    turns: list[Turn]
    branches: list[Branch] | None = Field(None, description="every branch of the session (forks leave one each), "
                                                            "newest first; with `?branches=true`")


class TraceReply(BaseModel):
    code: int = 0
    data: Trace


class LogEntry(Step):
    trace: list[dict] = Field(description="RAGFlow's tool log of the component: "
                                           "{path, tool_name, arguments, result, elapsed_time} per call")


class LogsReply(BaseModel):
    code: int = 0
    data: list[LogEntry] | dict = Field(description="the steps of the turn that produced the message, "
                                                    "or {} when no session of the agent has it (as RAGFlow)")


class Fork(BaseModel):
    model_config = ConfigDict(extra="forbid")
    checkpoint_id: str = Field(description="a step's checkpoint_id from the trace")
    component_id: str | None = Field(None, description="which component, when several ran in parallel from "
                                                       "the checkpoint")
    inputs: dict | None = Field(None, description="the step's component runs again with these inputs (keys of "
                                                  "its traced `inputs`; a UserFillUp's form fields)")
    outputs: dict | None = Field(None, description="these outputs replace the step's and the run goes on from "
                                                   "its successors")
    stream: bool = Field(False, description="RAGFlow's SSE events, or the final reply when false (the default, "
                                            "as for completions)")


class Rerun(BaseModel):
    model_config = ConfigDict(extra="allow")
    id: str = Field(description="the message id of the turn to run again (RAGFlow: the run's log id)")
    component_id: str = Field(description="the component to run again; what came before it is kept")
    dsl: Any = Field(None, description="accepted for RAGFlow's shape and ignored: a session runs its own DSL")
    agent_id: str | None = Field(None, description="the agent (else every agent of the tenant is searched)")
    session_id: str | None = None
    inputs: dict | None = None
    outputs: dict | None = None
    stream: bool = False


# --- helpers --------------------------------------------------------------------------------------
async def _session(request: Request, tenant_id: str, agent_id: str, session_id: str):
    await owned_agent(request, tenant_id, agent_id)
    session = await store(request).get_session(tenant_id, session_id)
    if session is None or session.agent_id != agent_id:
        raise not_found(f"session {session_id} of agent {agent_id}")
    return session


async def _graph(request: Request, session):
    try:
        compiled = await asyncio.to_thread(compile_dsl, session.dsl_text or session.dsl)
    except CompileError as e:
        raise diagnostics_error([d.to_dict() for d in e.diagnostics], "the session's DSL")
    return await asyncio.to_thread(compiled.graph, store(request).checkpointer)


def _config(session_id: str) -> dict:
    return {"configurable": {"thread_id": session_id}}


async def _turns(request: Request, session, checkpoint_id: str | None = None) -> list[dict]:
    graph = await _graph(request, session)
    config = _config(session.id)
    if checkpoint_id:
        config["configurable"]["checkpoint_id"] = checkpoint_id
    try:
        return await atrace(graph, config)
    except ForkError as e:
        raise _fork_error(e)


async def _message_turn(request: Request, session, message_id: str) -> dict | None:
    return await atrace_message(await _graph(request, session), _config(session.id), message_id)


def _fork_error(error: ForkError) -> ApiError:
    """A request that does not fit the session (an unknown checkpoint, one of another session, an input the
    component does not have): the caller's mistake, a 400 naming the field."""
    return argument_error(f"`{error.field}`: {error}")


async def _fork(request: Request, session, body, *, stream: bool):
    graph = await _graph(request, session)
    try:
        plan = await fork_plan(graph, _config(session.id), body.checkpoint_id, inputs=body.inputs,
                               outputs=body.outputs, component_id=body.component_id)
    except ForkError as e:
        raise _fork_error(e)
    style = "agent" if session.source == "agent" else "events"
    turn = await start_turn(request, session, TurnRequest(query=plan.query, fork=plan))
    return await answer(turn, stream=stream, style=style)


def _ragflow_log(step: dict) -> dict:
    """A step as an entry of RAGFlow's tool log, with the step's own fields besides."""
    tools = [{"path": step["component_name"] or step["component_id"], "tool_name": call["name"],
              "arguments": call["arguments"], "result": call["result"], "elapsed_time": call["elapsed"]}
             for call in step.get("tool_calls") or ()]
    return {**step, "trace": tools}


# --- routes ---------------------------------------------------------------------------------------
@router.get("/agents/{agent_id}/sessions/{session_id}/trace", response_model=TraceReply,
            response_model_exclude_unset=True,
            summary="The session's step trace: every step of every turn, read from its checkpoints")
async def session_trace(request: Request, agent_id: str, session_id: str, tenant_id: str = Depends(tenant),
                        checkpoint_id: str | None = Query(None, description=(
                            "trace the branch that leads to this checkpoint (one a fork left behind, say) "
                            "instead of the session's current one")),
                        branches: bool = Query(False, description="also list every branch of the session")):
    session = await _session(request, tenant_id, agent_id, session_id)
    turns = await _turns(request, session, checkpoint_id)
    reply = {"session_id": session.id, "agent_id": agent_id, "turns": turns}
    if branches:
        reply["branches"] = await abranches(await _graph(request, session), _config(session.id))
    return ok(reply)


@router.post("/agents/{agent_id}/sessions/{session_id}/fork",
             summary="Run a session again from one of its steps, with edited inputs or given outputs",
             description="The step's component runs again with `inputs`, or takes `outputs` and the run goes on "
                         "from its successors. The new branch streams as a completion does (RAGFlow's SSE), or "
                         "answers with the final reply when `stream` is false. The old branch stays in the "
                         "checkpoints; the session continues from the new one.")
async def fork_session(request: Request, agent_id: str, session_id: str, body: Fork, tenant_id: str = Depends(tenant)):
    session = await _session(request, tenant_id, agent_id, session_id)
    return await _fork(request, session, body, stream=body.stream)


@router.get("/agents/{agent_id}/logs/{message_id}", response_model=LogsReply, response_model_exclude_unset=True,
            summary="RAGFlow's run log of a message: the steps of the turn that produced it")
async def message_logs(request: Request, agent_id: str, message_id: str, tenant_id: str = Depends(tenant)):
    await owned_agent(request, tenant_id, agent_id)
    session = await store(request).find_session_of_message(tenant_id, agent_id, message_id)
    if session is None:
        return ok({})
    found = await _message_turn(request, session, message_id)
    if found is None:
        return ok({})
    return ok([_ragflow_log(step) for step in found["steps"]])


@router.post("/agents/rerun", summary="Run a past turn again from one of its components (a fork)",
             description="RAGFlow's route takes `{id, dsl, component_id}`; here `id` is the message id of the "
                         "turn, and its session runs again from `component_id`'s step, as the fork route does.")
async def rerun(request: Request, body: Rerun, tenant_id: str = Depends(tenant)):
    if body.agent_id:
        await owned_agent(request, tenant_id, body.agent_id)
    session = None
    if body.session_id:
        session = await store(request).get_session(tenant_id, body.session_id)
        if session is None or (body.agent_id and session.agent_id != body.agent_id):
            raise not_found(f"session {body.session_id}")
    else:
        session = await store(request).find_session_of_message(tenant_id, body.agent_id, body.id)
    if session is None:
        raise not_found(f"message {body.id}")
    found = await _message_turn(request, session, body.id)
    if found is None:
        raise not_found(f"message {body.id}")
    step = next((s for s in found["steps"] if s["component_id"] == body.component_id), None)
    if step is None:
        ran = ", ".join(dict.fromkeys(s["component_id"] for s in found["steps"])) or "none"
        raise argument_error(f"`component_id`: {body.component_id} did not run in the turn of message {body.id} "
                             f"(its components: {ran})")
    fork = Fork(checkpoint_id=step["checkpoint_id"], component_id=body.component_id, inputs=body.inputs,
                outputs=body.outputs, stream=body.stream)
    return await _fork(request, session, fork, stream=body.stream)

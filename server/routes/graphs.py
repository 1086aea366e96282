"""Compile-and-run: the DSL comes with the request; no agent needs to be stored first."""
from __future__ import annotations

import asyncio
import json
import re
from typing import Any, Literal

from fastapi import APIRouter, Depends, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from canvas2graph.server.backend.store import StoreError
from canvas2graph.server.auth import tenant
from canvas2graph.server.errors import ApiError, RetCode, argument_error, data_error, not_found, ok
from canvas2graph.server.deps import parse_dsl, store
from canvas2graph.server.compiling import compile_in_thread
from canvas2graph.server.turns import answer, check, diagnostics_error, refuse_unreadable, require_compiles, start_turn, turn_request
from canvas2graph.server.uploads import require_own_files

router = APIRouter(prefix="/api/v1/graphs", tags=["graphs"])
SESSION_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")


class CompileBody(BaseModel):
    dsl: Any = Field(description="the canvas DSL: an object (or its JSON text), a template or an agent record")


class ExportBody(CompileBody):
    format: Literal["mermaid", "json", "dot", "svg", "png"] = Field(
        "mermaid", description="mermaid or json: in the JSON envelope; dot, svg or png: the file itself, "
                               "with its content type (svg and png are laid out by Graphviz on the server)")


class RunBody(BaseModel):
    model_config = ConfigDict(extra="allow")
    dsl: Any = Field(None, description="the DSL to run; optional when continuing a session (it runs its own DSL)")
    query: Any = None
    inputs: dict | None = None
    session_id: str | None = Field(None, description="continue this session (each event carries its session_id); "
                                                     "without it a new session starts")
    stream: bool = True
    return_trace: bool = False
    user_id: str | None = None
    files: list | None = None


@router.post("/compile", summary="Check a DSL: every diagnostic with component, field and reason")
async def compile_graph(request: Request, body: CompileBody, tenant_id: str = Depends(tenant)):
    verdict = refuse_unreadable(await check(request, parse_dsl(body.dsl, request)))
    return ok({"ok": verdict.ok, "components": verdict.components, "diagnostics": verdict.diagnostics})


@router.post("/export", summary="The compiled graph as Mermaid or JSON (every branch labelled), or as a "
                                 "picture: DOT, SVG or PNG",
             responses={200: {"content": {"image/svg+xml": {}, "image/png": {}, "text/vnd.graphviz": {}}}})
async def export_graph(request: Request, body: ExportBody, tenant_id: str = Depends(tenant)):
    verdict = await check(request, parse_dsl(body.dsl, request))
    if not verdict.ok:
        raise diagnostics_error(verdict.diagnostics, "the DSL")
    if body.format == "mermaid":
        return ok({"format": "mermaid", "mermaid": verdict.mermaid})
    if body.format == "json":
        return ok({"format": "json", "graph": verdict.graph})
    compiled = await compile_in_thread(parse_dsl(body.dsl, request))    # it compiles: the worker said so
    from canvas2graph.compiler.picture import CONTENT_TYPES, DrawingError, render, to_dot
    title = compiled.plan.dsl.title or None
    if body.format == "dot":
        return Response(to_dot(compiled.plan, title=title), media_type=CONTENT_TYPES["dot"])
    try:        # dot runs as a child process: off the event loop
        picture = await asyncio.to_thread(render, compiled.plan, body.format, title=title)
    except DrawingError as e:
        raise ApiError(RetCode.OPERATING_ERROR, str(e), status=503)
    return Response(picture, media_type=CONTENT_TYPES[body.format])


def _same(stored: Any, given: dict) -> bool:
    return json.loads(json.dumps(stored)) == json.loads(json.dumps(given))


@router.post("/run", summary="Run one turn of a DSL: SSE of RAGFlow events (or the JSON reply); resumable")
async def run_graph(request: Request, body: RunBody, tenant_id: str = Depends(tenant)):
    dsl = parse_dsl(body.dsl, request) if body.dsl is not None else None
    session = None
    if body.session_id:
        if not SESSION_ID.match(body.session_id):
            raise argument_error("`session_id` must be 1-128 letters, digits or . _ : -")
        session = await store(request).get_session(tenant_id, body.session_id)
        if session is None:       # unknown and another tenant's alike: no id tells whether it exists
            raise not_found(f"session {body.session_id}")
        if session.source != "graph":
            raise data_error(f"session {body.session_id} belongs to agent {session.agent_id}: "
                             "continue it through /api/v1/agents/chat/completions")
        if dsl is not None and not _same(session.dsl, dsl):
            raise data_error(f"session {body.session_id} runs another DSL: a session keeps the DSL it started "
                             "with; start a new session to run a changed DSL")
    await require_own_files(request, tenant_id, body.files, body.inputs)
    if session is None:
        if dsl is None:
            raise argument_error("`dsl` is required to start a session")
        await require_compiles(request, dsl, "the DSL")
        try:
            session = await store(request).create_session(tenant_id, source="graph", dsl=dsl,
                                                          user_id=body.user_id or "")
        except StoreError as e:
            raise data_error(str(e))
    turn = await start_turn(request, session, turn_request(body.query, body.inputs, body.user_id, body.files))
    return await answer(turn, stream=body.stream, style="events", return_trace=body.return_trace)

"""Starting a turn for a request and answering with its events: what every run route shares."""
from __future__ import annotations

from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, StreamingResponse

from canvas2graph.types import Diagnostic
from canvas2graph.types import CompileError
from canvas2graph.server.backend.conversations import SessionBusy, Turn
from canvas2graph.runtime.services.models import ModelConfigError
from canvas2graph.runtime.services.scripted import ScriptError
from canvas2graph.runtime.run.runner import TurnRejected, TurnRequest
from canvas2graph.server.backend.store import Session
from canvas2graph.server import replies
from canvas2graph.server.compiling import Verdict, compile_in_thread
from canvas2graph.server.errors import ApiError, RetCode, argument_error, data_error, ok

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no", "Connection": "keep-alive"}


UNREADABLE = ("too-deep", "unreadable")      # a DSL nested past compiler.dsl.load.MAX_DEPTH: the request is malformed


def diagnostics_error(diagnostics: list[dict], what: str) -> ApiError:
    errors = [Diagnostic(**d) for d in diagnostics if d.get("severity") == "error"]
    first = f": {errors[0]}" if errors else ""
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    if errors and errors[0].code in UNREADABLE:
        return ApiError(RetCode.ARGUMENT_ERROR, f"{what} cannot be read{first}", status=400,
                        data={"diagnostics": diagnostics})
    return data_error(f"{what} does not compile{first}{more}", data={"diagnostics": diagnostics})


def refuse_unreadable(verdict: Verdict, what: str = "`dsl`") -> Verdict:
    """A DSL nested deeper than a DSL may be (200 levels) is a malformed request, not a canvas with a
    mistake: HTTP 400 (ARGUMENT_ERROR) on every route, its diagnostic naming the component and the field,
    whether or not a default model was filled in. Other verdicts pass through."""
    if any(d.get("code") in UNREADABLE for d in verdict.errors):
        raise diagnostics_error(verdict.diagnostics, what)
    return verdict


async def check(request: Request, dsl: Any) -> Verdict:
    """The verdict on a DSL, from a compile worker (server/compiling.py): the loop never compiles."""
    return await request.app.state.compilers.check(dsl)


async def memory_warnings(request: Request, tenant_id: str, dsl: Any) -> list[dict]:
    """A warning for each memory the DSL names that the tenant has not (a Message saving to it, or a Retrieval
    reading it, fails when it runs)."""
    from canvas2graph.runtime.services.memory import MemoryBook, memory_ids_of
    store = getattr(getattr(request.app.state, "background", None), "memory", None)
    components = dsl.get("components") if isinstance(dsl, dict) else None
    if store is None or not isinstance(components, dict):
        return []
    named = memory_ids_of(components)
    if not named:
        return []
    book = MemoryBook(store, tenant_id, embedder=request.app.state.run_services.memory_embedder)
    found = {m.id: m for m in await book.find([memory_id for _, _, memory_id, _ in named])}
    out = []
    for component, field, memory_id, kind in named:
        memory = found.get(memory_id)
        if memory is None:
            out.append(Diagnostic(code="unknown-memory", severity="warning", component_id=component, field=field,
                                  message=f"memory {memory_id!r} does not exist (create it with POST /api/v1/memories); "
                                          "the component fails when it runs"))
            continue
        problem = book.embedder_problem(memory) if kind == "Retrieval" else None
        if problem:
            out.append(Diagnostic(code="memory-ranked-by-text", severity="warning", component_id=component,
                                  field=field, message=f"memory {memory.name!r}: {problem}"))
    return [d.to_dict() for d in out]


async def require_compiles(request: Request, dsl: Any, what: str) -> None:
    """Refuse to run a DSL with errors, listing them all (before any session is created for it); then
    compile it for running, in a thread (`compile_dsl` caches by content: once per DSL)."""
    verdict = await check(request, dsl)
    if not verdict.ok:
        raise diagnostics_error(verdict.diagnostics, what)
    try:
        compiled = await compile_in_thread(dsl)
    except CompileError as e:
        raise diagnostics_error([d.to_dict() for d in e.diagnostics], what)
    if getattr(compiled, "kind", "agent") == "pipeline":
        raise argument_error(f"{what} is an ingestion pipeline, not an agent: run it over documents with "
                             "POST /api/v1/datasets/{dataset_id}/ingest")


async def start_turn(request: Request, session: Session, turn_request: TurnRequest) -> Turn:
    try:
        return await request.app.state.conversations.start(session, turn_request)
    except CompileError as e:
        raise diagnostics_error([d.to_dict() for d in e.diagnostics], "the session's DSL")
    except SessionBusy as e:
        raise ApiError(RetCode.RUNNING, str(e), status=409)
    except TurnRejected as e:
        raise data_error(str(e))
    except (ModelConfigError, ScriptError) as e:
        raise data_error(f"the models are not configured: {e}")


async def answer(turn: Turn, *, stream: bool, style: str, return_trace: bool = False):
    """RAGFlow's SSE stream, or its JSON reply once the turn has ended."""
    if stream:
        return StreamingResponse(replies.sse(turn, style, return_trace), media_type="text/event-stream; charset=utf-8",
                                 headers=SSE_HEADERS)
    try:
        collected = await replies.collect(turn, return_trace)
    except Exception as e:      # noqa: BLE001 - the turn crashed (not a component failure: those are events)
        raise ApiError(RetCode.SERVER_ERROR, f"the turn failed: {replies.failure_text(e)}", status=500)
    return JSONResponse(ok(replies.json_reply(collected, turn, style)))


async def answer_openai(turn: Turn, *, stream: bool, model: str):
    if stream:
        return StreamingResponse(replies.openai_sse(turn, model), media_type="text/event-stream; charset=utf-8",
                                 headers=SSE_HEADERS)
    return JSONResponse(await replies.openai_json(turn, model))


def turn_request(query: Any, inputs: Any, user_id: Any, files: Any) -> TurnRequest:
    if query is not None and not isinstance(query, (str, dict)):
        raise argument_error("`query` must be a string (or an object of Begin inputs)")
    if inputs is not None and not isinstance(inputs, dict):
        raise argument_error("`inputs` must be an object: {field: {type, value}} or {field: value}")
    if files is not None and not isinstance(files, list):
        raise argument_error("`files` must be a list")
    try:
        return TurnRequest(query=query or "", inputs=inputs, user_id=str(user_id or ""), files=files)
    except TurnRejected as e:       # values no session can store (NaN, integers beyond 64 bits, ...)
        raise argument_error(str(e))

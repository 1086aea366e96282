"""LangGraph Server's runs, as turns of canvas2graph sessions.

A run is one turn, queued as a durable job through the same machinery as RAGFlow's completions
(`Conversations.submit`: the thread's turns one at a time in arrival order, `multitask_strategy` for a busy
thread, cancellation from any process), with the LangGraph stream modes the client asked for passed on raw
(`TurnRequest.stream_modes`, `runtime/run/events.py` RAW_EVENT). The run's row is the turn's
(`c2g_turns`, its LangGraph fields in `options`) and its stream is the turn's event log, so a streamed run,
`runs.wait`, `runs.join` and `runs.join_stream` read the same run from any server process, and a run
outlives the process that accepted it.
"""
from __future__ import annotations

import uuid
from typing import Any, AsyncIterator

from fastapi import Request

from canvas2graph.runtime.run.runner import TurnRejected, TurnRequest
from canvas2graph.runtime.run.steps import ForkPlan
from canvas2graph.runtime.services.models import ModelConfigError
from canvas2graph.runtime.services.scripted import ScriptError
from canvas2graph.server.backend.conversations import SessionBusy
from canvas2graph.server.backend.store import Agent, Session
from canvas2graph.server.backend.store_turns import TurnRecord
from canvas2graph.server.protocols import common
from canvas2graph.server.protocols.langgraph_views import dumps, sse
from canvas2graph.types import CompileError, UsageError

# stream modes langgraph-sdk asks for -> the LangGraph stream mode (runtime/run/events.py raw mode) they need.
# `messages-tuple` sends LangGraph's (message chunk, metadata) pairs as they come; `messages` sends them as
# LangGraph Server does: `messages/metadata` once a message starts, then `messages/partial` with the message
# so far (`messages/complete` for one that came whole); `events` sends astream_events' events.
STREAM_MODES = {"values": "values", "updates": "updates", "messages-tuple": "messages", "messages": "messages",
                "custom": "custom", "events": "events", "debug": "debug", "tasks": "tasks",
                "checkpoints": "checkpoints"}


class LangGraphError(Exception):
    """A request LangGraph Server would refuse: answered as `{"detail": message}` with `status`."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status, self.message = status, message


def stream_modes(value: Any) -> list[str]:
    modes = [value] if isinstance(value, str) else list(value or ["values"])
    unknown = [m for m in modes if m not in STREAM_MODES]
    if unknown:
        raise LangGraphError(422, f"stream_mode {', '.join(map(str, unknown))} is not served: use "
                                  f"{', '.join(STREAM_MODES)} (docs/compatibility.md)")
    return modes


def input_fields(value: Any) -> dict[str, Any]:
    """A run's `input` as a turn request's fields: the canvas's input (`query`, `inputs`, `files`,
    `user_id`), or a chat UI's `messages` (the last human message is the query)."""
    if not isinstance(value, dict):
        raise LangGraphError(422, "`input` must be an object: {query, inputs, files, user_id} or {messages}")
    fields = {k: value[k] for k in ("query", "inputs", "files", "user_id") if value.get(k) is not None}
    messages = value.get("messages")
    if "query" not in fields and isinstance(messages, list) and messages:
        last = messages[-1]
        content = last.get("content") if isinstance(last, dict) else last
        if isinstance(content, list):
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        fields["query"] = content if isinstance(content, str) else str(content)
    return fields


async def turn_request(request: Request, session: Session, body: dict, modes: list[str],
                       run_id: str | None = None) -> TurnRequest:
    """The turn a run body asks for: a new turn (`input`), a form answered (`command.resume`), or a run
    from an earlier checkpoint (`checkpoint_id`: LangGraph's replay and fork)."""
    raw = list(dict.fromkeys(STREAM_MODES[m] for m in modes))
    command = body.get("command") or {}
    if not isinstance(command, dict) or set(command) - {"resume"}:
        raise LangGraphError(422, "only `command={'resume': ...}` is served (not goto or update)")
    checkpoint = body.get("checkpoint")
    if checkpoint is not None and not isinstance(checkpoint, dict):
        raise LangGraphError(422, "`checkpoint` must be an object with `checkpoint_id`")
    checkpoint_id = body.get("checkpoint_id") or (checkpoint or {}).get("checkpoint_id")
    if checkpoint_id is not None and not isinstance(checkpoint_id, str):
        raise LangGraphError(422, "`checkpoint_id` must be a string")
    if checkpoint_id:
        if body.get("input") is not None:
            raise LangGraphError(422, "a run from a checkpoint takes no `input`: update the state there first")
        resume = command.get("resume")
        if resume is not None and not isinstance(resume, dict):
            raise LangGraphError(422, "a form answered from a checkpoint takes an object of its fields")
        config = {"configurable": {"thread_id": session.id, "checkpoint_ns": "", "checkpoint_id": checkpoint_id}}
        return TurnRequest(fork=ForkPlan(config=config, component_id="", component_type="", resume=resume),
                           stream_modes=raw, run_id=run_id)
    if "resume" in command:
        resume = command["resume"]
        if isinstance(resume, dict):
            return TurnRequest(inputs=resume, stream_modes=raw, run_id=run_id)
        pause = await common.waiting_for(request, session)
        turn = common.form_request({"query": "" if resume is None else str(resume)}, {}, pause)
        turn.stream_modes, turn.run_id = raw, run_id
        return turn
    fields = input_fields(body["input"]) if body.get("input") is not None else {}
    return TurnRequest(**fields, stream_modes=raw, run_id=run_id)


RUN_STRATEGIES = ("reject", "enqueue", "interrupt", "rollback")


async def start_run(request: Request, tenant: str, session: Session, agent: Agent, body: dict) -> TurnRecord:
    """Queue a run's turn behind the thread's earlier ones, by its `multitask_strategy` (LangGraph's default,
    "reject", refuses a busy thread with 409 at once). Refused before anything is queued when the thread's DSL
    or models are broken, or the body is."""
    modes = stream_modes(body.get("stream_mode"))
    strategy = body.get("multitask_strategy") or "reject"
    if strategy not in RUN_STRATEGIES:
        raise LangGraphError(422, f"multitask_strategy {strategy!r} is not one of {', '.join(RUN_STRATEGIES)}")
    run_id = str(uuid.uuid4())
    wanted = await turn_request(request, session, body, modes, run_id)
    options = {"assistant_id": agent.id, "metadata": body.get("metadata") or {}, "multitask_strategy": strategy,
               "stream_mode": modes, "on_disconnect": body.get("on_disconnect") or "continue"}
    conversations = request.app.state.conversations
    try:
        await conversations.preflight(session)
        return await conversations.submit(session, wanted, source="langgraph", options=options, strategy=strategy)
    except SessionBusy as e:
        raise LangGraphError(409, f"{e} (multitask_strategy \"reject\"; \"enqueue\" waits for it)")
    except (CompileError, ModelConfigError, ScriptError, UsageError, TurnRejected) as e:
        raise LangGraphError(422, str(e))


async def frames(request: Request, record: TurnRecord, session: Session, *, asker: bool,
                 modes: list[str] | None = None, after: int | None = None) -> AsyncIterator[bytes]:
    """A run's SSE stream, from its first event, whichever process runs it: its metadata, then its frames
    in the stream modes it was asked for (or `modes`, among those), each numbered by its event's place in
    the run (`after`: only those after that number, a client's `Last-Event-ID`), then an error frame if it
    failed. A reader that leaves stops the run only when it asked for it and said `on_disconnect="cancel"`."""
    modes = modes or list(record.options.get("stream_mode") or ["values"])
    turn = request.app.state.conversations.attach(record, session, asker=asker)
    turn.asker = asker and record.options.get("on_disconnect") == "cancel"
    converter = FrameConverter(modes)
    if after is None:
        yield sse("metadata", {"run_id": record.id, "attempt": max(record.attempts, 1)})
    finished, position = False, 0
    try:
        result = common.TurnResult(session_id=session.id)
        try:
            async for batch in turn.batches():
                out = []
                for event in batch:
                    common.add_event(result, event)
                    position += 1
                    pieces = converter.frames(event, position)
                    if after is None or position > after:
                        out += pieces
                if out:
                    yield b"".join(out)
        except Exception as e:      # noqa: BLE001 - the run crashed: told in the stream
            result.status, result.error = "failed", f"{type(e).__name__}: {e}"
        else:
            result.status, result.error = turn.outcome.status, turn.outcome.error
        failed = error_value(result)
        if failed is not None:
            yield sse("error", failed)
        finished = True
    finally:
        if not finished:
            turn.cancel()


class FrameConverter:
    """RAGFlow's and LangGraph's events of a turn -> LangGraph Server's SSE frames for the modes asked for."""

    def __init__(self, modes: list[str]):
        self.modes = modes
        self.wanted = {STREAM_MODES[m] for m in modes}
        self.whole_messages: dict[str, Any] = {}     # `messages` mode: each message so far, by its id

    def frames(self, event: dict, event_id: int | None = None) -> list[bytes]:
        if event.get("event") != "langgraph" or event.get("mode") not in self.wanted:
            return []
        mode, data = event["mode"], event["data"]
        if mode == "messages":
            if "messages-tuple" in self.modes:
                return [sse("messages", list(data), event_id)]       # (message chunk, metadata)
            return [sse(name, value, event_id) for name, value in message_frames(self.whole_messages, *data)]
        if mode == "values" and event.get("interrupts") and isinstance(data, dict):
            data = {**data, "__interrupt__": event["interrupts"]}      # as LangGraph Server sends a pause
        return [sse(mode, data, event_id)]


async def wait_end(request: Request, record: TurnRecord, session: Session) -> common.TurnResult:
    """Read a run to its end (here, or in whichever process runs it), without stopping it if the caller leaves."""
    turn = request.app.state.conversations.attach(record, session, asker=False)
    return await common.run_to_end(turn)


def message_frames(seen: dict[str, Any], message: Any, metadata: dict) -> list[tuple[str, Any]]:
    """LangGraph Server's `messages` stream mode for one part of LangGraph's: `messages/metadata` when a
    message starts, then the message so far as `messages/partial` (a chunk) or `messages/complete`."""
    from langchain_core.messages import BaseMessageChunk, convert_to_messages, message_chunk_to_message

    if isinstance(message, dict):
        message = convert_to_messages([message])[0]
    frames: list[tuple[str, Any]] = []
    if message.id in seen:
        seen[message.id] += message
    else:
        seen[message.id] = message
        frames.append(("messages/metadata", {message.id: {"metadata": metadata}}))
    kind = "messages/partial" if isinstance(message, BaseMessageChunk) else "messages/complete"
    frames.append((kind, [message_chunk_to_message(seen[message.id])]))
    return frames


def error_value(result: common.TurnResult | None) -> dict | None:
    """`runs.wait`'s `__error__` for a run that failed."""
    if result is None or result.status not in ("failed", "stopped"):
        return None
    return {"error": "RunError", "message": result.error or "the run failed"}


__all__ = ["FrameConverter", "LangGraphError", "RUN_STRATEGIES", "STREAM_MODES", "dumps", "error_value", "frames",
           "message_frames", "start_run", "stream_modes", "wait_end"]

"""LangGraph Server's runs, as turns of canvas2graph sessions.

A run is one turn, started through the same machinery as RAGFlow's completions (`Conversations.start`:
the session's lease, one turn at a time, cancellation across processes), with the LangGraph stream modes
the client asked for passed on raw (`TurnRequest.stream_modes`, `runtime/run/events.py` RAW_EVENT). Each run
is consumed by a task of this process into a list of SSE frames, so a streamed run, `runs.wait`,
`runs.join` and `runs.join_stream` all read the same run; its status is kept in `c2g_lg_runs`, so another
server process can list, join and cancel it.
"""
from __future__ import annotations

import asyncio
import json
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, AsyncIterator

from fastapi import Request

from canvas2graph.server.backend.conversations import Turn
from canvas2graph.runtime.run.runner import TurnRequest
from canvas2graph.server.backend.store import Agent, Session
from canvas2graph.runtime.run.steps import ForkPlan
from canvas2graph.server.errors import ApiError
from canvas2graph.server.protocols import common
from canvas2graph.server.protocols.langgraph_views import RUN_STATUS, dumps, now, sse

# stream modes langgraph-sdk asks for -> the LangGraph stream mode (runtime/run/events.py raw mode) they need.
# `messages-tuple` sends LangGraph's (message chunk, metadata) pairs as they come; `messages` sends them as
# LangGraph Server does: `messages/metadata` once a message starts, then `messages/partial` with the message
# so far (`messages/complete` for one that came whole); `events` sends astream_events' events.
STREAM_MODES = {"values": "values", "updates": "updates", "messages-tuple": "messages", "messages": "messages",
                "custom": "custom", "events": "events", "debug": "debug", "tasks": "tasks",
                "checkpoints": "checkpoints"}
RUNS_KEPT = 1000                # finished runs whose frames this process keeps for join_stream
RUNS_KEPT_BYTES = 64 << 20      # and at most so many bytes of their frames (`events` frames hold the state)
JOIN_POLL_SECONDS = 0.25        # how often a join looks at a run that another process runs


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


def _input_request(value: Any) -> dict[str, Any]:
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
    fields = _input_request(body["input"]) if body.get("input") is not None else {}
    return TurnRequest(**fields, stream_modes=raw, run_id=run_id)


@dataclass
class Run:
    row: dict
    tenant: str
    frames: list[bytes] = field(default_factory=list)
    changed: asyncio.Condition = field(default_factory=asyncio.Condition)
    done: asyncio.Event = field(default_factory=asyncio.Event)
    result: common.TurnResult | None = None
    turn: Turn | None = None
    task: asyncio.Task | None = None
    size: int = 0                       # bytes of its frames

    @property
    def run_id(self) -> str:
        return self.row["run_id"]


class Runs:
    """The runs of this process, and their records in the database."""

    def __init__(self) -> None:
        self.local: OrderedDict[str, Run] = OrderedDict()
        self.kept_bytes = 0             # of the frames of the runs in `local`

    async def start(self, request: Request, tenant: str, session: Session, agent: Agent, body: dict) -> Run:
        """Start a run's turn (refused before anything runs: a busy thread, a form without its answer) and
        a task that reads it to its end."""
        store = request.app.state.store
        modes = stream_modes(body.get("stream_mode"))
        run_id = str(uuid.uuid4())
        wanted_turn = await turn_request(request, session, body, modes, run_id)
        metadata = body.get("metadata") or {}
        row = {"run_id": run_id, "thread_id": session.id, "tenant": tenant, "assistant_id": agent.id,
               "status": "pending", "metadata": json.dumps(metadata, default=str),
               "multitask_strategy": body.get("multitask_strategy") or "reject", "created_at": now(),
               "updated_at": now()}
        await store.db.execute(
            "INSERT INTO c2g_lg_runs (run_id, thread_id, tenant, assistant_id, status, metadata, multitask_strategy, "
            "created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", tuple(row.values()))
        run = Run(row=row, tenant=tenant)
        try:
            run.turn = await common.start(request, session, wanted_turn)
        except ApiError as e:
            await self._record(store, run, "error")
            raise LangGraphError(409 if e.status == 409 else 422, e.message)
        await self._record(store, run, "running")
        self.local[run.run_id] = run
        self.forget_finished()
        run.task = asyncio.create_task(self._consume(store, run, modes), name=f"langgraph-run-{run.run_id}")
        return run

    @staticmethod
    async def _record(store, run: Run, status: str) -> None:
        run.row["status"], run.row["updated_at"] = status, now()
        await store.db.execute("UPDATE c2g_lg_runs SET status = ?, updated_at = ? WHERE run_id = ?",
                               (status, run.row["updated_at"], run.run_id))

    async def _consume(self, store, run: Run, modes: list[str]) -> None:
        wanted = {STREAM_MODES[m] for m in modes}
        whole_messages: dict[str, Any] = {}        # `messages` mode: each message so far, by its id

        async def on_event(event: dict) -> None:
            if event.get("event") != "langgraph" or event.get("mode") not in wanted:
                return
            mode, data = event["mode"], event["data"]
            if mode == "messages":
                if "messages-tuple" in modes:
                    await self._add(run, sse("messages", list(data)))       # (message chunk, metadata)
                else:
                    for name, value in message_frames(whole_messages, *data):
                        await self._add(run, sse(name, value))
                return
            if mode == "values" and event.get("interrupts") and isinstance(data, dict):
                data = {**data, "__interrupt__": event["interrupts"]}      # as LangGraph Server sends a pause
            await self._add(run, sse(mode, data))

        try:
            run.result = await common.run_to_end(run.turn, on_event)
            if run.result.status in ("failed", "stopped"):
                await self._add(run, sse("error", {"error": "RunError", "message": run.result.error or "the run failed"}))
            await asyncio.shield(self._record(store, run, RUN_STATUS.get(run.result.status, "error")))
        finally:
            run.done.set()
            async with run.changed:
                run.changed.notify_all()
            self.forget_finished()

    def forget_finished(self, keep: int = RUNS_KEPT, keep_bytes: int = RUNS_KEPT_BYTES) -> None:
        """Drop the frames of the oldest finished runs beyond `keep` runs or `keep_bytes` bytes (a run still
        running keeps its own and those after it); their records stay in the database."""
        while self.local and (len(self.local) > keep or self.kept_bytes > keep_bytes):
            oldest = next(iter(self.local.values()))
            if not oldest.done.is_set():
                break
            self.local.popitem(last=False)
            self.kept_bytes -= oldest.size

    async def _add(self, run: Run, frame: bytes) -> None:
        async with run.changed:
            run.frames.append(frame)
            run.size += len(frame)
            if self.local.get(run.run_id) is run:
                self.kept_bytes += len(frame)
            run.changed.notify_all()

    async def frames(self, run: Run, *, cancel_on_disconnect: bool = False) -> AsyncIterator[bytes]:
        """The run's SSE stream: its metadata, then every frame from the first, until it ends."""
        yield sse("metadata", {"run_id": run.run_id, "attempt": 1})
        sent, finished = 0, False
        try:
            while True:
                async with run.changed:
                    await run.changed.wait_for(lambda: len(run.frames) > sent or run.done.is_set())
                    batch = run.frames[sent:]
                if batch:
                    sent += len(batch)
                    yield b"".join(batch)
                elif run.done.is_set():
                    finished = True
                    return
        finally:
            if not finished and cancel_on_disconnect and run.turn is not None:
                run.turn.cancel()

    async def wait_done(self, store, tenant: str, run_id: str, timeout: float = 3600) -> dict | None:
        """Wait for a run to end, here or in another process; its record, or None when there is none."""
        run = self.local.get(run_id)
        if run is not None and run.tenant == tenant:
            await run.done.wait()
            return run.row
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            rows = await store.db.fetchall("SELECT * FROM c2g_lg_runs WHERE tenant = ? AND run_id = ?", (tenant, run_id))
            if not rows:
                return None
            if rows[0]["status"] not in ("pending", "running") or loop.time() > deadline:
                return rows[0]
            await asyncio.sleep(JOIN_POLL_SECONDS)


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


__all__ = ["LangGraphError", "Run", "Runs", "STREAM_MODES", "dumps", "error_value", "message_frames", "stream_modes"]

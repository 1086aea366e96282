"""LangGraph Server's JSON shapes (langgraph-sdk's `schema.py`) for canvas2graph's agents, sessions and
checkpoints: assistants, threads, thread states, runs and stream parts, and the records kept for threads
beside the sessions (`c2g_lg_threads`, in the server's database; a run is a turn's row, `c2g_turns`)."""
from __future__ import annotations

import json
import time
from datetime import datetime, timezone
from typing import Any

import orjson

from canvas2graph.server.backend.store import Agent
from canvas2graph.server.backend.jobs.wire import json_default
from canvas2graph.server.backend.store_turns import TurnRecord
from canvas2graph.server.protocols import common

SCHEMA = [
    """CREATE TABLE IF NOT EXISTS c2g_lg_threads (
        thread_id TEXT PRIMARY KEY, tenant TEXT NOT NULL, metadata TEXT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL, updated_at DOUBLE PRECISION NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS c2g_lg_threads_tenant ON c2g_lg_threads (tenant, created_at)",
]

# the run statuses of LangGraph Server, from how a turn ended
RUN_STATUS = {"queued": "pending", "running": "running", "finished": "success", "paused": "success",
              "cancelled": "interrupted", "interrupted": "interrupted", "rolled_back": "interrupted", "stopped": "error",
              "failed": "error", "rejected": "error"}


def iso(seconds: float | None) -> str | None:
    if seconds is None:
        return None
    return datetime.fromtimestamp(seconds, timezone.utc).isoformat()


def dumps(value: Any) -> bytes:
    return orjson.dumps(value, default=json_default, option=orjson.OPT_NON_STR_KEYS)


def jsonable(value: Any) -> Any:
    """A value as JSON types (what the client will read), whatever LangGraph put in it."""
    return orjson.loads(dumps(value))


def graph_id(agent: Agent) -> str:
    """The agent's graph name: its title in snake_case (its id when the title has no letters to keep)."""
    return common.slug(agent.title) or agent.id


def assistant_view(agent: Agent) -> dict:
    created, updated = agent.create_time / 1000, agent.update_time / 1000
    return {"assistant_id": agent.id, "graph_id": graph_id(agent), "name": agent.title,
            "description": agent.description, "config": {}, "context": {},
            "metadata": {"created_by": "canvas2graph", "tags": agent.tag_list}, "version": 1,
            "created_at": iso(created), "updated_at": iso(updated)}


def checkpoint_view(config: dict | None, thread_id: str = "") -> dict | None:
    if config is None:
        return None
    configurable = config.get("configurable") or {}
    return {"thread_id": configurable.get("thread_id", thread_id), "checkpoint_ns": configurable.get("checkpoint_ns", ""),
            "checkpoint_id": configurable.get("checkpoint_id"), "checkpoint_map": None}


def interrupt_view(interrupt: Any) -> dict:
    return {"value": jsonable(getattr(interrupt, "value", None)), "id": getattr(interrupt, "id", "")}


def state_view(snapshot: Any, thread_id: str) -> dict:
    """A LangGraph `StateSnapshot` as LangGraph Server's `ThreadState`."""
    tasks = [{"id": t.id, "name": t.name, "path": jsonable(list(t.path or ())),
              "error": str(t.error) if t.error else None,
              "interrupts": [interrupt_view(i) for i in t.interrupts], "checkpoint": None, "state": None,
              "result": jsonable(t.result) if getattr(t, "result", None) is not None else None}
             for t in snapshot.tasks]
    return {"values": jsonable(snapshot.values), "next": list(snapshot.next), "tasks": tasks,
            "checkpoint": checkpoint_view(snapshot.config, thread_id), "metadata": jsonable(snapshot.metadata or {}),
            "created_at": snapshot.created_at, "parent_checkpoint": checkpoint_view(snapshot.parent_config, thread_id),
            "interrupts": [i for task in tasks for i in task["interrupts"]]}


def empty_state(thread_id: str) -> dict:
    """The state of a thread no run has started yet."""
    return {"values": {}, "next": [], "tasks": [], "checkpoint": checkpoint_view({}, thread_id), "metadata": {},
            "created_at": None, "parent_checkpoint": None, "interrupts": []}


def thread_view(row: dict, state: dict | None, status: str) -> dict:
    interrupts = {}
    for task in (state or {}).get("tasks") or []:
        if task["interrupts"]:
            interrupts[task["id"]] = task["interrupts"]
    return {"thread_id": row["thread_id"], "created_at": iso(row["created_at"]), "updated_at": iso(row["updated_at"]),
            "metadata": json.loads(row["metadata"]) if isinstance(row["metadata"], str) else row["metadata"],
            "status": status, "values": (state or {}).get("values") or {}, "interrupts": interrupts}


def run_view(turn: TurnRecord, assistant_id: str | None = None) -> dict:
    """A turn as LangGraph Server's `Run` (a turn asked through RAGFlow's API is a run of its thread too)."""
    options = turn.options or {}
    updated = turn.ended_at or turn.started_at or turn.created_at
    return {"run_id": turn.id, "thread_id": turn.session_id,
            "assistant_id": options.get("assistant_id") or assistant_id, "created_at": iso(turn.created_at),
            "updated_at": iso(updated), "status": RUN_STATUS.get(turn.status, "error"),
            "metadata": options.get("metadata") or {}, "multitask_strategy": options.get("multitask_strategy") or "reject",
            "kwargs": {}}


def final_values(state: dict) -> dict:
    """What `runs.wait` and `runs.join` answer: the thread's values, with its interrupts as LangGraph adds them."""
    values = dict(state.get("values") or {})
    if state.get("interrupts"):
        values["__interrupt__"] = state["interrupts"]
    return values


def sse(event: str, data: Any, event_id: int | None = None) -> bytes:
    """An SSE frame; `event_id` numbers it in its run's stream (`join_stream` resumes after a `Last-Event-ID`)."""
    head = b"event: " + event.encode() + (b"\nid: " + str(event_id).encode() if event_id is not None else b"")
    return head + b"\ndata: " + dumps(data) + b"\n\n"


def now() -> float:
    return time.time()

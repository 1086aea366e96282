"""What the public API's tests share: checkpointers from a test URL, for LangGraph's sync and async calls,
and RAGFlow events with the values that differ from run to run taken out."""
from __future__ import annotations

import contextlib
import json
from typing import Any, Iterator

from canvas2graph.runtime.run.checkpoint import is_postgres

# values that differ between two runs of the same turn (ids, clocks), left out when events are compared
VARYING = {"message_id", "task_id", "created_at", "elapsed_time", "_created_time", "_elapsed_time", "session_id", "id"}


@contextlib.contextmanager
def sync_saver(url: str) -> Iterator[Any]:
    """LangGraph's own synchronous saver for a `durable_url` (a SQLite file or PostgreSQL), for `invoke`."""
    if is_postgres(url):
        from langgraph.checkpoint.postgres import PostgresSaver
        with PostgresSaver.from_conn_string(url) as saver:
            saver.setup()
            yield saver
    else:
        from langgraph.checkpoint.sqlite import SqliteSaver
        with SqliteSaver.from_conn_string(url) as saver:
            yield saver


def comparable(events: list[dict]) -> list[Any]:
    """Events as JSON, without the values that vary from run to run."""
    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in VARYING}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value
    return [strip(e) for e in json.loads(json.dumps(events, ensure_ascii=False, default=str))]


def thread(thread_id: str, **more: Any) -> dict:
    return {"configurable": {"thread_id": thread_id, **more}}

"""A turn's events as bytes: how a worker hands them to the event log and an API process reads them back.

Events are JSON (orjson). RAGFlow's events are JSON already; the raw LangGraph parts a LangGraph run asks
for may hold LangChain messages and other objects: a message of the `messages` stream mode keeps its class
(`message_to_dict`, read back with `messages_from_dict`: a chunk stays a chunk, so a reader can add them up
as LangGraph Server's `messages/partial` does), anything else is written as its `model_dump()`, or as text.

Besides the events clients see, the log carries the turn's own records, `{"event": TURN_EVENT, ...}`:
`kind: "attempt"` when a worker takes the turn up (more than once after a worker died mid-turn) and
`kind: "end"` with how it ended. Readers use them and never send them on.
"""
from __future__ import annotations

from typing import Any, Iterable

import orjson

TURN_EVENT = "__turn__"
RAW_EVENT = "langgraph"             # runtime.run.events.RAW_EVENT
_MESSAGE = "__message__"


def json_default(value: Any) -> Any:
    """What orjson cannot write by itself: LangChain messages (pydantic), sets, and anything else as text."""
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump()
    if isinstance(value, (set, frozenset)):
        return list(value)
    return str(value)


def _raw_messages(event: dict) -> dict:
    """A `messages` part keeps its message's class through the log."""
    data = event.get("data")
    if event.get("mode") != "messages" or not isinstance(data, (list, tuple)) or len(data) != 2:
        return event
    from langchain_core.messages import BaseMessage, message_to_dict
    message, metadata = data
    if isinstance(message, BaseMessage):
        return {**event, "data": [{_MESSAGE: message_to_dict(message)}, metadata]}
    return event


def encode(events: Iterable[dict]) -> bytes:
    """A batch of events as one JSON array."""
    return orjson.dumps([_raw_messages(e) if e.get("event") == RAW_EVENT else e for e in events],
                        default=json_default, option=orjson.OPT_NON_STR_KEYS)


def decode(batch: bytes | str) -> list[dict]:
    events = orjson.loads(batch)
    for event in events:
        if event.get("event") == RAW_EVENT and event.get("mode") == "messages":
            data = event.get("data")
            if isinstance(data, list) and data and isinstance(data[0], dict) and _MESSAGE in data[0]:
                from langchain_core.messages import messages_from_dict
                event["data"] = (messages_from_dict([data[0][_MESSAGE]])[0], data[1])
    return events


def turn_event(kind: str, **fields: Any) -> dict:
    return {"event": TURN_EVENT, "kind": kind, **fields}

"""What a component's step asked of models and tools, recorded for the step trace (runtime/run/steps.py).

`Node.__call__` opens a record for its step (`open_record`); model and tool code adds to it
(`prompt`, `usage`, `tool_call`), keyed by the component the call belongs to, which is not always the
step's own: a Message that streams an LLM's pending generation makes that LLM's model call. When the
step made any call, the record rides on the `last` write every node makes anyway (`last.calls`),
so the checkpoint of the step keeps it and no channel is added. Steps that call nothing pay one
context-variable set and reset; recorded values are references to what the call used (the prompt
list it sent), not copies, so a step stores its prompt once, as the checkpoint's writes.

    {component_id: {"messages": [{role, content}], "usage": {prompt_tokens, completion_tokens,
                     total_tokens, calls}, "reasoning": text,
                     "tool_calls": [{id, name, arguments, result, elapsed}]}}
"""
from __future__ import annotations

from contextvars import ContextVar, Token
from typing import Any

__all__ = ["open_record", "close_record", "prompt", "usage", "reasoning", "tool_call", "image_summaries",
           "RESULT_CHARS"]

RESULT_CHARS = 2000         # a tool result is kept up to this many characters (the model saw all of it)

_RECORD: ContextVar[dict | None] = ContextVar("canvas2graph_calls", default=None)


def open_record() -> tuple[dict, Token]:
    record: dict = {}
    return record, _RECORD.set(record)


def close_record(token: Token) -> None:
    _RECORD.reset(token)


def _entry(component_id: str) -> dict | None:
    record = _RECORD.get()
    if record is None:          # a component run outside a graph step (unit tests, the debug route)
        return None
    entry = record.get(component_id)
    if entry is None:
        entry = record[component_id] = {}
    return entry


def prompt(component_id: str, messages: list) -> None:
    """The messages sent to the model (the first call's: later rounds of a tool loop add tool results)."""
    entry = _entry(component_id)
    if entry is not None and "messages" not in entry:
        entry["messages"] = image_summaries(messages)


def image_summaries(messages: list) -> list:
    """Messages as a trace keeps them: a message's `images` (data URIs the model was sent) as their type and
    size, not their bytes. The same list when no message has images."""
    if not any(isinstance(m, dict) and m.get("images") for m in messages):
        return messages
    return [{**m, "images": [f"{str(u).split(',', 1)[0]},… ({len(str(u)):,} characters)" for u in m["images"]]}
            if isinstance(m, dict) and m.get("images") else m for m in messages]


def usage(component_id: str, counts: dict) -> None:
    entry = _entry(component_id)
    if entry is None:
        return
    total = entry.setdefault("usage", {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0, "calls": 0})
    for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
        total[key] += counts.get(key) or 0
    total["calls"] += 1


def reasoning(component_id: str, text: str) -> None:
    """The model's reasoning (the replies' reasoning, joined when a step called its model more than once)."""
    entry = _entry(component_id)
    if entry is not None:
        entry["reasoning"] = entry.get("reasoning", "") + text


def tool_call(component_id: str, call: dict, result: Any, elapsed: float) -> None:
    entry = _entry(component_id)
    if entry is None:
        return
    text = result if isinstance(result, str) else str(result)
    entry.setdefault("tool_calls", []).append({
        "id": call.get("id"), "name": call.get("name"), "arguments": call.get("args") or {},
        "result": text[:RESULT_CHARS], "elapsed": elapsed})

"""The graph state: JSON values only, so every checkpointer can store it.

One channel per component holds that component's outputs (`out:<component id>`), so a node's
write touches only its own channel and a reference is a direct channel read. Shared channels
hold the globals (`sys.*`, `env.*`), the conversation history, the request of the current turn
and bookkeeping for events.
"""
from __future__ import annotations

from typing import Annotated, Any, TypedDict

GLOBALS = "globals"
HISTORY = "history"
REQUEST = "request"
LAST = "last"
TRACE = "trace"
REFERENCE = "reference"


def channel(component_id: str) -> str:
    """State key of a component's outputs."""
    return "out:" + component_id


def merge_outputs(old: dict | None, new: dict | None) -> dict:
    """Merge output keys; `None` resets the component (done at the start of every turn)."""
    if new is None:
        return {}
    if not old:
        return dict(new)
    return {**old, **new}


def merge_globals(old: dict | None, new: dict | None) -> dict:
    if not old:
        return dict(new or {})
    return {**old, **(new or {})}


def take_last(old: Any, new: Any) -> Any:
    return new


def drop(old: Any, new: Any) -> dict:
    """For per-step values that events read from task results but state need not keep."""
    return {}


def build_state_schema(component_ids: list[str]) -> type:
    """A TypedDict with the shared channels plus one channel per component."""
    fields: dict[str, Any] = {
        GLOBALS: Annotated[dict, merge_globals],
        HISTORY: Annotated[list, take_last],
        REQUEST: Annotated[dict, take_last],
        LAST: Annotated[str, take_last],
        TRACE: Annotated[dict, drop],
        REFERENCE: Annotated[dict, take_last],
    }
    for cid in component_ids:
        fields[channel(cid)] = Annotated[dict, merge_outputs]
    return TypedDict("CanvasState", fields, total=False)  # type: ignore[operator]

"""What a session's turns did, read from its checkpoints: the one view both `record` (a session that ran)
and `test` (a case run again) compare, so a recorded case passes when nothing changed.

A turn's observation: `status`, `answer` (the state's answer at the turn's last checkpoint), `path` (the
component ids in the order the trace's steps ran), and per component its last step's `outputs` (without
the bookkeeping keys that start with `_`), the `messages` it sent to a model, its `usage` and `tool_calls`.
"""
from __future__ import annotations

from typing import Any

from canvas2graph.runtime.run.events import MESSAGE_ID
from canvas2graph.runtime.run.steps import atrace

__all__ = ["observe_session", "observe_turn", "MODEL_TYPES", "PROMPTED_TYPES"]

MODEL_TYPES = ("LLM", "Agent", "Categorize")
PROMPTED_TYPES = ("LLM", "Agent")       # whose prompts people write: a changed prompt is a difference


def _outputs(outputs: dict) -> dict:
    return {k: v for k, v in (outputs or {}).items() if not k.startswith("_")}


def observe_turn(turn: dict, answer: Any = None) -> dict:
    """A traced turn (runtime/run/steps.py) as a case compares it."""
    components: dict[str, dict] = {}
    for step in turn["steps"]:
        seen = components.setdefault(step["component_id"], {"type": step["component_type"]})
        seen["outputs"] = _outputs(step["outputs"])
        for key in ("messages", "usage", "reasoning", "tool_calls", "inputs", "error", "form"):
            if step.get(key) is not None:
                seen[key] = step[key]
    error = next((s["error"] for s in turn["steps"] if s.get("error")), None)
    return {"message_id": turn.get("message_id"), "query": turn.get("query", ""), "status": turn["status"],
            "answer": answer if isinstance(answer, str) else "", "path": [s["component_id"] for s in turn["steps"]],
            "components": components, "error": error, "steps": turn["steps"]}


async def _answer(graph, thread: dict, message_id: str | None) -> Any:
    if not message_id:
        return None
    async for snapshot in graph.aget_state_history(thread, filter={MESSAGE_ID: message_id}, limit=1):
        return snapshot.values.get("answer")
    return None


async def observe_session(graph, session_id: str) -> list[dict]:
    """Every turn of the session's current branch, observed."""
    thread = {"configurable": {"thread_id": session_id, "checkpoint_ns": ""}}
    turns = await atrace(graph, {"configurable": {"thread_id": session_id}})
    return [observe_turn(turn, await _answer(graph, thread, turn.get("message_id"))) for turn in turns]

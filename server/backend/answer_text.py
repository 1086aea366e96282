"""The answer's text as RAGFlow logs it: each `message` event's content, with the think markers put back.

A reasoning model's thinking streams as `message` events flagged `start_to_think` / `end_to_think`
(SPEC 8.1); RAGFlow's logged answer and its JSON replies carry `<think>` ... `</think>` in their place.
The conversation log (`server/backend/conversations.py`) and the server's replies (`server/replies.py`) both
add the answer up this way.
"""
from __future__ import annotations

from canvas2graph.nodes.documents.markdown import strip_thinking


def message_text(data: dict) -> str:
    """What one `message` event's data adds to the answer: its content, then `<think>` or `</think>`
    when the event opens or closes the model's thinking."""
    text = data.get("content") or ""
    if data.get("start_to_think"):
        text += "<think>"
    elif data.get("end_to_think"):
        text += "</think>"
    return text


def without_thinking(text: str) -> str:
    """The answer a protocol's client reads: the logged answer less the model's thinking (MCP, A2A and
    LangGraph's waits have no place for it)."""
    return strip_thinking(text)


def thinking_of(text: str) -> str:
    """The model's thinking in a logged answer: what its `<think>` blocks hold, one after the other."""
    import re
    return "".join(re.findall(r"<think>(.*?)(?:</think>|\Z)", text, re.S))

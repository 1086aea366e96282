"""Agents and sessions as RAGFlow's API shows them."""
from __future__ import annotations

import time
from typing import Any

from compiler import diagnose
from runtime.store import Agent, Session


def _date(ms: int) -> str:
    return time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(ms / 1000))


def diagnostics_of(dsl: Any) -> dict:
    """`{"compiles": bool, "diagnostics": [...]}` for a DSL: what create, update and get report."""
    compiled, diags = diagnose(dsl)
    return {"compiles": compiled is not None, "diagnostics": [d.to_dict() for d in diags]}


def agent_view(agent: Agent, *, with_dsl: bool = True, checked: dict | None = None) -> dict:
    view = {"id": agent.id, "title": agent.title, "description": agent.description, "avatar": agent.avatar,
            "canvas_category": "agent_canvas", "canvas_type": None, "user_id": agent.tenant,
            "create_time": agent.create_time, "update_time": agent.update_time,
            "create_date": _date(agent.create_time), "update_date": _date(agent.update_time)}
    if with_dsl:
        view["dsl"] = agent.dsl
    if checked is not None:
        view.update(checked)
    return view


def _chunks(reference: Any) -> list:
    chunks = reference.get("chunks") if isinstance(reference, dict) else None
    if isinstance(chunks, dict):
        return list(chunks.values())
    return list(chunks) if isinstance(chunks, list) else []


def messages_view(session: Session) -> list[dict]:
    """The message log; each answer after the prologue carries the chunks its turn cited (RAGFlow's listing)."""
    messages = [dict(m) for m in session.messages]
    refs = iter(session.reference)
    for i, message in enumerate(messages):
        if i and message.get("role") == "assistant":
            message["reference"] = _chunks(next(refs, None))
    return messages


def session_view(session: Session, *, with_dsl: bool = True) -> dict:
    view = {"id": session.id, "agent_id": session.agent_id, "name": session.name, "user_id": session.user_id,
            "source": session.source, "messages": messages_view(session),
            "create_time": session.create_time, "update_time": session.update_time,
            "create_date": _date(session.create_time), "update_date": _date(session.update_time)}
    if with_dsl:
        view["dsl"] = session.dsl
    return view

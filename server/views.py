"""Agents and sessions as RAGFlow's API shows them."""
from __future__ import annotations

import time
from typing import Any

from canvas2graph.server.backend.store import Agent, Session, Version, WebhookCall


def _date(ms: int) -> str:
    return time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(ms / 1000))


def checked_view(verdict) -> dict:
    """`{"compiles": bool, "diagnostics": [...]}`: what agent create, update and get report."""
    return {"compiles": verdict.ok, "diagnostics": verdict.diagnostics}


def agent_view(agent: Agent, *, with_dsl: bool = True, checked: dict | None = None) -> dict:
    view = {"id": agent.id, "title": agent.title, "description": agent.description, "avatar": agent.avatar,
            "canvas_category": "agent_canvas", "canvas_type": agent.canvas_type, "tags": agent.tags,
            "user_id": agent.tenant,
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
            "version_id": session.version_id, "version_title": session.version_title,
            "create_time": session.create_time, "update_time": session.update_time,
            "create_date": _date(session.create_time), "update_date": _date(session.update_time)}
    if with_dsl:
        view["dsl"] = session.dsl
    return view


def last_turn_view(turn) -> dict | None:
    """How a session's newest turn (`turn`, or None before any) went, {status, error}: the UI tells a failed
    session (a component's error: "stopped", or "failed") from one waiting for a form ("paused") or cancelled."""
    return {"status": turn.status, "error": turn.error} if turn is not None else None


def version_view(version: Version, *, full: bool = True) -> dict:
    """A version as RAGFlow shows one (UserCanvasVersion), plus who saved it and its diagnostics.
    Listings leave out the DSL and the description, as RAGFlow's do."""
    view = {"id": version.id, "user_canvas_id": version.agent_id, "title": version.title,
            "release": version.released, "created_by": version.created_by,
            "create_time": version.create_time, "update_time": version.update_time,
            "create_date": _date(version.create_time), "update_date": _date(version.update_time)}
    if full:
        view.update(description=version.description, dsl=version.dsl, **(version.diagnostics or {}))
    return view


def webhook_call_view(call: WebhookCall) -> dict:
    """One call in `/webhook/logs`' `calls`: who called, and how its run went."""
    return {"id": call.id, "session_id": call.session_id, "test": call.is_test, "mode": call.mode,
            "method": call.method, "client": call.client, "status": call.status, "http_status": call.http_status,
            "error": call.error, "start_ts": call.start_ts, "end_ts": call.end_ts,
            "elapsed_time": (call.end_ts - call.start_ts) if call.end_ts else None}

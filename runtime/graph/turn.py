"""Start and end of a turn: the bookkeeping RAGFlow's Canvas.run does around the graph (SPEC 5.1, 5.8).

All of it happens inside the graph, so LangGraph's own calls (`invoke`, `Command(resume=...)`, a run
from an earlier checkpoint) keep a conversation the way canvas2graph's Runner does:
- `start_turn`: in Begin's step, from the request channels (`CanvasInput`) and the previous turn's state;
- `resume_update`: in the step of a form (Begin, UserFillUp) that a request answered;
- `finish_turn` / `finish_after`: in the step that ends the turn.
"""
from __future__ import annotations

import json
import time
from typing import Any, Mapping

from canvas2graph.runtime.graph.state import (ANSWER, FILES, GLOBALS, HISTORY, INPUTS, LAST, LOOPS, OUTPUTS, QUERY, REFERENCE, REQUEST,
                           USER_ID, appended, combine_updates, merge_values, outputs_of, with_update)


def now_text() -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S")


def next_turn(count: Any) -> int:
    """The turn number after `count`; a count that is no whole number (a session saved by an older
    version, say) starts again from 1 rather than failing every later turn."""
    ok = isinstance(count, int) and not isinstance(count, bool) and 0 <= count < 2 ** 53
    return count + 1 if ok else 1


def prepare_turn(previous: Mapping[str, Any] | None, *, initial_globals: Mapping[str, Any],
                 query: Any = "", inputs: Mapping[str, Any] | None = None,
                 user_id: str = "", files: list | None = None) -> dict[str, Any]:
    """The update that starts a turn: fresh component outputs, updated globals and history.

    `OUTPUTS` and `LOOPS` are None, which their reducers read as "start afresh". The history and
    `sys.history` are written as appends, and the globals as the keys that change, once the
    conversation has globals: what a turn stores does not grow with the turns before it."""
    previous = previous or {}
    before = previous.get(GLOBALS)
    globals_ = {} if before else dict(initial_globals)
    globals_["sys.date"] = now_text()
    if query:                           # an empty query keeps the previous one (SPEC 4.4)
        globals_["sys.query"] = query
    if user_id:
        globals_["sys.user_id"] = user_id
    if files:
        globals_["sys.files"] = files
    globals_["sys.conversation_turns"] = next_turn((before or globals_).get("sys.conversation_turns"))
    said = f"user: {query}"
    globals_["sys.history"] = (appended([said]) if before and isinstance(before.get("sys.history"), list)
                               else list((before or globals_).get("sys.history") or []) + [said])
    update: dict[str, Any] = {OUTPUTS: None, LOOPS: None}     # every component starts the turn afresh
    update.update({
        GLOBALS: globals_,
        HISTORY: appended([["user", query]]),
        REQUEST: {"query": query, "inputs": dict(inputs or {}), "open": True},
        LAST: {},
        REFERENCE: None,                        # a fresh reference store each turn
        ANSWER: "",
    })
    return update


def start_turn(state: Mapping[str, Any], initial_globals: Mapping[str, Any]) -> dict[str, Any]:
    """The start of a turn from the request in the state's request channels and what the last turn left."""
    return prepare_turn(state, initial_globals=initial_globals, query=state.get(QUERY) or "",
                        inputs=state.get(INPUTS) or None, user_id=state.get(USER_ID) or "",
                        files=state.get(FILES) or None)


def answer_text(outputs: Any) -> str:
    """The text of an answer (RAGFlow's `outputs.content`; `result` for components that have no content)."""
    if not isinstance(outputs, Mapping):
        return "" if outputs is None else str(outputs)
    for key in ("content", "result"):
        value = outputs.get(key)
        if value is not None:
            return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return ""


def finish_turn(state: Mapping[str, Any]) -> dict[str, Any]:
    """Record the assistant turn: the whole output dict of the last component (SPEC 5.8).

    The finish node can run twice in one turn: it is deferred like a join, and when a sink ends in
    the same step as the branches of a join, LangGraph runs the finish and the join together; the
    join's own edge to the finish then runs it again. The first run closed the request; a later run
    replaces that answer with the answer of the component that really came last.
    """
    last_step = state.get(LAST) or {}
    last = last_step.get("component_id") or ""
    outputs = dict(outputs_of(state, last)) if last else {}
    answer = last_step.get("answer")        # a Message's text less the thinking it showed
    request = state.get(REQUEST) or {}
    history = state.get(HISTORY) or []
    sys_history = (state.get(GLOBALS) or {}).get("sys.history") or []
    drop = drop_said = 0
    if request.get("open") is False and history and history[-1][0] == "assistant":
        drop = 1
        if sys_history and str(sys_history[-1]).startswith("assistant: "):
            drop_said = 1
    said = f"assistant: {outputs!r}"
    said_write = appended([said], drop_said) if isinstance(sys_history, list) else list(sys_history) + [said]
    return {HISTORY: appended([["assistant", outputs]], drop), GLOBALS: {"sys.history": said_write}, REQUEST: {**request, "open": False},
            ANSWER: answer if isinstance(answer, str) else answer_text(outputs)}


def finish_after(state: Mapping[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    """`update` (a node's writes) plus the end of the turn, as the finish node would record it in the
    next step: for a component whose step ends the turn when nothing else can be running."""
    view = with_update(state, {key: update[key] for key in (LAST, HISTORY, REQUEST, GLOBALS) if key in update})
    last = (view.get(LAST) or {}).get("component_id")
    written = (update.get(OUTPUTS) or {}).get(last) if last else None
    if written:
        view[OUTPUTS] = {**(state.get(OUTPUTS) or {}), last: merge_values(outputs_of(state, last), written)}
    finish = finish_turn(view)
    return combine_updates(update, finish)


def resume_update(previous: Mapping[str, Any], *, query: str = "", inputs: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """What a resuming request changes (SPEC 5.1): turns count, history and sys.query, not outputs."""
    before = previous.get(GLOBALS) or {}
    globals_: dict[str, Any] = {"sys.date": now_text()}
    if query:
        globals_["sys.query"] = query
    globals_["sys.conversation_turns"] = next_turn(before.get("sys.conversation_turns"))
    said = f"user: {query}"
    globals_["sys.history"] = (appended([said]) if isinstance(before.get("sys.history"), list)
                               else list(before.get("sys.history") or []) + [said])
    return {GLOBALS: globals_, HISTORY: appended([["user", query]]),
            REQUEST: {"query": query, "inputs": dict(inputs or {}), "open": True}}


def history_messages(history: list, window: int) -> list[dict[str, str]]:
    """Canvas.get_history(n): the last 2n entries as {role, content}; dicts contribute their content."""
    if window <= 0:
        return []
    out = []
    for role, content in history[-2 * window:]:
        if isinstance(content, dict):
            content = content.get("content", "")
        out.append({"role": role, "content": content if isinstance(content, str) else str(content)})
    return out

"""A turn's RAGFlow events as the HTTP replies RAGFlow sends (SPEC 8.1).

Styles:
- `events`: a run outside an agent session (no session yet, a "workflow" session, or a graph run):
  the stream carries every event; the JSON reply is the last event, with the answer added.
- `agent`: a session created by `POST /agents/{id}/sessions`: the stream carries `message`,
  `message_end`, `user_inputs`, `node_finished` and a `workflow_finished` reduced to its usage; the
  JSON reply is the last `message_end` (or the pause) with the answer added.
- `legacy`: `POST /agents/{id}/completions`, which ragflow-sdk 0.22 reads: only `message` and
  `message_end` (it reads `data.content` of every event until `message_end`), so a pause is told as a
  message with the tips and a `message_end` that carries the form under `user_inputs`.
- OpenAI chat-completion chunks and replies (`openai_*`).
"""
from __future__ import annotations

import copy
import time
from typing import Any, AsyncIterator, Callable

import orjson

from canvas2graph.server.backend.answer_text import message_text, thinking_of, without_thinking
from canvas2graph.server.backend.conversations import Turn

DONE = b"data:[DONE]\n\n"
OPENAI_DONE = b"data: [DONE]\n\n"


_ORJSON = orjson.OPT_NON_STR_KEYS       # reference chunks may be keyed by numbers


def dumps(payload: Any) -> bytes:
    """JSON as UTF-8 (RAGFlow's ensure_ascii=False); orjson, because a busy server encodes thousands of
    events a second."""
    return orjson.dumps(payload, default=str, option=_ORJSON)


def frame(payload: Any) -> bytes:
    return b"data:" + dumps(payload) + b"\n\n"


def openai_frame(payload: Any) -> bytes:
    return b"data: " + dumps(payload) + b"\n\n"


def failure_text(error: BaseException) -> str:
    """Why a turn failed, for the client: the runtime's own message, or the exception's name and text."""
    from canvas2graph.runtime.run.runner import TurnFailed
    return str(error) if isinstance(error, TurnFailed) else f"{type(error).__name__}: {error}"


def error_frame(error: BaseException) -> bytes:
    return frame({"code": 500, "message": failure_text(error), "data": False})


class Answer:
    """What a turn's events add up to: the answer text, references, structured outputs and the trace."""

    def __init__(self, return_trace: bool = False):
        self.content = ""
        self.reference: dict = {}
        self.structured: dict = {}
        self.trace: list[dict] = []
        self.return_trace = return_trace
        self.last: dict | None = None
        self.last_message_end: dict | None = None
        self.first_pause: dict | None = None

    def add(self, event: dict) -> None:
        kind, data = event.get("event"), event.get("data") or {}
        if kind == "message":
            self.content += message_text(data)
        if isinstance(data.get("reference"), dict):
            self.reference.update(data["reference"])
        if kind == "node_finished":
            outputs = data.get("outputs") if isinstance(data.get("outputs"), dict) else {}
            if outputs.get("structured"):
                self.structured[data.get("component_id")] = outputs["structured"]
            if self.return_trace:
                self.trace.append({"component_id": data.get("component_id"), "trace": [copy.deepcopy(data)]})
        elif kind == "message_end":
            self.last_message_end = event
        elif kind == "user_inputs" and self.first_pause is None:
            self.first_pause = event
        self.last = event

    def decorate(self, event: dict | None, usage: dict | None = None) -> dict:
        """`event` with the answer added to its data, as RAGFlow's JSON replies carry it."""
        reply = copy.deepcopy(event) if event is not None else {"data": {}}
        data = reply.setdefault("data", {})
        if not isinstance(data, dict):
            data = reply["data"] = {"value": data}
        data["content"] = self.content
        data["reference"] = self.reference
        if usage is not None:
            data["usage"] = usage
        if self.structured:
            data["structured"] = self.structured
        if self.return_trace:
            data["trace"] = self.trace
        return reply


def _with_session(event: dict, session_id: str) -> dict:
    return {**event, "session_id": session_id}


def sse(turn: Turn, style: str, return_trace: bool = False) -> AsyncIterator[bytes]:
    """The turn as RAGFlow's SSE stream. Leaving early (the client went away) cancels the turn."""
    sid = turn.session.id
    trace: list[dict] = []

    def frames(event: dict) -> list[bytes]:
        if event.get("event") == "node_finished" and return_trace:
            trace.append({"component_id": event["data"].get("component_id"),
                          "trace": [copy.deepcopy(event["data"])]})
            event = {**event, "data": {**event["data"], "trace": list(trace)}}
        return [frame(_with_session(out, sid)) for out in _shape(event, style, return_trace)]

    return _stream(turn, frames, failed=error_frame, done=DONE)     # RAGFlow reports a failed run in the stream


async def _stream(turn: Turn, frames: Callable[[dict], list[bytes]], *, failed: Callable[[Exception], bytes],
                  done: bytes, last: Callable[[], bytes] | None = None) -> AsyncIterator[bytes]:
    """The turn's events as SSE bytes, one write per batch of events (`frames` gives an event's frames),
    then `last()` when given, then `done`. A failure of the run is told inside the stream as `failed(error)`
    before `done`; leaving early (the client went away) cancels the turn."""
    finished = False
    try:
        try:
            async for batch in turn.batches():
                out = [piece for event in batch for piece in frames(event)]
                if out:
                    yield b"".join(out)
            if last is not None:
                yield last()
        except Exception as e:      # noqa: BLE001 - the client is told in the stream, not by a dropped connection
            yield failed(e)
        finished = True
        yield done
    finally:
        if not finished:
            turn.cancel()


def _shape(event: dict, style: str, return_trace: bool) -> list[dict]:
    kind = event.get("event")
    if style == "events":
        return [event]
    if style == "agent":
        if kind in ("message", "message_end", "user_inputs", "node_finished"):
            return [event]
        if kind == "workflow_finished":
            return [{**event, "data": {"usage": (event.get("data") or {}).get("usage")}}]
        return []
    # legacy
    if kind in ("message", "message_end") or (kind == "node_finished" and return_trace):
        return [event]
    if kind == "user_inputs":
        data = event.get("data") or {}
        base = {k: v for k, v in event.items() if k != "data"}
        return [{**base, "event": "message", "data": {"content": data.get("tips") or ""}},
                {**base, "event": "message_end", "data": {"user_inputs": data}}]
    return []


async def collect(turn: Turn, return_trace: bool = False) -> Answer:
    answer = Answer(return_trace)
    async for event in turn.events():
        answer.add(event)
    # the text as the turn's events add up to it: a turn taken over streams its cut-off step again, and the
    # answer holds it once
    answer.content = turn.content
    return answer


def json_reply(answer: Answer, turn: Turn, style: str) -> dict:
    """The `data` of a non-streamed completion."""
    sid = turn.session.id
    if style == "events":
        final = answer.decorate(answer.last)
    else:
        final = answer.decorate(answer.last_message_end or answer.first_pause or answer.last, usage=dict(turn.usage))
    final["session_id"] = sid
    return final


# --- OpenAI-compatible mode ---------------------------------------------------------------------
def _usage(turn: Turn) -> dict:
    usage = turn.usage or {}
    prompt, completion = int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def _chunk(turn: Turn, model: str, delta: dict, finish_reason: str | None = None, usage: dict | None = None) -> dict:
    return {"id": turn.session.id, "object": "chat.completion.chunk", "created": int(time.time()), "model": model,
            "system_fingerprint": "", "usage": usage,
            "choices": [{"delta": delta, "finish_reason": finish_reason, "index": 0, "logprobs": None}]}


def _delta(content: str | None, reference: Any = None) -> dict:
    delta = {"content": content, "role": "assistant", "function_call": None, "tool_calls": None}
    if reference:
        delta["reference"] = reference
    return delta


def openai_sse(turn: Turn, model: str) -> AsyncIterator[bytes]:
    """Chat-completion chunks for the answer's text, then (unlike RAGFlow) a last chunk with
    `finish_reason: "stop"` and the usage, then `data: [DONE]`."""
    thinking = False        # a reasoning model's thinking goes out as `reasoning_content`, as RAGFlow's chat API does

    def frames(event: dict) -> list[bytes]:
        nonlocal thinking
        kind, data = event.get("event"), event.get("data") or {}
        if kind == "message":
            if data.get("start_to_think") or data.get("end_to_think"):
                thinking = bool(data.get("start_to_think"))
            text = data.get("content") or ""
            if thinking:
                return [openai_frame(_chunk(turn, model, {**_delta(None), "reasoning_content": text}))] if text else []
            return [openai_frame(_chunk(turn, model, _delta(text)))] if text or not data.get("end_to_think") else []
        if kind == "message_end":
            return [openai_frame(_chunk(turn, model, _delta("", data.get("reference"))))]
        if kind == "user_inputs":        # a pause: show its tips, or the chat shows nothing
            return [openai_frame(_chunk(turn, model, _delta(data.get("tips") or "")))]
        return []

    def failed(error: Exception) -> bytes:      # as RAGFlow: the error as the answer's text
        return openai_frame(_chunk(turn, model, _delta(f"**ERROR**: {error}"), "stop", _usage(turn)))

    return _stream(turn, frames, failed=failed, done=OPENAI_DONE,
                   last=lambda: openai_frame(_chunk(turn, model, {}, "stop", _usage(turn))))


async def openai_json(turn: Turn, model: str) -> dict:
    tips, reference, failed = "", {}, None
    try:
        async for event in turn.events():
            kind, data = event.get("event"), event.get("data") or {}
            if kind == "user_inputs":
                tips += data.get("tips") or ""
            if isinstance(data.get("reference"), dict):
                reference.update(data["reference"])
    except Exception as e:          # noqa: BLE001
        failed = f"**ERROR**: {e}"
    # the answer as the turn's events add up to it (a turn taken over holds its text once), its thinking apart
    logged = turn.content
    content, reasoning = failed or (without_thinking(logged) + tips), thinking_of(logged)
    usage = _usage(turn)
    usage["completion_tokens_details"] = {"reasoning_tokens": 0, "accepted_prediction_tokens": usage["completion_tokens"],
                                          "rejected_prediction_tokens": 0}
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if reasoning:
        message["reasoning_content"] = reasoning
    if reference:
        message["reference"] = reference
    return {"id": turn.session.id, "object": "chat.completion", "created": int(time.time()), "model": model,
            "param": None, "usage": usage,
            "choices": [{"message": message, "logprobs": None, "finish_reason": "stop", "index": 0}]}

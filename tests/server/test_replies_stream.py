"""The SSE loop both streamed replies share (`replies.sse`, `replies.openai_sse`): one write per batch of
events, a failed run told inside the stream before the end marker, and a client that leaves early
cancelling the turn."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace

import orjson

from canvas2graph.server import replies


class ScriptedTurn:
    """A turn whose event batches are given, optionally ending in a failure; it records being cancelled."""

    def __init__(self, batches: list[list[dict]], failure: Exception | None = None):
        self.session = SimpleNamespace(id="s1")
        self.usage = {"prompt_tokens": 2, "completion_tokens": 3}
        self._batches, self._failure = batches, failure
        self.cancelled = False

    async def batches(self):
        for batch in self._batches:
            yield batch
        if self._failure is not None:
            raise self._failure

    def cancel(self) -> None:
        self.cancelled = True


def message(text: str) -> dict:
    return {"event": "message", "data": {"content": text}}


async def chunks(stream) -> list[bytes]:
    return [chunk async for chunk in stream]


def payloads(chunk: bytes, prefix: bytes) -> list[dict]:
    return [orjson.loads(part[len(prefix):]) for part in chunk.split(b"\n\n") if part]


def test_each_batch_is_one_write_and_the_stream_ends_with_done():
    turn = ScriptedTurn([[message("a"), message("b")], [{"event": "node_started", "data": {}}], [message("c")]])
    out = asyncio.run(chunks(replies.sse(turn, "agent")))
    assert out[-1] == replies.DONE
    # the batch without anything to send in the agent style is no write at all
    assert [[e["data"]["content"] for e in payloads(c, b"data:")] for c in out[:-1]] == [["a", "b"], ["c"]]
    assert all(e["session_id"] == "s1" for c in out[:-1] for e in payloads(c, b"data:"))
    assert not turn.cancelled


def test_a_failed_run_is_told_in_the_stream_before_done():
    turn = ScriptedTurn([[message("a")]], failure=RuntimeError("the store went away"))
    out = asyncio.run(chunks(replies.sse(turn, "events")))
    assert payloads(out[-2], b"data:") == [{"code": 500, "message": "RuntimeError: the store went away",
                                            "data": False}]
    assert out[-1] == replies.DONE and not turn.cancelled


def test_openai_chunks_end_with_a_stop_chunk_carrying_the_usage_then_done():
    turn = ScriptedTurn([[message("Hel"), message("lo")], [{"event": "message_end", "data": {}}]])
    out = asyncio.run(chunks(replies.openai_sse(turn, "m")))
    assert out[-1] == replies.OPENAI_DONE
    texts = [c["choices"][0]["delta"].get("content") for chunk in out[:-1] for c in payloads(chunk, b"data: ")]
    assert texts == ["Hel", "lo", "", None]
    stop = payloads(out[-2], b"data: ")[0]
    assert stop["choices"][0]["finish_reason"] == "stop"
    assert stop["usage"] == {"prompt_tokens": 2, "completion_tokens": 3, "total_tokens": 5}


def test_an_openai_failure_is_the_answers_text_as_ragflow_sends_it():
    turn = ScriptedTurn([], failure=ValueError("bad"))
    out = asyncio.run(chunks(replies.openai_sse(turn, "m")))
    failure = payloads(out[0], b"data: ")[0]["choices"][0]
    assert failure["delta"]["content"] == "**ERROR**: bad" and failure["finish_reason"] == "stop"
    assert out[1:] == [replies.OPENAI_DONE]


def test_a_client_that_leaves_early_cancels_the_turn():
    async def leave_after_first(stream) -> None:
        async for _ in stream:
            break
        await stream.aclose()

    for stream_of in (lambda t: replies.sse(t, "events"), lambda t: replies.openai_sse(t, "m")):
        turn = ScriptedTurn([[message("a")], [message("b")]])
        asyncio.run(leave_after_first(stream_of(turn)))
        assert turn.cancelled

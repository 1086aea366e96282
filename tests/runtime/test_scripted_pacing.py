"""`chunk_interval_ms`: a scripted model that takes time to write, for load tests and cancellation."""
from __future__ import annotations

import asyncio

import pytest

from runtime import scripted
from runtime.scripted import Script, ScriptError, ScriptedChatModel


@pytest.fixture
def sleeps(monkeypatch):
    """The pauses the model takes, recorded instead of waited for."""
    taken: list[float] = []
    real_sleep = asyncio.sleep

    async def record(seconds, *args, **kwargs):
        taken.append(seconds)
        await real_sleep(0)

    monkeypatch.setattr(scripted.asyncio, "sleep", record)
    return taken


def model(script: dict) -> ScriptedChatModel:
    return ScriptedChatModel(script=Script.load(script))


async def test_each_streamed_chunk_waits_the_interval(sleeps):
    llm = model({"replies": ["one two three"], "stream_chunks": 3, "chunk_interval_ms": 20})
    chunks = [c.content async for c in llm.astream("x")]
    assert chunks == ["one ", "two ", "three"]
    assert sleeps == [0.02, 0.02, 0.02]


async def test_a_non_streamed_reply_waits_as_long_as_streaming_it_would(sleeps):
    llm = model({"replies": ["one two three"], "stream_chunks": 3, "chunk_interval_ms": 20})
    assert (await llm.ainvoke("x")).content == "one two three"
    assert sleeps == [pytest.approx(0.06)]


async def test_without_an_interval_nothing_waits(sleeps):
    assert [c.content async for c in model({"replies": ["a b"]}).astream("x")] == ["a ", "b"]
    assert sleeps == []


@pytest.mark.parametrize("value", [-1, "20", True, 60_001])
def test_a_bad_interval_is_a_script_error(value):
    with pytest.raises(ScriptError, match="chunk_interval_ms must be a number of milliseconds"):
        Script.load({"chunk_interval_ms": value})

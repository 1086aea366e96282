"""`chunk_interval_ms`: a scripted model that takes time to write, for load tests and cancellation."""
from __future__ import annotations

import asyncio

import pytest

from canvas2graph.runtime.services import scripted
from canvas2graph.runtime.services.scripted import Script, ScriptError, ScriptedChatModel


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


# --- delay_ms: a model that takes time to answer (the whole script, one reply, one chunk) -------------
async def test_the_scripts_delay_is_waited_before_the_first_chunk_only(sleeps):
    llm = model({"replies": ["one two three"], "stream_chunks": 3, "delay_ms": 200})
    assert [c.content async for c in llm.astream("x")] == ["one ", "two ", "three"]
    assert sleeps == [0.2]


async def test_a_replys_delay_replaces_the_scripts_for_that_reply(sleeps):
    llm = model({"replies": [{"content": "slow", "delay_ms": 500}, "default"], "delay_ms": 100})
    assert (await llm.ainvoke("x")).content == "slow"
    assert (await llm.ainvoke("x")).content == "default"
    assert sleeps == [pytest.approx(0.5), pytest.approx(0.1)]


async def test_a_chunk_waits_its_own_delay_before_it_is_streamed(sleeps):
    llm = model({"replies": [{"chunks": ["a", {"content": "b", "delay_ms": 30}, {"content": "c"}], "delay_ms": 10}]})
    assert [c.content async for c in llm.astream("x")] == ["a", "b", "c"]
    assert sleeps == [pytest.approx(0.01), pytest.approx(0.03)]


async def test_delays_add_to_the_chunk_interval(sleeps):
    llm = model({"replies": [{"chunks": ["a", {"content": "b", "delay_ms": 30}]}], "chunk_interval_ms": 5,
                 "delay_ms": 40})
    assert [c.content async for c in llm.astream("x")] == ["a", "b"]
    assert sleeps == [pytest.approx(0.045), pytest.approx(0.035)]


async def test_an_unstreamed_call_takes_as_long_as_streaming_the_reply(sleeps):
    llm = model({"replies": [{"content": "ab", "chunks": ["a", {"content": "b", "delay_ms": 30}], "delay_ms": 20}]})
    assert (await llm.ainvoke("x")).content == "ab"
    assert sleeps == [pytest.approx(0.05)]


def test_a_synchronous_call_waits_too(monkeypatch):
    taken: list[float] = []
    monkeypatch.setattr(scripted.time, "sleep", taken.append)
    llm = model({"replies": ["a b", "c"], "stream_chunks": 2, "delay_ms": 25})
    assert llm.invoke("x").content == "a b"
    assert [c.content for c in llm.stream("x")] == ["c"]
    assert taken == [pytest.approx(0.025), pytest.approx(0.025)]


async def test_a_reasoning_reply_waits_before_its_first_thought_and_chunk_delays_before_their_chunks(sleeps):
    llm = model({"replies": [{"reasoning": "hmm", "chunks": [{"content": "x", "delay_ms": 7}], "delay_ms": 3}]})
    pieces = [c async for c in llm.astream("x")]
    assert [p.additional_kwargs.get("reasoning_content") or p.content for p in pieces] == ["hmm", "x"]
    assert sleeps == [pytest.approx(0.003), pytest.approx(0.007)]


@pytest.mark.parametrize("script, where", [
    ({"delay_ms": -5}, "delay_ms"),
    ({"delay_ms": "1s"}, "delay_ms"),
    ({"replies": [{"content": "a", "delay_ms": True}]}, r"replies\[0\].delay_ms"),
    ({"replies": [{"chunks": [{"content": "a", "delay_ms": 60_001}]}]}, r"replies\[0\].chunks\[0\].delay_ms"),
])
def test_a_bad_delay_is_a_script_error_naming_where_it_is(script, where):
    with pytest.raises(ScriptError, match=f"{where} must be a number of milliseconds from 0 to 60000"):
        Script.load(script)


def test_a_chunk_object_with_an_unknown_key_is_a_script_error():
    with pytest.raises(ScriptError, match=r"replies\[0\].chunks\[1\] must be a string or an object"):
        Script.load({"replies": [{"chunks": ["a", {"content": "b", "wait": 3}]}]})

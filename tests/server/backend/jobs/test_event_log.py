"""A turn's event log, on a SQLite file and on PostgreSQL: readers follow a turn from any position, in order,
to its end record, whoever writes it and whenever they start reading; batches a reader sees twice (through a
notification and the table) are read once; a turn whose end record never came is ended from its row."""
from __future__ import annotations

import asyncio
import time
import uuid

from langchain_core.messages import AIMessageChunk

from canvas2graph.server.backend.jobs.event_log import NOTIFY_MAX, PostgresEventLog, SqliteEventLog
from canvas2graph.server.backend.jobs.wire import RAW_EVENT, decode, encode, turn_event
from canvas2graph.server.backend.store import open_store


def event(n: int) -> dict:
    return {"event": "message", "message_id": "m", "data": {"content": f"piece {n}"}}


async def opened(url: str):
    store_cm = open_store(url)
    store = await store_cm.__aenter__()
    log = PostgresEventLog(store.db) if url.startswith("postgresql") else SqliteEventLog(store.db)
    await log.start()
    return store_cm, log


async def collect(log, turn_id: str, start: int = 0, settled=None) -> list[dict]:
    return [e async for batch in log.follow(turn_id, start, settled=settled) for e in batch]


async def test_a_reader_follows_a_turn_from_its_first_event_to_its_end_in_order(durable_url):
    store_cm, log = await opened(durable_url)
    try:
        turn = uuid.uuid4().hex
        reader = asyncio.create_task(collect(log, turn))        # starts before anything is written
        seq = 0
        for n in range(0, 30, 3):
            seq = await log.append(turn, seq, [event(n), event(n + 1), event(n + 2)])
            await asyncio.sleep(0.001)
        await log.append(turn, seq, [turn_event("end", status="finished")])
        events = await asyncio.wait_for(reader, 10)
        assert [e["data"]["content"] for e in events[:-1]] == [f"piece {n}" for n in range(30)]
        assert events[-1] == turn_event("end", status="finished")
        late = await collect(log, turn, start=28)                 # a reader that comes later, from a position
        assert [e.get("data", {}).get("content") for e in late] == ["piece 28", "piece 29", None]
        assert await log.next_seq(turn) == 31
    finally:
        await log.close()
        await store_cm.__aexit__(None, None, None)


async def test_a_batch_written_twice_is_read_once_and_a_big_one_comes_from_the_table(durable_url):
    store_cm, log = await opened(durable_url)
    try:
        turn = uuid.uuid4().hex
        reader = asyncio.create_task(collect(log, turn))
        big = [{"event": "message", "message_id": "m", "data": {"content": "x" * NOTIFY_MAX}}]
        seq = await log.append(turn, 0, [event(0)])
        assert await log.append(turn, 0, [event(0)]) == seq      # a retried write: the row is there already
        seq = await log.append(turn, seq, big)
        await log.append(turn, seq, [turn_event("end", status="finished")])
        events = await asyncio.wait_for(reader, 10)
        assert [len(e["data"]["content"]) for e in events[:-1]] == [7, NOTIFY_MAX]
    finally:
        await log.close()
        await store_cm.__aexit__(None, None, None)


async def test_a_turn_without_its_end_record_ends_its_readers_from_its_row(durable_url):
    store_cm, log = await opened(durable_url)
    try:
        turn = uuid.uuid4().hex
        await log.append(turn, 0, [event(0)])

        async def settled():
            return turn_event("end", status="failed", error="its worker died while logging")
        started = time.monotonic()
        events = await asyncio.wait_for(collect(log, turn, settled=settled), 10)
        assert [e["event"] for e in events] == ["message", "__turn__"] and events[-1]["status"] == "failed"
        assert time.monotonic() - started < 5
    finally:
        await log.close()
        await store_cm.__aexit__(None, None, None)


def test_a_streamed_message_keeps_its_class_through_the_log():
    chunk = AIMessageChunk(content="Hel", id="run-1")
    raw = {"event": RAW_EVENT, "mode": "messages", "data": (chunk, {"langgraph_node": "LLM.A"})}
    [back] = decode(encode([raw]))
    message, metadata = back["data"]
    assert isinstance(message, AIMessageChunk) and message.content == "Hel" and message.id == "run-1"
    assert metadata == {"langgraph_node": "LLM.A"}
    assert (message + AIMessageChunk(content="lo", id="run-1")).content == "Hello"

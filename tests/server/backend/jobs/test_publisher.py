"""A turn's publisher writes every event it is given to the log, once and in order: when it is closed while a
batch is being written, when a write fails after it landed, and when the database is away for a while."""
from __future__ import annotations

import asyncio

import pytest

from canvas2graph.server.backend.jobs.publisher import Publisher


class SlowLog:
    """An event log whose writes take `delay` seconds; `fail` makes the next writes raise after they landed
    (the answer lost on the way back), as a connection cut after its commit does."""
    linger = 0.0

    def __init__(self, delay: float = 0.05):
        self.delay, self.fail = delay, 0
        self.rows: dict[int, list[dict]] = {}

    async def append(self, turn_id: str, seq: int, events: list[dict]) -> int:
        await asyncio.sleep(self.delay)
        self.rows.setdefault(seq, list(events))         # ON CONFLICT (turn_id, seq) DO NOTHING
        if self.fail:
            self.fail -= 1
            raise ConnectionError("connection lost after the commit")
        return seq + len(events)

    def events(self) -> list[int]:
        out: list[int] = []
        for seq in sorted(self.rows):
            assert seq == len(out), f"a gap or an overlap at {seq}"
            out += [e["n"] for e in self.rows[seq]]
        return out


async def test_closing_while_a_batch_is_being_written_lets_it_finish():
    log = SlowLog(delay=0.2)
    publisher = Publisher(log, "t")
    publisher.put({"n": 0})
    await asyncio.sleep(0.05)           # the first batch is on its way
    publisher.put({"n": 1})             # the last event, given just before the turn closes its publisher
    await publisher.close()
    assert log.events() == [0, 1]


async def test_a_write_that_landed_but_failed_is_sent_again_as_it_was_not_merged_with_later_events():
    log = SlowLog(delay=0.01)
    log.fail = 1
    publisher = Publisher(log, "t")
    publisher.put({"n": 0})
    await asyncio.sleep(0.03)           # the write landed, its answer did not: retried in 0.5 s
    for n in range(1, 5):
        publisher.put({"n": n})
    await publisher.close()
    assert log.events() == [0, 1, 2, 3, 4]


async def test_a_database_away_longer_than_the_close_timeout_is_an_error_that_counts_what_is_left():
    log = SlowLog(delay=0.01)
    log.fail = 1000
    publisher = Publisher(log, "t")
    publisher.put({"n": 0})
    with pytest.raises(RuntimeError, match="1 events could not be logged"):
        await publisher.close(timeout=1.0)

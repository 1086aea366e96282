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


# --- what a turn's events add up to ------------------------------------------------------------------------
from canvas2graph.server.backend.jobs.publisher import AnswerFold     # noqa: E402
from canvas2graph.server.backend.jobs.wire import turn_event           # noqa: E402


def started(component: str) -> dict:
    return {"event": "node_started", "message_id": "m", "data": {"component_id": component}}


def finished(component: str) -> dict:
    return {"event": "node_finished", "message_id": "m", "data": {"component_id": component}}


def said(text: str) -> dict:
    return {"event": "message", "message_id": "m", "data": {"content": text}}


END = {"event": "workflow_finished", "message_id": "m", "data": {}}


def folded(*events: dict) -> str:
    fold = AnswerFold()
    for event in events:
        fold.add(event)
    return fold.answer("m")


def test_a_step_run_again_after_a_takeover_is_kept_once():
    assert folded(started("Message:M"), said("Hello "), said("wor"), turn_event("attempt", attempt=2),
                  started("Message:M"), said("Hello "), said("world"), finished("Message:M"), END) == "Hello world"


def test_a_step_that_finished_before_the_kill_but_whose_end_was_not_logged_keeps_its_text():
    # the worker died after the step's checkpoint and before its node_finished reached the log: the new
    # worker goes on from the next component, which streams on
    assert folded(started("Message:A"), said("First. "), turn_event("attempt", attempt=2),
                  started("Message:B"), said("Second."), finished("Message:B"), END) == "First. Second."
    # ... or the turn had nothing left to run
    assert folded(started("Message:A"), said("Only."), turn_event("attempt", attempt=2), END) == "Only."


def test_an_upstream_step_run_again_first_does_not_decide_for_the_streaming_one():
    assert folded(started("LLM:A"), finished("LLM:A"), started("Message:M"), said("par"),
                  turn_event("attempt", attempt=2), started("LLM:A"), finished("LLM:A"),
                  started("Message:M"), said("partial answer"), finished("Message:M"), END) == "partial answer"

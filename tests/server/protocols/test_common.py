"""What every protocol's reply to a turn holds (server/protocols/common.py): MCP, A2A and LangGraph's waits."""
from __future__ import annotations

import asyncio

from canvas2graph.runtime.run.runner import TurnRequest
from canvas2graph.server.backend.conversations import Turn
from canvas2graph.server.backend.jobs.wire import turn_event
from canvas2graph.server.backend.store_records import Session
from canvas2graph.server.backend.store_turns import TurnRecord
from canvas2graph.server.protocols.common import run_to_end
from tests.server.backend.jobs.test_publisher import END, finished, said, started


def _turn(*batches: list[dict]) -> Turn:
    async def follow():
        for batch in batches:
            yield batch
    turn = Turn(record=TurnRecord.__new__(TurnRecord), request=TurnRequest(query="q"), conversations=None,
                session=Session(id="s", tenant="t", agent_id="a", source="agent", dsl={}))
    turn._follow = follow()
    return turn


def test_a_reply_holds_a_turn_taken_over_mid_message_once():
    # the worker died while the Message streamed "q=>"; the new one ran the Message's step again: a client of
    # the stream sees "q=>" twice, a reply (an MCP tool result, an A2A task's message) holds it once
    turn = _turn([started("Message:M"), said("q=>")],
                 [turn_event("attempt", attempt=2, owner="w2")],
                 [started("Message:M"), said("q=>"), said("Answer."), finished("Message:M"), END,
                  turn_event("end", status="finished")])
    seen: list[dict] = []

    async def hook(event: dict) -> None:
        seen.append(event)

    result = asyncio.run(run_to_end(turn, hook))
    assert result.content == "q=>Answer."
    assert [e["data"]["content"] for e in seen if e.get("event") == "message"] == ["q=>", "q=>", "Answer."]
    assert result.status == "finished"


def test_a_reply_holds_the_answer_without_the_models_thinking():
    think = {"event": "message", "message_id": "m", "data": {"content": "", "start_to_think": True}}
    thought = {"event": "message", "message_id": "m", "data": {"content": "a retried payment is the usual cause."}}
    done = {"event": "message", "message_id": "m", "data": {"content": "", "end_to_think": True}}
    turn = _turn([started("Message:M"), think, thought, done, said("You were charged twice."), finished("Message:M"),
                  END, turn_event("end", status="finished")])
    assert asyncio.run(run_to_end(turn)).content == "You were charged twice."

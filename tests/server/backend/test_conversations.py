"""A turn as its asker reads it (server/backend/conversations.py): what its events add up to."""
from __future__ import annotations

from canvas2graph.runtime.run.runner import TurnRequest
from canvas2graph.server.backend.conversations import Turn
from canvas2graph.server.backend.jobs.wire import turn_event
from canvas2graph.server.backend.store_records import Session
from canvas2graph.server.backend.store_turns import TurnRecord
from tests.server.backend.jobs.test_publisher import END, finished, said, started


def test_a_turn_taken_over_mid_message_answers_with_its_text_once():
    # the worker died while the Message streamed; the new one ran the Message's step again (issue 34: a blocking
    # completion answered "c6 q0=>c6 q0=>Answer ..." in tests/server/test_workers.py)
    record = TurnRecord.__new__(TurnRecord)
    turn = Turn(record=record, session=Session(id="s", tenant="t", agent_id="a", source="agent", dsl={}),
                request=TurnRequest(query="q"), conversations=None)
    turn._take([started("Message:M"), said("q=>")])
    turn._take([turn_event("attempt", attempt=2, owner="w2")])
    turn._take([started("Message:M"), said("q=>"), said("Answer."), finished("Message:M"), END])
    assert turn.content == "q=>Answer."

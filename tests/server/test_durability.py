"""Sessions outlive servers and clients: restarts, kills, two servers on PostgreSQL, disconnects, cancels.

The servers here answer with a model that takes its time (250 ms per streamed word), so a test can act
while a turn runs: kill the server, drop the connection, or cancel the turn.
"""
from __future__ import annotations

import threading
import uuid

import pytest

from tests.runtime.checkpointers import postgres_url
from tests.server.helpers import (
    CHAT_DSL, FEEDBACK_DSL, FINAL, SLOW_SCRIPT, TWO_STEP_DSL, Api, Server, chat_answer, first_message, make_token,
    new_tenant, texts, wait_for,
)

CHAT = "/agents/chat/completions"
BOTH_ANSWERS = "Answer 1 from LLM:A.Answer 2 from LLM:B."


def answers(api: Api, agent_id: str, sid: str) -> list[str]:
    log = api.ok("GET", f"/agents/{agent_id}/sessions/{sid}")["messages"]
    return [m["content"] for m in log if m["role"] == "assistant"]


# --- restarts -----------------------------------------------------------------------------------------
def test_a_server_killed_mid_turn_finishes_the_turn_after_a_restart_and_answers_the_next_message_as_itself(
        durable_url, tmp_path):
    token = make_token(durable_url, new_tenant())
    first = Server(durable_url, tmp_path, SLOW_SCRIPT).start()
    api = Api(first, token)
    agent_id = api.agent(TWO_STEP_DSL)
    stream = api.iter_events(CHAT, {"agent_id": agent_id, "query": "go", "stream": True})
    sid = first_message(stream)["session_id"]
    first.kill()                                   # SIGKILL while Message:M1 streams
    stream.close()
    api.close()

    with Server(durable_url, tmp_path, SLOW_SCRIPT) as second:
        api = Api(second, token)
        # the restarted server continues the turn by itself; the client re-attaches to read the rest
        rest = api.stream(f"/agents/{agent_id}/sessions/{sid}/stream", None, method="GET")
        finished = [e["data"]["component_id"] for e in rest if e["event"] == "node_finished"]
        # what completed is not run again (on PostgreSQL the stream holds the dead server's events too)
        assert all(finished.count(cid) == 1 for cid in finished) and finished[-1] == "Message:M2"
        assert rest[-1]["event"] == "workflow_finished" and texts(rest).endswith(BOTH_ANSWERS)
        # the next message is answered as itself, after the interrupted turn
        data = api.ok("POST", CHAT, {"agent_id": agent_id, "session_id": sid, "query": "next"})
        assert data["data"]["content"] == BOTH_ANSWERS
        log = api.ok("GET", f"/agents/{agent_id}/sessions/{sid}")["messages"]
        assert [(m["role"], m["content"]) for m in log] == [
            ("user", "go"), ("assistant", BOTH_ANSWERS), ("user", "next"), ("assistant", BOTH_ANSWERS)]
        api.close()


def test_paused_and_finished_sessions_continue_on_a_restarted_server(durable_url, tmp_path):
    token = make_token(durable_url, new_tenant())
    with Server(durable_url, tmp_path) as first:
        api = Api(first, token)
        pausing, chatting = api.agent(FEEDBACK_DSL), api.agent(CHAT_DSL)
        paused, chat = api.session(pausing)["id"], api.session(chatting)["id"]
        assert api.ok("POST", CHAT, {"agent_id": pausing, "session_id": paused, "query": "coffee"})["event"] == "user_inputs"
        assert api.ok("POST", CHAT, {"agent_id": chatting, "session_id": chat, "query": "one"})["data"]["content"] == chat_answer(1)
        api.close()
    with Server(durable_url, tmp_path) as second:
        api = Api(second, token)
        data = api.ok("POST", CHAT, {"agent_id": pausing, "session_id": paused, "inputs": {"feedback": "bolder"}})
        assert data["data"]["content"] == FINAL
        data = api.ok("POST", CHAT, {"agent_id": chatting, "session_id": chat, "query": "two"})
        assert data["data"]["content"] == chat_answer(2)           # the history carried over
        api.close()


# --- two servers, one PostgreSQL ------------------------------------------------------------------------
@pytest.fixture
def two_servers(tmp_path):
    url = postgres_url()
    a = Server(url, tmp_path, SLOW_SCRIPT).start()
    try:
        b = Server(url, tmp_path, SLOW_SCRIPT).start()
    except Exception:
        a.stop()
        raise
    token = make_token(url, new_tenant())
    yield Api(a, token), Api(b, token)
    a.stop()
    b.stop()


def test_two_servers_on_postgresql_serve_the_same_sessions(two_servers):
    a, b = two_servers
    chatting, pausing = a.agent(CHAT_DSL), a.agent(FEEDBACK_DSL)
    assert b.ok("GET", f"/agents/{chatting}")["compiles"] is True
    chat = a.session(chatting)["id"]
    assert a.ok("POST", CHAT, {"agent_id": chatting, "session_id": chat, "query": "one"})["data"]["content"] == chat_answer(1)
    assert b.ok("POST", CHAT, {"agent_id": chatting, "session_id": chat, "query": "two"})["data"]["content"] == chat_answer(2)
    assert answers(a, chatting, chat) == ["Hello! Ask me anything.", chat_answer(1), chat_answer(2)]
    paused = b.session(pausing)["id"]
    assert a.ok("POST", CHAT, {"agent_id": pausing, "session_id": paused, "query": "tea"})["event"] == "user_inputs"
    assert b.ok("POST", CHAT, {"agent_id": pausing, "session_id": paused, "inputs": {"feedback": "x"}})["data"]["content"] == FINAL


def test_a_turn_running_on_one_server_is_cancelled_through_the_other(two_servers):
    a, b = two_servers
    agent_id = a.agent(TWO_STEP_DSL)
    stream = a.iter_events(CHAT, {"agent_id": agent_id, "query": "go", "stream": True})
    sid = first_message(stream)["session_id"]
    assert b.ok("POST", f"/tasks/{sid}/cancel") is True
    rest = list(stream)
    assert rest[-1]["event"] == "workflow_finished" and rest[-1]["data"]["outputs"] == "Task has been canceled"
    # stopped at the next node boundary: Message:M1 finished, nothing after it ran
    assert [e["data"]["component_id"] for e in rest if e["event"] == "node_finished"][-1] == "Message:M1"


def test_a_request_waits_for_the_turn_another_server_runs_on_its_session(two_servers):
    a, b = two_servers
    agent_id = a.agent(TWO_STEP_DSL)
    sid = a.session(agent_id)["id"]
    stream = a.iter_events(CHAT, {"agent_id": agent_id, "session_id": sid, "query": "one", "stream": True})
    first_message(stream)
    done = threading.Thread(target=lambda: list(stream))
    done.start()
    data = b.ok("POST", CHAT, {"agent_id": agent_id, "session_id": sid, "query": "two"})
    done.join(60)
    assert data["data"]["content"] == BOTH_ANSWERS
    assert answers(a, agent_id, sid)[1:] == [BOTH_ANSWERS, BOTH_ANSWERS]   # one turn after the other


# --- clients that go away, and cancellation -------------------------------------------------------------
@pytest.fixture(scope="module")
def slow(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("slow")
    with Server(str(tmp / "slow.db"), tmp, SLOW_SCRIPT, "--busy-wait", "0") as server:
        api = Api(server, make_token(server.db, "dora"))
        yield api
        api.close()


def test_a_client_that_disconnects_stops_its_turn_at_once(slow):
    agent_id = slow.agent(TWO_STEP_DSL)
    sid = slow.session(agent_id)["id"]
    stream = slow.iter_events(CHAT, {"agent_id": agent_id, "session_id": sid, "query": "go", "stream": True})
    first_message(stream)
    stream.close()                                 # the client goes away while Message:M1 streams
    # the turn stops there: its answer is what M1 had streamed, and LLM:B never ran
    logged = wait_for(lambda: answers(slow, agent_id, sid)[1:], what="the cancelled turn's answer")
    assert len(logged) == 1 and "Answer 1 from LLM:A.".startswith(logged[0]) and "LLM:B" not in logged[0]
    # the session stays consistent: the next turn runs from Begin
    events = slow.stream(CHAT, {"agent_id": agent_id, "session_id": sid, "query": "again", "stream": True})
    assert texts(events) == BOTH_ANSWERS and events[0]["data"]["component_id"] == "begin"


def test_cancel_ends_the_running_turn_as_ragflow_does(slow):
    agent_id = slow.agent(TWO_STEP_DSL)
    stream = slow.iter_events(CHAT, {"agent_id": agent_id, "query": "go", "stream": True})
    sid = first_message(stream)["session_id"]
    assert slow.ok("POST", f"/tasks/{sid}/cancel") is True
    rest = list(stream)
    assert rest[-1]["data"]["outputs"] == "Task has been canceled"
    assert [e["data"]["component_id"] for e in rest if e["event"] == "node_finished"][-1] == "Message:M1"
    assert slow.ok("POST", f"/tasks/{sid}/cancel") is False        # nothing runs any more
    events = slow.stream(CHAT, {"agent_id": agent_id, "session_id": sid, "query": "again", "stream": True})
    assert events[0]["event"] == "workflow_started" and texts(events) == BOTH_ANSWERS


def test_a_second_request_on_a_running_session_is_refused_when_the_server_does_not_wait(slow):
    agent_id = slow.agent(TWO_STEP_DSL)
    sid = slow.session(agent_id)["id"]
    stream = slow.iter_events(CHAT, {"agent_id": agent_id, "session_id": sid, "query": "go", "stream": True})
    first_message(stream)
    reply = slow.call("POST", CHAT, {"agent_id": agent_id, "session_id": sid, "query": "me too"})
    assert reply["code"] == 106 and "running a turn" in reply["message"]
    list(stream)
    assert answers(slow, agent_id, sid)[1:] == [BOTH_ANSWERS]

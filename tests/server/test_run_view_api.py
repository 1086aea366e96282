"""What the web UI's run view reads from the API besides the trace: a fork's question in the message log
names the turn it ran again (the chat shows the fork as another version of that turn), and a session says
how its newest turn ended (the sessions list tells a failed session from one waiting for a form)."""
from __future__ import annotations

import pytest

from tests.server.helpers import CHAT_DSL, FAILING_DSL, FEEDBACK_DSL, SCRIPT, Api, Server, make_token


@pytest.fixture(scope="module")
def alice(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("runview")
    db = str(tmp / "server.db")
    with Server(db, tmp, SCRIPT) as server:
        api = Api(server, make_token(db, "alice"))
        yield api
        api.close()


def ask(api: Api, agent_id: str, query: str, session_id: str | None = None) -> str:
    body = {"agent_id": agent_id, "query": query, "stream": True, **({"session_id": session_id} if session_id else {})}
    return api.stream("/agents/chat/completions", body)[0]["session_id"]


def test_a_forks_question_in_the_log_names_the_message_of_the_turn_it_ran_again(alice):
    agent_id = alice.agent(CHAT_DSL)
    session_id = ask(alice, agent_id, "first")
    ask(alice, agent_id, "second", session_id)
    turns = alice.ok("GET", f"/agents/{agent_id}/sessions/{session_id}/trace")["turns"]
    first = turns[0]
    step = next(s for s in first["steps"] if s["component_id"] == "LLM:A")
    alice.stream(f"/agents/{agent_id}/sessions/{session_id}/fork", {"checkpoint_id": step["checkpoint_id"], "stream": True})
    questions = [m for m in alice.ok("GET", f"/agents/{agent_id}/sessions/{session_id}")["messages"] if m["role"] == "user"]
    assert [q["content"] for q in questions] == ["first", "second", "first"]
    assert questions[2]["fork"] == {"component_id": "LLM:A", "of": first["message_id"]}
    assert questions[0]["id"] == first["message_id"]


def test_a_session_says_how_its_newest_turn_ended_in_the_listing_and_alone(alice):
    agent_id = alice.agent(CHAT_DSL)
    fresh = alice.session(agent_id)["id"]
    answered = ask(alice, agent_id, "hello")
    failing = alice.agent(FAILING_DSL)
    failed = ask(alice, failing, "break")
    asking = alice.agent(FEEDBACK_DSL)
    paused = ask(alice, asking, "coffee")
    listed = {s["id"]: s["last_turn"] for s in alice.ok("GET", f"/agents/{agent_id}/sessions?dsl=false")}
    assert listed[fresh] is None
    assert listed[answered] == {"status": "finished", "error": None}
    failed_turn = alice.ok("GET", f"/agents/{failing}/sessions?dsl=false")[0]["last_turn"]
    assert failed_turn["status"] == "stopped" and "the provider is down" in failed_turn["error"]
    assert alice.ok("GET", f"/agents/{asking}/sessions/{paused}")["last_turn"]["status"] == "paused"
    assert alice.ok("GET", f"/agents/{failing}/sessions/{failed}")["last_turn"]["status"] == "stopped"

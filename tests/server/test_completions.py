"""Running agents over HTTP: RAGFlow's SSE framing and reply shapes, pauses, the legacy route, graphs."""
from __future__ import annotations

from tests.server.helpers import (
    CHAT_DSL, DRAFT, chat_answer, FAILING_DSL, FEEDBACK_DSL, FINAL, TIPS, TWO_STEP_DSL, texts,
)

CHAT = "/agents/chat/completions"


# --- /agents/chat/completions without a session: every event, then the last one as the JSON reply ---
def test_a_streamed_run_sends_every_event_with_its_session_and_ends_with_done(alice):
    agent_id = alice.agent(CHAT_DSL)
    events = alice.stream(CHAT, {"agent_id": agent_id, "query": "hello", "stream": True})
    kinds = [e["event"] for e in events]
    assert kinds[0] == "workflow_started" and kinds[-1] == "workflow_finished"
    assert {"node_started", "node_finished", "message", "message_end"} <= set(kinds)
    sid = events[0]["session_id"]
    assert all(e["session_id"] == sid and e["task_id"] == sid for e in events)
    assert texts(events) == chat_answer(1)
    # the run started a session: the next request continues it
    events = alice.stream(CHAT, {"agent_id": agent_id, "session_id": sid, "query": "again", "stream": True})
    assert texts(events) == chat_answer(2)


def test_a_json_run_answers_with_the_last_event_and_the_whole_answer(alice):
    agent_id = alice.agent(CHAT_DSL)
    data = alice.ok("POST", CHAT, {"agent_id": agent_id, "query": "hello"})
    assert data["event"] == "workflow_finished"
    assert data["data"]["content"] == chat_answer(1)
    assert data["data"]["reference"] == {} and data["data"]["usage"]["calls"] == 1
    assert data["session_id"]


def test_question_is_an_alias_of_query(alice):
    agent_id = alice.agent(CHAT_DSL)
    data = alice.ok("POST", CHAT, {"agent_id": agent_id, "question": "hello"})
    assert data["data"]["inputs"] == {} and data["data"]["content"]== chat_answer(1)


def test_return_trace_lists_every_finished_component(alice):
    agent_id = alice.agent(CHAT_DSL)
    data = alice.ok("POST", CHAT, {"agent_id": agent_id, "query": "hello", "return_trace": True})
    assert [t["component_id"] for t in data["data"]["trace"]] == ["begin", "LLM:A", "Message:M"]
    events = alice.stream(CHAT, {"agent_id": agent_id, "query": "hi", "stream": True, "return_trace": True})
    last = [e for e in events if e["event"] == "node_finished"][-1]
    assert [t["component_id"] for t in last["data"]["trace"]] == ["begin", "LLM:A", "Message:M"]


# --- agent sessions (POST /agents/{id}/sessions) ------------------------------------------------------
def test_an_agent_session_streams_answers_finished_nodes_and_the_usage(alice):
    agent_id = alice.agent(CHAT_DSL)
    sid = alice.session(agent_id)["id"]
    events = alice.stream(CHAT, {"agent_id": agent_id, "session_id": sid, "query": "hello", "stream": True})
    kinds = {e["event"] for e in events}
    assert kinds == {"node_finished", "message", "message_end", "workflow_finished"}
    assert events[-1]["data"] == {"usage": {"prompt_tokens": 1, "completion_tokens": 4, "total_tokens": 5, "calls": 1}}
    assert texts(events) == chat_answer(1)


def test_an_agent_session_answers_json_with_its_last_message_end(alice):
    agent_id = alice.agent(CHAT_DSL)
    sid = alice.session(agent_id)["id"]
    data = alice.ok("POST", CHAT, {"agent_id": agent_id, "session_id": sid, "query": "hello"})
    assert data["event"] == "message_end" and data["session_id"] == sid
    assert data["data"]["content"] == chat_answer(1)
    assert data["data"]["usage"]["calls"] == 1


def test_the_message_log_records_every_turn(alice):
    agent_id = alice.agent(CHAT_DSL)
    sid = alice.session(agent_id)["id"]
    for query in ("one", "two"):
        alice.ok("POST", CHAT, {"agent_id": agent_id, "session_id": sid, "query": query})
    log = alice.ok("GET", f"/agents/{agent_id}/sessions/{sid}")["messages"]
    assert [(m["role"], m["content"]) for m in log] == [
        ("assistant", "Hello! Ask me anything."),
        ("user", "one"), ("assistant", chat_answer(1)),
        ("user", "two"), ("assistant", chat_answer(2)),
    ]


def test_a_failing_component_is_reported_in_the_reply_and_the_session_goes_on(alice):
    agent_id = alice.agent(FAILING_DSL)
    sid = alice.session(agent_id)["id"]
    events = alice.stream(CHAT, {"agent_id": agent_id, "session_id": sid, "query": "hi", "stream": True})
    failed = [e["data"] for e in events if e["event"] == "node_finished" and e["data"]["error"]]
    assert [f["component_id"] for f in failed] == ["LLM:Fails"] and "the provider is down" in failed[0]["error"]
    data = alice.ok("POST", CHAT, {"agent_id": agent_id, "session_id": sid, "query": "again"})
    assert data["session_id"] == sid          # a new turn ran (and failed the same way) on the same session
    assert len(alice.ok("GET", f"/agents/{agent_id}/sessions/{sid}")["messages"]) == 5


# --- pauses -----------------------------------------------------------------------------------------
def test_a_pause_streams_user_inputs_and_the_next_request_resumes_it(alice):
    agent_id = alice.agent(FEEDBACK_DSL)
    sid = alice.session(agent_id)["id"]
    events = alice.stream(CHAT, {"agent_id": agent_id, "session_id": sid, "query": "coffee", "stream": True})
    assert events[-1]["event"] == "user_inputs"
    assert events[-1]["data"]["tips"] == TIPS and list(events[-1]["data"]["inputs"]) == ["feedback"]
    events = alice.stream(CHAT, {"agent_id": agent_id, "session_id": sid, "stream": True,
                                 "inputs": {"feedback": {"type": "line", "value": "shorter"}}})
    assert texts(events) == FINAL
    assert "LLM:Draft" not in [e["data"].get("component_id") for e in events]   # nothing before the pause runs again


def test_a_paused_json_reply_is_the_pause_and_a_resume_without_inputs_is_refused(alice):
    agent_id = alice.agent(FEEDBACK_DSL)
    sid = alice.session(agent_id)["id"]
    data = alice.ok("POST", CHAT, {"agent_id": agent_id, "session_id": sid, "query": "coffee"})
    assert data["event"] == "user_inputs" and data["data"]["tips"] == TIPS
    reply = alice.call("POST", CHAT, {"agent_id": agent_id, "session_id": sid, "query": "and now?"})
    assert reply["code"] == 102 and "provide inputs for feedback" in reply["message"]
    data = alice.ok("POST", CHAT, {"agent_id": agent_id, "session_id": sid, "inputs": {"feedback": "bolder"}})
    assert data["data"]["content"] == FINAL


# --- the legacy route ragflow-sdk 0.22 posts to -------------------------------------------------------
def test_the_legacy_route_streams_only_messages(alice):
    agent_id = alice.agent(TWO_STEP_DSL)
    sid = alice.session(agent_id)["id"]
    events = alice.stream(f"/agents/{agent_id}/completions", {"session_id": sid, "question": "hi"})
    assert {e["event"] for e in events} == {"message", "message_end"}
    assert texts(events) == "Answer 1 from LLM:A.Answer 2 from LLM:B."
    data = alice.ok("POST", f"/agents/{agent_id}/completions", {"session_id": sid, "question": "hi", "stream": False})
    assert data["data"]["content"] == "Answer 1 from LLM:A.Answer 2 from LLM:B."


def test_the_legacy_route_tells_a_pause_as_a_message_with_the_form(alice):
    agent_id = alice.agent(FEEDBACK_DSL)
    sid = alice.session(agent_id)["id"]
    events = alice.stream(f"/agents/{agent_id}/completions", {"session_id": sid, "question": "coffee"})
    assert [e["event"] for e in events] == ["message", "message_end"]
    assert events[0]["data"]["content"] == TIPS
    assert list(events[1]["data"]["user_inputs"]["inputs"]) == ["feedback"]
    events = alice.stream(f"/agents/{agent_id}/completions",
                          {"session_id": sid, "question": "", "inputs": {"feedback": {"value": "warmer"}}})
    assert texts(events) == FINAL


# --- compile-and-run ----------------------------------------------------------------------------------
def test_compile_reports_diagnostics(alice):
    data = alice.ok("POST", "/graphs/compile", {"dsl": CHAT_DSL})
    assert data == {"ok": True, "components": 3, "diagnostics": []}
    data = alice.ok("POST", "/graphs/compile", {"dsl": {"components": {"begin": {"obj": {"component_name": "Nope"}}}}})
    assert data["ok"] is False and data["diagnostics"][0]["component_id"] == "begin"


def test_export_draws_every_branch_as_mermaid_or_json(alice):
    mermaid = alice.ok("POST", "/graphs/export", {"dsl": CHAT_DSL})["mermaid"]
    assert mermaid.startswith("flowchart TD") and "LLM" in mermaid
    graph = alice.ok("POST", "/graphs/export", {"dsl": CHAT_DSL, "format": "json"})["graph"]
    assert [n["id"] for n in graph["nodes"]] == ["begin", "LLM:A", "Message:M"]
    response = alice.http.post("/graphs/export", json={"dsl": {"components": {}}})
    assert response.status_code == 400 and response.json()["code"] == 102


def test_a_graph_run_streams_ragflow_events_and_resumes_like_any_session(alice):
    events = alice.stream("/graphs/run", {"dsl": FEEDBACK_DSL, "query": "tea"})
    assert events[0]["event"] == "workflow_started" and events[-1]["event"] == "user_inputs"
    sid = events[0]["session_id"]
    assert all(e["session_id"] == sid for e in events)
    # the session keeps its DSL: the resume needs none
    events = alice.stream("/graphs/run", {"session_id": sid, "inputs": {"feedback": "calmer"}})
    assert texts(events) == FINAL and events[-1]["event"] == "workflow_finished"
    reply = alice.http.post("/graphs/run", json={"session_id": sid, "dsl": CHAT_DSL, "query": "x"})
    assert reply.status_code == 400 and "runs another DSL" in reply.json()["message"]
    reply = alice.http.post("/graphs/run", json={"session_id": "never-started", "dsl": CHAT_DSL, "query": "x"})
    assert reply.status_code == 404 and reply.json()["message"] == "session never-started not found"


def test_graph_run_errors_carry_an_http_status(alice):
    response = alice.http.post("/graphs/run", json={"query": "no dsl"})
    assert response.status_code == 400 and "`dsl` is required" in response.json()["message"]
    response = alice.http.post("/graphs/run", json={"dsl": {"components": {"begin": {"obj": {"component_name": "Nope"}}}}})
    assert response.status_code == 400 and response.json()["data"]["diagnostics"]
    data = alice.ok("POST", "/graphs/run", {"dsl": CHAT_DSL, "query": "hi", "stream": False})
    assert data["data"]["content"] == chat_answer(1) and data["data"]["outputs"]["content"]


def test_draft_text_is_what_the_pause_showed(alice):
    data = alice.ok("POST", "/graphs/run", {"dsl": FEEDBACK_DSL, "query": "tea", "stream": False})
    assert data["event"] == "user_inputs" and DRAFT in data["data"]["tips"]

"""The step trace of a session over HTTP, forks from its steps, and RAGFlow's logs and rerun routes.

Each test module runs one real server per database (SQLite file, PostgreSQL) with two tenants.
"""
from __future__ import annotations

import uuid

import pytest

from tests.server.helpers import SCRIPT, Api, Server, cpn, make_token, texts

# begin -> LLM:Kind -> Switch:S -- the query names RAGFlow --> Agent:T (a KB-search tool) -> Message:M
#                                \-- else ------------------> Message:E ("chat: <LLM:Kind's answer>")
RETRIEVAL_TOOL = {"component_name": "Retrieval", "name": "KB search", "params": {"dataset_ids": ["kb-1"]}}
ROUTER_DSL = {"components": {
    "begin": cpn("Begin", {}, ["LLM:Kind"]),
    "LLM:Kind": cpn("LLM", {"llm_id": "gpt-4o@OpenAI", "sys_prompt": "Say search or chat.",
                            "prompts": [{"role": "user", "content": "{sys.query}"}]}, ["Switch:S"]),
    "Switch:S": cpn("Switch", {"conditions": [{"logical_operator": "and", "to": ["Agent:T"], "items": [
        {"cpn_id": "sys.query", "operator": "contains", "value": "RAGFlow"}]}], "end_cpn_ids": ["Message:E"]},
        ["Agent:T", "Message:E"]),
    "Agent:T": cpn("Agent", {"llm_id": "gpt-4o@OpenAI", "sys_prompt": "Use the KB.", "cite": False, "max_rounds": 3,
                             "prompts": [{"role": "user", "content": "{sys.query}"}], "tools": [RETRIEVAL_TOOL]},
                   ["Message:M"]),
    "Message:M": cpn("Message", {"content": ["{Agent:T@content}"]}),
    "Message:E": cpn("Message", {"content": ["chat: {LLM:Kind@content}"]}),
}}
ROUTER_SCRIPT = {
    **SCRIPT,
    "by_component": {
        **SCRIPT["by_component"],
        # every turn gets a fresh copy of the script: the Agent calls the tool, then answers
        "LLM:Kind": ["chat"],
        "Agent:T": [{"tool_calls": [{"name": "search_my_dateset_0", "arguments": {"query": "RAGFlow"}}]},
                    "RAGFlow is a RAG engine."],
    },
    "retrieval": [{"content": "RAGFlow is an open-source RAG engine.", "docnm_kwd": "intro.md", "doc_id": "d1"}],
}


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def served(request, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("trace")
    if request.param == "sqlite":
        db = str(tmp / "server.db")
    else:
        from tests.runtime.checkpointers import postgres_url
        db = postgres_url()
    with Server(db, tmp, ROUTER_SCRIPT) as server:
        alice = Api(server, make_token(db, f"alice-{uuid.uuid4().hex[:6]}"))
        bob = Api(server, make_token(db, f"bob-{uuid.uuid4().hex[:6]}"))
        yield server, alice, bob
        alice.close()
        bob.close()


def ask(api: Api, agent_id: str, session_id: str, query: str) -> list[dict]:
    return api.stream("/agents/chat/completions", {"agent_id": agent_id, "session_id": session_id, "query": query,
                                                    "stream": True})


def two_turns(api: Api) -> tuple[str, str, list[list[dict]]]:
    agent_id = api.agent(ROUTER_DSL)
    session_id = api.session(agent_id)["id"]
    return agent_id, session_id, [ask(api, agent_id, session_id, q) for q in ("What is RAGFlow?", "Hi there")]


def trace_of(api: Api, agent_id: str, session_id: str) -> dict:
    return api.ok("GET", f"/agents/{agent_id}/sessions/{session_id}/trace")


def test_the_trace_lists_every_step_of_both_turns(served):
    _, alice, _ = served
    agent_id, session_id, runs = two_turns(alice)
    trace = trace_of(alice, agent_id, session_id)
    assert trace["session_id"] == session_id and trace["agent_id"] == agent_id
    first, second = trace["turns"]
    assert [t["query"] for t in trace["turns"]] == ["What is RAGFlow?", "Hi there"]
    assert [t["status"] for t in trace["turns"]] == ["finished", "finished"]
    assert [t["message_id"] for t in trace["turns"]] == [runs[0][0]["message_id"], runs[1][0]["message_id"]]
    assert [s["component_id"] for s in first["steps"]] == ["begin", "LLM:Kind", "Switch:S", "Agent:T", "Message:M"]
    assert [s["component_id"] for s in second["steps"]] == ["begin", "LLM:Kind", "Switch:S", "Message:E"]
    for step in first["steps"] + second["steps"]:
        assert step["checkpoint_id"] and step["elapsed"] >= 0 and step["error"] is None
    llm = first["steps"][1]
    assert llm["inputs"] == {"sys.query": "What is RAGFlow?"} and llm["outputs"]["content"] == "chat"
    assert llm["messages"][0] == {"role": "system", "content": "Say search or chat."}
    assert llm["messages"][-1] == {"role": "user", "content": "What is RAGFlow?"}
    assert llm["usage"]["total_tokens"] > 0 and llm["usage"]["calls"] == 1
    switch = first["steps"][2]
    assert switch["outputs"]["_next"] == ["Agent:T"] and "messages" not in switch and "tool_calls" not in switch
    agent = first["steps"][3]
    assert agent["outputs"]["content"] == "RAGFlow is a RAG engine."      # the streamed generation's final text
    assert agent["messages"][-1] == {"role": "user", "content": "What is RAGFlow?"}
    assert agent["usage"]["calls"] == 2
    [call] = agent["tool_calls"]
    assert call["name"] == "search_my_dateset_0" and call["arguments"] == {"query": "RAGFlow"}
    assert "RAGFlow is an open-source RAG engine." in call["result"]
    assert second["steps"][3]["outputs"]["content"] == "chat:chat"      # RAGFlow drops the space before a reference


def refused_as_unknown(theirs, unused) -> bool:
    """Another tenant's id is answered exactly as an id nobody uses: 404, RAGFlow's "not found" (code 102)."""
    return (theirs.status_code == unused.status_code == 404 and theirs.json()["code"] == unused.json()["code"] == 102
            and "not found" in theirs.json()["message"] and "not found" in unused.json()["message"])


def test_another_tenant_gets_what_an_unknown_id_gets(served):
    _, alice, bob = served
    agent_id, session_id, runs = two_turns(alice)
    checkpoint = trace_of(alice, agent_id, session_id)["turns"][1]["steps"][1]["checkpoint_id"]
    assert refused_as_unknown(bob.http.get(f"/agents/{agent_id}/sessions/{session_id}/trace"),
                              alice.http.get(f"/agents/{agent_id}/sessions/no-such-session/trace"))
    assert refused_as_unknown(
        bob.http.post(f"/agents/{agent_id}/sessions/{session_id}/fork", json={"checkpoint_id": checkpoint}),
        alice.http.post(f"/agents/{agent_id}/sessions/no-such-session/fork", json={"checkpoint_id": checkpoint}))
    assert refused_as_unknown(bob.http.get(f"/agents/{agent_id}/logs/{runs[0][0]['message_id']}"),
                              alice.http.get(f"/agents/no-such-agent/logs/{runs[0][0]['message_id']}"))
    assert refused_as_unknown(
        bob.http.post("/agents/rerun", json={"id": runs[0][0]["message_id"], "component_id": "LLM:Kind"}),
        alice.http.post("/agents/rerun", json={"id": "no-such-message", "component_id": "LLM:Kind"}))
    assert trace_of(alice, agent_id, session_id)["turns"][1]["steps"][1]["checkpoint_id"] == checkpoint


def fork(api: Api, agent_id: str, session_id: str, body: dict):
    return api.http.post(f"/agents/{agent_id}/sessions/{session_id}/fork", json=body)


def all_checkpoints(trace: dict) -> set[str]:
    return {s["checkpoint_id"] for t in trace["turns"] for s in t["steps"]}


def test_a_fork_with_edited_inputs_runs_a_new_branch_and_the_old_one_stays(served):
    _, alice, _ = served
    agent_id, session_id, _ = two_turns(alice)
    before = trace_of(alice, agent_id, session_id)
    switch = before["turns"][1]["steps"][2]
    assert switch["component_id"] == "Switch:S" and switch["inputs"] == {"sys.query": "Hi there"}
    events = alice.stream(f"/agents/{agent_id}/sessions/{session_id}/fork",
                          {"checkpoint_id": switch["checkpoint_id"], "inputs": {"sys.query": "And RAGFlow?"},
                           "stream": True})
    # the Switch now routes to the Agent, which searches and answers: a new answer
    assert texts(events).endswith("RAGFlow is a RAG engine.")
    assert any(e["event"] == "message_end" for e in events)
    after = trace_of(alice, agent_id, session_id)
    forked = after["turns"][-1]
    assert forked["fork_of"] == 2 and forked["query"] == "Hi there" and forked["status"] == "finished"
    assert forked["message_id"] == events[0]["message_id"]
    assert [s["component_id"] for s in forked["steps"]] == ["Switch:S", "Agent:T", "Message:M"]
    assert forked["steps"][0]["inputs"] == {"sys.query": "And RAGFlow?"}        # the inputs it ran with
    assert forked["steps"][0]["outputs"]["_next"] == ["Agent:T"]
    # the current branch keeps turn 1 and turn 2 up to the forked step; the old branch is still stored
    assert [s["component_id"] for s in after["turns"][1]["steps"]] == ["begin", "LLM:Kind"]
    old_message = before["turns"][1]["message_id"]
    logs = alice.ok("GET", f"/agents/{agent_id}/logs/{old_message}")        # the run, whole, from its branch
    assert [e["component_id"] for e in logs] == ["begin", "LLM:Kind", "Switch:S", "Message:E"]
    old_tail = before["turns"][1]["steps"][3]["checkpoint_id"]
    assert old_tail not in all_checkpoints(after)
    old_branch = alice.ok("GET", f"/agents/{agent_id}/sessions/{session_id}/trace?checkpoint_id={old_tail}")
    assert [s["component_id"] for s in old_branch["turns"][1]["steps"]] == ["begin", "LLM:Kind", "Switch:S", "Message:E"]
    # the session goes on from the new branch: its next turn is the fourth run and sees the fork's answer
    ask(alice, agent_id, session_id, "Thanks")
    latest = trace_of(alice, agent_id, session_id)["turns"][-1]
    assert latest["query"] == "Thanks" and latest["turn"] == 4
    llm = latest["steps"][1]
    assert {"role": "assistant", "content": "RAGFlow is a RAG engine."} in llm["messages"]


def test_branches_lists_every_branch_a_fork_left_and_each_traces_its_own_turns(served):
    _, alice, _ = served
    agent_id, session_id, _ = two_turns(alice)
    before = trace_of(alice, agent_id, session_id)
    assert all(s["started_at"] >= before["turns"][0]["started_at"] > 0 for t in before["turns"] for s in t["steps"])
    alone = alice.ok("GET", f"/agents/{agent_id}/sessions/{session_id}/trace?branches=true")["branches"]
    assert [(b["current"], b["turns"], b["query"]) for b in alone] == [(True, 2, "Hi there")]
    switch = before["turns"][1]["steps"][2]
    alice.stream(f"/agents/{agent_id}/sessions/{session_id}/fork",
                 {"checkpoint_id": switch["checkpoint_id"], "inputs": {"sys.query": "And RAGFlow?"}, "stream": True})
    branches = alice.ok("GET", f"/agents/{agent_id}/sessions/{session_id}/trace?branches=true")["branches"]
    assert [(b["current"], b["turns"], b["fork_of"], b["status"], b["query"]) for b in branches] == [
        (True, 3, 2, "finished", "And RAGFlow?"), (False, 2, None, "finished", "Hi there")]
    old = alice.ok("GET", f"/agents/{agent_id}/sessions/{session_id}/trace?checkpoint_id={branches[1]['checkpoint_id']}")
    assert [s["component_id"] for s in old["turns"][1]["steps"]] == ["begin", "LLM:Kind", "Switch:S", "Message:E"]
    assert "branches" not in trace_of(alice, agent_id, session_id)
    # the session's log marks the fork's question as a run again, with its edited text and the turn it ran again
    log = alice.ok("GET", f"/agents/{agent_id}/sessions/{session_id}")["messages"]
    asked = [m for m in log if m["role"] == "user"]
    assert [m.get("fork") for m in asked] == [None, None, {"component_id": "Switch:S", "query": "And RAGFlow?",
                                                           "of": asked[1]["id"]}]


def test_a_fork_with_given_outputs_continues_from_the_steps_successors(served):
    _, alice, _ = served
    agent_id, session_id, _ = two_turns(alice)
    llm = trace_of(alice, agent_id, session_id)["turns"][1]["steps"][1]
    reply = fork(alice, agent_id, session_id, {"checkpoint_id": llm["checkpoint_id"],
                                               "outputs": {"content": "edited"}, "stream": False})
    assert reply.status_code == 200 and reply.json()["code"] == 0, reply.text
    assert reply.json()["data"]["data"]["content"] == "chat:edited"
    forked = trace_of(alice, agent_id, session_id)["turns"][-1]
    assert [s["component_id"] for s in forked["steps"]] == ["LLM:Kind", "Switch:S", "Message:E"]
    assert forked["steps"][0]["outputs"]["content"] == "edited" and "usage" not in forked["steps"][0]


def test_fork_requests_that_do_not_fit_the_session_are_4xx_naming_the_field(served):
    _, alice, _ = served
    agent_id, session_id, _ = two_turns(alice)
    other_agent, other_session, _ = two_turns(alice)
    llm = trace_of(alice, agent_id, session_id)["turns"][1]["steps"][1]
    foreign = trace_of(alice, other_agent, other_session)["turns"][0]["steps"][1]["checkpoint_id"]
    cases = {
        "checkpoint_id": {"checkpoint_id": "no-such-checkpoint"},
        "checkpoint_id ": {"checkpoint_id": foreign},                 # a checkpoint of another session
        "inputs": {"checkpoint_id": llm["checkpoint_id"], "inputs": {"sys.nope": "x"}},
        "outputs": {"checkpoint_id": llm["checkpoint_id"], "inputs": {"sys.query": "a"}, "outputs": {"content": "b"}},
    }
    for field, body in cases.items():
        reply = fork(alice, agent_id, session_id, {**body, "stream": False})
        assert 400 <= reply.status_code < 500, (field, reply.text)
        assert reply.json()["code"] != 0 and f"`{field.strip()}`" in reply.json()["message"], reply.text
    unknown = fork(alice, agent_id, session_id, {"checkpoint_id": llm["checkpoint_id"], "inputs": {"sys.nope": "x"}})
    assert "sys.nope" in unknown.json()["message"] and "sys.query" in unknown.json()["message"]
    missing = fork(alice, agent_id, session_id, {"inputs": {}})
    assert 400 <= missing.status_code < 500 and "checkpoint_id" in missing.text


def test_logs_of_a_message_are_the_steps_of_its_turn_with_ragflow_tool_log(served):
    _, alice, _ = served
    agent_id, session_id, runs = two_turns(alice)
    logs = alice.ok("GET", f"/agents/{agent_id}/logs/{runs[0][0]['message_id']}")
    assert [e["component_id"] for e in logs] == ["begin", "LLM:Kind", "Switch:S", "Agent:T", "Message:M"]
    agent = logs[3]
    [tool] = agent["trace"]
    assert tool["tool_name"] == "search_my_dateset_0" and tool["arguments"] == {"query": "RAGFlow"}
    assert "RAGFlow is an open-source RAG engine." in tool["result"] and tool["elapsed_time"] >= 0
    assert all(e["trace"] == [] for e in logs if e["component_id"] != "Agent:T")
    assert alice.ok("GET", f"/agents/{agent_id}/logs/no-such-message") == {}     # as RAGFlow: nothing logged


def test_rerun_runs_a_past_turn_again_from_one_component(served):
    _, alice, _ = served
    agent_id, session_id, runs = two_turns(alice)
    reply = alice.http.post("/agents/rerun", json={"id": runs[1][0]["message_id"], "component_id": "Message:E",
                                                   "dsl": {}, "inputs": {"LLM:Kind@content": "rerun"}})
    assert reply.status_code == 200 and reply.json()["code"] == 0, reply.text
    assert reply.json()["data"]["data"]["content"] == "chat:rerun"
    forked = trace_of(alice, agent_id, session_id)["turns"][-1]
    assert forked["fork_of"] == 2 and [s["component_id"] for s in forked["steps"]] == ["Message:E"]
    wrong = alice.http.post("/agents/rerun", json={"id": runs[1][0]["message_id"], "component_id": "Agent:T"})
    assert 400 <= wrong.status_code < 500 and "`component_id`" in wrong.json()["message"]
    assert alice.http.post("/agents/rerun", json={"id": runs[1][0]["message_id"]}).status_code == 400


FORM_DSL = {"components": {
    "begin": cpn("Begin", {}, ["LLM:Draft"]),
    "LLM:Draft": cpn("LLM", {"llm_id": "gpt-4o@OpenAI", "prompts": [{"role": "user", "content": "Slogan: {sys.query}"}]},
                     ["UserFillUp:Ask"]),
    "UserFillUp:Ask": cpn("UserFillUp", {"enable_tips": True, "tips": "Any feedback?",
                                         "inputs": {"feedback": {"type": "line", "name": "Feedback", "optional": False}}},
                          ["Message:Out"]),
    "Message:Out": cpn("Message", {"content": ["{LLM:Draft@content} / {UserFillUp:Ask@feedback}"]}),
}}


def test_a_paused_session_forks_before_its_form_and_at_its_form(served):
    _, alice, _ = served
    agent_id = alice.agent(FORM_DSL)
    session_id = alice.session(agent_id)["id"]
    events = ask(alice, agent_id, session_id, "coffee")
    assert any(e["event"] == "user_inputs" for e in events)
    paused = trace_of(alice, agent_id, session_id)["turns"]
    assert [t["status"] for t in paused] == ["paused"]
    assert [s["component_id"] for s in paused[0]["steps"]] == ["begin", "LLM:Draft", "UserFillUp:Ask"]
    form_step = paused[0]["steps"][2]
    assert form_step["form"]["inputs"]["feedback"]["name"] == "Feedback"
    # before the form: the draft is written again from an edited query, and the new branch pauses again
    draft = paused[0]["steps"][1]
    events = alice.stream(f"/agents/{agent_id}/sessions/{session_id}/fork",
                          {"checkpoint_id": draft["checkpoint_id"], "inputs": {"sys.query": "tea"}, "stream": True})
    assert any(e["event"] == "user_inputs" for e in events)
    turns = trace_of(alice, agent_id, session_id)["turns"]
    assert turns[-1]["status"] == "paused" and turns[-1]["fork_of"] == 1
    assert turns[-1]["steps"][0]["messages"][-1] == {"role": "user", "content": "Slogan: tea"}
    # at the form: its inputs answer it on a new branch, which finishes
    at_form = turns[-1]["steps"][-1]
    assert at_form["component_id"] == "UserFillUp:Ask"
    reply = fork(alice, agent_id, session_id, {"checkpoint_id": at_form["checkpoint_id"],
                                               "inputs": {"feedback": "shorter"}, "stream": False})
    assert reply.json()["code"] == 0, reply.text
    assert reply.json()["data"]["data"]["content"].endswith("/shorter")
    final = trace_of(alice, agent_id, session_id)["turns"][-1]
    assert final["status"] == "finished"
    assert [s["component_id"] for s in final["steps"]] == ["UserFillUp:Ask", "Message:Out"]
    bad = fork(alice, agent_id, session_id, {"checkpoint_id": at_form["checkpoint_id"], "inputs": {"colour": "x"}})
    assert bad.status_code == 400 and "`inputs`" in bad.json()["message"] and "feedback" in bad.json()["message"]


def test_a_new_session_has_no_turns_and_the_routes_are_documented(served):
    server, alice, _ = served
    agent_id = alice.agent(ROUTER_DSL)
    session_id = alice.session(agent_id)["id"]
    assert trace_of(alice, agent_id, session_id) == {"session_id": session_id, "agent_id": agent_id, "turns": []}
    document = alice.http.get(server.url + "/openapi.json").json()
    paths = document["paths"]
    trace_path = "/api/v1/agents/{agent_id}/sessions/{session_id}/trace"
    assert trace_path in paths and "/api/v1/agents/{agent_id}/sessions/{session_id}/fork" in paths
    assert "/api/v1/agents/{agent_id}/logs/{message_id}" in paths and "/api/v1/agents/rerun" in paths
    assert paths[trace_path]["get"]["responses"]["200"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "/TraceReply")
    step = document["components"]["schemas"]["Step"]["properties"]
    assert {"checkpoint_id", "inputs", "outputs", "elapsed", "error", "messages", "usage", "tool_calls"} <= set(step)


def test_a_fork_streams_the_events_a_completion_streams(served):
    _, alice, _ = served
    agent_id = alice.agent(ROUTER_DSL)
    # a completion without a session starts a "workflow" session, whose stream carries every event
    first = alice.stream("/agents/chat/completions", {"agent_id": agent_id, "query": "Hi there", "stream": True})
    session_id = first[0]["task_id"]
    message = next(s for s in trace_of(alice, agent_id, session_id)["turns"][0]["steps"]
                   if s["component_id"] == "Message:E")
    forked = alice.stream(f"/agents/{agent_id}/sessions/{session_id}/fork",
                          {"checkpoint_id": message["checkpoint_id"], "inputs": {"LLM:Kind@content": "forked"},
                           "stream": True})
    assert forked[0]["event"] == "workflow_started" and forked[-1]["event"] == "workflow_finished"
    assert {e["message_id"] for e in forked} == {forked[0]["message_id"]} != {first[0]["message_id"]}
    assert [e["event"] for e in forked] == ["workflow_started", "node_started", "message", "message", "message_end",
                                            "node_finished", "workflow_finished"]
    assert texts(forked) == "chat:forked"
    for event in forked:      # the shapes of the completion's own events
        twin = next(e for e in first if e["event"] == event["event"])
        assert set(event) == set(twin) and set(event["data"]) == set(twin["data"])


def test_the_trace_command_reads_a_server_session_with_the_dsl_it_stored(served):
    import json
    import os
    import subprocess

    from tests.server.helpers import CLI, REPO
    server, alice, _ = served
    agent_id, session_id, _ = two_turns(alice)
    done = subprocess.run(CLI + ["trace", "--session", session_id, "--db", server.db], cwd=REPO, capture_output=True,
                          text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["turns"] == trace_of(alice, agent_id, session_id)["turns"]

"""Agents and sessions over HTTP: RAGFlow's routes and envelope, tenants, and bad requests."""
from __future__ import annotations

import json
import subprocess

import httpx

from tests.server.helpers import BROKEN_DSL, CHAT_DSL, CLI, REPO, Api, make_token


# --- agents ----------------------------------------------------------------------------------------
def test_create_returns_the_agent_with_its_diagnostics(alice):
    data = alice.ok("POST", "/agents", {"title": "helpdesk", "dsl": CHAT_DSL, "description": "answers"})
    assert data["title"] == "helpdesk" and data["description"] == "answers"
    assert data["compiles"] is True and data["diagnostics"] == []
    assert data["dsl"] == CHAT_DSL


def test_an_agent_with_errors_is_stored_and_its_diagnostics_name_component_and_field(alice):
    data = alice.ok("POST", "/agents", {"title": "broken", "dsl": BROKEN_DSL})
    assert data["compiles"] is False
    [problem] = [d for d in data["diagnostics"] if d["severity"] == "error"]
    assert problem["component_id"] == "Message:M" and "LLM:Missing" in problem["message"]
    assert alice.ok("GET", f"/agents/{data['id']}")["compiles"] is False


def test_running_an_agent_with_errors_returns_them(alice):
    agent_id = alice.agent(BROKEN_DSL)
    reply = alice.call("POST", "/agents/chat/completions", {"agent_id": agent_id, "query": "hi"})
    assert reply["code"] == 102 and "does not compile" in reply["message"]
    assert any(d["component_id"] == "Message:M" for d in reply["data"]["diagnostics"])
    reply = alice.call("POST", f"/agents/{agent_id}/sessions", {})
    assert reply["code"] == 102 and reply["data"]["diagnostics"]


def test_update_checks_the_new_dsl(alice):
    agent_id = alice.agent(CHAT_DSL)
    data = alice.ok("PUT", f"/agents/{agent_id}", {"dsl": BROKEN_DSL, "title": "renamed"})
    assert data["title"] == "renamed" and data["compiles"] is False
    data = alice.ok("PUT", f"/agents/{agent_id}", {"dsl": CHAT_DSL})
    assert data["compiles"] is True and data["title"] == "renamed"


def test_titles_are_unique_per_tenant(alice, bob):
    alice.ok("POST", "/agents", {"title": "twin", "dsl": CHAT_DSL})
    reply = alice.call("POST", "/agents", {"title": "twin", "dsl": CHAT_DSL})
    assert reply["code"] == 102 and "already exists" in reply["message"]
    bob.ok("POST", "/agents", {"title": "twin", "dsl": CHAT_DSL})      # another tenant may use it


def test_list_agents_pages_and_reports_the_total(alice):
    for i in range(3):
        alice.ok("POST", "/agents", {"title": f"paged-{i}", "dsl": CHAT_DSL})
    data = alice.ok("GET", "/agents", params={"page": 1, "page_size": 2})
    assert len(data["canvas"]) == 2 and data["total"] >= 3
    titles = {a["title"] for page in (1, 2, 3) for a in alice.ok("GET", "/agents", params={"page": page, "page_size": 2})["canvas"]}
    assert {"paged-0", "paged-1", "paged-2"} <= titles


def test_filtering_by_id_or_title_answers_a_plain_list_as_ragflow_022_did(alice):
    agent_id = alice.agent(CHAT_DSL, title="findme")
    assert [a["id"] for a in alice.ok("GET", "/agents", params={"title": "findme"})] == [agent_id]
    assert [a["title"] for a in alice.ok("GET", "/agents", params={"id": agent_id})] == ["findme"]
    assert alice.call("GET", "/agents", params={"title": "nobody"})["code"] == 102


def test_delete_agent_removes_it_and_its_sessions(alice):
    agent_id = alice.agent(CHAT_DSL)
    session = alice.session(agent_id)
    assert alice.ok("DELETE", f"/agents/{agent_id}") is True
    assert "not found" in alice.call("GET", f"/agents/{agent_id}")["message"]
    assert alice.call("GET", f"/agents/{agent_id}/sessions/{session['id']}")["code"] == 102


# --- sessions --------------------------------------------------------------------------------------
def test_a_new_sessions_first_message_is_begins_prologue(alice):
    agent_id = alice.agent(CHAT_DSL)
    session = alice.session(agent_id)
    assert session["agent_id"] == agent_id and session["source"] == "agent"
    assert session["message"] == [{"role": "assistant", "content": "Hello! Ask me anything."}]
    assert alice.ok("GET", f"/agents/{agent_id}/sessions/{session['id']}")["messages"] == session["message"]


def test_sessions_are_listed_with_or_without_their_dsl_and_deleted(alice):
    agent_id = alice.agent(CHAT_DSL)
    first, second, third = (alice.session(agent_id)["id"] for _ in range(3))
    listed = alice.ok("GET", f"/agents/{agent_id}/sessions")
    assert {s["id"] for s in listed} == {first, second, third} and all("dsl" in s for s in listed)
    assert all("dsl" not in s for s in alice.ok("GET", f"/agents/{agent_id}/sessions", params={"dsl": "false"}))
    assert alice.ok("DELETE", f"/agents/{agent_id}/sessions", {"ids": [first]}) is True
    assert alice.ok("DELETE", f"/agents/{agent_id}/sessions/{second}") is True
    assert [s["id"] for s in alice.ok("GET", f"/agents/{agent_id}/sessions")] == [third]
    assert alice.ok("DELETE", f"/agents/{agent_id}/sessions", {"delete_all": True}) is True
    assert alice.ok("GET", f"/agents/{agent_id}/sessions") == []


def test_deleting_a_mix_of_own_and_unknown_sessions_reports_both(alice):
    agent_id = alice.agent(CHAT_DSL)
    sid = alice.session(agent_id)["id"]
    reply = alice.call("DELETE", f"/agents/{agent_id}/sessions", {"ids": [sid, "no-such-session"]})
    assert reply["code"] == 0 and reply["data"]["success_count"] == 1
    assert reply["data"]["errors"] == ["The agent doesn't own the session no-such-session"]


# --- tenants ---------------------------------------------------------------------------------------
def test_another_tenants_agents_and_sessions_answer_as_not_found(alice, bob):
    agent_id = alice.agent(CHAT_DSL)
    sid = alice.session(agent_id)["id"]
    for method, path, body in [
        ("GET", f"/agents/{agent_id}", None), ("PUT", f"/agents/{agent_id}", {"title": "mine"}),
        ("DELETE", f"/agents/{agent_id}", None), ("POST", f"/agents/{agent_id}/sessions", {}),
        ("GET", f"/agents/{agent_id}/sessions", None), ("GET", f"/agents/{agent_id}/sessions/{sid}", None),
        ("DELETE", f"/agents/{agent_id}/sessions", {"ids": [sid]}),
        ("POST", "/agents/chat/completions", {"agent_id": agent_id, "session_id": sid, "query": "hi"}),
        ("POST", f"/agents/{agent_id}/completions", {"session_id": sid, "question": "hi", "stream": False}),
        ("POST", f"/tasks/{sid}/cancel", None),
    ]:
        reply = bob.call(method, path, body)
        assert reply["code"] == 102 and "not found" in reply["message"], (method, path, reply)
    assert all(a["id"] != agent_id for a in bob.ok("GET", "/agents")["canvas"])
    # alice still has everything
    assert alice.ok("GET", f"/agents/{agent_id}/sessions/{sid}")["id"] == sid


def test_another_tenants_session_id_answers_exactly_like_an_unknown_one(alice, bob):
    sid = alice.ok("POST", "/graphs/run", {"dsl": CHAT_DSL, "query": "hi", "stream": False})["session_id"]
    unknown = "0" * len(sid)
    for path, body in [("/graphs/run", {"dsl": CHAT_DSL, "query": "hi", "stream": False}),
                       ("/graphs/run", {"query": "hi", "stream": False}),
                       (f"/tasks/{{sid}}/cancel", {})]:
        replies = []
        for candidate in (sid, unknown):
            response = bob.http.post(path.replace("{sid}", candidate), json={**body, "session_id": candidate})
            replies.append((response.status_code, response.text.replace(candidate, "<id>")))
        assert replies[0] == replies[1], (path, replies)


# --- authentication --------------------------------------------------------------------------------
def test_requests_without_a_valid_token_are_refused(server, alice):
    url = server.url + "/api/v1/agents"
    missing = httpx.get(url).json()
    assert missing["code"] == 109 and "Authorization" in missing["message"]
    assert httpx.get(url, headers={"Authorization": "Bearer nope"}).json()["code"] == 109
    # a raw token without "Bearer " is accepted, as RAGFlow does
    assert httpx.get(url, headers={"Authorization": alice.token}).json()["code"] == 0


def test_a_revoked_token_stops_working(server):
    token = make_token(server.db, "carol")
    api = Api(server, token)
    assert api.call("GET", "/agents")["code"] == 0
    listed = subprocess.run(CLI + ["tokens", "list", "--tenant", "carol", "--db", server.db], cwd=REPO,
                            capture_output=True, text=True, check=True).stdout
    assert "carol" in listed and token not in listed       # only ids are listed, never tokens
    subprocess.run(CLI + ["tokens", "revoke", token, "--db", server.db], cwd=REPO, check=True, capture_output=True)
    assert api.call("GET", "/agents")["code"] == 109
    api.close()


# --- bad requests ----------------------------------------------------------------------------------
def test_missing_fields_and_wrong_types_name_the_field(alice):
    reply = alice.call("POST", "/agents", {"dsl": CHAT_DSL})
    assert reply["code"] == 101 and "`title` is required" in reply["message"]
    reply = alice.call("POST", "/agents", {"title": "x", "dsl": 42})
    assert reply["code"] == 101 and "`dsl` must be a JSON object" in reply["message"]
    reply = alice.call("POST", "/agents/chat/completions", {"query": "hi"})
    assert reply["code"] == 101 and "`agent_id` is required" in reply["message"]
    reply = alice.call("GET", "/agents", params={"page": "first"})
    assert reply["code"] == 101 and "`page` must be an integer" in reply["message"]


def test_malformed_json_is_an_argument_error(alice):
    response = alice.http.post("/agents", content=b'{"title": "x", "dsl": {', headers={"Content-Type": "application/json"})
    reply = response.json()
    assert reply["code"] == 101 and "not valid JSON" in reply["message"]


def test_a_json_body_is_read_whatever_its_declared_type_and_must_be_an_object(alice):
    body = json.dumps({"title": "posted-by-curl", "dsl": CHAT_DSL}).encode()
    response = alice.http.post("/agents", content=body, headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert response.json()["code"] == 0                     # what `curl -d` sends
    reply = alice.call("POST", "/agents", [1, 2])
    assert reply["code"] == 101 and reply["message"] == "the request body must be a JSON object"


def test_unknown_ids_and_routes(alice):
    assert alice.call("GET", "/agents/no-such-agent")["message"] == "agent no-such-agent not found"
    response = alice.http.get("/no/such/route")
    assert response.status_code == 404 and response.json()["code"] == 404


def test_a_session_of_another_agent_is_refused(alice):
    first, second = alice.agent(CHAT_DSL), alice.agent(CHAT_DSL)
    sid = alice.session(first)["id"]
    reply = alice.call("POST", "/agents/chat/completions", {"agent_id": second, "session_id": sid, "query": "hi"})
    assert reply["code"] == 102 and f"not a session of agent {second}" in reply["message"]
    assert alice.call("GET", f"/agents/{second}/sessions/{sid}")["code"] == 102


def test_an_oversized_body_is_refused_and_the_server_goes_on(alice):
    huge = {"title": "big", "dsl": {"components": {}, "padding": "x" * (17 * 1024 * 1024)}}
    response = alice.http.post("/agents", json=huge)
    assert response.status_code == 413 and response.json()["code"] == 101
    assert "larger than the server's limit" in response.json()["message"]
    assert alice.call("GET", "/agents")["code"] == 0


def test_the_openapi_document_lists_every_route(server):
    paths = httpx.get(server.url + "/openapi.json").json()["paths"]
    for path in ["/api/v1/agents", "/api/v1/agents/{agent_id}", "/api/v1/agents/{agent_id}/sessions",
                 "/api/v1/agents/{agent_id}/sessions/{session_id}", "/api/v1/agents/chat/completions",
                 "/api/v1/agents/{agent_id}/completions", "/api/v1/agents_openai/{agent_id}/chat/completions",
                 "/api/v1/tasks/{task_id}/cancel", "/api/v1/graphs/compile", "/api/v1/graphs/run",
                 "/api/v1/graphs/export"]:
        assert path in paths
    assert httpx.get(server.url + "/docs").status_code == 200

"""Agent versions: every save keeps one (who, when, the DSL, its diagnostics); a session runs the version
it started with; a published version serves sessions asked for with `release`; restoring is a save."""
from __future__ import annotations

import copy
import uuid

from tests.server.helpers import BROKEN_DSL, cpn

CHAT = "/agents/chat/completions"


def echo_dsl(text: str) -> dict:
    """begin -> Message:M, which says `text` (no model: the answer names the version that ran)."""
    return {"components": {"begin": cpn("Begin", {"prologue": f"prologue {text}"}, ["Message:M"]),
                           "Message:M": cpn("Message", {"content": [text]})}}


def answer(api, body: dict) -> str:
    return api.ok("POST", CHAT, body)["data"]["content"]


def test_every_save_keeps_a_version_with_author_date_dsl_and_diagnostics(alice):
    title = f"versioned-{uuid.uuid4().hex[:6]}"
    agent_id = alice.ok("POST", "/agents", {"title": title, "dsl": echo_dsl("one")})["id"]
    alice.ok("PUT", f"/agents/{agent_id}", {"dsl": echo_dsl("two")})
    alice.ok("PUT", f"/agents/{agent_id}", {"dsl": BROKEN_DSL})
    listed = alice.ok("GET", f"/agents/{agent_id}/versions")
    assert len(listed) == 3 and all("dsl" not in v for v in listed)          # listings leave the DSL out
    newest, middle, oldest = listed
    assert newest["update_time"] >= middle["update_time"] >= oldest["update_time"]
    assert oldest["created_by"] == "alice" and oldest["title"].startswith(f"alice_{title}_")
    assert oldest["user_canvas_id"] == agent_id and oldest["release"] is False and oldest["create_date"]
    first = alice.ok("GET", f"/agents/{agent_id}/versions/{oldest['id']}")
    assert first["dsl"] == echo_dsl("one") and first["compiles"] is True and first["diagnostics"] == []
    broken = alice.ok("GET", f"/agents/{agent_id}/versions/{newest['id']}")
    assert broken["compiles"] is False and broken["diagnostics"][0]["component_id"] == "Message:M"


def test_saving_the_same_dsl_or_only_the_title_adds_no_version(alice):
    agent_id = alice.agent(echo_dsl("same"))
    before = alice.ok("GET", f"/agents/{agent_id}/versions")
    alice.ok("PUT", f"/agents/{agent_id}", {"dsl": echo_dsl("same")})
    alice.ok("PUT", f"/agents/{agent_id}", {"title": f"renamed-{uuid.uuid4().hex[:6]}"})
    after = alice.ok("GET", f"/agents/{agent_id}/versions")
    assert [v["id"] for v in after] == [v["id"] for v in before]
    assert after[0]["update_time"] >= before[0]["update_time"]       # the same DSL refreshes the latest


def test_twenty_drafts_are_kept(alice):
    agent_id = alice.agent(echo_dsl("v0"))
    for i in range(1, 23):
        alice.ok("PUT", f"/agents/{agent_id}", {"dsl": echo_dsl(f"v{i}")})
    versions = alice.ok("GET", f"/agents/{agent_id}/versions")
    assert len(versions) == 20
    newest = alice.ok("GET", f"/agents/{agent_id}/versions/{versions[0]['id']}")
    assert newest["dsl"] == echo_dsl("v22")


def test_a_session_keeps_the_version_it_started_with(alice):
    agent_id = alice.agent(echo_dsl("first"))
    old = alice.session(agent_id)
    [v1] = alice.ok("GET", f"/agents/{agent_id}/versions")
    assert old["version_id"] == v1["id"] and old["version_title"] == v1["title"]
    alice.ok("PUT", f"/agents/{agent_id}", {"dsl": echo_dsl("second")})
    assert answer(alice, {"agent_id": agent_id, "session_id": old["id"], "query": "hi"}) == "first"
    new = alice.session(agent_id)
    assert answer(alice, {"agent_id": agent_id, "session_id": new["id"], "query": "hi"}) == "second"
    assert new["version_id"] != old["version_id"]
    stored = alice.ok("GET", f"/agents/{agent_id}/sessions/{old['id']}")
    assert stored["version_id"] == v1["id"] and stored["dsl"] == echo_dsl("first")


def test_a_published_version_serves_sessions_asked_for_with_release(alice):
    agent_id = alice.agent(echo_dsl("draft 1"))
    reply = alice.call("POST", f"/agents/{agent_id}/sessions", {"release": True})
    assert reply["code"] == 102 and "no published version" in reply["message"]
    alice.ok("PUT", f"/agents/{agent_id}", {"dsl": echo_dsl("published"), "release": True})
    alice.ok("PUT", f"/agents/{agent_id}", {"dsl": echo_dsl("draft 2")})
    released = alice.ok("POST", f"/agents/{agent_id}/sessions", {"release": True})
    assert released["messages"][0]["content"] == "prologue published"
    assert answer(alice, {"agent_id": agent_id, "session_id": released["id"], "query": "x"}) == "published"
    assert answer(alice, {"agent_id": agent_id, "query": "x", "release": True}) == "published"
    assert answer(alice, {"agent_id": agent_id, "query": "x"}) == "draft 2"
    flags = {v["release"] for v in alice.ok("GET", f"/agents/{agent_id}/versions")}
    assert flags == {True, False}


def test_restoring_a_version_is_saving_its_dsl(alice):
    agent_id = alice.agent(echo_dsl("good"))
    [good] = alice.ok("GET", f"/agents/{agent_id}/versions")
    alice.ok("PUT", f"/agents/{agent_id}", {"dsl": echo_dsl("bad")})
    restored = alice.ok("GET", f"/agents/{agent_id}/versions/{good['id']}")["dsl"]
    alice.ok("PUT", f"/agents/{agent_id}", {"dsl": restored})
    assert answer(alice, {"agent_id": agent_id, "query": "x"}) == "good"
    assert len(alice.ok("GET", f"/agents/{agent_id}/versions")) == 3


def test_versions_of_another_tenant_answer_as_unknown_ones(alice, bob):
    agent_id = alice.agent(echo_dsl("mine"))
    [version] = alice.ok("GET", f"/agents/{agent_id}/versions")
    unknown = uuid.uuid4().hex
    for path in (f"/agents/{agent_id}/versions", f"/agents/{agent_id}/versions/{version['id']}"):
        theirs, missing = bob.call("GET", path), bob.call("GET", path.replace(agent_id, unknown))
        assert theirs["code"] == missing["code"] == 102
        assert theirs["message"].replace(agent_id, unknown) == missing["message"]
    reply = alice.call("GET", f"/agents/{agent_id}/versions/{unknown}")
    assert reply["code"] == 102 and "not found" in reply["message"]


def test_deleting_an_agent_deletes_its_versions(alice):
    agent_id = alice.agent(copy.deepcopy(echo_dsl("gone")))
    assert alice.ok("GET", f"/agents/{agent_id}/versions")
    alice.ok("DELETE", f"/agents/{agent_id}")
    assert alice.call("GET", f"/agents/{agent_id}/versions")["code"] == 102

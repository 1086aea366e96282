"""KeenableSearch speaks Keenable's search API: the public endpoint without a key, the keyed one (and the
realtime mode) with one; the first top_n results become citable chunks."""
from __future__ import annotations

import pytest

from tests.nodes.helpers import errors
from tests.nodes.tools.support import Reply, agent_dsl, finished, message_end, node_dsl, run_turn, tool_messages

RESULTS = {"results": [
    {"title": "Keenable launch", "url": "https://news.example/keenable", "snippet": "Keenable is a search\nAPI for agents.",
     "description": ""},
    {"title": "Empty one", "url": "https://news.example/empty", "snippet": "", "description": ""},
    {"title": "Third", "url": "https://news.example/third", "snippet": "", "description": "Only a description."},
]}


@pytest.fixture
def keenable(fake, monkeypatch):
    monkeypatch.delenv("KEENABLE_API_KEY", raising=False)
    monkeypatch.delenv("KEENABLE_API_URL", raising=False)
    monkeypatch.setenv("CANVAS2GRAPH_KEENABLE_URL", fake.url)
    return fake


async def test_without_a_key_the_public_endpoint_is_asked_in_pro_mode(keenable):
    keenable.on("POST", "/v1/search/public", Reply(200, RESULTS))
    events = await run_turn(node_dsl("KeenableSearch:K", "KeenableSearch", {}), "search apis for agents")
    [req] = keenable.requests
    assert req.json() == {"query": "search apis for agents", "mode": "pro"}
    assert "x-api-key" not in req.headers
    out = finished(events, "KeenableSearch:K")["outputs"]
    assert out["json"] == RESULTS["results"]
    assert "Keenable is a search API for agents." in out["formalized_content"]     # line breaks folded
    urls = [c["url"] for c in message_end(events)["reference"]["chunks"].values()]
    assert urls == ["https://news.example/keenable", "https://news.example/third"]


async def test_a_key_from_the_environment_uses_the_keyed_endpoint_and_top_n_cuts_results(keenable, monkeypatch):
    monkeypatch.setenv("KEENABLE_API_KEY", "kn-secret")
    keenable.on("POST", "/v1/search", Reply(200, RESULTS))
    events = await run_turn(node_dsl("KeenableSearch:K", "KeenableSearch", {"top_n": 1, "site": "news.example"}), "q")
    [req] = keenable.requests
    assert req.headers["x-api-key"] == "kn-secret" and req.json()["site"] == "news.example"
    assert finished(events, "KeenableSearch:K")["outputs"]["json"] == RESULTS["results"][:1]


async def test_realtime_mode_without_a_key_names_where_to_set_it(keenable):
    events = await run_turn(node_dsl("KeenableSearch:K", "KeenableSearch", {"mode": "realtime"}), "q")
    error = finished(events, "KeenableSearch:K")["error"]
    assert "params.api_key" in error and "KEENABLE_API_KEY" in error and keenable.requests == []


async def test_rags_flow_legacy_url_variable_moves_the_base_url(fake, monkeypatch):
    monkeypatch.delenv("CANVAS2GRAPH_KEENABLE_URL", raising=False)
    monkeypatch.delenv("KEENABLE_API_KEY", raising=False)
    monkeypatch.setenv("KEENABLE_API_URL", fake.url)
    fake.on("POST", "/v1/search/public", Reply(200, {"results": []}))
    events = await run_turn(node_dsl("KeenableSearch:K", "KeenableSearch", {}), "q")
    assert finished(events, "KeenableSearch:K")["outputs"]["formalized_content"] == ""
    assert len(fake.requests) == 1


def test_params_are_checked_at_compile_time():
    assert "mode" in errors("KeenableSearch", {"mode": "fast"})[0].message
    assert errors("KeenableSearch", {"top_n": 0})


async def test_as_an_agent_tool_the_model_passes_query_and_site(keenable):
    keenable.on("POST", "/v1/search/public", Reply(200, RESULTS))
    tool = {"component_name": "KeenableSearch", "name": "KeenableSearch", "params": {}}
    script = {"replies": [{"tool_calls": [{"name": "keenable_search_0",
                                           "arguments": {"query": "agents", "site": "news.example"}}]}, "Done [ID:0]."]}
    await run_turn(agent_dsl(tool), "find", script)
    assert keenable.requests[0].json() == {"query": "agents", "mode": "pro", "site": "news.example"}
    assert "Keenable is a search API for agents." in tool_messages()[0]

"""QueritSearch and QueritContents speak Querit's API with a bearer key; arguments are checked as RAGFlow
checks them, in the DSL and in a model's call; rate limits and 5xx are tried three times."""
from __future__ import annotations

import pytest

from tests.nodes.helpers import errors
from tests.nodes.tools.support import Reply, agent_dsl, finished, message_end, node_dsl, run_turn, tool_messages

KEY = "qr-secret-key"
SEARCH = {"took": "12ms", "results": {"result": [
    {"title": "Querit", "url": "https://querit.example/", "snippet": "Querit is a web search API."},
    {"title": "No snippet", "url": "https://querit.example/2", "snippet": None}]}}
CONTENTS = {"results": [{"url": "https://querit.example/", "content": "# Querit"}], "statuses": [{"status": "ok"}]}


@pytest.fixture
def querit(fake, monkeypatch):
    monkeypatch.delenv("QUERIT_API_KEY", raising=False)
    monkeypatch.setenv("CANVAS2GRAPH_QUERIT_URL", fake.url)
    return fake


async def test_search_sends_count_chunks_and_filters_and_keeps_the_whole_answer(querit):
    querit.on("POST", "/v1/search", Reply(200, SEARCH))
    params = {"api_key": KEY, "count": 5, "site_include": ["a.example"], "time_range": "w1",
              "language_include": ["en"]}
    events = await run_turn(node_dsl("QueritSearch:Q", "QueritSearch", params), "web search api")
    [req] = querit.requests
    assert req.headers["authorization"] == f"Bearer {KEY}"
    assert req.json() == {"query": "web search api", "count": 5, "chunksPerDoc": 3, "filters": {
        "sites": {"include": ["a.example"]}, "timeRange": {"date": "w1"}, "languages": {"include": ["en"]}}}
    out = finished(events, "QueritSearch:Q")["outputs"]
    assert out["json"] == SEARCH and "Querit is a web search API." in out["formalized_content"]
    assert [c["url"] for c in message_end(events)["reference"]["chunks"].values()] == ["https://querit.example/"]


async def test_a_missing_key_names_the_param_and_the_variable(querit):
    events = await run_turn(node_dsl("QueritSearch:Q", "QueritSearch", {}), "q")
    error = finished(events, "QueritSearch:Q")["error"]
    assert "params.api_key" in error and "QUERIT_API_KEY" in error


async def test_rate_limits_are_tried_three_times(querit, monkeypatch):
    monkeypatch.setenv("QUERIT_API_KEY", KEY)
    answers = iter([Reply(429, {"error": "slow down"}), Reply(503, "busy"), Reply(200, SEARCH)])
    querit.on("POST", "/v1/search", lambda req: next(answers))
    events = await run_turn(node_dsl("QueritSearch:Q", "QueritSearch", {"delay_after_error": 0}), "q")
    assert len(querit.requests) == 3 and finished(events, "QueritSearch:Q")["error"] is None


def test_the_dsl_arguments_are_checked_at_compile_time():
    assert "chunks_per_doc" in errors("QueritSearch", {"chunks_per_doc": 5})[0].message
    assert "time_range" in errors("QueritSearch", {"time_range": "last week"})[0].message
    assert "site_include" in errors("QueritSearch", {"site_include": "a.example"})[0].message
    assert "urls" in errors("QueritContents", {"urls": []})[0].message
    assert "crawl_timeout" in errors("QueritContents", {"urls": "https://a.example", "crawl_timeout": 90})[0].message
    assert not errors("QueritContents", {"urls": "https://a.example, https://b.example"})


async def test_contents_posts_the_urls_and_returns_querits_answer(querit):
    querit.on("POST", "/v1/contents", Reply(200, CONTENTS))
    params = {"api_key": KEY, "urls": "https://querit.example/", "format": "text", "extras_meta": True}
    events = await run_turn(node_dsl("QueritContents:C", "QueritContents", params, show="json"), "")
    assert querit.requests[0].json() == {"urls": ["https://querit.example/"], "format": "text", "crawlTimeout": 10,
                                         "extrasMeta": True}
    assert finished(events, "QueritContents:C")["outputs"]["json"] == CONTENTS


async def test_a_models_wrong_argument_is_a_tool_error_it_reads(querit, monkeypatch):
    monkeypatch.setenv("QUERIT_API_KEY", KEY)
    querit.on("POST", "/v1/search", Reply(200, SEARCH))
    tool = {"component_name": "QueritSearch", "name": "QueritSearch", "params": {}}
    script = {"replies": [{"tool_calls": [{"name": "querit_search_0", "arguments": {"query": "x", "count": 0}}]},
                          {"tool_calls": [{"name": "querit_search_0", "arguments": {"query": "x", "count": 2}}]},
                          "Found [ID:0]."]}
    await run_turn(agent_dsl(tool), "q", script)
    first, second = tool_messages()
    assert "count must be a whole number of at least 1" in first
    assert len(querit.requests) == 1 and querit.requests[0].json()["count"] == 2
    assert "Querit is a web search API." in second

"""BGPT posts the query to its paper search and turns each paper's structured evidence into a citable chunk."""
from __future__ import annotations

import pytest

from tests.nodes.helpers import errors
from tests.nodes.tools.support import Reply, agent_dsl, finished, message_end, node_dsl, run_turn, tool_messages

PAPER = {"title": "Vitamin D and fractures", "authors": ["A. Author", "B. Author"], "journal": "BMJ", "year": 2021,
         "doi": "10.1136/bmj.x", "abstract": "A meta-analysis.", "methods": "RCTs pooled",
         "sample_size_and_population_characteristics": "n=12,000 adults", "results_and_conclusions": "No effect.",
         "paper_limitations_and_biases": "", "study_blindspots": "Only older adults"}


@pytest.fixture
def bgpt(fake, monkeypatch):
    monkeypatch.delenv("BGPT_API_KEY", raising=False)
    monkeypatch.setenv("CANVAS2GRAPH_BGPT_URL", f"{fake.url}/api/mcp-search")
    return fake


async def test_the_query_and_top_n_are_posted_and_each_paper_becomes_labelled_evidence(bgpt):
    bgpt.on("POST", "/api/mcp-search", Reply(200, {"results": [PAPER, {"title": None}]}))
    events = await run_turn(node_dsl("BGPT:B", "BGPT", {"top_n": 3, "days_back": "30"}), "does vitamin d prevent fractures")
    assert bgpt.requests[0].json() == {"query": "does vitamin d prevent fractures", "num_results": 3, "days_back": 30}
    out = finished(events, "BGPT:B")["outputs"]
    assert out["json"] == [PAPER, {"title": None}]
    text = out["formalized_content"]
    assert "Title: Vitamin D and fractures" in text and "Methods: RCTs pooled" in text
    assert "Limitations: -" in text and "Sample size / population: n=12,000 adults" in text
    chunks = list(message_end(events)["reference"]["chunks"].values())
    assert [c["document_name"] for c in chunks] == ["Vitamin D and fractures", "Untitled"]
    assert chunks[0]["url"] == "10.1136/bmj.x"           # no url: the DOI stands in, as in RAGFlow


async def test_a_key_from_the_environment_travels_in_the_body(bgpt, monkeypatch):
    monkeypatch.setenv("BGPT_API_KEY", "bg-secret")
    bgpt.on("POST", "/api/mcp-search", Reply(200, {"results": []}))
    await run_turn(node_dsl("BGPT:B", "BGPT", {}), "q")
    assert bgpt.requests[0].json()["api_key"] == "bg-secret"


async def test_a_rejected_request_is_an_error_without_the_key(bgpt):
    bgpt.on("POST", "/api/mcp-search", Reply(401, {"error": "invalid api key bg-from-dsl"}))
    events = await run_turn(node_dsl("BGPT:B", "BGPT", {"api_key": "bg-from-dsl"}), "q")
    error = finished(events, "BGPT:B")["error"]
    assert error.startswith("BGPT answered HTTP 401") and "bg-from-dsl" not in error


async def test_results_that_are_not_a_list_are_an_error(bgpt):
    bgpt.on("POST", "/api/mcp-search", Reply(200, {"results": "none"}))
    events = await run_turn(node_dsl("BGPT:B", "BGPT", {}), "q")
    assert finished(events, "BGPT:B")["error"] == "BGPT answered with results that are not a list"


def test_days_back_and_top_n_are_checked():
    assert "days_back" in errors("BGPT", {"days_back": "soon"})[0].message
    assert errors("BGPT", {"days_back": -3}) and errors("BGPT", {"top_n": 0})
    assert not errors("BGPT", {"top_n": "5", "days_back": ""})


async def test_as_an_agent_tool(bgpt):
    bgpt.on("POST", "/api/mcp-search", Reply(200, {"results": [PAPER]}))
    tool = {"component_name": "BGPT", "name": "BGPT", "params": {}}
    script = {"replies": [{"tool_calls": [{"name": "bgpt_search_0", "arguments": {"query": "vitamin d"}}]}, "No [ID:0]."]}
    await run_turn(agent_dsl(tool), "q", script)
    assert bgpt.requests[0].json()["query"] == "vitamin d"
    assert "Results: No effect." in tool_messages()[0]

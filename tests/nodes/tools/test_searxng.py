"""SearXNG queries an instance's /search?format=json; the instance comes from the model, the params or
the environment; results become citable chunks; a missing or bad instance URL is a clear error. An
instance the model or the DSL names passes the host guard (the test instance is on 127.0.0.1, so the
tests lift it with CANVAS2GRAPH_SEARXNG_ALLOW_PRIVATE=1, except those that show the refusal)."""
from __future__ import annotations

import pytest

from tests.nodes.helpers import build, context, errors, state
from tests.nodes.tools.support import (Reply, agent_dsl, closed_port_url, finished, message_end, node_dsl,
                                       run_turn, tool_messages)

ANSWER = {"query": "ragflow", "number_of_results": 3, "answers": [], "suggestions": [], "results": [
    {"url": "https://ragflow.io/", "title": "RAGFlow", "content": "Open-source RAG engine.", "engine": "duckduckgo",
     "score": 3.0},
    {"url": "https://github.com/infiniflow/ragflow", "title": "infiniflow/ragflow", "content": "Source code.",
     "engine": "bing", "score": 1.5},
    {"url": "https://third.example/", "title": "Third", "content": "Third result.", "engine": "bing", "score": 0.5},
]}


ALLOW = "CANVAS2GRAPH_SEARXNG_ALLOW_PRIVATE"


@pytest.fixture(autouse=True)
def allowed(monkeypatch):
    monkeypatch.setenv(ALLOW, "1")


def searxng_node(url: str, **params):
    return node_dsl("SearXNG:S", "SearXNG", {"query": "sys.query", "searxng_url": url, **params})


async def test_searxng_sends_the_json_search_request_to_the_instance(fake):
    fake.on("GET", "/search", Reply(200, ANSWER))
    events = await run_turn(searxng_node(fake.url + "/", top_n=2), "ragflow")
    [req] = fake.requests
    assert {k: v[0] for k, v in req.query.items()} == {"q": "ragflow", "format": "json", "categories": "general",
                                                       "language": "auto", "safesearch": "1", "pageno": "1"}
    out = finished(events, "SearXNG:S")["outputs"]
    assert out["json"] == ANSWER["results"][:2]                # top_n results
    chunks = list(message_end(events)["reference"]["chunks"].values())
    assert [c["url"] for c in chunks] == ["https://ragflow.io/", "https://github.com/infiniflow/ragflow"]
    assert out["formalized_content"].count("\nID: ") + out["formalized_content"].startswith("ID:") == 2


async def test_the_instance_may_come_from_the_environment(fake, monkeypatch):
    monkeypatch.setenv("CANVAS2GRAPH_SEARXNG_URL", fake.url)
    fake.on("GET", "/search", Reply(200, ANSWER))
    node = build("SearXNG:S", "SearXNG", {"query": "sys.query"})
    result = await node.run(state("ragflow"), context())
    assert len(result.outputs["json"]) == 3 and fake.requests[0].arg("q") == "ragflow"


async def test_without_an_instance_the_error_says_where_to_set_it():
    node = build("SearXNG:S", "SearXNG", {"query": "sys.query"})
    with pytest.raises(Exception, match="params.searxng_url .* CANVAS2GRAPH_SEARXNG_URL"):
        await node.run(state("ragflow"), context())


async def test_only_http_instances_are_called():
    node = build("SearXNG:S", "SearXNG", {"query": "sys.query", "searxng_url": "file:///etc/passwd"})
    with pytest.raises(Exception, match="must be an http:// or https:// address"):
        await node.run(state("ragflow"), context())


async def test_an_instance_without_the_json_format_gets_a_hint(fake):
    fake.on("GET", "/search", Reply(403, "<html><title>403 Forbidden</title></html>", "text/html"))
    events = await run_turn(searxng_node(fake.url), "ragflow")
    error = finished(events, "SearXNG:S")["error"]
    assert error.startswith("SearXNG answered HTTP 403 Forbidden: 403 Forbidden") and "search.formats" in error


async def test_server_errors_timeouts_and_unreachable_instances_are_component_errors(fake, monkeypatch):
    fake.on("GET", "/search", Reply(500, "Internal Server Error"))
    events = await run_turn(searxng_node(fake.url), "ragflow")
    assert finished(events, "SearXNG:S")["error"] == "SearXNG answered HTTP 500 Internal Server Error: Internal Server Error"

    monkeypatch.setenv("CANVAS2GRAPH_TOOL_TIMEOUT", "0.3")
    fake.on("GET", "/search", Reply(200, ANSWER, delay=30))
    events = await run_turn(searxng_node(fake.url), "ragflow")
    assert finished(events, "SearXNG:S")["error"] == f"SearXNG did not answer within 0.3 s ({fake.url}/search)"

    url = closed_port_url()
    events = await run_turn(searxng_node(url), "ragflow")
    assert finished(events, "SearXNG:S")["error"].startswith(f"cannot reach SearXNG at {url}/search: ")


async def test_a_non_json_answer_is_an_error(fake):
    fake.on("GET", "/search", Reply(200, "<html>search page</html>", "text/html"))
    events = await run_turn(searxng_node(fake.url), "ragflow")
    assert finished(events, "SearXNG:S")["error"] == \
        f"SearXNG answered with text/html where JSON was expected ({fake.url}/search)"


async def test_as_agent_tool_the_model_may_name_the_instance(fake):
    fake.on("GET", "/search", Reply(200, ANSWER))
    tool = {"component_name": "SearXNG", "name": "SearXNG", "params": {"top_n": "1"}}
    call = {"name": "searxng_search_0", "arguments": {"query": "ragflow", "searxng_url": fake.url}}
    events = await run_turn(agent_dsl(tool), "q", {"replies": [{"tool_calls": [call]}], "auto_reply": "done"})
    [chunk] = message_end(events)["reference"]["chunks"].values()
    assert chunk["url"] == "https://ragflow.io/"
    assert tool_messages()[0].startswith("\nID: ")


async def test_a_private_instance_named_in_the_dsl_is_refused_unless_allowed(fake, monkeypatch):
    monkeypatch.delenv(ALLOW)
    fake.on("GET", "/search", Reply(200, ANSWER))
    events = await run_turn(searxng_node(fake.url), "ragflow")
    assert finished(events, "SearXNG:S")["error"] == (
        "127.0.0.1 is a private, loopback or otherwise non-public address; set "
        "CANVAS2GRAPH_SEARXNG_ALLOW_PRIVATE=1 to let SearXNG connect to such hosts")
    assert fake.requests == []


async def test_a_private_instance_the_model_names_is_refused_and_the_model_reads_why(fake, monkeypatch):
    monkeypatch.delenv(ALLOW)
    fake.on("GET", "/search", Reply(200, ANSWER))
    tool = {"component_name": "SearXNG", "name": "SearXNG", "params": {}}
    port = fake.url.rsplit(":", 1)[1]
    call = {"name": "searxng_search_0", "arguments": {"query": "ragflow", "searxng_url": f"http://localhost:{port}"}}
    await run_turn(agent_dsl(tool), "q", {"replies": [{"tool_calls": [call]}], "auto_reply": "done"})
    assert "is a private, loopback or otherwise non-public address" in tool_messages()[0]
    assert fake.requests == []


async def test_the_operators_instance_from_the_environment_is_trusted(fake, monkeypatch):
    monkeypatch.delenv(ALLOW)
    monkeypatch.setenv("CANVAS2GRAPH_SEARXNG_URL", fake.url)        # a self-hosted instance on the intranet
    fake.on("GET", "/search", Reply(200, ANSWER))
    result = await build("SearXNG:S", "SearXNG", {"query": "sys.query"}).run(state("ragflow"), context())
    assert len(result.outputs["json"]) == 3


async def test_as_agent_tool_a_missing_instance_is_what_the_model_reads():
    tool = {"component_name": "SearXNG", "name": "SearXNG", "params": {}}
    call = {"name": "searxng_search_0", "arguments": {"query": "ragflow"}}
    await run_turn(agent_dsl(tool), "q", {"replies": [{"tool_calls": [call]}], "auto_reply": "done"})
    assert tool_messages()[0].startswith("SearXNG error: SearXNG needs the URL of an instance")


@pytest.mark.parametrize("params, field", [({"top_n": 0}, "params.top_n"), ({"top_n": "ten"}, "params.top_n")])
def test_bad_params_are_compile_errors_naming_the_field(params, field):
    [error] = errors("SearXNG", params)
    assert error.field == field

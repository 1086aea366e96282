"""TavilySearch and TavilyExtract speak Tavily's REST API: POST /search and /extract with a bearer key;
results become citable chunks, as a canvas node and as an Agent tool; failures are clear errors."""
from __future__ import annotations

import pytest

from canvas2graph.compiler.canvas import diagnose
from canvas2graph.nodes.tool import chunk_key
from tests.nodes.helpers import build, context, errors, state
from tests.nodes.tools.support import (Reply, agent_dsl, closed_port_url, finished, message_end, node_dsl,
                                       run_turn, tool_messages)

KEY = "tvly-test-secret-key"

SEARCH = {"query": "what is ragflow", "answer": None, "images": [], "response_time": 0.4, "results": [
    {"title": "RAGFlow", "url": "https://ragflow.io/", "content": "RAGFlow is an open-source RAG engine.",
     "score": 0.91, "raw_content": None},
    {"title": "RAGFlow on GitHub", "url": "https://github.com/infiniflow/ragflow",
     "content": "Agents are graphs of components. ![x](data:image/png;base64,AAAA)", "score": 0.72, "raw_content": None},
    {"title": "Nothing to read", "url": "https://empty.example/", "content": "", "score": 0.1, "raw_content": None},
]}

EXTRACT = {"response_time": 1.2, "failed_results": [], "results": [
    {"url": "https://ragflow.io/docs", "raw_content": "# Docs\nRAGFlow has agents.", "images": []}]}


@pytest.fixture
def tavily(fake, monkeypatch):
    monkeypatch.setenv("CANVAS2GRAPH_TAVILY_URL", fake.url)
    return fake


def search_node(**params):
    return node_dsl("TavilySearch:Web", "TavilySearch", {"api_key": KEY, "query": "sys.query", **params})


# --- TavilySearch as a canvas node ---------------------------------------------------------

async def test_search_posts_the_query_from_state_with_the_key_as_bearer_token(tavily):
    tavily.on("POST", "/search", Reply(200, SEARCH))
    events = await run_turn(search_node(max_results=5, days=7, search_depth="advanced", include_raw_content=True),
                            "what is ragflow")
    [req] = tavily.requests
    assert req.headers["authorization"] == f"Bearer {KEY}"
    body = req.json()
    assert body["query"] == "what is ragflow" and body["topic"] == "general"
    assert (body["max_results"], body["days"], body["search_depth"]) == (5, 7, "advanced")
    # as in RAGFlow: snippets only, never raw pages or images
    assert body["include_raw_content"] is False and body["include_images"] is False
    assert KEY not in req.body.decode()
    data = finished(events, "TavilySearch:Web")
    assert data["error"] is None
    assert data["inputs"] == {"query": "what is ragflow", "topic": "general", "include_domains": [], "exclude_domains": []}


async def test_search_results_become_id_blocks_json_and_reference_chunks(tavily):
    tavily.on("POST", "/search", Reply(200, SEARCH))
    events = await run_turn(search_node(), "what is ragflow")
    out = finished(events, "TavilySearch:Web")["outputs"]
    assert out["json"] == SEARCH["results"]              # the raw results, the empty one included
    chunks = message_end(events)["reference"]["chunks"]
    assert [c["url"] for c in chunks.values()] == ["https://ragflow.io/", "https://github.com/infiniflow/ragflow"]
    first, second = chunks.values()
    assert first["similarity"] == 0.91 and first["document_name"] == "RAGFlow"
    assert "data:image" not in second["content"]          # inline images are dropped from the text
    for n, chunk in chunks.items():
        assert n == chunk_key(chunk["id"])
        assert f"ID: {n}\n├── Title: {chunk['document_name']}\n├── URL: {chunk['url']}\n└── Content:\n{chunk['content']}" \
            in out["formalized_content"]
    assert "empty.example" not in out["formalized_content"]


async def test_an_empty_query_answers_empty_without_calling_tavily(tavily):
    node = build("TavilySearch:Web", "TavilySearch", {"api_key": KEY, "query": "sys.query"})
    result = await node.run(state(""), context())
    assert result.outputs["formalized_content"] == "" and tavily.requests == []


async def test_the_key_may_come_from_the_environment(tavily, monkeypatch):
    monkeypatch.setenv("TAVILY_API_KEY", "tvly-from-env")
    tavily.on("POST", "/search", Reply(200, SEARCH))
    await run_turn(search_node(api_key=""), "q")
    assert tavily.requests[0].headers["authorization"] == "Bearer tvly-from-env"


async def test_a_missing_key_is_a_component_error_naming_where_to_set_it(tavily):
    events = await run_turn(search_node(api_key=""), "q")
    error = finished(events, "TavilySearch:Web")["error"]
    assert "params.api_key" in error and "TAVILY_API_KEY" in error
    assert tavily.requests == []


async def test_a_rejected_key_is_a_component_error_that_does_not_repeat_the_key(tavily):
    tavily.on("POST", "/search", Reply(401, {"detail": {"error": f"Unauthorized: invalid API key {KEY}"}}))
    events = await run_turn(search_node(), "q")
    data = finished(events, "TavilySearch:Web")
    assert data["error"].startswith("Tavily answered HTTP 401 Unauthorized (check the API key): Unauthorized")
    assert KEY not in data["error"] and data["outputs"]["_ERROR"] == data["error"]
    assert "workflow_finished" not in [e["event"] for e in events]


async def test_a_server_error_is_retried_as_the_node_max_retries_say(tavily):
    answers = iter([Reply(502, "<html><body>Bad gateway</body></html>", "text/html"), Reply(200, SEARCH)])
    tavily.on("POST", "/search", lambda req: next(answers))
    events = await run_turn(search_node(max_retries=1, delay_after_error=0), "q")
    assert len(tavily.requests) == 2
    assert finished(events, "TavilySearch:Web")["error"] is None


async def test_a_server_error_without_retries_reports_the_status_and_body(tavily):
    tavily.on("POST", "/search", Reply(500, {"error": "internal failure"}))
    events = await run_turn(search_node(), "q")
    assert finished(events, "TavilySearch:Web")["error"] == \
        "Tavily answered HTTP 500 Internal Server Error: internal failure"


async def test_a_slow_service_times_out(tavily, monkeypatch):
    monkeypatch.setenv("CANVAS2GRAPH_TOOL_TIMEOUT", "0.3")
    tavily.on("POST", "/search", Reply(200, SEARCH, delay=30))
    events = await run_turn(search_node(), "q")
    assert finished(events, "TavilySearch:Web")["error"] == \
        f"Tavily did not answer within 0.3 s ({tavily.url}/search)"


async def test_an_unreachable_service_is_a_clear_error(monkeypatch):
    url = closed_port_url()
    monkeypatch.setenv("CANVAS2GRAPH_TAVILY_URL", url)
    events = await run_turn(search_node(), "q")
    assert finished(events, "TavilySearch:Web")["error"].startswith(f"cannot reach Tavily at {url}/search: ")


# --- TavilySearch as an Agent tool ---------------------------------------------------------

def agent_with(component_name: str, **params):
    return agent_dsl({"component_name": component_name, "name": component_name, "params": {"api_key": KEY, **params}})


async def test_as_agent_tool_the_model_arguments_reach_tavily_and_results_become_citable(tavily):
    tavily.on("POST", "/search", Reply(200, SEARCH))
    call = {"name": "tavily_search_0", "arguments": {"query": "ragflow agents", "topic": "news",
                                                     "include_domains": ["ragflow.io"]}}
    events = await run_turn(agent_with("TavilySearch", max_results=3), "how do agents work?",
                            {"replies": [{"tool_calls": [call]}], "auto_reply": "They are graphs [ID:1]."})
    body = tavily.requests[0].json()
    assert (body["query"], body["topic"], body["include_domains"], body["exclude_domains"], body["max_results"]) == \
        ("ragflow agents", "news", ["ragflow.io"], [], 3)
    [seen] = tool_messages()
    chunks = message_end(events)["reference"]["chunks"]
    assert len(chunks) == 2 and all(f"ID: {n}\n" in seen for n in chunks)
    assert finished(events, "Agent:A")["error"] is None


async def test_as_agent_tool_a_failure_is_what_the_model_reads_after_the_retries(tavily):
    tavily.on("POST", "/search", Reply(503, {"error": "overloaded"}))
    call = {"name": "tavily_search_0", "arguments": {"query": "x"}}
    events = await run_turn(agent_with("TavilySearch", max_retries=2, delay_after_error=0), "q",
                            {"replies": [{"tool_calls": [call]}], "auto_reply": "Sorry, search is down."})
    assert len(tavily.requests) == 3
    assert tool_messages() == ["TavilySearch error: Tavily answered HTTP 503 Service Unavailable: overloaded"]
    assert finished(events, "Agent:A")["error"] is None
    assert events[-1]["event"] == "workflow_finished"


def test_the_model_sees_rag_flows_function_name_and_arguments():
    agent = build("Agent:A", "Agent", agent_with("TavilySearch")["components"]["Agent:A"]["obj"]["params"])
    [tool] = agent.tools
    fn = tool.schema["function"]
    assert fn["name"] == "tavily_search_0"
    assert list(fn["parameters"]["properties"]) == ["query", "topic", "include_domains", "exclude_domains"]
    assert fn["parameters"]["properties"]["topic"]["enum"] == ["general", "news"]
    assert "items" not in fn["parameters"]["properties"]["include_domains"]
    assert fn["parameters"]["required"] == ["query"]


# --- TavilyExtract ---------------------------------------------------------------------------

async def test_extract_posts_the_urls_and_makes_each_page_citable(tavily):
    tavily.on("POST", "/extract", Reply(200, EXTRACT))
    call = {"name": "tavily_extract_0", "arguments": {"urls": "https://ragflow.io/docs, https://ragflow.io/blog"}}
    events = await run_turn(agent_with("TavilyExtract", format="text"), "read the docs",
                            {"replies": [{"tool_calls": [call]}], "auto_reply": "Done."})
    [req] = tavily.requests
    assert req.path == "/extract" and req.headers["authorization"] == f"Bearer {KEY}"
    assert req.json() == {"urls": ["https://ragflow.io/docs", "https://ragflow.io/blog"], "extract_depth": "basic",
                          "format": "text", "include_images": False}
    [chunk] = message_end(events)["reference"]["chunks"].values()
    assert chunk["url"] == "https://ragflow.io/docs" and chunk["content"] == "# Docs\nRAGFlow has agents."
    assert f"ID: {chunk_key(chunk['id'])}" in tool_messages()[0]


async def test_extract_as_a_node_reads_the_urls_param(tavily):
    tavily.on("POST", "/extract", Reply(200, EXTRACT))
    events = await run_turn(node_dsl("TavilyExtract:Read", "TavilyExtract",
                                     {"api_key": KEY, "urls": "sys.query", "extract_depth": "advanced"}),
                            "https://ragflow.io/docs")
    assert tavily.requests[0].json()["urls"] == ["https://ragflow.io/docs"]
    assert tavily.requests[0].json()["extract_depth"] == "advanced"
    assert finished(events, "TavilyExtract:Read")["outputs"]["json"] == EXTRACT["results"]


async def test_extract_fails_when_no_page_could_be_read(tavily):
    tavily.on("POST", "/extract", Reply(200, {"results": [], "failed_results": [
        {"url": "https://gone.example/", "error": "404 Not Found"}]}))
    node = build("TavilyExtract:Read", "TavilyExtract", {"api_key": KEY, "urls": ["https://gone.example/"]})
    with pytest.raises(Exception, match=r"could not read any of the pages \(https://gone.example/: 404 Not Found\)"):
        await node.run(state("q"), context())



@pytest.mark.parametrize("path, component, params", [
    ("/search", "TavilySearch", {"query": "sys.query"}),
    ("/extract", "TavilyExtract", {"urls": ["https://ragflow.io/docs"]}),
])
@pytest.mark.parametrize("answer", [{"answer": "no results key"}, {"results": "not a list"}, ["a", "list"]])
async def test_an_answer_without_a_results_list_is_a_clear_error(tavily, path, component, params, answer):
    tavily.on("POST", path, Reply(200, answer))
    node = build(f"{component}:T", component, {"api_key": KEY, **params})
    with pytest.raises(Exception, match="^Tavily answered without a results list$"):
        await node.run(state("what is ragflow"), context())
    assert [req.path for req in tavily.requests] == [path]

# --- params: RAGFlow's check() rules, at compile time -----------------------------------------

@pytest.mark.parametrize("component, params, field", [
    ("TavilySearch", {"topic": "sports"}, "params.topic"),
    ("TavilySearch", {"search_depth": "deep"}, "params.search_depth"),
    ("TavilySearch", {"max_results": 0}, "params.max_results"),
    ("TavilySearch", {"days": -1}, "params.days"),
    ("TavilyExtract", {"extract_depth": "deep"}, "params.extract_depth"),
    ("TavilyExtract", {"format": "html"}, "params.format"),
])
def test_bad_params_are_compile_errors_naming_the_field(component, params, field):
    [error] = errors(component, params)
    assert error.field == field and error.code == "invalid-param"


def test_an_agent_tool_with_bad_params_fails_to_compile_naming_the_tool_field():
    dsl = agent_with("TavilySearch", topic="sports")
    [error] = [d for d in diagnose(dsl)[1] if d.severity == "error"]
    assert (error.component_id, error.field) == ("Agent:A", "params.tools.0.params.topic")

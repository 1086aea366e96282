"""GitHub searches repositories through the REST API (GET /search/repositories, most stars first, top_n
per page); repositories become citable chunks and `json` keeps the raw items; a token is optional;
rate limits, validation errors, timeouts and unreachable servers are clear errors."""
from __future__ import annotations

import pytest

from canvas2graph.compiler.canvas import diagnose
from tests.nodes.helpers import build, context, errors, state
from tests.nodes.tools.support import (Reply, agent_dsl, closed_port_url, finished, message_end, node_dsl, run_turn,
                                       tool_messages)

ITEMS = [
    {"id": 1, "name": "ragflow", "full_name": "infiniflow/ragflow", "html_url": "https://github.com/infiniflow/ragflow",
     "description": "RAGFlow is an open-source RAG engine based on deep document understanding.",
     "stargazers_count": 60000, "watchers": 60000, "language": "Python", "topics": ["rag", "llm"]},
    {"id": 2, "name": "langgraph", "full_name": "langchain-ai/langgraph",
     "html_url": "https://github.com/langchain-ai/langgraph", "description": None, "stargazers_count": 12000,
     "watchers": 12000, "language": None, "topics": []},
]
SEARCH = {"total_count": 2, "incomplete_results": False, "items": ITEMS}


@pytest.fixture
def github(fake, monkeypatch):
    monkeypatch.setenv("CANVAS2GRAPH_GITHUB_URL", fake.url)
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    return fake


def github_node(**params):
    return node_dsl("GitHub:Repos", "GitHub", {"query": "sys.query", **params})


async def test_the_search_asks_for_the_most_starred_repositories_first(github):
    github.on("GET", "/search/repositories", Reply(200, SEARCH))
    events = await run_turn(github_node(top_n=5), "rag engine language:python")
    [req] = github.requests
    assert {k: v[0] for k, v in req.query.items()} == {"q": "rag engine language:python", "sort": "stars",
                                                        "order": "desc", "per_page": "5"}
    assert req.headers["accept"] == "application/vnd.github+json"
    assert req.headers["x-github-api-version"] == "2022-11-28"
    assert "authorization" not in req.headers               # anonymous, as in RAGFlow
    assert finished(events, "GitHub:Repos")["error"] is None


async def test_repositories_become_citable_chunks_and_json_keeps_the_items(github):
    github.on("GET", "/search/repositories", Reply(200, SEARCH))
    events = await run_turn(github_node(), "rag")
    assert github.requests[0].arg("per_page") == "10"
    out = finished(events, "GitHub:Repos")["outputs"]
    assert out["json"] == ITEMS
    first, second = message_end(events)["reference"]["chunks"].values()
    assert (first["document_name"], first["url"]) == ("infiniflow/ragflow", "https://github.com/infiniflow/ragflow")
    assert first["content"] == ("RAGFlow is an open-source RAG engine based on deep document understanding.\n"
                                "stars: 60000\nlanguage: Python\ntopics: rag, llm")
    assert second["content"] == "No description\nstars: 12000"
    assert f"├── URL: https://github.com/infiniflow/ragflow\n└── Content:\n{first['content']}" in out["formalized_content"]


async def test_a_token_from_the_environment_or_the_params_is_a_bearer_token(github, monkeypatch):
    github.on("GET", "/search/repositories", Reply(200, SEARCH))
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_fromtheenvironment")
    await run_turn(github_node(), "rag")
    await run_turn(github_node(api_key="ghp_fromtheparams"), "rag")
    assert [r.headers["authorization"] for r in github.requests] == ["Bearer ghp_fromtheenvironment",
                                                                      "Bearer ghp_fromtheparams"]


async def test_an_exhausted_rate_limit_is_retried_and_explained(github):
    limited = Reply(403, {"message": "API rate limit exceeded for 127.0.0.1.",
                          "documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"},
                    headers={"x-ratelimit-remaining": "0", "x-ratelimit-limit": "10"})
    answers = iter([limited, Reply(200, SEARCH)])
    github.on("GET", "/search/repositories", lambda req: next(answers))
    events = await run_turn(github_node(max_retries=1, delay_after_error=0), "rag")
    assert len(github.requests) == 2 and finished(events, "GitHub:Repos")["error"] is None

    github.on("GET", "/search/repositories", limited)
    events = await run_turn(github_node(), "rag")
    assert finished(events, "GitHub:Repos")["error"] == \
        "GitHub's rate limit is exhausted (HTTP 403); a token in params.api_key or GITHUB_TOKEN raises the limit"


async def test_a_refused_query_and_a_bad_token_report_githubs_message_without_the_token(github):
    github.on("GET", "/search/repositories", Reply(422, {"message": "Validation Failed", "errors": [
        {"resource": "Search", "field": "q", "code": "missing"}]}))
    events = await run_turn(github_node(), "is:nothing")
    assert finished(events, "GitHub:Repos")["error"] == "GitHub answered HTTP 422 Unprocessable Entity: Validation Failed"

    github.on("GET", "/search/repositories", Reply(401, {"message": "Bad credentials for ghp_secret_token_value"}))
    events = await run_turn(github_node(api_key="ghp_secret_token_value"), "rag")
    assert finished(events, "GitHub:Repos")["error"] == \
        "GitHub answered HTTP 401 Unauthorized (check the API key): Bad credentials for ***"


async def test_an_empty_query_or_no_match_is_empty(github):
    github.on("GET", "/search/repositories", Reply(200, {"total_count": 0, "incomplete_results": False, "items": []}))
    node = build("GitHub:Repos", "GitHub", {"query": "sys.query"})
    result = await node.run(state("qqqzzz"), context())
    assert result.outputs == {"formalized_content": "", "json": []} and "reference" not in result.writes
    result = await node.run(state(""), context())
    assert result.outputs == {"formalized_content": ""} and len(github.requests) == 1


async def test_server_errors_timeouts_and_unreachable_servers(github, monkeypatch):
    github.on("GET", "/search/repositories", Reply(500, {"message": "Server Error"}))
    events = await run_turn(github_node(), "q")
    assert finished(events, "GitHub:Repos")["error"] == "GitHub answered HTTP 500 Internal Server Error: Server Error"

    monkeypatch.setenv("CANVAS2GRAPH_TOOL_TIMEOUT", "0.3")
    github.on("GET", "/search/repositories", Reply(200, SEARCH, delay=30))
    events = await run_turn(github_node(), "q")
    assert finished(events, "GitHub:Repos")["error"] == \
        f"GitHub did not answer within 0.3 s ({github.url}/search/repositories)"

    url = closed_port_url()
    monkeypatch.setenv("CANVAS2GRAPH_GITHUB_URL", url)
    events = await run_turn(github_node(), "q")
    assert finished(events, "GitHub:Repos")["error"].startswith(f"cannot reach GitHub at {url}/search/repositories: ")


# --- as an Agent tool ------------------------------------------------------------------------

def agent_with(**params):
    return agent_dsl({"component_name": "GitHub", "name": "GitHub", "params": params})


async def test_as_agent_tool_repositories_are_citable(github):
    github.on("GET", "/search/repositories", Reply(200, SEARCH))
    call = {"name": "github_search_0", "arguments": {"query": "topic:rag"}}
    events = await run_turn(agent_with(top_n=2), "which RAG engines exist?",
                            {"replies": [{"tool_calls": [call]}], "auto_reply": "RAGFlow [ID:1]."})
    assert github.requests[0].arg("q") == "topic:rag" and github.requests[0].arg("per_page") == "2"
    [seen] = tool_messages()
    chunks = message_end(events)["reference"]["chunks"]
    assert len(chunks) == 2 and all(f"ID: {n}\n" in seen for n in chunks)


async def test_as_agent_tool_a_failure_is_what_the_model_reads(github):
    github.on("GET", "/search/repositories", Reply(503, {"message": "Service Unavailable"}))
    call = {"name": "github_search_0", "arguments": {"query": "x"}}
    events = await run_turn(agent_with(), "q", {"replies": [{"tool_calls": [call]}], "auto_reply": "GitHub is down."})
    assert tool_messages() == ["GitHub error: GitHub answered HTTP 503 Service Unavailable: Service Unavailable"]
    assert events[-1]["event"] == "workflow_finished"


def test_the_model_sees_ragflows_function_name():
    agent = build("Agent:A", "Agent", agent_with()["components"]["Agent:A"]["obj"]["params"])
    fn = agent.tools[0].schema["function"]
    assert fn["name"] == "github_search_0" and fn["parameters"]["required"] == ["query"]


def test_bad_params_are_compile_errors_naming_the_field():
    [error] = errors("GitHub", {"top_n": 0})
    assert (error.field, error.code) == ("params.top_n", "invalid-param")
    [error] = [d for d in diagnose(agent_with(top_n=0))[1] if d.severity == "error"]
    assert (error.component_id, error.field) == ("Agent:A", "params.tools.0.params.top_n")

"""Google and GoogleScholar call SerpApi's search.json (engines google and google_scholar) with the key as
`api_key`; organic results become citable chunks; SerpApi's errors are clear and never show the key."""
from __future__ import annotations

import pytest

from canvas2graph.compiler.canvas import diagnose
from canvas2graph.nodes.tool import chunk_key
from tests.nodes.helpers import build, context, errors, state
from tests.nodes.tools.support import (Reply, agent_dsl, closed_port_url, finished, message_end, node_dsl,
                                       run_turn, tool_messages)

KEY = "serp-test-secret-key"

GOOGLE = {"search_metadata": {"status": "Success"}, "organic_results": [
    {"position": 1, "title": "RAGFlow", "link": "https://ragflow.io/", "snippet": "An open-source RAG engine.",
     "about_this_result": {"source": {"description": "RAGFlow is built on deep document understanding."}}},
    {"position": 2, "title": "RAGFlow agents", "link": "https://ragflow.io/docs/agent", "snippet": "Agents are graphs."},
]}

SCHOLAR = {"search_metadata": {"status": "Success"}, "organic_results": [
    {"position": 0, "title": "Retrieval-Augmented Generation", "result_id": "abc", "link": "https://arxiv.org/abs/2005.11401",
     "snippet": "Large pre-trained language models store factual knowledge.",
     "publication_info": {"summary": "P Lewis, E Perez - NeurIPS, 2020", "authors": [{"name": "P Lewis"}, {"name": "E Perez"}]}},
    {"position": 1, "title": "A patent", "result_id": "def", "link": "https://patents.example/1",
     "publication_info": {"summary": "Some inventor - 2021"}},
]}


@pytest.fixture
def serpapi(fake, monkeypatch):
    monkeypatch.setenv("CANVAS2GRAPH_SERPAPI_URL", fake.url)
    return fake


def google_node(**params):
    return node_dsl("Google:G", "Google", {"api_key": KEY, "q": "sys.query", "country": "us", **params})


# --- Google -----------------------------------------------------------------------------------

async def test_google_sends_the_serpapi_google_request(serpapi):
    serpapi.on("GET", "/search.json", Reply(200, GOOGLE))
    events = await run_turn(google_node(language="de", num=10), "ragflow")
    [req] = serpapi.requests
    assert {k: v[0] for k, v in req.query.items()} == {
        "engine": "google", "q": "ragflow", "google_domain": "google.com", "gl": "us", "hl": "de",
        "start": "0", "num": "10", "api_key": KEY}
    assert finished(events, "Google:G")["inputs"] == {"q": "ragflow", "start": 0, "num": 10}


async def test_google_results_prefer_the_source_description_and_become_citable(serpapi):
    serpapi.on("GET", "/search.json", Reply(200, GOOGLE))
    events = await run_turn(google_node(), "ragflow")
    out = finished(events, "Google:G")["outputs"]
    assert out["json"] == GOOGLE["organic_results"]
    chunks = list(message_end(events)["reference"]["chunks"].values())
    assert [c["content"] for c in chunks] == ["RAGFlow is built on deep document understanding.", "Agents are graphs."]
    assert [c["url"] for c in chunks] == ["https://ragflow.io/", "https://ragflow.io/docs/agent"]
    assert all(f"ID: {chunk_key(c['id'])}\n├── Title: {c['document_name']}" in out["formalized_content"] for c in chunks)


async def test_google_with_no_results_is_empty_not_an_error(serpapi):
    serpapi.on("GET", "/search.json", Reply(200, {"search_metadata": {"status": "Success"},
                                                  "error": "Google hasn't returned any results for this query."}))
    events = await run_turn(google_node(), "zzzzqqq")
    data = finished(events, "Google:G")
    assert data["error"] is None and data["outputs"]["formalized_content"] == "" and data["outputs"]["json"] == []


async def test_google_reports_serpapi_errors_without_the_key(serpapi):
    serpapi.on("GET", "/search.json", Reply(401, {"error": "Invalid API key. Your API key should be here: "
                                                           f"https://serpapi.com/manage-api-key?k={KEY}"}))
    events = await run_turn(google_node(), "ragflow")
    error = finished(events, "Google:G")["error"]
    assert error.startswith("Google (SerpApi) answered HTTP 401 Unauthorized (check the API key): Invalid API key.")
    assert KEY not in error


async def test_google_reports_an_error_in_a_successful_answer(serpapi):
    serpapi.on("GET", "/search.json", Reply(200, {"error": "Your account has run out of searches."}))
    events = await run_turn(google_node(), "ragflow")
    assert finished(events, "Google:G")["error"] == "Google (SerpApi) search failed: Your account has run out of searches."


async def test_google_needs_a_key_at_run_time_but_the_canvas_compiles_without_one(serpapi):
    assert errors("Google", {"api_key": ""}) == []
    events = await run_turn(google_node(api_key=""), "ragflow")
    assert "SERPAPI_API_KEY" in finished(events, "Google:G")["error"]
    assert serpapi.requests == []


async def test_google_unreachable_and_slow(monkeypatch, serpapi):
    monkeypatch.setenv("CANVAS2GRAPH_TOOL_TIMEOUT", "0.3")
    serpapi.on("GET", "/search.json", Reply(200, GOOGLE, delay=30))
    events = await run_turn(google_node(), "ragflow")
    assert finished(events, "Google:G")["error"] == f"Google (SerpApi) did not answer within 0.3 s ({serpapi.url}/search.json)"
    url = closed_port_url()
    monkeypatch.setenv("CANVAS2GRAPH_SERPAPI_URL", url)
    events = await run_turn(google_node(), "ragflow")
    error = finished(events, "Google:G")["error"]
    assert error.startswith(f"cannot reach Google (SerpApi) at {url}/search.json") and KEY not in error


async def test_google_as_agent_tool_takes_paging_from_the_model(serpapi):
    serpapi.on("GET", "/search.json", Reply(200, GOOGLE))
    tool = {"component_name": "Google", "name": "Google", "params": {"api_key": KEY, "country": "gb"}}
    call = {"name": "google_search_0", "arguments": {"q": "ragflow agent", "start": "10", "num": 3}}
    events = await run_turn(agent_dsl(tool), "q", {"replies": [{"tool_calls": [call]}], "auto_reply": "done"})
    req = serpapi.requests[0]
    assert (req.arg("q"), req.arg("start"), req.arg("num"), req.arg("gl")) == ("ragflow agent", "10", "3", "gb")
    assert len(message_end(events)["reference"]["chunks"]) == 2
    assert tool_messages()[0].startswith("\nID: ")


async def test_google_as_agent_tool_rejects_a_bad_paging_argument(serpapi):
    tool = {"component_name": "Google", "name": "Google", "params": {"api_key": KEY}}
    call = {"name": "google_search_0", "arguments": {"q": "x", "num": "many"}}
    await run_turn(agent_dsl(tool), "q", {"replies": [{"tool_calls": [call]}], "auto_reply": "done"})
    assert tool_messages() == ["Google error: num must be a whole number, not 'many'"]
    assert serpapi.requests == []


# --- GoogleScholar ------------------------------------------------------------------------------

async def test_scholar_sends_the_google_scholar_engine_request_with_filters(serpapi):
    serpapi.on("GET", "/search.json", Reply(200, SCHOLAR))
    node = build("GoogleScholar:S", "GoogleScholar", {"api_key": KEY, "query": "sys.query", "top_n": 5,
                                                        "sort_by": "date", "year_low": 2019, "year_high": "",
                                                        "patents": False})
    await node.run(state("retrieval augmented generation"), context())
    [req] = serpapi.requests
    assert {k: v[0] for k, v in req.query.items()} == {
        "engine": "google_scholar", "q": "retrieval augmented generation", "as_sdt": "0", "as_ylo": "2019",
        "scisbd": "1", "start": "0", "num": "5", "api_key": KEY}


async def test_scholar_papers_carry_authors_and_abstract(serpapi):
    serpapi.on("GET", "/search.json", Reply(200, SCHOLAR))
    node = build("GoogleScholar:S", "GoogleScholar", {"api_key": KEY, "query": "sys.query"})
    result = await node.run(state("rag"), context())
    assert serpapi.requests[0].arg("as_sdt") == "7"          # patents included by default, as in RAGFlow
    first, second = result.writes["reference"]["chunks"].values()
    assert first["content"] == ("Authors: P Lewis, E Perez\nPublished: P Lewis, E Perez - NeurIPS, 2020\n"
                                "Abstract: Large pre-trained language models store factual knowledge.")
    assert second["content"] == "Published: Some inventor - 2021\nAbstract: no abstract"
    assert result.outputs["json"] == SCHOLAR["organic_results"]


async def test_scholar_pages_through_serpapi_for_more_than_twenty_results(serpapi):
    page = lambda n, start: [{"title": f"Paper {start + i}", "link": f"https://p.example/{start + i}",
                              "snippet": f"About {start + i}"} for i in range(n)]
    serpapi.on("GET", "/search.json", lambda req: Reply(200, {"organic_results": page(
        int(req.arg("num")) if req.arg("start") == "0" else 4, int(req.arg("start")))}))
    node = build("GoogleScholar:S", "GoogleScholar", {"api_key": KEY, "query": "sys.query", "top_n": 30})
    result = await node.run(state("rag"), context())
    assert [(r.arg("start"), r.arg("num")) for r in serpapi.requests] == [("0", "20"), ("20", "10")]
    assert len(result.outputs["json"]) == 24


async def test_scholar_as_agent_tool_without_a_key_tells_the_model_how_to_fix_it(serpapi):
    tool = {"component_name": "GoogleScholar", "name": "GoogleScholar", "params": {}}
    call = {"name": "google_scholar_search_0", "arguments": {"query": "rag"}}
    await run_turn(agent_dsl(tool), "q", {"replies": [{"tool_calls": [call]}], "auto_reply": "done"})
    [seen] = tool_messages()
    assert seen.startswith("GoogleScholar error: GoogleScholar (SerpApi) needs an API key") and "SERPAPI_API_KEY" in seen


async def test_scholar_key_from_the_environment(serpapi, monkeypatch):
    monkeypatch.setenv("SERPAPI_API_KEY", "serp-env")
    serpapi.on("GET", "/search.json", Reply(200, SCHOLAR))
    node = build("GoogleScholar:S", "GoogleScholar", {"query": "sys.query"})
    await node.run(state("rag"), context())
    assert serpapi.requests[0].arg("api_key") == "serp-env"


# --- params ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("component, params, field", [
    ("Google", {"country": "xx"}, "params.country"),
    ("Google", {"language": "english"}, "params.language"),
    ("Google", {"num": 0}, "params.num"),
    ("GoogleScholar", {"sort_by": "citations"}, "params.sort_by"),
    ("GoogleScholar", {"top_n": 0}, "params.top_n"),
    ("GoogleScholar", {"patents": "yes"}, "params.patents"),
])
def test_bad_params_are_compile_errors_naming_the_field(component, params, field):
    [error] = errors(component, params)
    assert error.field == field


def test_agent_schemas_use_ragflow_function_names():
    params = {"llm_id": "m@OpenAI", "tools": [{"component_name": "Google", "params": {}},
                                              {"component_name": "GoogleScholar", "params": {}}]}
    agent = build("Agent:A", "Agent", params)
    google, scholar = (t.schema["function"] for t in agent.tools)
    assert (google["name"], list(google["parameters"]["properties"]), google["parameters"]["required"]) == \
        ("google_search_0", ["q", "start", "num"], ["q"])
    assert (scholar["name"], scholar["parameters"]["required"]) == ("google_scholar_search_1", ["query"])


def test_a_template_with_an_empty_google_key_compiles_the_google_tool():
    dsl = agent_dsl({"component_name": "Google", "name": "Google", "params": {"api_key": "", "country": "us"}})
    assert [d for d in diagnose(dsl)[1] if d.severity == "error"] == []

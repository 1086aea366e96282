"""ArXiv queries the arXiv API's Atom feed (GET /api/query) and turns each paper into a citable chunk:
title, PDF link and abstract, authors and date as metadata; errors the API reports in its feed, HTTP
failures, timeouts and unreachable servers are clear errors, as a node and as an Agent tool."""
from __future__ import annotations

import pytest

from canvas2graph.compiler.canvas import diagnose
from canvas2graph.nodes.tool import chunk_key
from tests.nodes.helpers import build, context, errors, state
from tests.nodes.tools.support import (Reply, agent_dsl, closed_port_url, finished, message_end, node_dsl, run_turn,
                                       tool_messages)

FEED = """<?xml version="1.0" encoding="UTF-8"?>
<feed xmlns="http://www.w3.org/2005/Atom" xmlns:opensearch="http://a9.com/-/spec/opensearch/1.1/"
      xmlns:arxiv="http://arxiv.org/schemas/atom">
  <id>https://arxiv.org/api/cHxbiOdZaP56ODnBPIenZhzg5f8</id>
  <title>arXiv Query: search_query=all:rag&amp;id_list=&amp;start=0&amp;max_results=3</title>
  <updated>2024-05-01T00:00:00-04:00</updated>
  <opensearch:totalResults>2</opensearch:totalResults>
  <opensearch:startIndex>0</opensearch:startIndex>
  <opensearch:itemsPerPage>3</opensearch:itemsPerPage>
  <entry>
    <id>http://arxiv.org/abs/2312.10997v5</id>
    <updated>2024-03-27T07:53:51Z</updated>
    <published>2023-12-18T07:47:33Z</published>
    <title>Retrieval-Augmented Generation for Large Language Models: A
  Survey</title>
    <summary>  Large language models show impressive capabilities
but hallucinate; retrieval from external databases helps.
</summary>
    <author><name>Yunfan Gao</name></author>
    <author><name>Yun Xiong</name></author>
    <arxiv:comment xmlns:arxiv="http://arxiv.org/schemas/atom">Ongoing work</arxiv:comment>
    <link href="http://arxiv.org/abs/2312.10997v5" rel="alternate" type="text/html"/>
    <link title="pdf" href="http://arxiv.org/pdf/2312.10997v5" rel="related" type="application/pdf"/>
    <arxiv:primary_category xmlns:arxiv="http://arxiv.org/schemas/atom" term="cs.CL" scheme="http://arxiv.org/schemas/atom"/>
    <category term="cs.CL" scheme="http://arxiv.org/schemas/atom"/>
  </entry>
  <entry>
    <id>http://arxiv.org/abs/2005.11401v4</id>
    <updated>2021-04-12T15:42:23Z</updated>
    <published>2020-05-22T21:34:34Z</published>
    <title>Retrieval-Augmented Generation for Knowledge-Intensive NLP Tasks</title>
    <summary>Large pre-trained language models store factual knowledge in their parameters.</summary>
    <author><name>Patrick Lewis</name></author>
    <link href="http://arxiv.org/abs/2005.11401v4" rel="alternate" type="text/html"/>
    <arxiv:primary_category xmlns:arxiv="http://arxiv.org/schemas/atom" term="cs.CL" scheme="http://arxiv.org/schemas/atom"/>
  </entry>
</feed>
"""

EMPTY_FEED = """<?xml version="1.0" encoding="UTF-8"?>
<feed xmlns="http://www.w3.org/2005/Atom" xmlns:opensearch="http://a9.com/-/spec/opensearch/1.1/">
  <title>arXiv Query: search_query=all:qqqzzz</title>
  <opensearch:totalResults>0</opensearch:totalResults>
</feed>
"""

ERROR_FEED = """<?xml version="1.0" encoding="UTF-8"?>
<feed xmlns="http://www.w3.org/2005/Atom" xmlns:opensearch="http://a9.com/-/spec/opensearch/1.1/">
  <title>arXiv Query: search_query=&amp;id_list=&amp;start=0&amp;max_results=-1</title>
  <opensearch:totalResults>1</opensearch:totalResults>
  <entry>
    <id>http://arxiv.org/api/errors#max_results_must_be_non-negative</id>
    <title>Error</title>
    <summary>max_results must be non-negative</summary>
    <updated>2024-05-01T00:00:00-04:00</updated>
    <link href="http://arxiv.org/api/errors#max_results_must_be_non-negative" rel="alternate" type="text/html"/>
    <author><name>arXiv api core</name></author>
  </entry>
</feed>
"""

ATOM = "application/atom+xml; charset=UTF-8"


@pytest.fixture
def arxiv(fake, monkeypatch):
    monkeypatch.setenv("CANVAS2GRAPH_ARXIV_URL", fake.url)
    return fake


def arxiv_node(**params):
    return node_dsl("ArXiv:Papers", "ArXiv", {"query": "sys.query", **params})


async def test_the_query_from_state_goes_to_the_api_with_ragflows_sorting_and_page_size(arxiv):
    arxiv.on("GET", "/api/query", Reply(200, FEED, ATOM))
    events = await run_turn(arxiv_node(top_n=3, sort_by="relevance"), "retrieval augmented generation")
    [req] = arxiv.requests
    assert {k: v[0] for k, v in req.query.items()} == {
        "search_query": "retrieval augmented generation", "start": "0", "max_results": "3",
        "sortBy": "relevance", "sortOrder": "descending"}
    data = finished(events, "ArXiv:Papers")
    assert data["error"] is None and data["inputs"] == {"query": "retrieval augmented generation"}


async def test_papers_become_citable_chunks_with_pdf_links_abstracts_and_authors(arxiv):
    arxiv.on("GET", "/api/query", Reply(200, FEED, ATOM))
    events = await run_turn(arxiv_node(), "rag")
    assert arxiv.requests[0].arg("sortBy") == "submittedDate" and arxiv.requests[0].arg("max_results") == "12"
    out = finished(events, "ArXiv:Papers")["outputs"]
    assert "json" not in out                              # RAGFlow's ArXiv sets formalized_content only
    first, second = message_end(events)["reference"]["chunks"].values()
    assert first["document_name"] == "Retrieval-Augmented Generation for Large Language Models: A Survey"
    assert first["url"] == "http://arxiv.org/pdf/2312.10997v5"
    assert first["content"] == ("Large language models show impressive capabilities but hallucinate; "
                                "retrieval from external databases helps.")
    assert first["document_metadata"] == {"Authors": "Yunfan Gao, Yun Xiong", "Published": "2023-12-18"}
    assert second["url"] == "http://arxiv.org/abs/2005.11401v4"      # no PDF link: the abstract page
    n = chunk_key(first["id"])
    assert (f"ID: {n}\n├── Title: {first['document_name']}\n├── URL: http://arxiv.org/pdf/2312.10997v5\n"
            f"├── Authors: Yunfan Gao, Yun Xiong\n├── Published: 2023-12-18\n└── Content:\n{first['content']}") \
        in out["formalized_content"]


async def test_nothing_found_and_an_empty_query_are_empty_results(arxiv):
    arxiv.on("GET", "/api/query", Reply(200, EMPTY_FEED, ATOM))
    node = build("ArXiv:Papers", "ArXiv", {"query": "sys.query"})
    result = await node.run(state("qqqzzz"), context())
    assert result.outputs == {"formalized_content": ""} and "reference" not in result.writes
    result = await node.run(state(""), context())
    assert result.outputs == {"formalized_content": ""} and len(arxiv.requests) == 1


async def test_a_query_the_api_refuses_reports_the_reason_from_the_error_feed(arxiv):
    arxiv.on("GET", "/api/query", Reply(400, ERROR_FEED, ATOM))
    events = await run_turn(arxiv_node(), "q")
    assert finished(events, "ArXiv:Papers")["error"] == \
        "arXiv answered HTTP 400 Bad Request: max_results must be non-negative"


async def test_server_errors_are_retried_as_max_retries_say_then_reported(arxiv):
    answers = iter([Reply(503, "<html><body>Service Unavailable</body></html>", "text/html"), Reply(200, FEED, ATOM)])
    arxiv.on("GET", "/api/query", lambda req: next(answers))
    events = await run_turn(arxiv_node(max_retries=1, delay_after_error=0), "q")
    assert len(arxiv.requests) == 2 and finished(events, "ArXiv:Papers")["error"] is None

    arxiv.on("GET", "/api/query", Reply(500, "<html><body>Internal error</body></html>", "text/html"))
    events = await run_turn(arxiv_node(), "q")
    assert finished(events, "ArXiv:Papers")["error"] == "arXiv answered HTTP 500 Internal Server Error: Internal error"


async def test_a_body_that_is_not_a_feed_is_a_clear_error(arxiv):
    arxiv.on("GET", "/api/query", Reply(200, "<html><body>maintenance", "text/html"))
    events = await run_turn(arxiv_node(), "q")
    assert finished(events, "ArXiv:Papers")["error"].startswith("arXiv answered with something other than an Atom feed")


async def test_slow_and_unreachable_services(arxiv, monkeypatch):
    monkeypatch.setenv("CANVAS2GRAPH_TOOL_TIMEOUT", "0.3")
    arxiv.on("GET", "/api/query", Reply(200, FEED, ATOM, delay=30))
    events = await run_turn(arxiv_node(), "q")
    assert finished(events, "ArXiv:Papers")["error"] == f"arXiv did not answer within 0.3 s ({arxiv.url}/api/query)"

    url = closed_port_url()
    monkeypatch.setenv("CANVAS2GRAPH_ARXIV_URL", url)
    events = await run_turn(arxiv_node(), "q")
    assert finished(events, "ArXiv:Papers")["error"].startswith(f"cannot reach arXiv at {url}/api/query: ")


# --- as an Agent tool ------------------------------------------------------------------------

def agent_with(**params):
    return agent_dsl({"component_name": "ArXiv", "name": "ArXiv", "params": params})


async def test_as_agent_tool_the_models_query_is_searched_and_papers_are_citable(arxiv):
    arxiv.on("GET", "/api/query", Reply(200, FEED, ATOM))
    call = {"name": "arxiv_search_0", "arguments": {"query": "ti:retrieval AND cat:cs.CL"}}
    events = await run_turn(agent_with(top_n=5, sort_by="lastUpdatedDate"), "recent RAG surveys?",
                            {"replies": [{"tool_calls": [call]}], "auto_reply": "See the survey [ID:1]."})
    req = arxiv.requests[0]
    assert (req.arg("search_query"), req.arg("max_results"), req.arg("sortBy")) == \
        ("ti:retrieval AND cat:cs.CL", "5", "lastUpdatedDate")
    [seen] = tool_messages()
    chunks = message_end(events)["reference"]["chunks"]
    assert len(chunks) == 2 and all(f"ID: {n}\n" in seen for n in chunks)
    assert finished(events, "Agent:A")["error"] is None


async def test_as_agent_tool_a_failure_is_what_the_model_reads(arxiv):
    arxiv.on("GET", "/api/query", Reply(400, ERROR_FEED, ATOM))
    call = {"name": "arxiv_search_0", "arguments": {"query": "x"}}
    events = await run_turn(agent_with(), "q", {"replies": [{"tool_calls": [call]}], "auto_reply": "arXiv failed."})
    assert tool_messages() == ["ArXiv error: arXiv answered HTTP 400 Bad Request: max_results must be non-negative"]
    assert events[-1]["event"] == "workflow_finished"


def test_the_model_sees_ragflows_function_name_and_one_required_query():
    agent = build("Agent:A", "Agent", agent_with()["components"]["Agent:A"]["obj"]["params"])
    [tool] = agent.tools
    fn = tool.schema["function"]
    assert fn["name"] == "arxiv_search_0"
    assert list(fn["parameters"]["properties"]) == ["query"] and fn["parameters"]["required"] == ["query"]


# --- params ------------------------------------------------------------------------------------

@pytest.mark.parametrize("params, field", [({"sort_by": "date"}, "params.sort_by"), ({"top_n": 0}, "params.top_n"),
                                           ({"top_n": "many"}, "params.top_n")])
def test_bad_params_are_compile_errors_naming_the_field(params, field):
    [error] = errors("ArXiv", params)
    assert (error.field, error.code) == (field, "invalid-param")


def test_an_agent_tool_with_bad_params_fails_to_compile_naming_the_tool_field():
    [error] = [d for d in diagnose(agent_with(sort_by="date"))[1] if d.severity == "error"]
    assert (error.component_id, error.field) == ("Agent:A", "params.tools.0.params.sort_by")

"""PubMed searches NCBI's E-utilities (esearch for ids, then efetch for the records, as XML), naming
itself with `tool` and `email`; each article becomes a citable chunk with its citation details and
abstract; NCBI's errors, rate limits, timeouts and unreachable servers are clear errors."""
from __future__ import annotations

import pytest

from canvas2graph.compiler.canvas import diagnose
from tests.nodes.helpers import build, context, errors, state
from tests.nodes.tools.support import (Reply, agent_dsl, closed_port_url, finished, message_end, node_dsl,
                                       run_turn, tool_messages)

XML = "text/xml; charset=UTF-8"
SEARCH = "/entrez/eutils/esearch.fcgi"
FETCH = "/entrez/eutils/efetch.fcgi"


def esearch(ids: list[str]) -> str:
    id_list = "".join(f"<Id>{i}</Id>\n" for i in ids)
    return f"""<?xml version="1.0" encoding="UTF-8" ?>
<!DOCTYPE eSearchResult PUBLIC "-//NLM//DTD esearch 20060628//EN" "https://eutils.ncbi.nlm.nih.gov/eutils/dtd/20060628/esearch.dtd">
<eSearchResult><Count>{len(ids)}</Count><RetMax>{len(ids)}</RetMax><RetStart>0</RetStart><IdList>
{id_list}</IdList><TranslationSet/><QueryTranslation>"crispr"[All Fields]</QueryTranslation></eSearchResult>
"""


EFETCH = """<?xml version="1.0" ?>
<!DOCTYPE PubmedArticleSet PUBLIC "-//NLM//DTD PubMedArticle, 1st January 2024//EN" "https://dtd.nlm.nih.gov/ncbi/pubmed/out/pubmed_240101.dtd">
<PubmedArticleSet>
<PubmedArticle>
  <MedlineCitation Status="MEDLINE" Owner="NLM">
    <PMID Version="1">38000001</PMID>
    <Article PubModel="Print-Electronic">
      <Journal>
        <JournalIssue CitedMedium="Internet"><Volume>21</Volume><Issue>4</Issue></JournalIssue>
        <Title>Nature reviews. Drug discovery</Title>
      </Journal>
      <ArticleTitle>Base editing of <i>PCSK9</i> in primates.</ArticleTitle>
      <Pagination><MedlinePgn>233-251</MedlinePgn></Pagination>
      <ELocationID EIdType="doi" ValidYN="Y">10.1038/s41573-023-0001-x</ELocationID>
      <Abstract>
        <AbstractText Label="BACKGROUND" NlmCategory="BACKGROUND">CRISPR base editors change single
          bases.</AbstractText>
        <AbstractText Label="RESULTS" NlmCategory="RESULTS">LDL fell by 60% (<i>p</i> &lt; 0.01).</AbstractText>
      </Abstract>
      <AuthorList CompleteYN="Y">
        <Author ValidYN="Y"><LastName>Doudna</LastName><ForeName>Jennifer A</ForeName><Initials>JA</Initials></Author>
        <Author ValidYN="Y"><LastName>Liu</LastName><ForeName>David R</ForeName><Initials>DR</Initials></Author>
        <Author ValidYN="Y"><CollectiveName>Gene Editing Consortium</CollectiveName></Author>
      </AuthorList>
    </Article>
  </MedlineCitation>
  <PubmedData>
    <ArticleIdList>
      <ArticleId IdType="pubmed">38000001</ArticleId>
      <ArticleId IdType="doi">10.1038/s41573-023-00001-x</ArticleId>
    </ArticleIdList>
  </PubmedData>
</PubmedArticle>
<PubmedArticle>
  <MedlineCitation Status="In-Data-Review" Owner="NLM">
    <PMID Version="1">37000002</PMID>
    <Article PubModel="Electronic">
      <Journal><JournalIssue CitedMedium="Internet"/><Title>bioRxiv</Title></Journal>
      <ArticleTitle>A preprint without an abstract.</ArticleTitle>
    </Article>
  </MedlineCitation>
  <PubmedData><ArticleIdList><ArticleId IdType="pubmed">37000002</ArticleId></ArticleIdList></PubmedData>
</PubmedArticle>
</PubmedArticleSet>
"""

FIRST = """Title: Base editing of PCSK9 in primates.
Authors: Jennifer A Doudna, David R Liu, Gene Editing Consortium
Journal: Nature reviews. Drug discovery
Volume: 21
Issue: 4
Pages: 233-251
DOI: 10.1038/s41573-023-00001-x
Abstract: BACKGROUND: CRISPR base editors change single bases.
RESULTS: LDL fell by 60% (p < 0.01)."""

SECOND = """Title: A preprint without an abstract.
Authors: Unknown Authors
Journal: bioRxiv
Volume: -
Issue: -
Pages: -
DOI: -
Abstract: No abstract available"""


@pytest.fixture
def ncbi(fake, monkeypatch):
    monkeypatch.setenv("CANVAS2GRAPH_PUBMED_URL", fake.url)
    monkeypatch.delenv("NCBI_API_KEY", raising=False)
    return fake


def serve(ncbi, ids=("38000001", "37000002"), records=EFETCH):
    ncbi.on("GET", SEARCH, Reply(200, esearch(list(ids)), XML))
    ncbi.on("GET", FETCH, Reply(200, records, XML))
    ncbi.on("POST", FETCH, Reply(200, records, XML))


def pubmed_node(**params):
    return node_dsl("PubMed:Papers", "PubMed", {"query": "sys.query", **params})


async def test_esearch_finds_ids_then_efetch_reads_their_records(ncbi):
    serve(ncbi)
    events = await run_turn(pubmed_node(top_n=2, email="lab@example.org"), "crispr base editing")
    search, fetch = ncbi.requests
    assert (search.path, fetch.path) == (SEARCH, FETCH)
    assert {k: v[0] for k, v in search.query.items()} == {
        "db": "pubmed", "tool": "canvas2graph", "email": "lab@example.org", "term": "crispr base editing", "retmax": "2"}
    assert {k: v[0] for k, v in fetch.query.items()} == {
        "db": "pubmed", "tool": "canvas2graph", "email": "lab@example.org", "id": "38000001,37000002", "retmode": "xml"}
    assert finished(events, "PubMed:Papers")["error"] is None


async def test_each_article_is_a_citable_chunk_with_its_citation_and_abstract(ncbi):
    serve(ncbi)
    events = await run_turn(pubmed_node(), "crispr")
    assert ncbi.requests[0].arg("retmax") == "12" and ncbi.requests[0].arg("email") == "A.N.Other@example.com"
    first, second = message_end(events)["reference"]["chunks"].values()
    assert (first["document_name"], first["url"]) == ("Base editing of PCSK9 in primates.",
                                                      "https://pubmed.ncbi.nlm.nih.gov/38000001/")
    assert first["content"] == FIRST and second["content"] == SECOND
    out = finished(events, "PubMed:Papers")["outputs"]
    assert "json" not in out and f"└── Content:\n{FIRST}" in out["formalized_content"]


async def test_the_api_key_from_the_environment_is_sent_and_never_shown(ncbi, monkeypatch):
    monkeypatch.setenv("NCBI_API_KEY", "ncbi-secret-0123456789")
    ncbi.on("GET", SEARCH, Reply(429, {"error": "API rate limit exceeded", "api-key": "ncbi-secret-0123456789",
                                       "count": "11", "limit": "10"}))
    events = await run_turn(pubmed_node(), "crispr")
    assert ncbi.requests[0].arg("api_key") == "ncbi-secret-0123456789"
    error = finished(events, "PubMed:Papers")["error"]
    assert error == "PubMed answered HTTP 429 Too Many Requests: API rate limit exceeded"


async def test_a_rate_limit_is_retried_as_max_retries_say(ncbi):
    serve(ncbi)
    answers = iter([Reply(429, {"error": "API rate limit exceeded"}), Reply(200, esearch(["38000001"]), XML)])
    ncbi.on("GET", SEARCH, lambda req: next(answers))
    events = await run_turn(pubmed_node(max_retries=1, delay_after_error=0), "crispr")
    assert [r.path for r in ncbi.requests] == [SEARCH, SEARCH, FETCH]
    assert finished(events, "PubMed:Papers")["error"] is None


async def test_no_ids_means_an_empty_result_without_a_fetch(ncbi):
    serve(ncbi, ids=())
    node = build("PubMed:Papers", "PubMed", {"query": "sys.query"})
    result = await node.run(state("qqqzzz"), context())
    assert result.outputs == {"formalized_content": ""} and [r.path for r in ncbi.requests] == [SEARCH]
    result = await node.run(state(""), context())
    assert result.outputs == {"formalized_content": ""} and len(ncbi.requests) == 1


async def test_more_than_two_hundred_ids_are_fetched_with_a_post(ncbi):
    ids = [str(30000000 + i) for i in range(201)]
    serve(ncbi, ids=ids)
    node = build("PubMed:Papers", "PubMed", {"query": "sys.query", "top_n": 201})
    await node.run(state("crispr"), context())
    fetch = ncbi.requests[1]
    assert fetch.method == "POST" and fetch.form()["id"] == ",".join(ids) and fetch.form()["retmode"] == "xml"


async def test_an_esearch_error_element_is_a_component_error(ncbi):
    ncbi.on("GET", SEARCH, Reply(200, "<eSearchResult><ERROR>Search Backend failed: syntax error</ERROR></eSearchResult>",
                                 XML))
    events = await run_turn(pubmed_node(), "((")
    assert finished(events, "PubMed:Papers")["error"] == "PubMed refused the search: Search Backend failed: syntax error"


async def test_http_failures_timeouts_and_unreachable_servers(ncbi, monkeypatch):
    serve(ncbi)
    ncbi.on("GET", FETCH, Reply(502, "<html><body><h1>Bad Gateway</h1></body></html>", "text/html"))
    events = await run_turn(pubmed_node(), "q")
    assert finished(events, "PubMed:Papers")["error"] == "PubMed answered HTTP 502 Bad Gateway: Bad Gateway"

    monkeypatch.setenv("CANVAS2GRAPH_TOOL_TIMEOUT", "0.3")
    ncbi.on("GET", SEARCH, Reply(200, esearch([]), XML, delay=30))
    events = await run_turn(pubmed_node(), "q")
    assert finished(events, "PubMed:Papers")["error"] == f"PubMed did not answer within 0.3 s ({ncbi.url}{SEARCH})"

    url = closed_port_url()
    monkeypatch.setenv("CANVAS2GRAPH_PUBMED_URL", url)
    events = await run_turn(pubmed_node(), "q")
    assert finished(events, "PubMed:Papers")["error"].startswith(f"cannot reach PubMed at {url}{SEARCH}: ")


# --- as an Agent tool ------------------------------------------------------------------------

def agent_with(**params):
    return agent_dsl({"component_name": "PubMed", "name": "PubMed", "params": params})


async def test_as_agent_tool_articles_are_citable(ncbi):
    serve(ncbi)
    call = {"name": "pubmed_search_0", "arguments": {"query": "PCSK9[ti] AND base editing"}}
    events = await run_turn(agent_with(top_n=5), "does base editing lower LDL?",
                            {"replies": [{"tool_calls": [call]}], "auto_reply": "Yes [ID:1]."})
    assert (ncbi.requests[0].arg("term"), ncbi.requests[0].arg("retmax")) == ("PCSK9[ti] AND base editing", "5")
    [seen] = tool_messages()
    chunks = message_end(events)["reference"]["chunks"]
    assert len(chunks) == 2 and all(f"ID: {n}\n" in seen for n in chunks)


async def test_as_agent_tool_a_failure_is_what_the_model_reads(ncbi):
    ncbi.on("GET", SEARCH, Reply(500, {"error": "backend down"}))
    call = {"name": "pubmed_search_0", "arguments": {"query": "x"}}
    events = await run_turn(agent_with(), "q", {"replies": [{"tool_calls": [call]}], "auto_reply": "PubMed is down."})
    assert tool_messages() == ["PubMed error: PubMed answered HTTP 500 Internal Server Error: backend down"]
    assert events[-1]["event"] == "workflow_finished"


def test_the_model_sees_ragflows_function_name():
    agent = build("Agent:A", "Agent", agent_with()["components"]["Agent:A"]["obj"]["params"])
    fn = agent.tools[0].schema["function"]
    assert fn["name"] == "pubmed_search_0" and fn["parameters"]["required"] == ["query"]


@pytest.mark.parametrize("params, field", [({"top_n": 0}, "params.top_n"), ({"top_n": -3}, "params.top_n")])
def test_bad_params_are_compile_errors_naming_the_field(params, field):
    [error] = errors("PubMed", params)
    assert (error.field, error.code) == (field, "invalid-param")


def test_an_agent_tool_with_bad_params_fails_to_compile_naming_the_tool_field():
    [error] = [d for d in diagnose(agent_with(top_n=0))[1] if d.severity == "error"]
    assert (error.component_id, error.field) == ("Agent:A", "params.tools.0.params.top_n")

"""Wikipedia searches the chosen edition's MediaWiki API, then reads each page's introduction; pages become
citable chunks in search order; disambiguation and missing pages are skipped; failures are clear."""
from __future__ import annotations

import pytest

from tests.nodes.helpers import build, context, errors, state
from tests.nodes.tools.support import (Reply, Seen, agent_dsl, closed_port_url, finished, message_end, node_dsl,
                                       run_turn, tool_messages)

PAGES = {
    "Retrieval-augmented generation": {"extract": "Retrieval-augmented generation (RAG) lets a model use documents.",
                                       "fullurl": "https://de.wikipedia.org/wiki/Retrieval-augmented_generation"},
    "RAG": {"extract": "RAG may refer to:", "disambiguation": True},
    "Large language model": {"extract": "A large language model is a language model trained on much text.",
                             "fullurl": "https://de.wikipedia.org/wiki/Large_language_model"},
}


def mediawiki(search_titles: list[str], known: dict[str, dict] = PAGES):
    """A MediaWiki api.php: list=search answers `search_titles`, prop=extracts answers from `known` pages."""
    def answer(req: Seen) -> Reply:
        if req.arg("list") == "search":
            return Reply(200, {"batchcomplete": True, "query": {"searchinfo": {"totalhits": len(search_titles)},
                                                                "search": [{"ns": 0, "title": t, "pageid": i}
                                                                           for i, t in enumerate(search_titles)]}})
        pages, normalized = [], []
        for title in req.arg("titles").split("|"):
            if title[0].islower():                              # MediaWiki capitalises the first letter
                normalized.append({"from": title, "to": title[0].upper() + title[1:]})
                title = title[0].upper() + title[1:]
            page = known.get(title)
            if page is None:
                pages.append({"ns": 0, "title": title, "missing": True})
                continue
            entry = {"pageid": hash(title) % 1000, "ns": 0, "title": title, "extract": page["extract"],
                     "fullurl": page.get("fullurl", f"https://de.wikipedia.org/wiki/{title}")}
            if page.get("disambiguation"):
                entry["pageprops"] = {"disambiguation": ""}
            pages.append(entry)
        return Reply(200, {"batchcomplete": True, "query": {"normalized": normalized, "pages": pages}})
    return answer


@pytest.fixture
def wiki(fake, monkeypatch):
    monkeypatch.setenv("CANVAS2GRAPH_WIKIPEDIA_URL", fake.url + "/{lang}")
    return fake


async def test_wikipedia_searches_then_reads_introductions_of_the_language_edition(wiki):
    wiki.on("GET", "/de/w/api.php", mediawiki(["Retrieval-augmented generation", "RAG", "Large language model"]))
    events = await run_turn(node_dsl("Wikipedia:W", "Wikipedia", {"query": "sys.query", "language": "de", "top_n": 3}),
                            "retrieval augmented generation")
    search, extracts = wiki.requests
    assert {k: v[0] for k, v in search.query.items()} == {
        "action": "query", "format": "json", "formatversion": "2", "list": "search",
        "srsearch": "retrieval augmented generation", "srlimit": "3", "srprop": ""}
    assert extracts.arg("prop") == "extracts|info|pageprops" and extracts.arg("exintro") == "1"
    assert extracts.arg("explaintext") == "1" and extracts.arg("inprop") == "url"
    assert extracts.arg("titles") == "Retrieval-augmented generation|RAG|Large language model"
    out = finished(events, "Wikipedia:W")["outputs"]
    assert "json" not in out                                  # as RAGFlow: formalized_content only
    chunks = list(message_end(events)["reference"]["chunks"].values())
    assert [c["document_name"] for c in chunks] == ["Retrieval-augmented generation", "Large language model"]
    assert chunks[0]["url"] == "https://de.wikipedia.org/wiki/Retrieval-augmented_generation"
    assert chunks[0]["content"] == PAGES["Retrieval-augmented generation"]["extract"]
    assert "RAG may refer to" not in out["formalized_content"]


async def test_introductions_are_read_twenty_titles_at_a_time_and_follow_normalised_titles(wiki):
    titles = [f"topic {i}" for i in range(25)]
    wiki.on("GET", "/en/w/api.php", mediawiki(titles, {f"Topic {i}": {"extract": f"About topic {i}."} for i in range(25)}))
    node = build("Wikipedia:W", "Wikipedia", {"query": "sys.query", "top_n": 25})
    out = await node.execute({"query": "topics"}, context())
    assert [len(r.arg("titles").split("|")) for r in wiki.requests[1:]] == [20, 5]
    names = [c["document_name"] for c in out.chunks]         # (25 chunks may share an [ID:n], as in RAGFlow)
    assert names == [f"Topic {i}" for i in range(25)]


async def test_nothing_found_is_empty(wiki):
    wiki.on("GET", "/en/w/api.php", mediawiki([]))
    node = build("Wikipedia:W", "Wikipedia", {"query": "sys.query"})
    result = await node.run(state("qqqzzz"), context())
    assert result.outputs == {"formalized_content": ""} and "reference" not in result.writes


async def test_an_api_error_is_a_component_error(wiki):
    wiki.on("GET", "/en/w/api.php", Reply(200, {"error": {"code": "maxlag", "info": "Waiting for a database server"}}))
    events = await run_turn(node_dsl("Wikipedia:W", "Wikipedia", {"query": "sys.query"}), "x")
    assert finished(events, "Wikipedia:W")["error"] == "Wikipedia refused the request: Waiting for a database server"


async def test_http_failures_timeouts_and_unreachable_servers(wiki, monkeypatch):
    wiki.on("GET", "/en/w/api.php", Reply(503, "<html><body>Service Temporarily Unavailable</body></html>", "text/html"))
    events = await run_turn(node_dsl("Wikipedia:W", "Wikipedia", {"query": "sys.query"}), "x")
    assert finished(events, "Wikipedia:W")["error"] == \
        "Wikipedia answered HTTP 503 Service Unavailable: Service Temporarily Unavailable"

    monkeypatch.setenv("CANVAS2GRAPH_TOOL_TIMEOUT", "0.3")
    wiki.on("GET", "/en/w/api.php", Reply(200, {}, delay=30))
    events = await run_turn(node_dsl("Wikipedia:W", "Wikipedia", {"query": "sys.query"}), "x")
    assert finished(events, "Wikipedia:W")["error"] == f"Wikipedia did not answer within 0.3 s ({wiki.url}/en/w/api.php)"

    url = closed_port_url()
    monkeypatch.setenv("CANVAS2GRAPH_WIKIPEDIA_URL", url)          # one server for every edition
    events = await run_turn(node_dsl("Wikipedia:W", "Wikipedia", {"query": "sys.query"}), "x")
    assert finished(events, "Wikipedia:W")["error"].startswith(f"cannot reach Wikipedia at {url}/w/api.php: ")


async def test_as_agent_tool_pages_are_citable(wiki):
    wiki.on("GET", "/en/w/api.php", mediawiki(["Large language model"]))
    tool = {"component_name": "Wikipedia", "name": "Wikipedia", "params": {"language": "en", "top_n": 10}}
    call = {"name": "wikipedia_search_0", "arguments": {"query": "LLM"}}
    events = await run_turn(agent_dsl(tool), "q", {"replies": [{"tool_calls": [call]}], "auto_reply": "done"})
    [chunk] = message_end(events)["reference"]["chunks"].values()
    assert chunk["document_name"] == "Large language model"
    assert "Content:\nA large language model" in tool_messages()[0]


@pytest.mark.parametrize("params, field", [({"language": "english"}, "params.language"), ({"top_n": 0}, "params.top_n")])
def test_bad_params_are_compile_errors_naming_the_field(params, field):
    [error] = errors("Wikipedia", params)
    assert error.field == field

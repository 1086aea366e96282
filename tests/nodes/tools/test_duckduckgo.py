"""DuckDuckGo reads the HTML front end for web results (following its Next form) and /news.js for news;
ads are skipped, redirect links unwrapped, results citable; rate limits and failures are clear errors."""
from __future__ import annotations

from urllib.parse import quote

import pytest

from tests.nodes.helpers import build, context, errors, state
from tests.nodes.tools.support import (Reply, Seen, agent_dsl, closed_port_url, finished, message_end, node_dsl,
                                       run_turn, tool_messages)


def result(n: int) -> str:
    target = quote(f"https://site{n}.example/page?id={n}", safe="")
    return f"""
<div class="result results_links results_links_deep web-result ">
  <div class="links_main links_deep result__body">
    <h2 class="result__title"><a rel="nofollow" class="result__a" href="//duckduckgo.com/l/?uddg={target}&amp;rut=r{n}">Result <b>{n}</b></a></h2>
    <div class="result__extras"><a class="result__url" href="//duckduckgo.com/l/?uddg={target}">site{n}.example</a></div>
    <a class="result__snippet" href="//duckduckgo.com/l/?uddg={target}">Snippet about <b>ragflow</b> number {n}.</a>
  </div>
</div>"""


AD = """
<div class="result results_links results_links_deep result--ad ">
  <h2 class="result__title"><a class="result__a" href="https://duckduckgo.com/y.js?ad_provider=x&amp;u3=ad">Buy now</a></h2>
  <a class="result__snippet" href="https://duckduckgo.com/y.js?ad_provider=x">An advertisement.</a>
</div>"""


def nav(label: str, start: int) -> str:
    return f"""<div class="nav-link"><form action="/html/" method="post">
<input type="submit" class="btn btn--alt" value="{label}" />
<input type="hidden" name="q" value="ragflow" /><input type="hidden" name="s" value="{start}" />
<input type="hidden" name="dc" value="{start + 1}" /><input type="hidden" name="vqd" value="4-1234" />
<input type="hidden" name="kl" value="wt-wt" /></form></div>"""


def html_page(numbers: range, *, prev: bool = False, more: bool = True) -> str:
    navs = (nav("&lt; Previous", numbers.start - 10) if prev else "") + (nav("Next", numbers.stop) if more else "")
    body = (AD if numbers.start == 0 else "") + "".join(result(n) for n in numbers)
    return f"<html><body><div id='links' class='results'>{body}</div>{navs}</body></html>"


def html_front_end(req: Seen) -> Reply:
    start = int(req.form().get("s", "0") or 0)
    return Reply(200, html_page(range(start, start + 10), prev=start > 0, more=start < 20), "text/html; charset=utf-8")


NEWS_FRONT = "<html><script>var x = 1; vqd='4-98765432109876543210';</script></html>"
NEWS = {"results": [
    {"date": 1735689600, "title": "RAGFlow released", "excerpt": "A new <b>RAGFlow</b> version &amp; agents.",
     "url": "https://news.example/ragflow", "image": "https://news.example/i.png", "source": "Example News"},
    {"date": 1735603200, "title": "RAG in practice", "excerpt": "Retrieval everywhere.", "url": "https://news.example/rag",
     "source": "Other News"}], "next": None}


@pytest.fixture
def ddg(fake, monkeypatch):
    monkeypatch.setenv("CANVAS2GRAPH_DUCKDUCKGO_HTML_URL", fake.url)
    monkeypatch.setenv("CANVAS2GRAPH_DUCKDUCKGO_URL", fake.url)
    return fake


def ddg_node(**params):
    return node_dsl("DuckDuckGo:D", "DuckDuckGo", {"query": "sys.query", **params})


async def test_web_search_posts_the_query_to_the_html_front_end(ddg):
    ddg.on("POST", "/html/", html_front_end)
    events = await run_turn(ddg_node(top_n=5), "ragflow")
    [req] = ddg.requests
    assert req.form() == {"q": "ragflow", "kl": "wt-wt", "b": ""}
    out = finished(events, "DuckDuckGo:D")["outputs"]
    assert out["json"][0] == {"title": "Result 0", "href": "https://site0.example/page?id=0",
                              "body": "Snippet about ragflow number 0."}
    assert len(out["json"]) == 5 and all("duckduckgo.com/y.js" not in r["href"] for r in out["json"])
    chunks = list(message_end(events)["reference"]["chunks"].values())
    assert [c["url"] for c in chunks] == [f"https://site{n}.example/page?id={n}" for n in range(5)]
    assert finished(events, "DuckDuckGo:D")["inputs"] == {"query": "ragflow", "channel": "text"}


async def test_web_search_follows_the_next_form_until_top_n_or_the_last_page(ddg):
    ddg.on("POST", "/html/", html_front_end)
    node = build("DuckDuckGo:D", "DuckDuckGo", {"query": "sys.query", "top_n": 50})
    result = await node.run(state("ragflow"), context())
    assert [r.form().get("s") for r in ddg.requests] == [None, "10", "20"]
    assert ddg.requests[1].form()["vqd"] == "4-1234"
    assert len(result.outputs["json"]) == 30                       # three pages, then no Next


async def test_no_results_is_empty(ddg):
    ddg.on("POST", "/html/", Reply(200, "<html><div class='no-results'>No results.</div></html>", "text/html"))
    node = build("DuckDuckGo:D", "DuckDuckGo", {"query": "sys.query"})
    result = await node.run(state("qqqzzz"), context())
    assert result.outputs == {"formalized_content": "", "json": []}


async def test_news_gets_a_search_token_then_reads_news_js(ddg):
    ddg.on("GET", "/", Reply(200, NEWS_FRONT, "text/html"))
    ddg.on("GET", "/news.js", Reply(200, NEWS))
    events = await run_turn(ddg_node(channel="news"), "ragflow")
    front, news = ddg.requests
    assert front.arg("q") == "ragflow"
    assert {k: v[0] for k, v in news.query.items()} == {"l": "wt-wt", "o": "json", "noamp": "1", "q": "ragflow",
                                                         "vqd": "4-98765432109876543210", "p": "-1", "s": "0"}
    out = finished(events, "DuckDuckGo:D")["outputs"]
    assert out["json"][0] == {"date": "2025-01-01T00:00:00", "title": "RAGFlow released",
                              "body": "A new RAGFlow version & agents.", "url": "https://news.example/ragflow",
                              "image": "https://news.example/i.png", "source": "Example News"}
    assert [c["url"] for c in message_end(events)["reference"]["chunks"].values()] == \
        ["https://news.example/ragflow", "https://news.example/rag"]


async def test_news_without_a_token_is_an_error(ddg):
    ddg.on("GET", "/", Reply(200, "<html>nothing here</html>", "text/html"))
    events = await run_turn(ddg_node(channel="news"), "ragflow")
    assert finished(events, "DuckDuckGo:D")["error"] == "DuckDuckGo gave no search token (vqd) for the news search"


async def test_as_agent_tool_the_model_picks_the_channel(ddg):
    ddg.on("GET", "/", Reply(200, NEWS_FRONT, "text/html"))
    ddg.on("GET", "/news.js", Reply(200, NEWS))
    ddg.on("POST", "/html/", html_front_end)
    tool = {"component_name": "DuckDuckGo", "name": "DuckDuckGo", "params": {"top_n": 2, "channel": "text"}}
    calls = [{"name": "duckduckgo_search_0", "arguments": {"query": "ragflow", "channel": "news"}},
             {"name": "duckduckgo_search_0", "arguments": {"query": "ragflow"}}]
    events = await run_turn(agent_dsl(tool), "q", {"replies": [{"tool_calls": calls}], "auto_reply": "done"})
    assert sorted(r.path for r in ddg.requests) == ["/", "/html/", "/news.js"]
    news_text, web_text = tool_messages()
    assert "URL: https://news.example/ragflow" in news_text and "URL: https://site0.example/page?id=0" in web_text
    assert len(message_end(events)["reference"]["chunks"]) == 4


async def test_rate_limiting_and_failures_are_clear_errors(ddg, monkeypatch):
    ddg.on("POST", "/html/", Reply(202, "<html>anomaly challenge</html>", "text/html"))
    events = await run_turn(ddg_node(), "ragflow")
    assert finished(events, "DuckDuckGo:D")["error"] == \
        "DuckDuckGo is rate limiting these searches (HTTP 202); try again later"

    ddg.on("POST", "/html/", Reply(403, "<html>Forbidden</html>", "text/html"))
    events = await run_turn(ddg_node(), "ragflow")
    assert finished(events, "DuckDuckGo:D")["error"] == "DuckDuckGo answered HTTP 403 Forbidden: Forbidden"

    monkeypatch.setenv("CANVAS2GRAPH_TOOL_TIMEOUT", "0.3")
    ddg.on("POST", "/html/", Reply(200, "", delay=30))
    events = await run_turn(ddg_node(), "ragflow")
    assert finished(events, "DuckDuckGo:D")["error"] == f"DuckDuckGo did not answer within 0.3 s ({ddg.url}/html/)"

    url = closed_port_url()
    monkeypatch.setenv("CANVAS2GRAPH_DUCKDUCKGO_HTML_URL", url)
    events = await run_turn(ddg_node(), "ragflow")
    assert finished(events, "DuckDuckGo:D")["error"].startswith(f"cannot reach DuckDuckGo at {url}/html/: ")


@pytest.mark.parametrize("params, field", [({"channel": "general"}, "params.channel"), ({"top_n": 0}, "params.top_n")])
def test_bad_params_are_compile_errors_naming_the_field(params, field):
    [error] = errors("DuckDuckGo", params)
    assert error.field == field

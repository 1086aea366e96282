"""Crawler fetches one page over http(s) and returns it as markdown, cleaned HTML or main text; it refuses
other schemes and private addresses (unless allowed), checks every redirect, and fails clearly."""
from __future__ import annotations

import gzip

import pytest

from canvas2graph.runtime.services.netguard import HostRefused
from tests.fake_dns import FakeDNS
from tests.nodes.helpers import build, context, errors, state
from tests.nodes.tools.support import Reply, agent_dsl, closed_port_url, finished, node_dsl, run_turn, tool_messages

PAGE = """<!doctype html><html><head><title>RAGFlow</title><style>body { color: red }</style>
<script>track()</script></head><body>
<nav>Menu <a href="/">Home</a></nav>
<main><h1 class="hero">RAGFlow <b>agents</b></h1>
<p>Agents are <a href="/docs/agents" onclick="x()">graphs</a> of components.<br>They call tools.</p>
<ul><li>Retrieval</li><li>Web search</li></ul><!-- hidden note --><script>evil()</script>
<img src="/logo.png" alt="logo" width="10"></main>
<footer>Copyright</footer></body></html>"""


@pytest.fixture
def site(fake, monkeypatch):
    monkeypatch.setenv("CANVAS2GRAPH_CRAWLER_ALLOW_PRIVATE", "1")      # the test site lives on 127.0.0.1
    fake.on("GET", "/page", Reply(200, PAGE, "text/html; charset=utf-8"))
    return fake


async def crawl(url: str, ctx=None, **params) -> str:
    node = build("Crawler:C", "Crawler", {"query": "sys.query", **params})
    result = await node.run(state(url), ctx or context())
    return result.outputs["formalized_content"]


async def test_markdown_is_the_default_with_absolute_links(site):
    text = await crawl(f"{site.url}/page")
    assert text == (f"Menu [Home]({site.url}/)\n\n# RAGFlow **agents**\n\n"
                    f"Agents are [graphs]({site.url}/docs/agents) of components.\nThey call tools.\n\n"
                    f"- Retrieval\n- Web search\n\n![logo]({site.url}/logo.png)\nCopyright")
    [req] = site.requests
    assert req.method == "GET" and req.path == "/page" and "text/html" in req.headers["accept"]


async def test_html_is_the_body_without_scripts_styles_comments_or_event_attributes(site):
    html = await crawl(f"{site.url}/page", extract_type="html")
    assert html.startswith("<body>") and "<h1>RAGFlow <b>agents</b></h1>" in html
    assert f'<a href="{site.url}/docs/agents">graphs</a>' in html
    for gone in ("script", "track()", "evil()", "color: red", "hidden note", "onclick", "class=", "width="):
        assert gone not in html


async def test_content_is_the_main_text_without_page_furniture(site):
    text = await crawl(f"{site.url}/page", extract_type="content")
    assert text == "RAGFlow agents\n\nAgents are graphs of components.\nThey call tools.\n\nRetrieval\n\nWeb search"


async def test_plain_text_pages_come_back_as_they_are_and_binary_pages_are_refused(site):
    site.on("GET", "/notes.txt", Reply(200, "line one\n  line two\n", "text/plain"))
    assert await crawl(f"{site.url}/notes.txt", extract_type="html") == "line one\n  line two\n"
    site.on("GET", "/paper.pdf", Reply(200, b"%PDF-1.7", "application/pdf"))
    with pytest.raises(Exception, match=r"is application/pdf, not HTML or text"):
        await crawl(f"{site.url}/paper.pdf")


async def test_compressed_pages_are_read(site):
    site.on("GET", "/gz", Reply(200, gzip.compress(PAGE.encode()), "text/html", headers={"Content-Encoding": "gzip"}))
    assert (await crawl(f"{site.url}/gz", extract_type="content")).startswith("RAGFlow agents")


async def test_redirects_are_followed_and_each_target_is_checked(site):
    site.on("GET", "/old", Reply(301, "", headers={"Location": "/page"}))
    assert (await crawl(f"{site.url}/old", extract_type="content")).startswith("RAGFlow agents")
    assert [r.path for r in site.requests] == ["/old", "/page"]
    site.on("GET", "/leave", Reply(302, "", headers={"Location": "file:///etc/passwd"}))
    with pytest.raises(Exception, match="URL not valid: 'file:///etc/passwd' is not an http:// or https:// address"):
        await crawl(f"{site.url}/leave")
    site.on("GET", "/loop", Reply(302, "", headers={"Location": "/loop"}))
    with pytest.raises(Exception, match="redirects more than 5 times"):
        await crawl(f"{site.url}/loop")


async def test_private_addresses_are_refused_unless_allowed(fake, monkeypatch):
    fake.on("GET", "/page", Reply(200, PAGE, "text/html"))
    with pytest.raises(Exception, match=r"127.0.0.1 is a private, loopback or otherwise non-public address; "
                                        r"set CANVAS2GRAPH_CRAWLER_ALLOW_PRIVATE=1 to let Crawler connect"):
        await crawl(f"{fake.url}/page")
    with pytest.raises(Exception, match=r"localhost \((127.0.0.1|::1)\) is a private, loopback"):
        await crawl(f"http://localhost:{fake.url.rsplit(':', 1)[1]}/page")
    assert fake.requests == []


async def test_a_redirect_from_a_public_page_to_a_private_address_is_refused(fake, monkeypatch):
    dns = FakeDNS.install(monkeypatch)                    # news.example stands for a public site
    dns.names["news.example"] = ["127.0.0.1"]
    port = fake.url.rsplit(":", 1)[1]
    fake.on("GET", "/story", Reply(302, "", headers={"Location": "http://169.254.169.254/latest/meta-data/"}))
    with pytest.raises(HostRefused, match="169.254.169.254 is a private, loopback or otherwise non-public address"):
        await crawl(f"http://news.example:{port}/story")
    assert [r.path for r in fake.requests] == ["/story"]


async def test_a_proxy_on_a_private_address_is_refused(fake, monkeypatch):
    dns = FakeDNS.install(monkeypatch)
    dns.public = set()
    dns.names["news.example"] = ["93.184.216.34"]
    fake.on("GET", "/story", Reply(200, PAGE, "text/html"))
    with pytest.raises(HostRefused, match=r"127.0.0.1 is a private, loopback or otherwise non-public address; "
                                          r"set CANVAS2GRAPH_CRAWLER_ALLOW_PRIVATE=1"):
        await crawl("http://news.example/story", proxy=fake.url)
    assert fake.requests == []


async def test_behind_a_proxy_a_private_page_is_refused(fake, monkeypatch):
    """The proxy resolves the page's host in its own network: the page must pass the guard too."""
    dns = FakeDNS.install(monkeypatch)
    dns.names["proxy.example"] = ["127.0.0.1"]
    port = fake.url.rsplit(":", 1)[1]
    with pytest.raises(HostRefused, match="10.0.0.8 is a private"):
        await crawl("http://10.0.0.8/admin", proxy=f"http://proxy.example:{port}")
    assert fake.requests == []


async def test_a_run_may_allow_private_hosts_to_the_crawler(fake):
    fake.on("GET", "/page", Reply(200, PAGE, "text/html"))
    ctx = context()
    ctx.extras["allow_private"] = {"Crawler"}        # as embedders and servers configure runs
    assert "RAGFlow **agents**" in await crawl(f"{fake.url}/page", ctx)


async def test_only_http_and_https_are_crawled():
    for url in ("file:///etc/passwd", "ftp://example.com/x", "gopher://example.com", "javascript:alert(1)"):
        with pytest.raises(Exception, match="URL not valid"):
            await crawl(url)


async def test_oversized_pages_are_refused_while_they_arrive(site, monkeypatch):
    monkeypatch.setattr("canvas2graph.nodes.tools.crawler.MAX_BYTES", 2_000_000)
    site.on("GET", "/big", Reply(200, "<p>" + "x" * 3_000_000 + "</p>", "text/html"))
    with pytest.raises(Exception, match=rf"{site.url}/big is larger than 2 MB"):
        await crawl(f"{site.url}/big")


async def test_http_errors_timeouts_and_unreachable_sites_are_component_errors(site, monkeypatch):
    site.on("GET", "/gone", Reply(404, "<html><h1>Not Found</h1></html>", "text/html"))
    events = await run_turn(node_dsl("Crawler:C", "Crawler", {"query": "sys.query"}), f"{site.url}/gone")
    assert finished(events, "Crawler:C")["error"] == "Crawler answered HTTP 404 Not Found: Not Found"

    monkeypatch.setenv("CANVAS2GRAPH_TOOL_TIMEOUT", "0.3")
    site.on("GET", "/slow", Reply(200, PAGE, "text/html", delay=30))
    events = await run_turn(node_dsl("Crawler:C", "Crawler", {"query": "sys.query"}), f"{site.url}/slow")
    assert finished(events, "Crawler:C")["error"] == f"Crawler did not answer within 0.3 s ({site.url}/slow)"

    url = closed_port_url()
    events = await run_turn(node_dsl("Crawler:C", "Crawler", {"query": "sys.query"}), f"{url}/page")
    assert finished(events, "Crawler:C")["error"].startswith(f"cannot reach Crawler at {url}/page: ")


async def test_as_a_node_the_page_feeds_downstream_components(site):
    events = await run_turn(node_dsl("Crawler:C", "Crawler", {"query": "sys.query", "extract_type": "content"}),
                            f"{site.url}/page")
    assert finished(events, "Crawler:C")["inputs"] == {"query": f"{site.url}/page"}
    assert events[-1]["data"]["outputs"]["content"].startswith("RAGFlow agents")


async def test_as_agent_tool_the_model_reads_the_page(site):
    tool = {"component_name": "Crawler", "name": "Crawler", "params": {"extract_type": "markdown"}}
    calls = [{"name": "web_crawler_0", "arguments": {"query": f"{site.url}/page"}},
             {"name": "web_crawler_0", "arguments": {"query": "file:///etc/passwd"}}]
    await run_turn(agent_dsl(tool), "q", {"replies": [{"tool_calls": calls}], "auto_reply": "done"})
    page, refused = tool_messages()
    assert page.startswith(f"Menu [Home]({site.url}/)\n\n# RAGFlow **agents**")
    assert refused == "Crawler error: URL not valid: 'file:///etc/passwd' is not an http:// or https:// address"


@pytest.mark.parametrize("params, field", [({"extract_type": "pdf"}, "params.extract_type"),
                                           ({"proxy": "socks5://127.0.0.1:1080"}, "params.proxy")])
def test_bad_params_are_compile_errors_naming_the_field(params, field):
    [error] = errors("Crawler", params)
    assert error.field == field

"""Crawler: fetch one web page and return it as markdown, cleaned HTML or its main text, SPEC 3.17.

RAGFlow drives a headless browser (crawl4ai); this fetches the page over HTTP with httpx (no
JavaScript runs) and converts it with BeautifulSoup and markdownify. As RAGFlow's SSRF guard does,
only http and https URLs are fetched, and every connection goes through the host guard
(`canvas2graph.runtime.services.netguard`): hosts that resolve to private, loopback, link-local or otherwise non-public
addresses are refused, at every redirect and for the `proxy` too (the page's host is checked as
well, since the proxy resolves it); `CANVAS2GRAPH_CRAWLER_ALLOW_PRIVATE=1` lifts that for intranet
pages (and tests).
"""
from __future__ import annotations

import re
from urllib.parse import urljoin, urlsplit

from pydantic import field_validator

from canvas2graph.nodes.base import Params
from canvas2graph.nodes.registry import register
from canvas2graph.nodes.tool import Tool, ToolArg, ToolError, ToolOutput
from canvas2graph.nodes.tools._web import request, text_arg, timeout_for, where
from canvas2graph.runtime.services.html_text import block_lines
from canvas2graph.runtime.services.netguard import HostGuard

MAX_REDIRECTS = 5
MAX_BYTES = 10_000_000
HTML_TYPES = ("text/html", "application/xhtml+xml")
TEXT_TYPES = ("text/", "application/json", "application/xml", "application/ld+json")
# never content: code, styling, embedded objects and the document's metadata
DROPPED_TAGS = ("script", "style", "noscript", "template", "iframe", "svg", "canvas", "object", "embed",
                "link", "meta", "head")
KEPT_ATTRIBUTES = {"href", "src", "alt", "title", "colspan", "rowspan"}
# page furniture around the main text
FURNITURE = ("nav", "header", "footer", "aside", "form", "button")
BLOCKS = ("p", "div", "section", "article", "main", "li", "ul", "ol", "dl", "dt", "dd", "tr", "table", "pre",
          "blockquote", "figcaption", "h1", "h2", "h3", "h4", "h5", "h6", "hr")


class CrawlerParams(Params):
    proxy: str | None = None
    extract_type: str = "markdown"

    @field_validator("extract_type")
    @classmethod
    def _extract_type(cls, v: str) -> str:
        if v not in ("html", "markdown", "content"):
            raise ValueError(f"extract_type must be html, markdown or content, not {v!r}")
        return v

    @field_validator("proxy")
    @classmethod
    def _proxy(cls, v: str | None) -> str | None:
        if not v:
            return None
        if urlsplit(v).scheme not in ("http", "https"):
            raise ValueError(f"proxy must be an http:// or https:// proxy URL, not {v!r}")
        return v


@register("Crawler", CrawlerParams, outputs=lambda p: {"formalized_content"})
class Crawler(Tool):
    function_name = "web_crawler"
    tool_description = "Read a web page: returns its content as markdown, as cleaned HTML or as its main text."
    args = {"query": ToolArg("string", "The full URL of the page, starting with http:// or https://.", required=True)}

    def thoughts(self, state) -> str:
        return f"Reading the page {self.node_args(state).get('query', '')}"

    async def execute(self, args: dict, ctx) -> ToolOutput:
        url = text_arg(args, "query")
        if not url:
            return ToolOutput({"formalized_content": ""})
        response = await fetch(url, self.params.proxy, ctx)
        kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
        if kind in HTML_TYPES or (not kind and response.text.lstrip()[:1] == "<"):
            text = convert(response.text, self.params.extract_type, str(response.url))
        elif kind.startswith(TEXT_TYPES):
            text = response.text
        else:
            raise ToolError(f"the page at {where(str(response.url))} is {kind or 'of unknown type'}, not HTML or text")
        return ToolOutput({"formalized_content": text})


async def fetch(url: str, proxy: str | None, ctx=None):
    """GET the page, following up to MAX_REDIRECTS redirects; the guard checks every connection."""
    guard = HostGuard.of("Crawler", ctx)
    for _ in range(MAX_REDIRECTS + 1):
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ToolError(f"URL not valid: {url!r} is not an http:// or https:// address")
        response = await request("Crawler", "GET", url, timeout=timeout_for(60), proxy=proxy, guard=guard,
                                 follow_redirects=False, max_bytes=MAX_BYTES,
                                 headers={"Accept": "text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.5"})
        location = response.headers.get("location")
        if response.status_code in (301, 302, 303, 307, 308) and location:
            url = urljoin(url, location)
            continue
        return response
    raise ToolError(f"the page at {where(url)} redirects more than {MAX_REDIRECTS} times")


def convert(html: str, extract_type: str, base_url: str = "") -> str:
    """The page as cleaned HTML, markdown, or its main text; links and images point to absolute URLs."""
    from bs4 import BeautifulSoup, Comment    # here: `canvas2graph compile` loads the tool without these
    from markdownify import markdownify
    soup = BeautifulSoup(html, "html.parser")
    for tag in soup.find_all(DROPPED_TAGS):
        tag.decompose()
    for comment in soup.find_all(string=lambda s: isinstance(s, Comment)):
        comment.extract()
    for tag in soup.find_all(True):
        tag.attrs = {k: v for k, v in tag.attrs.items() if k in KEPT_ATTRIBUTES}
        for key in ("href", "src"):
            if base_url and isinstance(tag.attrs.get(key), str):
                tag.attrs[key] = urljoin(base_url, tag.attrs[key])
    root = soup.body or soup
    if extract_type == "html":
        return str(root).strip()
    if extract_type == "markdown":
        return _tidy(markdownify(str(root), heading_style="ATX", bullets="-"))
    main = root.find("main") or root.find("article") or root
    for tag in main.find_all(FURNITURE):
        tag.decompose()
    return _tidy("\n".join(block_lines(main, BLOCKS)))


def _tidy(text: str) -> str:
    lines = [line.rstrip() for line in text.splitlines()]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()

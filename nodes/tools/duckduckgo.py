"""DuckDuckGo: the keyless endpoints the `ddgs`/`duckduckgo_search` library RAGFlow uses reads, SPEC 3.17.

- Web results (`channel` general/text): the HTML front end, `POST https://html.duckduckgo.com/html/`
  with the form field `q`, read page by page (the "Next" form) until `top_n` results.
- News (`channel` news): a search token (`vqd`) from `https://duckduckgo.com/?q=...`, then the JSON
  endpoint `/news.js`.

These are implemented here with httpx rather than through the library, so the base URLs can be
pointed elsewhere: `CANVAS2GRAPH_DUCKDUCKGO_HTML_URL` and `CANVAS2GRAPH_DUCKDUCKGO_URL`. The `json`
output has the library's shapes: `{title, href, body}` and `{date, title, body, url, image, source}`.
"""
from __future__ import annotations

import re
from datetime import datetime, timezone
from html import unescape
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bs4 import BeautifulSoup
from pydantic import Field, field_validator

from canvas2graph.nodes.base import Params
from canvas2graph.nodes.registry import register
from canvas2graph.nodes.tool import Tool, ToolArg, ToolError, ToolOutput, endpoint, found
from canvas2graph.nodes.tools._web import ServiceUnavailable, json_body, request, text_arg, timeout_for, web_chunks

MAX_PAGES = 5                  # pages read for one search, whatever top_n asks
REGION = "wt-wt"               # no region, as the library's default
_VQD = re.compile(r"""vqd=["']?([\d-]+)""")
_TAGS = re.compile(r"<[^>]+>")


class DuckDuckGoParams(Params):
    top_n: int = Field(10, gt=0)
    channel: str = "text"

    @field_validator("channel")
    @classmethod
    def _channel(cls, v: str) -> str:
        if v not in ("text", "news"):
            raise ValueError(f"channel must be text (web search) or news, not {v!r}")
        return v


@register("DuckDuckGo", DuckDuckGoParams, outputs=lambda p: {"formalized_content", "json"})
class DuckDuckGo(Tool):
    function_name = "duckduckgo_search"
    tool_description = "Web and news search through DuckDuckGo, a privacy-focused search engine."
    args = {
        "query": ToolArg("string", "The keywords to search for: the key terms of the request, synonyms included.",
                         required=True),
        "channel": ToolArg("string", "general (default) searches the web; news searches recent news coverage of "
                           "current events.", default=None, enum=("general", "news")),
    }

    def thoughts(self, state) -> str:
        return f"Searching DuckDuckGo for: {self.node_args(state).get('query', '')}"

    async def execute(self, args: dict, ctx) -> ToolOutput:
        query = text_arg(args, "query")
        if not query:
            return ToolOutput({"formalized_content": ""})
        # the model says general/news, the canvas form text/news
        channel = text_arg(args, "channel") or self.params.channel
        if channel not in ("general", "text", "news"):
            raise ToolError(f"channel must be general or news, not {channel!r}")
        top_n = self.params.top_n
        if channel == "news":
            results = await news(query, top_n)
            chunks = web_chunks(results, title=lambda r: r["title"], url=lambda r: r["url"], content=lambda r: r["body"])
        else:
            results = await web(query, top_n)
            chunks = web_chunks(results, title=lambda r: r["title"], url=lambda r: r["href"], content=lambda r: r["body"])
        return found(chunks, results)


async def web(query: str, top_n: int) -> list[dict]:
    """Web results from the HTML front end, following its "Next" form until top_n."""
    url = f"{endpoint('duckduckgo_html', 'https://html.duckduckgo.com')}/html/"
    form: dict[str, str] = {"q": query, "kl": REGION, "b": ""}
    results: list[dict] = []
    seen: set[str] = set()
    for _ in range(MAX_PAGES):
        response = await request("DuckDuckGo", "POST", url, data=form, timeout=timeout_for(30))
        _refuse_rate_limit(response.status_code)
        from bs4 import BeautifulSoup     # here: `canvas2graph compile` loads the tool without it
        page = BeautifulSoup(response.text, "html.parser")
        if page.select_one("div.no-results"):
            break
        for item in page.select("div.result"):
            if "result--ad" in (item.get("class") or []):
                continue
            link = item.select_one("a.result__a")
            href = _target(link.get("href", "")) if link else ""
            if not href or href in seen:
                continue
            seen.add(href)
            snippet = item.select_one(".result__snippet")
            results.append({"title": link.get_text(" ", strip=True), "href": href,
                            "body": snippet.get_text(" ", strip=True) if snippet else ""})
        if len(results) >= top_n:
            break
        form = _next_page(page)
        if form is None:
            break
    return results[:top_n]


async def news(query: str, top_n: int) -> list[dict]:
    """News from /news.js, with the search token the front page hands out for the query."""
    base = endpoint("duckduckgo", "https://duckduckgo.com")
    front = await request("DuckDuckGo", "GET", f"{base}/", params={"q": query}, timeout=timeout_for(30))
    _refuse_rate_limit(front.status_code)
    token = _VQD.search(front.text)
    if token is None:
        raise ToolError("DuckDuckGo gave no search token (vqd) for the news search")
    params: dict[str, Any] = {"l": REGION, "o": "json", "noamp": "1", "q": query, "vqd": token.group(1), "p": "-1",
                              "s": 0}
    results: list[dict] = []
    seen: set[str] = set()
    for _ in range(MAX_PAGES):
        response = await request("DuckDuckGo", "GET", f"{base}/news.js", params=params, timeout=timeout_for(30))
        _refuse_rate_limit(response.status_code)
        data = json_body("DuckDuckGo", response)
        rows = data.get("results") if isinstance(data, dict) else None
        if not rows:
            break
        for row in rows:
            if not isinstance(row, dict) or not row.get("url") or row["url"] in seen:
                continue
            seen.add(row["url"])
            results.append({"date": _iso(row.get("date")), "title": row.get("title", ""),
                             "body": unescape(_TAGS.sub("", row.get("excerpt") or "")), "url": row["url"],
                             "image": row.get("image"), "source": row.get("source")})
        following = data.get("next")
        if len(results) >= top_n or not following:
            break
        params["s"] = parse_qs(urlsplit(str(following)).query).get("s", [params["s"]])[0]
    return results[:top_n]


def _refuse_rate_limit(status: int) -> None:
    # DuckDuckGo answers 202 with a challenge page instead of results when it rate-limits a client
    if status == 202:
        raise ServiceUnavailable("DuckDuckGo is rate limiting these searches (HTTP 202); try again later")


def _target(href: str) -> str:
    """The result's own URL: the HTML front end wraps it as //duckduckgo.com/l/?uddg=<url>."""
    parts = urlsplit(href if not href.startswith("//") else "https:" + href)
    if parts.path.startswith("/l/"):
        wrapped = parse_qs(parts.query).get("uddg")
        if wrapped:
            return unquote(wrapped[0])
    if "duckduckgo.com/y.js" in href:         # an ad
        return ""
    return href


def _next_page(page: BeautifulSoup) -> dict[str, str] | None:
    """The hidden fields of the "Next" button's form, or None on the last page."""
    for nav in reversed(page.select("div.nav-link")):
        form = nav.find("form")
        if form is None:
            continue
        button = form.find("input", attrs={"type": "submit"})
        fields = {i["name"]: i.get("value", "") for i in form.find_all("input", attrs={"type": "hidden"}) if i.get("name")}
        if fields and (button is None or "prev" not in str(button.get("value", "")).lower()):
            return fields
    return None


def _iso(stamp: Any) -> str | None:
    try:
        return datetime.fromtimestamp(int(stamp), tz=timezone.utc).replace(tzinfo=None).isoformat()
    except (TypeError, ValueError, OverflowError, OSError):
        return None

"""Wikipedia: the MediaWiki action API of the `language` edition (`/w/api.php`), SPEC 3.17.

Two calls, as the `wikipedia` library RAGFlow uses makes them: a full-text search for page titles,
then each page's introduction as plain text (TextExtracts) and its URL. Disambiguation pages are
skipped, as RAGFlow skips pages the library cannot open. The base URL is
`https://{lang}.wikipedia.org`, or `CANVAS2GRAPH_WIKIPEDIA_URL`, where `{lang}` stands for the
language (`http://127.0.0.1:8080/{lang}` for a local mirror of several editions).
"""
from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator

from canvas2graph.nodes.base import Params
from canvas2graph.nodes.registry import register
from canvas2graph.nodes.tool import Tool, ToolArg, ToolError, ToolOutput, endpoint, found
from canvas2graph.nodes.tools._web import json_body, request, text_arg, timeout_for, web_chunks

EXTRACTS_PER_CALL = 20       # TextExtracts returns at most 20 introductions per request

# The editions RAGFlow's WikipediaParam.check() accepts.
LANGUAGES = frozenset("""
af pl ar ast az bg nan bn be ca cs cy da de et el en es eo eu fa fr gl ko hy hi hr id it he ka lld la lv lt
hu mk arz ms min my nl ja nb nn ce uz pt kk ro ru ceb sk sl sr sh fi sv ta tt th tg azb tr uk ur vi war zh
yue""".split())


class WikipediaParams(Params):
    top_n: int = Field(10, gt=0)
    language: str = "en"

    @field_validator("language")
    @classmethod
    def _language(cls, v: str) -> str:
        if v not in LANGUAGES:
            raise ValueError(f"language must be a Wikipedia edition code such as en, de or zh, not {v!r}")
        return v


@register("Wikipedia", WikipediaParams, outputs=lambda p: {"formalized_content"})
class Wikipedia(Tool):
    function_name = "wikipedia_search"
    tool_description = ("Search Wikipedia, the free encyclopedia, and read the introductions of the matching "
                        "articles.")
    args = {"query": ToolArg("string", "What to look up: a specific subject, ideally the title of an article.",
                             required=True)}

    def thoughts(self, state) -> str:
        return f"Looking up Wikipedia for: {self.node_args(state).get('query', '')}"

    async def execute(self, args: dict, ctx) -> ToolOutput:
        query = text_arg(args, "query")
        if not query:
            return ToolOutput({"formalized_content": ""})
        api = f"{endpoint('wikipedia', 'https://{lang}.wikipedia.org').replace('{lang}', self.params.language)}/w/api.php"
        found_titles = await self._search(api, query)
        pages = await self._introductions(api, found_titles)
        chunks = web_chunks(pages, title=lambda p: p["title"], url=lambda p: p.get("fullurl"),
                            content=lambda p: p.get("extract"))
        out = found(chunks)
        out.outputs.pop("json", None)          # RAGFlow's Wikipedia sets formalized_content only
        return out

    async def _search(self, api: str, query: str) -> list[str]:
        data = await _call(api, {"list": "search", "srsearch": query, "srlimit": self.params.top_n, "srprop": ""})
        return [hit["title"] for hit in (data.get("query") or {}).get("search") or [] if hit.get("title")]

    async def _introductions(self, api: str, titles: list[str]) -> list[dict]:
        """The pages for `titles`, in search order, without missing and disambiguation pages."""
        by_title: dict[str, dict] = {}
        renamed: dict[str, str] = {}
        for start in range(0, len(titles), EXTRACTS_PER_CALL):
            batch = titles[start:start + EXTRACTS_PER_CALL]
            data = await _call(api, {"prop": "extracts|info|pageprops", "exintro": 1, "explaintext": 1,
                                     "exlimit": "max", "inprop": "url", "ppprop": "disambiguation", "redirects": 1,
                                     "titles": "|".join(batch)})
            q = data.get("query") or {}
            for step in (q.get("normalized") or []) + (q.get("redirects") or []):
                renamed[step["from"]] = step["to"]
            for page in q.get("pages") or []:
                by_title[page.get("title", "")] = page
        pages = []
        for title in titles:
            for _ in range(3):                 # a normalised title, then a redirect
                if title in by_title or title not in renamed:
                    break
                title = renamed[title]
            page = by_title.get(title)
            if page is None or page.get("missing") or "disambiguation" in (page.get("pageprops") or {}):
                continue
            pages.append(page)
        return pages


async def _call(api: str, params: dict[str, Any]) -> dict:
    response = await request("Wikipedia", "GET", api, timeout=timeout_for(30), params={
        "action": "query", "format": "json", "formatversion": 2, **params})
    data = json_body("Wikipedia", response)
    if not isinstance(data, dict):
        raise ToolError("Wikipedia answered with something other than a JSON object")
    if data.get("error"):
        err = data["error"]
        raise ToolError(f"Wikipedia refused the request: {err.get('info') or err.get('code') or err}")
    return data

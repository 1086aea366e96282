"""KeenableSearch: Keenable's web search API for agents (`POST /v1/search`), SPEC 3.17.

Keenable answers without a key on its public endpoint (`/v1/search/public`, the free tier); with a
key (`params.api_key` or `KEENABLE_API_KEY`, sent as `X-API-Key`) the keyed endpoint lifts the rate
limits and allows the `realtime` mode. The base URL is `https://api.keenable.ai`, or
`CANVAS2GRAPH_KEENABLE_URL` (RAGFlow's own `KEENABLE_API_URL` is honoured too). The first `top_n`
results become citable chunks; `json` holds them as Keenable sent them.
"""
from __future__ import annotations

import os

from pydantic import Field

from canvas2graph.nodes.base import Params
from canvas2graph.nodes.registry import register
from canvas2graph.nodes.tool import Tool, ToolArg, ToolError, ToolOutput, endpoint, found
from canvas2graph.nodes.tools._web import json_body, one_of, request, text_arg, timeout_for, web_chunks
from canvas2graph.nodes.tools.keys import api_key, given_key

KEY_ENV = "KEENABLE_API_KEY"
DEFAULT_URL = "https://api.keenable.ai"


class KeenableSearchParams(Params):
    api_key: str | None = ""
    mode: str = "pro"
    top_n: int = Field(10, gt=0)

    _mode = one_of("mode", ("pro", "realtime"))


@register("KeenableSearch", KeenableSearchParams, outputs=lambda p: {"formalized_content", "json"})
class KeenableSearch(Tool):
    function_name = "keenable_search"
    tool_description = (
        "Web search through Keenable, a search API made for AI agents: fresh, relevant results for a query. "
        "Search with a focused query made of the request's key terms (and their synonyms); results can be "
        "limited to one site.")
    args = {
        "query": ToolArg("string", "The keywords to search for: the most important terms of the request, "
                         "synonyms included.", required=True),
        "site": ToolArg("string", "Only return results from this one domain, e.g. techcrunch.com. Default: any site.",
                        default=""),
    }

    def thoughts(self, state) -> str:
        return f"Searching the web with Keenable for: {self.node_args(state).get('query', '')}"

    async def execute(self, args: dict, ctx) -> ToolOutput:
        query = text_arg(args, "query")
        if not query:
            return ToolOutput({"formalized_content": ""})
        p = self.params
        key = given_key(p.api_key, KEY_ENV)
        if p.mode == "realtime":           # the public endpoint has no realtime mode
            key = api_key(key, KEY_ENV, "Keenable's realtime mode")
        body = {"query": query, "mode": p.mode}
        site = text_arg(args, "site")
        if site:
            body["site"] = site
        headers = {"X-API-Key": key} if key else {}
        path = "/v1/search" if key else "/v1/search/public"
        response = await request("Keenable", "POST", f"{_base_url()}{path}", json=body, headers=headers,
                                 secrets=[key] if key else [], timeout=timeout_for(30))
        data = json_body("Keenable", response)
        results = data.get("results") if isinstance(data, dict) else None
        if results is None:
            results = []
        if not isinstance(results, list):
            raise ToolError("Keenable answered with results that are not a list")
        results = results[:p.top_n]
        chunks = web_chunks([r for r in results if isinstance(r, dict)], title=lambda r: r.get("title"),
                            url=lambda r: r.get("url"), content=_content)
        return found(chunks, results)


def _base_url() -> str:
    legacy = os.environ.get("KEENABLE_API_URL", "").strip()       # RAGFlow's variable
    return endpoint("keenable", legacy or DEFAULT_URL)


def _content(result: dict) -> str:
    """Keenable's page text is in `snippet` (`description` is often empty); line breaks are folded."""
    return " ".join(str(result.get("snippet") or result.get("description") or "").split())

"""SearXNG: a self-hosted metasearch instance's JSON API (`GET <instance>/search?format=json`), SPEC 3.17.

The instance URL is the model's `searxng_url` argument, else `params.searxng_url`, else
`CANVAS2GRAPH_SEARXNG_URL`. The instance must allow the json format (`search.formats` in its
settings.yml); otherwise it answers 403, and the error says so.

An instance the model or the DSL names is reached through the host guard (`canvas2graph.runtime.services.netguard`): a
private or loopback instance needs `CANVAS2GRAPH_SEARXNG_ALLOW_PRIVATE=1`. The operator's
`CANVAS2GRAPH_SEARXNG_URL` is trusted as it is (a self-hosted instance usually lives on the intranet).
"""
from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from pydantic import Field, field_validator

from canvas2graph.nodes.base import Params
from canvas2graph.nodes.registry import register
from canvas2graph.nodes.tool import Tool, ToolArg, ToolError, ToolOutput, endpoint, found
from canvas2graph.nodes.tools._web import json_body, request, text_arg, timeout_for, web_chunks
from canvas2graph.runtime.services.netguard import HostGuard


class SearXNGParams(Params):
    top_n: int = Field(10, gt=0)
    searxng_url: str | None = ""

    @field_validator("top_n", mode="before")
    @classmethod
    def _top_n(cls, v: Any) -> Any:
        return v.strip() if isinstance(v, str) else v       # the form may save "10"; pydantic reads it as 10


def instance_url(value: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ToolError(f"the SearXNG URL must be an http:// or https:// address such as http://localhost:4000, "
                        f"not {value!r}")
    return value.rstrip("/")


@register("SearXNG", SearXNGParams, outputs=lambda p: {"formalized_content", "json"})
class SearXNG(Tool):
    function_name = "searxng_search"
    tool_description = ("Web search through SearXNG, a privacy-respecting metasearch engine that combines the "
                        "results of many search engines.")
    args = {
        "query": ToolArg("string", "The keywords to search for: the key terms of the request, synonyms included.",
                         required=True),
        "searxng_url": ToolArg("string", "The base URL of the SearXNG instance, e.g. http://localhost:4000. "
                               "Leave it out to use the configured instance.", default=None),
    }

    def thoughts(self, state) -> str:
        return f"Searching with SearXNG for: {self.node_args(state).get('query', '')}"

    async def execute(self, args: dict, ctx) -> ToolOutput:
        query = text_arg(args, "query")
        if not query:
            return ToolOutput({"formalized_content": ""})
        chosen = text_arg(args, "searxng_url") or (self.params.searxng_url or "").strip()    # by the model or the DSL
        configured = chosen or endpoint("searxng", "")
        if not configured:
            raise ToolError("SearXNG needs the URL of an instance: set params.searxng_url in the DSL or the "
                            "CANVAS2GRAPH_SEARXNG_URL environment variable")
        base = instance_url(configured)
        guard = HostGuard.of("SearXNG", ctx) if chosen else None
        try:
            response = await request("SearXNG", "GET", f"{base}/search", timeout=timeout_for(30), guard=guard, params={
                "q": query, "format": "json", "categories": "general", "language": "auto", "safesearch": 1,
                "pageno": 1})
        except ToolError as e:
            if getattr(e, "status", None) == 403:
                raise ToolError(f"{e} (the instance must allow the json format: search.formats in its settings.yml)") from None
            raise
        data = json_body("SearXNG", response)
        results = data.get("results") if isinstance(data, dict) else None
        if not isinstance(results, list):
            raise ToolError("SearXNG answered without a results list")
        results = results[: self.params.top_n]
        chunks = web_chunks(results, title=lambda r: r.get("title"), url=lambda r: r.get("url"),
                            content=lambda r: r.get("content"))
        return found(chunks, results)

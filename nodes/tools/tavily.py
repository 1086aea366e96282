"""TavilySearch and TavilyExtract: Tavily's REST API (`POST /search`, `POST /extract`), SPEC 3.17.

The key comes from `params.api_key` or `TAVILY_API_KEY` and is sent as a bearer token. The base URL
is `https://api.tavily.com`, or `CANVAS2GRAPH_TAVILY_URL`. Search results and extracted pages become
citable chunks: they enter the turn's reference store and the model reads them as `ID:` blocks.
"""
from __future__ import annotations

from typing import Any

from pydantic import Field

from canvas2graph.nodes.base import Params
from canvas2graph.nodes.registry import register
from canvas2graph.nodes.tool import Tool, ToolArg, ToolError, ToolOutput, endpoint, found
from canvas2graph.nodes.tools._web import one_of, json_body, list_arg, request, text_arg, timeout_for, web_chunks
from canvas2graph.nodes.tools.keys import api_key

KEY_ENV = "TAVILY_API_KEY"
DEFAULT_URL = "https://api.tavily.com"


class TavilySearchParams(Params):
    api_key: str | None = ""
    topic: str = "general"
    include_domains: Any = Field(default_factory=list)
    exclude_domains: Any = Field(default_factory=list)
    search_depth: str = "basic"
    max_results: int = Field(6, gt=0)
    days: int = Field(14, gt=0)
    include_answer: bool = False
    include_raw_content: bool = False
    include_images: bool = False
    include_image_descriptions: bool = False

    _topic = one_of("topic", ("general", "news"))
    _depth = one_of("search_depth", ("basic", "advanced"))


class TavilyExtractParams(Params):
    api_key: str | None = ""
    urls: Any = Field(default_factory=list)
    extract_depth: str = "basic"
    format: str = "markdown"
    include_images: bool = False

    _depth = one_of("extract_depth", ("basic", "advanced"))
    _format = one_of("format", ("markdown", "text"))


@register("TavilySearch", TavilySearchParams, outputs=lambda p: {"formalized_content", "json"})
class TavilySearch(Tool):
    function_name = "tavily_search"
    tool_description = (
        "Web search through Tavily, a search engine built for language models. Search for one aspect at a "
        "time with a short, specific query (a handful of keywords); widen the terms when little comes back, "
        "and compare what several sources say.")
    args = {
        "query": ToolArg("string", "The keywords to search for: the key terms of the request, synonyms included.",
                         required=True),
        "topic": ToolArg("string", "Search category, default general. Use news for recent events reported by "
                         "news media (politics, sports, current affairs), general for everything else.",
                         default=None, enum=("general", "news")),
        "include_domains": ToolArg("array", "Only return results from these domains (e.g. www.example.com). "
                                   "Default: no restriction.", default=None),
        "exclude_domains": ToolArg("array", "Never return results from these domains. Default: none.", default=None),
    }

    def thoughts(self, state) -> str:
        return f"Searching the web for: {self.node_args(state).get('query', '')}"

    async def execute(self, args: dict, ctx) -> ToolOutput:
        query = text_arg(args, "query")
        if not query:
            return ToolOutput({"formalized_content": ""})
        p = self.params
        key = api_key(p.api_key, KEY_ENV, "Tavily")
        topic = text_arg(args, "topic") or p.topic
        if topic not in ("general", "news"):
            raise ToolError(f"topic must be general or news, not {topic!r}")
        body = {
            "query": query, "topic": topic, "search_depth": p.search_depth, "max_results": p.max_results,
            "days": p.days, "include_answer": p.include_answer,
            # RAGFlow always asks for snippets, never raw pages or images, whatever the params say
            "include_raw_content": False, "include_images": False,
            "include_image_descriptions": p.include_image_descriptions,
            "include_domains": list_arg(args["include_domains"] if "include_domains" in args else p.include_domains),
            "exclude_domains": list_arg(args["exclude_domains"] if "exclude_domains" in args else p.exclude_domains),
        }
        _, results = await post("/search", body, key, timeout_for(30))
        chunks = web_chunks(results, title=lambda r: r.get("title"), url=lambda r: r.get("url"),
                            content=lambda r: r.get("raw_content") or r.get("content"), score=lambda r: r.get("score"))
        return found(chunks, results)


@register("TavilyExtract", TavilyExtractParams, outputs=lambda p: {"formalized_content", "json"})
class TavilyExtract(Tool):
    function_name = "tavily_extract"
    tool_description = "Fetch the content of one or more web pages, given their URLs, through Tavily Extract."
    args = {
        "urls": ToolArg("array", "The URLs of the pages to read.", required=True, default=None),
        "extract_depth": ToolArg("string", "basic (default) reads the main content; advanced also gets tables and "
                                 "embedded content, more reliably but slower and at twice the cost.",
                                 default=None, enum=("basic", "advanced")),
        "format": ToolArg("string", "markdown (default) or text: the format of the page content.",
                          default=None, enum=("markdown", "text")),
    }

    def thoughts(self, state) -> str:
        return f"Reading {self.node_args(state).get('urls', '')}"

    async def execute(self, args: dict, ctx) -> ToolOutput:
        p = self.params
        urls = list_arg(args.get("urls") if "urls" in args else p.urls)
        if not urls:
            return ToolOutput({"formalized_content": "", "json": []})
        key = api_key(p.api_key, KEY_ENV, "Tavily")
        depth = text_arg(args, "extract_depth") or p.extract_depth
        fmt = text_arg(args, "format") or p.format
        if depth not in ("basic", "advanced"):
            raise ToolError(f"extract_depth must be basic or advanced, not {depth!r}")
        if fmt not in ("markdown", "text"):
            raise ToolError(f"format must be markdown or text, not {fmt!r}")
        body = {"urls": urls, "extract_depth": depth, "format": fmt, "include_images": False}
        data, results = await post("/extract", body, key, timeout_for(120))
        failed = data.get("failed_results") or []
        if not results and failed:
            reasons = "; ".join(f"{f.get('url')}: {f.get('error')}" for f in failed if isinstance(f, dict))
            raise ToolError(f"Tavily could not read any of the pages ({reasons})")
        chunks = web_chunks(results, title=lambda r: r.get("url"), url=lambda r: r.get("url"),
                            content=lambda r: r.get("raw_content"))
        return found(chunks, results)


async def post(path: str, body: dict, key: str, timeout: float) -> tuple[dict, list]:
    """POST `body` to Tavily's `path` (/search, /extract) with the key as bearer token: Tavily's answer
    and its `results` list; an answer without one is an error."""
    response = await request("Tavily", "POST", f"{endpoint('tavily', DEFAULT_URL)}{path}", json=body,
                             headers={"Authorization": f"Bearer {key}"}, secrets=[key], timeout=timeout)
    data = json_body("Tavily", response)
    results = data.get("results") if isinstance(data, dict) else None
    if not isinstance(results, list):
        raise ToolError("Tavily answered without a results list")
    return data, results

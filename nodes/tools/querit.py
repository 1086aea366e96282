"""QueritSearch and QueritContents: Querit's web search (`POST /v1/search`) and page reader
(`POST /v1/contents`), SPEC 3.17.

The key comes from `params.api_key` or `QUERIT_API_KEY` and is sent as a bearer token. The base URL
is `https://api.querit.ai`, or `CANVAS2GRAPH_QUERIT_URL`. Every argument is checked as RAGFlow checks
it, in the DSL at compile time and in a model's call at run time (a wrong value is an error the
model reads). A request that meets a rate limit, a 5xx or a lost connection is tried three times,
`delay_after_error` apart, as RAGFlow does. Search results become citable chunks; `json` holds
Querit's whole answer.
"""
from __future__ import annotations

import asyncio
import re
from typing import Any
from urllib.parse import urlsplit

from pydantic import Field, field_validator, model_validator

from canvas2graph.nodes.base import Params
from canvas2graph.nodes.registry import register
from canvas2graph.nodes.tool import Tool, ToolArg, ToolError, ToolOutput, endpoint, found
from canvas2graph.nodes.tools._web import ServiceUnavailable, json_body, request, timeout_for, web_chunks
from canvas2graph.nodes.tools.keys import api_key

KEY_ENV = "QUERIT_API_KEY"
DEFAULT_URL = "https://api.querit.ai"
ATTEMPTS = 3
FORMATS = ("text", "markdown", "html")
TIME_RANGE = re.compile(r"^([dwmy][1-9][0-9]*|\d{4}-\d{2}-\d{2}to\d{4}-\d{2}-\d{2})$")
SEARCH_ARGS = ("count", "chunks_per_doc", "site_include", "site_exclude", "time_range", "country_include",
               "language_include")
LIST_ARGS = ("site_include", "site_exclude", "country_include", "language_include")


class InvalidArgument(ToolError):
    pass


def check_search(values: dict[str, Any]) -> None:
    """RAGFlow's rules for the search arguments; raises InvalidArgument naming the argument."""
    count, per_doc, time_range = values["count"], values["chunks_per_doc"], values["time_range"]
    if type(count) is not int or count < 1:
        raise InvalidArgument(f"count must be a whole number of at least 1, not {count!r}")
    if per_doc is not None and (type(per_doc) is not int or not 1 <= per_doc <= 3):
        raise InvalidArgument(f"chunks_per_doc must be a whole number from 1 to 3, not {per_doc!r}")
    if type(time_range) is not str:
        raise InvalidArgument(f"time_range must be a string, not {time_range!r}")
    if time_range and not TIME_RANGE.fullmatch(time_range):
        raise InvalidArgument(f"time_range must look like d7, w1, m3, y1 or YYYY-MM-DDtoYYYY-MM-DD, not {time_range!r}")
    for name in LIST_ARGS:
        value = values[name]
        if not isinstance(value, list) or any(not isinstance(v, str) for v in value):
            raise InvalidArgument(f"{name} must be a list of strings, not {value!r}")


def normalize_urls(urls: Any) -> Any:
    """A comma-separated string of URLs becomes a list, as RAGFlow accepts it."""
    if isinstance(urls, str):
        return [u.strip() for u in urls.split(",") if u.strip()]
    return urls


def check_contents(urls: Any, fmt: Any, crawl_timeout: Any, extras_meta: Any) -> None:
    if not isinstance(urls, list) or not 1 <= len(urls) <= 10 or any(not isinstance(u, str) or not u.strip() for u in urls):
        raise InvalidArgument("urls must hold between 1 and 10 non-empty URLs")
    for url in urls:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise InvalidArgument(f"urls must be absolute http:// or https:// URLs, not {url!r}")
    if fmt not in FORMATS:
        raise InvalidArgument(f"format must be text, markdown or html, not {fmt!r}")
    if type(crawl_timeout) is not int or not 1 <= crawl_timeout <= 60:
        raise InvalidArgument(f"crawl_timeout must be a whole number of seconds from 1 to 60, not {crawl_timeout!r}")
    if type(extras_meta) is not bool:
        raise InvalidArgument(f"extras_meta must be true or false, not {extras_meta!r}")


class QueritSearchParams(Params):
    api_key: str | None = ""
    count: Any = 10
    chunks_per_doc: Any = 3
    site_include: Any = Field(default_factory=list)
    site_exclude: Any = Field(default_factory=list)
    time_range: Any = ""
    country_include: Any = Field(default_factory=list)
    language_include: Any = Field(default_factory=list)

    @model_validator(mode="after")
    def _check(self) -> "QueritSearchParams":
        try:
            check_search({name: getattr(self, name) for name in SEARCH_ARGS})
        except InvalidArgument as e:
            raise ValueError(str(e)) from None
        return self


class QueritContentsParams(Params):
    api_key: str | None = ""
    urls: Any = Field(default_factory=list)
    format: Any = "markdown"
    crawl_timeout: Any = 10
    extras_meta: Any = False

    @field_validator("urls", mode="before")
    @classmethod
    def _urls(cls, v: Any) -> Any:
        return normalize_urls(v)

    @model_validator(mode="after")
    def _check(self) -> "QueritContentsParams":
        try:
            check_contents(self.urls, self.format, self.crawl_timeout, self.extras_meta)
        except InvalidArgument as e:
            raise ValueError(str(e)) from None
        return self


class _Querit(Tool):
    retry_inside = False         # Querit's own three attempts are the retries, as in RAGFlow

    def _key(self) -> str:
        return api_key(self.params.api_key, KEY_ENV, "Querit")

    async def _post(self, path: str, body: dict, key: str, timeout: float) -> dict:
        """POST to Querit: three attempts for rate limits, 5xx and lost connections."""
        url = f"{endpoint('querit', DEFAULT_URL)}{path}"
        for attempt in range(ATTEMPTS):
            try:
                response = await request("Querit", "POST", url, json=body, timeout=timeout, secrets=[key],
                                         headers={"Authorization": f"Bearer {key}", "Accept": "application/json"})
                break
            except ServiceUnavailable:
                if attempt + 1 >= ATTEMPTS:
                    raise
                await asyncio.sleep(self.params.delay_after_error)
        data = json_body("Querit", response)
        if not isinstance(data, dict):
            raise ToolError("Querit answered with something other than a JSON object")
        return data


@register("QueritSearch", QueritSearchParams, outputs=lambda p: {"formalized_content", "json"})
class QueritSearch(_Querit):
    function_name = "querit_search"
    tool_description = "Search the live web with Querit; returns Querit's complete answer and the pages it found."
    args = {
        "query": ToolArg("string", "What to search the web for.", required=True),
        "count": ToolArg("integer", "How many results at most (default 10).", default=None),
        "chunks_per_doc": ToolArg("integer", "Summary chunks per page, 1 to 3 (default 3).", default=None),
        "site_include": ToolArg("array", "Only return results from these sites.", default=None),
        "site_exclude": ToolArg("array", "Never return results from these sites.", default=None),
        "time_range": ToolArg("string", "How recent the results must be: d7, w1, m3, y1 (days, weeks, months, "
                              "years) or YYYY-MM-DDtoYYYY-MM-DD.", default=None),
        "country_include": ToolArg("array", "Only return results associated with these countries.", default=None),
        "language_include": ToolArg("array", "Only return results in these languages.", default=None),
    }

    def thoughts(self, state) -> str:
        return f"Searching the web with Querit for: {self.node_args(state).get('query', '')}"

    async def execute(self, args: dict, ctx) -> ToolOutput:
        query = args.get("query")
        if query is None:
            query = ""
        if not isinstance(query, str):
            raise InvalidArgument(f"the query must be a string, not {query!r}")
        if not query:
            return ToolOutput({"formalized_content": "", "json": {}})
        key = self._key()
        values = {name: args[name] if args.get(name) is not None else getattr(self.params, name)
                  for name in SEARCH_ARGS}
        check_search(values)
        data = await self._post("/v1/search", search_body(query, values), key, timeout_for(30))
        container = data.get("results", {})
        if not isinstance(container, dict):
            raise ToolError("Querit answered with a `results` field that is not an object")
        results = container.get("result", [])
        if not isinstance(results, list):
            raise ToolError("Querit answered with a `results.result` field that is not a list")
        chunks = web_chunks([r for r in results if isinstance(r, dict)], title=lambda r: _text(r.get("title")),
                            url=lambda r: _text(r.get("url")), content=lambda r: _text(r.get("snippet")))
        out = found(chunks, data)
        out.outputs["json"] = data
        return out


@register("QueritContents", QueritContentsParams, outputs=lambda p: {"json"})
class QueritContents(_Querit):
    function_name = "querit_contents"
    tool_description = "Read one or more web pages with Querit and return their contents."
    args = {
        "urls": ToolArg("array", "The absolute http:// or https:// URLs of the pages to read, 1 to 10.",
                        required=True, default=None),
        "format": ToolArg("string", "The format of the page contents: text, markdown (default) or html.",
                          default=None, enum=FORMATS),
        "crawl_timeout": ToolArg("integer", "Seconds allowed to read each page, 1 to 60 (default 10).", default=None),
        "extras_meta": ToolArg("boolean", "Whether to add each page's metadata (default false).", default=None),
    }

    def thoughts(self, state) -> str:
        return "Reading web pages with Querit."

    async def execute(self, args: dict, ctx) -> ToolOutput:
        p = self.params
        urls = normalize_urls(args["urls"] if args.get("urls") is not None else p.urls)
        fmt = args["format"] if args.get("format") is not None else p.format
        crawl_timeout = args["crawl_timeout"] if args.get("crawl_timeout") is not None else p.crawl_timeout
        extras_meta = args["extras_meta"] if args.get("extras_meta") is not None else p.extras_meta
        key = self._key()
        check_contents(urls, fmt, crawl_timeout, extras_meta)
        body = {"urls": urls, "format": fmt, "crawlTimeout": crawl_timeout, "extrasMeta": extras_meta}
        data = await self._post("/v1/contents", body, key, max(timeout_for(30), crawl_timeout + 5))
        for name in ("results", "statuses"):
            if name in data and not isinstance(data[name], list):
                raise ToolError(f"Querit answered with a `{name}` field that is not a list")
        return ToolOutput({"json": data}, text=_json_text(data))


def search_body(query: str, values: dict[str, Any]) -> dict[str, Any]:
    """Querit's search request: `count`, `chunksPerDoc` and the filters that are set."""
    body: dict[str, Any] = {"query": query, "count": values["count"]}
    if values["chunks_per_doc"] is not None:
        body["chunksPerDoc"] = values["chunks_per_doc"]
    filters: dict[str, Any] = {}
    sites = {k: values[f"site_{k}"] for k in ("include", "exclude") if values[f"site_{k}"]}
    if sites:
        filters["sites"] = sites
    if values["time_range"]:
        filters["timeRange"] = {"date": values["time_range"]}
    if values["country_include"]:
        filters["geo"] = {"countries": {"include": values["country_include"]}}
    if values["language_include"]:
        filters["languages"] = {"include": values["language_include"]}
    if filters:
        body["filters"] = filters
    return body


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def _json_text(data: Any) -> str:
    import json
    return json.dumps(data, ensure_ascii=False)

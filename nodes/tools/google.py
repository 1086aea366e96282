"""Google and GoogleScholar through SerpApi (`GET /search.json`, engines `google` and `google_scholar`), SPEC 3.17.

The key comes from `params.api_key` or `SERPAPI_API_KEY` and travels as SerpApi's `api_key` query
parameter (never in an error message). The base URL is `https://serpapi.com`, or
`CANVAS2GRAPH_SERPAPI_URL`. RAGFlow's GoogleScholar scrapes scholar.google.com with the `scholarly`
library, without a key; here it uses SerpApi's Google Scholar engine, which Google does not block
(see docs/compatibility.md).
"""
from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator

from canvas2graph.nodes.base import Params
from canvas2graph.nodes.registry import register
from canvas2graph.nodes.tool import Tool, ToolArg, ToolError, ToolOutput, endpoint, found
from canvas2graph.nodes.tools._web import json_body, request, text_arg, timeout_for, web_chunks
from canvas2graph.nodes.tools.keys import api_key

KEY_ENV = "SERPAPI_API_KEY"
NO_RESULTS = "hasn't returned any results"     # SerpApi's 200 answer for an empty result page
SCHOLAR_PAGE = 20                              # SerpApi's largest Google Scholar page

# The values RAGFlow's GoogleParam.check() accepts for `country` (gl) and `language` (hl).
COUNTRIES = frozenset("""
af al dz as ad ao ai aq ag ar am aw au at az bs bh bd bb by be bz bj bm bt bo ba bw bv br io bn bg bf bi
kh cm ca cv ky cf td cl cn cx cc co km cg cd ck cr ci hr cu cy cz dk dj dm do ec eg sv gq er ee et fk fo
fj fi fr gf pf tf ga gm ge de gh gi gr gl gd gp gu gt gn gw gy ht hm va hn hk hu is in id ir iq ie il it
jm jp jo kz ke ki kp kr kw kg la lv lb ls lr ly li lt lu mo mk mg mw my mv ml mt mh mq mr mu yt mx fm md
mc mn ms ma mz mm na nr np nl an nc nz ni ne ng nu nf mp no om pk pw ps pa pg py pe ph pn pl pt pr qa re
ro ru rw sh kn lc pm vc ws sm st sa sn rs sc sl sg sk si sb so za gs es lk sd sr sj sz se ch sy tw tj tz
th tl tg tk to tt tn tr tm tc tv ug ua ae uk gb us um uy uz vu ve vn vg vi wf eh ye zm zw""".split())
LANGUAGES = frozenset("""
af ak sq ws am ar hy az eu be bem bn bh xx-bork bs br bg bt km ca chr ny zh-cn zh-tw co hr cs da nl
xx-elmer en eo et ee fo tl fi fr fy gaa gl ka de el kl gn gu xx-hacker ht ha haw iw hi hu is ig id ia ga
it ja jw kn kk rw rn xx-klingon kg ko kri ku ckb ky lo la lv ln lt loz lg ach mk mg ms ml mt mv mi mr mfe
mo mn sr-me my ne pcm nso no nn oc or om ps fa xx-pirate pl pt pt-br pt-pt pa qu ro rm nyn ru gd sr sh st
tn crs sn sd si sk sl so es es-419 su sw sv tg ta tt te th ti to lua tum tr tk tw ug uk ur uz vu vi cy wo
xh yi yo zu""".split())


class GoogleParams(Params):
    # RAGFlow requires a non-empty key when the canvas loads; templates ship it empty for the user to
    # fill, so a missing key is reported when the search runs (with the environment as fallback).
    api_key: str | None = ""
    start: int = Field(0, ge=0)
    num: int = Field(6, gt=0)
    country: str = "cn"
    language: str = "en"

    @field_validator("country")
    @classmethod
    def _country(cls, v: str) -> str:
        if v not in COUNTRIES:
            raise ValueError(f"country must be a Google country code such as us, gb or cn, not {v!r}")
        return v

    @field_validator("language")
    @classmethod
    def _language(cls, v: str) -> str:
        if v not in LANGUAGES:
            raise ValueError(f"language must be a Google interface language such as en, de or zh-cn, not {v!r}")
        return v


class GoogleScholarParams(Params):
    api_key: str | None = ""          # not in RAGFlow (scholarly needs none); SerpApi does
    top_n: int = Field(12, gt=0)
    sort_by: str = "relevance"
    year_low: int | None = None
    year_high: int | None = None
    patents: bool = True

    @field_validator("sort_by")
    @classmethod
    def _sort_by(cls, v: str) -> str:
        if v not in ("relevance", "date"):
            raise ValueError(f"sort_by must be relevance or date, not {v!r}")
        return v

    @field_validator("year_low", "year_high", mode="before")
    @classmethod
    def _year(cls, v: Any) -> Any:
        return None if v == "" else v          # the form saves an empty year as ""

    @field_validator("patents", mode="before")
    @classmethod
    def _patents(cls, v: Any) -> Any:
        if not isinstance(v, bool):       # RAGFlow's check_boolean: a real boolean, not "yes" or 1
            raise ValueError(f"patents must be true or false, not {v!r}")
        return v


async def serpapi(service: str, params: dict[str, Any], key: str) -> dict:
    """One SerpApi search; its JSON, with "no results" turned into an empty page."""
    response = await request(service, "GET", f"{endpoint('serpapi', 'https://serpapi.com')}/search.json",
                             params={**params, "api_key": key}, secrets=[key],
                             timeout=timeout_for(30))
    data = json_body(service, response)
    if not isinstance(data, dict):
        raise ToolError(f"{service} answered with something other than a JSON object")
    error = data.get("error")
    if error and NO_RESULTS not in str(error):
        raise ToolError(f"{service} search failed: {error}")
    return data


def _int_arg(args: dict, name: str, default: int, minimum: int) -> int:
    value = args.get(name)
    if value is None or value == "":
        return default
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise ToolError(f"{name} must be a whole number, not {value!r}") from None
    if number < minimum:
        raise ToolError(f"{name} must be at least {minimum}, not {number}")
    return number


@register("Google", GoogleParams, outputs=lambda p: {"formalized_content", "json"})
class Google(Tool):
    function_name = "google_search"
    tool_description = "Google web search: pages, news and other public information on the web."
    args = {
        "q": ToolArg("string", "The keywords to search for: the key terms of the request, synonyms included.",
                     required=True),
        "start": ToolArg("integer", "How many results to skip, for paging: 0 (default) is the first page, "
                         "10 the second, 20 the third.", default=None),
        "num": ToolArg("integer", "How many results to return at most (default 6). Leave it out unless you need "
                       "more results than usual.", default=None),
    }

    def thoughts(self, state) -> str:
        return f"Searching Google for: {self.node_args(state).get('q', '')}"

    async def execute(self, args: dict, ctx) -> ToolOutput:
        q = text_arg(args, "q")
        if not q:
            return ToolOutput({"formalized_content": ""})
        p = self.params
        key = api_key(p.api_key, KEY_ENV, "Google (SerpApi)")
        data = await serpapi("Google (SerpApi)", {
            "engine": "google", "q": q, "google_domain": "google.com", "gl": p.country, "hl": p.language,
            "start": _int_arg(args, "start", p.start, 0), "num": _int_arg(args, "num", p.num, 1)}, key)
        results = data.get("organic_results") or []
        chunks = web_chunks(results, title=lambda r: r.get("title"), url=lambda r: r.get("link"),
                            content=_google_text)
        return found(chunks, results)


def _google_text(r: dict) -> str:
    """The source's description when Google has one ("About this result"), else the snippet."""
    about = ((r.get("about_this_result") or {}).get("source") or {}).get("description")
    return about or r.get("snippet") or ""


@register("GoogleScholar", GoogleScholarParams, outputs=lambda p: {"formalized_content", "json"})
class GoogleScholar(Tool):
    function_name = "google_scholar_search"
    tool_description = ("Google Scholar search for scholarly literature across disciplines: articles, theses, "
                        "books, abstracts and court opinions from publishers, universities and repositories.")
    args = {"query": ToolArg("string", "The keywords to search for: the key terms of the request, synonyms included.",
                             required=True)}

    def thoughts(self, state) -> str:
        return f"Looking for scholarly papers on: {self.node_args(state).get('query', '')}"

    async def execute(self, args: dict, ctx) -> ToolOutput:
        query = text_arg(args, "query")
        if not query:
            return ToolOutput({"formalized_content": "", "json": []})
        p = self.params
        key = api_key(p.api_key, KEY_ENV, "GoogleScholar (SerpApi)")
        search: dict[str, Any] = {"engine": "google_scholar", "q": query, "as_sdt": "7" if p.patents else "0"}
        if p.year_low is not None:
            search["as_ylo"] = p.year_low
        if p.year_high is not None:
            search["as_yhi"] = p.year_high
        if p.sort_by == "date":
            search["scisbd"] = 1          # newest first (abstracts), as scholarly's sort_by="date"
        results: list[dict] = []
        while len(results) < p.top_n:
            size = min(SCHOLAR_PAGE, p.top_n - len(results))
            data = await serpapi("GoogleScholar (SerpApi)", {**search, "start": len(results), "num": size}, key)
            page = data.get("organic_results") or []
            results += page[:size]
            if len(page) < size:
                break
        chunks = web_chunks(results, title=lambda r: r.get("title"), url=lambda r: r.get("link"), content=_paper_text)
        return found(chunks, results)


def _paper_text(r: dict) -> str:
    info = r.get("publication_info") or {}
    authors = ", ".join(a.get("name", "") for a in info.get("authors") or [] if isinstance(a, dict))
    lines = [f"Authors: {authors}" if authors else "", f"Published: {info['summary']}" if info.get("summary") else "",
             f"Abstract: {r.get('snippet') or 'no abstract'}"]
    return "\n".join(line for line in lines if line)

"""ArXiv: the arXiv API's Atom feed (`GET /api/query`), SPEC 3.17.

One request with `search_query`, `sortBy`, `sortOrder=descending` and `max_results=top_n`, as the
`arxiv` library RAGFlow uses sends it; the feed is parsed with the standard library. Each paper
becomes a citable chunk: its title, its PDF link and its abstract, with authors and submission date
as metadata. The base URL is `https://export.arxiv.org`, or `CANVAS2GRAPH_ARXIV_URL`.
"""
from __future__ import annotations

import xml.etree.ElementTree as ET

from pydantic import Field, field_validator

from canvas2graph.nodes.base import Params
from canvas2graph.nodes.registry import register
from canvas2graph.nodes.tool import Tool, ToolArg, ToolError, ToolOutput, endpoint, found
from canvas2graph.nodes.tools._web import request, status_error, text_arg, timeout_for, web_chunk

SORT_BY = ("submittedDate", "lastUpdatedDate", "relevance")
MAX_PER_REQUEST = 2000          # the API refuses larger pages
ATOM = "{http://www.w3.org/2005/Atom}"
ARXIV = "{http://arxiv.org/schemas/atom}"


class ArXivParams(Params):
    top_n: int = Field(12, gt=0)
    sort_by: str = "submittedDate"

    @field_validator("sort_by")
    @classmethod
    def _sort_by(cls, v: str) -> str:
        if v not in SORT_BY:
            raise ValueError(f"sort_by must be one of {', '.join(SORT_BY)}, not {v!r}")
        return v


@register("ArXiv", ArXivParams, outputs=lambda p: {"formalized_content"})
class ArXiv(Tool):
    function_name = "arxiv_search"
    tool_description = ("Search arXiv, the open archive of scientific preprints (physics, mathematics, computer "
                        "science, quantitative biology and finance, statistics, electrical engineering, economics). "
                        "Returns titles, abstracts and PDF links. Preprints are not peer reviewed.")
    args = {"query": ToolArg("string", "Keywords for arXiv: the essential terms of the request, with synonyms. "
                             "Field prefixes such as ti:, au: and abs: are allowed.", required=True)}

    def thoughts(self, state) -> str:
        return f"Searching arXiv for papers on: {self.node_args(state).get('query', '')}"

    async def execute(self, args: dict, ctx) -> ToolOutput:
        query = text_arg(args, "query")
        if not query:
            return ToolOutput({"formalized_content": ""})
        url = f"{endpoint('arxiv', 'https://export.arxiv.org')}/api/query"
        response = await request("arXiv", "GET", url, timeout=timeout_for(30), raise_for_status=False, params={
            "search_query": query, "start": 0, "max_results": min(self.params.top_n, MAX_PER_REQUEST),
            "sortBy": self.params.sort_by, "sortOrder": "descending"})
        papers = parse_feed(response.content, status=response.status_code)
        reason = _api_error(papers)
        if response.status_code >= 400:
            raise status_error("arXiv", response, detail=reason)
        if reason is not None:
            raise ToolError(f"arXiv refused the query: {reason}")
        chunks = []
        for paper in papers[:self.params.top_n]:
            meta = {"Authors": ", ".join(paper["authors"]), "Published": paper["published"][:10]}
            chunks.append(web_chunk(title=paper["title"], url=paper["pdf_url"] or paper["url"],
                                    content=paper["summary"], document_metadata=meta))
        out = found([c for c in chunks if c["content"]])
        out.outputs.pop("json", None)          # RAGFlow's ArXiv sets formalized_content only
        return out


def parse_feed(body: bytes, *, status: int = 200) -> list[dict]:
    """The entries of an arXiv Atom feed as plain dicts."""
    try:
        root = ET.fromstring(body)
    except ET.ParseError as e:
        if status >= 400:          # an error page from a proxy, not a feed: the status says enough
            return []
        raise ToolError(f"arXiv answered with something other than an Atom feed ({e})") from None
    papers = []
    for entry in root.iter(f"{ATOM}entry"):
        links = entry.findall(f"{ATOM}link")
        pdf = next((l.get("href") for l in links if l.get("title") == "pdf"), None)
        page = next((l.get("href") for l in links if l.get("rel") == "alternate"), None)
        papers.append({
            "id": _text(entry, f"{ATOM}id"),
            "title": _text(entry, f"{ATOM}title"),
            "summary": _text(entry, f"{ATOM}summary"),
            "authors": [_text(a, f"{ATOM}name") for a in entry.findall(f"{ATOM}author")],
            "published": _text(entry, f"{ATOM}published"),
            "primary_category": _attr(entry, f"{ARXIV}primary_category", "term"),
            "pdf_url": pdf,
            "url": page or _text(entry, f"{ATOM}id"),
        })
    return papers


def _api_error(papers: list[dict]) -> str | None:
    """The API reports a bad query as a feed whose one entry has an `/api/errors` id and the reason as summary."""
    for paper in papers:
        if "/api/errors" in paper["id"]:
            return paper["summary"]
    return None


def _attr(element: ET.Element, tag: str, name: str) -> str:
    child = element.find(tag)
    return child.get(name, "") if child is not None else ""


def _text(element: ET.Element, tag: str) -> str:
    """An element's text with the feed's hard line wrapping folded into single spaces."""
    found_el = element.find(tag)
    return " ".join("".join(found_el.itertext()).split()) if found_el is not None else ""

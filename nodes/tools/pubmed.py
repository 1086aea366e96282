"""PubMed: NCBI's E-utilities (`esearch.fcgi` then `efetch.fcgi`, XML), SPEC 3.17.

The search finds up to `top_n` PubMed ids for the query, the fetch returns their records; each
article becomes a citable chunk (title, authors, journal, volume, issue, pages, DOI, abstract) linking
to its pubmed.ncbi.nlm.nih.gov page. NCBI asks every caller to name itself: requests carry `tool`
and the `email` param, as Biopython's Entrez (which RAGFlow uses) sends them. An `NCBI_API_KEY` in the
environment raises NCBI's rate limit. The base URL is `https://eutils.ncbi.nlm.nih.gov`, or
`CANVAS2GRAPH_PUBMED_URL`.
"""
from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from typing import Any

from pydantic import Field

from canvas2graph.nodes.base import Params
from canvas2graph.nodes.registry import register
from canvas2graph.nodes.tool import Tool, ToolArg, ToolError, ToolOutput, endpoint, found
from canvas2graph.nodes.tools._web import request, text_arg, timeout_for, web_chunk

KEY_ENV = "NCBI_API_KEY"
TOOL_NAME = "canvas2graph"
POST_ABOVE = 200           # NCBI wants long id lists in a POST body rather than the URL


class PubMedParams(Params):
    top_n: int = Field(12, gt=0)
    email: str | None = "A.N.Other@example.com"


@register("PubMed", PubMedParams, outputs=lambda p: {"formalized_content"})
class PubMed(Tool):
    function_name = "pubmed_search"
    tool_description = ("Search PubMed, NCBI's free index of biomedical and life-science literature (MEDLINE, PubMed "
                        "Central citations, NCBI Bookshelf). Returns each article's citation details and abstract.")
    args = {"query": ToolArg("string", "Keywords for PubMed: the essential terms of the request, with synonyms "
                             "(MeSH terms and field tags such as [au] or [ti] are allowed).", required=True)}

    def thoughts(self, state) -> str:
        return f"Searching PubMed for articles on: {self.node_args(state).get('query', '')}"

    async def execute(self, args: dict, ctx) -> ToolOutput:
        query = text_arg(args, "query")
        if not query:
            return ToolOutput({"formalized_content": ""})
        base = f"{endpoint('pubmed', 'https://eutils.ncbi.nlm.nih.gov')}/entrez/eutils"
        common: dict[str, Any] = {"db": "pubmed", "tool": TOOL_NAME}
        if self.params.email:
            common["email"] = self.params.email
        key = os.environ.get(KEY_ENV, "").strip()
        if key:
            common["api_key"] = key
        secrets = [key] if key else []

        search = await request("PubMed", "GET", f"{base}/esearch.fcgi", timeout=timeout_for(30), secrets=secrets,
                               params={**common, "term": query, "retmax": self.params.top_n})
        ids = search_ids(search.content)
        if not ids:
            return ToolOutput({"formalized_content": ""})

        fetch_args = {**common, "id": ",".join(ids), "retmode": "xml"}
        if len(ids) > POST_ABOVE:
            fetched = await request("PubMed", "POST", f"{base}/efetch.fcgi", timeout=timeout_for(30),
                                    secrets=secrets, data=fetch_args)
        else:
            fetched = await request("PubMed", "GET", f"{base}/efetch.fcgi", timeout=timeout_for(30),
                                    secrets=secrets, params=fetch_args)
        articles = parse_articles(fetched.content)
        chunks = [web_chunk(title=a["title"], url=f"https://pubmed.ncbi.nlm.nih.gov/{a['pmid']}/",
                            content=citation(a)) for a in articles]
        out = found(chunks)
        out.outputs.pop("json", None)          # RAGFlow's PubMed sets formalized_content only
        return out


def search_ids(body: bytes) -> list[str]:
    """The PubMed ids of an esearch answer; an ERROR element (a malformed query) is a ToolError."""
    root = _xml(body, "esearch")
    error = root.findtext("ERROR")
    if error:
        raise ToolError(f"PubMed refused the search: {error.strip()}")
    return [i.text.strip() for i in root.iterfind("IdList/Id") if i.text and i.text.strip()]


def parse_articles(body: bytes) -> list[dict]:
    """The PubmedArticle records of an efetch answer, reduced to what a citation needs."""
    root = _xml(body, "efetch")
    articles = []
    for record in root.iterfind("PubmedArticle"):
        citation_el = record.find("MedlineCitation")
        article = citation_el.find("Article") if citation_el is not None else None
        if article is None:
            continue
        authors = []
        for author in article.iterfind("AuthorList/Author"):
            name = " ".join(p for p in (_text(author, "ForeName"), _text(author, "LastName")) if p)
            authors.append(name or _text(author, "CollectiveName"))
        doi = next((_flat(i) for i in record.iterfind(".//ArticleIdList/ArticleId") if i.get("IdType") == "doi"), "")
        doi = doi or next((_flat(e) for e in article.iterfind("ELocationID") if e.get("EIdType") == "doi"), "")
        articles.append({
            "pmid": _text(citation_el, "PMID"),
            "title": _text(article, "ArticleTitle"),
            "authors": [a for a in authors if a],
            "journal": _text(article, "Journal/Title"),
            "volume": _text(article, "Journal/JournalIssue/Volume"),
            "issue": _text(article, "Journal/JournalIssue/Issue"),
            "pages": _text(article, "Pagination/MedlinePgn"),
            "doi": doi,
            "abstract": _abstract(article),
        })
    return articles


def citation(a: dict) -> str:
    """The chunk text: the fields RAGFlow lists, '-' (or a placeholder) where PubMed has none."""
    return "\n".join([
        f"Title: {a['title'] or 'No title'}",
        f"Authors: {', '.join(a['authors']) or 'Unknown Authors'}",
        f"Journal: {a['journal'] or 'Unknown Journal'}",
        f"Volume: {a['volume'] or '-'}",
        f"Issue: {a['issue'] or '-'}",
        f"Pages: {a['pages'] or '-'}",
        f"DOI: {a['doi'] or '-'}",
        f"Abstract: {a['abstract'] or 'No abstract available'}",
    ])


def _abstract(article: ET.Element) -> str:
    """All abstract sections, each under its label (BACKGROUND:, METHODS:, ...) when the record has labels."""
    parts = []
    for section in article.iterfind("Abstract/AbstractText"):
        text = _flat(section)
        if not text:
            continue
        label = section.get("Label")
        parts.append(f"{label}: {text}" if label else text)
    return "\n".join(parts)


def _xml(body: bytes, what: str) -> ET.Element:
    try:
        return ET.fromstring(body)
    except ET.ParseError as e:
        raise ToolError(f"PubMed's {what} answered with something other than XML ({e})") from None


def _flat(element: ET.Element | None) -> str:
    """An element's text with inline markup (<i>, <b>, <sup>, ...) flattened and whitespace folded."""
    return " ".join("".join(element.itertext()).split()) if element is not None else ""


def _text(element: ET.Element, path: str) -> str:
    return _flat(element.find(path))

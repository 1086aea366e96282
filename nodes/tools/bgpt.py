"""BGPT: structured evidence from scientific papers (`POST https://bgpt.pro/api/mcp-search`), SPEC 3.17.

BGPT reads full-text studies and returns, per paper, its methods, sample, results, limitations,
conflicts of interest, data availability and blind spots. Each paper becomes a citable chunk of
those fields; `json` holds the results as BGPT sent them. A key is optional (`params.api_key` or
`BGPT_API_KEY`, sent in the body as BGPT expects); `days_back` limits how recent the papers are.
The URL is `https://bgpt.pro/api/mcp-search`, or `CANVAS2GRAPH_BGPT_URL` (the full search URL).
"""
from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator

from canvas2graph.nodes.base import Params
from canvas2graph.nodes.registry import register
from canvas2graph.nodes.tool import Tool, ToolArg, ToolError, ToolOutput, endpoint, found
from canvas2graph.nodes.tools._web import json_body, request, text_arg, timeout_for, web_chunks
from canvas2graph.nodes.tools.keys import given_key

KEY_ENV = "BGPT_API_KEY"
SEARCH_URL = "https://bgpt.pro/api/mcp-search"

# (label, the field names BGPT has used for it, newest first)
FIELDS = (
    ("Title", ("title",)),
    ("Authors", ("authors",)),
    ("Journal", ("journal",)),
    ("Year", ("year",)),
    ("DOI", ("doi",)),
    ("Abstract", ("abstract",)),
    ("Methods", ("methods_and_experimental_techniques", "methods")),
    ("Sample size / population", ("sample_size_and_population_characteristics", "sample_size_and_population")),
    ("Results", ("results_and_conclusions", "results")),
    ("Limitations", ("paper_limitations_and_biases", "limitations")),
    ("Conflicts of interest", ("conflict_of_interest_statements", "conflict_of_interest")),
    ("Data availability", ("data_availability_statements", "data_availability")),
    ("Blind spots", ("study_blindspots",)),
    ("How to falsify", ("how_to_falsify",)),
)


class BGPTParams(Params):
    top_n: int = Field(10, gt=0)
    api_key: str | None = ""
    days_back: int | None = None

    @field_validator("top_n", mode="before")
    @classmethod
    def _top_n(cls, v: Any) -> Any:
        return int(v.strip()) if isinstance(v, str) and v.strip().isdigit() else v

    @field_validator("days_back", mode="before")
    @classmethod
    def _days_back(cls, v: Any) -> Any:
        if v in (None, ""):
            return None
        try:
            v = int(v)
        except (TypeError, ValueError):
            raise ValueError(f"days_back must be a whole number of days, not {v!r}") from None
        if v <= 0:
            raise ValueError(f"days_back must be positive, not {v}")
        return v


@register("BGPT", BGPTParams, outputs=lambda p: {"formalized_content", "json"})
class BGPT(Tool):
    function_name = "bgpt_search"
    tool_description = (
        "Search scientific papers with BGPT and get structured evidence read from the full text of each study: "
        "methods, sample size, results, limitations, conflicts of interest, data and code availability, blind "
        "spots, quality and how the claim could be falsified. Use it to judge a scientific claim, not only to "
        "find abstracts.")
    args = {"query": ToolArg("string", "A scientific search query in natural language, made of the key terms of the "
                             "user's request.", required=True)}

    def thoughts(self, state) -> str:
        return f"Searching BGPT for scientific evidence on: {self.node_args(state).get('query', '')}"

    async def execute(self, args: dict, ctx) -> ToolOutput:
        query = text_arg(args, "query")
        if not query:
            return ToolOutput({"formalized_content": ""})
        p = self.params
        body: dict[str, Any] = {"query": query, "num_results": p.top_n}
        key = given_key(p.api_key, KEY_ENV)
        if key:
            body["api_key"] = key
        if p.days_back:
            body["days_back"] = p.days_back
        response = await request("BGPT", "POST", endpoint("bgpt", SEARCH_URL), json=body, secrets=[key] if key else [],
                                 timeout=timeout_for(25))
        data = json_body("BGPT", response)
        if not data or not isinstance(data, dict):
            raise ToolError("BGPT answered with something other than a JSON object")
        results = data.get("results", [])
        if not isinstance(results, list):
            raise ToolError("BGPT answered with results that are not a list")
        papers = [r for r in results if isinstance(r, dict)]
        chunks = web_chunks(papers, title=lambda r: r.get("title") or "Untitled",
                            url=lambda r: r.get("url") or r.get("doi") or "", content=paper_text)
        return found(chunks, results)


def paper_text(paper: dict) -> str:
    """One paper as labelled lines, "-" where BGPT has nothing for a field."""
    return "\n".join(f"{label}: {_field(paper, names)}" for label, names in FIELDS)


def _field(paper: dict, names: tuple[str, ...]) -> str:
    for name in names:
        value = paper.get(name)
        if value is None:
            continue
        text = str(value).strip()
        if text:
            return text
    return "-"

"""GitHub: the REST API's repository search (`GET /search/repositories`), SPEC 3.17.

The query goes out as `q`, sorted by stars, descending, `top_n` per page, as RAGFlow sends it. Each
repository becomes a citable chunk (name, html_url, description and stars); `json` holds the raw
items. No token is needed; `params.api_key` or `GITHUB_TOKEN`, when set, is sent as a bearer token for
GitHub's higher rate limit. The base URL is `https://api.github.com`, or `CANVAS2GRAPH_GITHUB_URL`.
"""
from __future__ import annotations


from pydantic import Field

from canvas2graph.nodes.base import Params
from canvas2graph.nodes.registry import register
from canvas2graph.nodes.tool import Tool, ToolArg, ToolError, ToolOutput, endpoint, found
from canvas2graph.nodes.tools._web import ServiceUnavailable, json_body, request, status_error, text_arg, timeout_for, web_chunk
from canvas2graph.nodes.tools.keys import given_key

TOKEN_ENV = "GITHUB_TOKEN"
MAX_PER_PAGE = 100           # GitHub's largest search page
API_VERSION = "2022-11-28"


class GitHubParams(Params):
    top_n: int = Field(10, gt=0)
    api_key: str | None = ""          # not in RAGFlow (which searches anonymously); optional here


@register("GitHub", GitHubParams, outputs=lambda p: {"formalized_content", "json"})
class GitHub(Tool):
    function_name = "github_search"
    tool_description = ("Search public GitHub repositories by keywords and qualifiers; the most starred matches "
                        "come first, with their description and star count.")
    args = {"query": ToolArg("string", "Keywords for GitHub's repository search: the essential terms of the request. "
                             "Qualifiers such as language:python or topic:rag are allowed.", required=True)}

    def thoughts(self, state) -> str:
        return f"Searching GitHub repositories for: {self.node_args(state).get('query', '')}"

    async def execute(self, args: dict, ctx) -> ToolOutput:
        query = text_arg(args, "query")
        if not query:
            return ToolOutput({"formalized_content": ""})
        headers = {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": API_VERSION}
        token = given_key(self.params.api_key, TOKEN_ENV)
        if token:
            headers["Authorization"] = f"Bearer {token}"
        response = await request("GitHub", "GET", f"{endpoint('github', 'https://api.github.com')}/search/repositories",
                                 timeout=timeout_for(30), headers=headers, secrets=[token] if token else [],
                                 raise_for_status=False, params={
                                     "q": query, "sort": "stars", "order": "desc",
                                     "per_page": min(self.params.top_n, MAX_PER_PAGE)})
        if response.status_code >= 400:
            raise _failure(response, token)
        data = json_body("GitHub", response)
        items = data.get("items") if isinstance(data, dict) else None
        if not isinstance(items, list):
            raise ToolError("GitHub answered without an items list")
        items = items[:self.params.top_n]
        chunks = [web_chunk(title=str(r.get("full_name") or r.get("name") or ""), url=str(r.get("html_url") or ""),
                            content=_summary(r)) for r in items if isinstance(r, dict)]
        return found(chunks, items)


def _failure(response, token: str) -> ToolError:
    """GitHub answers an exhausted rate limit with 403 or 429 and `x-ratelimit-remaining: 0`: that is
    worth retrying later and says nothing about the token."""
    if response.status_code in (403, 429) and response.headers.get("x-ratelimit-remaining") == "0":
        hint = "" if token else f"; a token in params.api_key or {TOKEN_ENV} raises the limit"
        error = ServiceUnavailable(f"GitHub's rate limit is exhausted (HTTP {response.status_code}){hint}")
        error.status = response.status_code
        return error
    return status_error("GitHub", response, [token] if token else [])


def _summary(repo: dict) -> str:
    """The chunk text: the description and star count RAGFlow gives, plus language and topics when known."""
    lines = [str(repo.get("description") or "No description"),
             f"stars: {repo.get('stargazers_count', repo.get('watchers', 0))}"]
    if repo.get("language"):
        lines.append(f"language: {repo['language']}")
    if repo.get("topics"):
        lines.append(f"topics: {', '.join(map(str, repo['topics']))}")
    return "\n".join(lines)

"""WenCai: iwencai (问财) stock, fund and market screening through the pywencai library, SPEC 3.17.

RAGFlow's WenCai has its pywencai call commented out, so there it always reports "". Here it makes
the call RAGFlow's code was written for: `pywencai.get(query=..., query_type=..., perpage=top_n)`, and
formats the answer as RAGFlow's code does (tables as markdown, text sections under their names).
pywencai is an optional dependency (`pip install pywencai`, or `canvas2graph[finance]`) and needs
Node.js to sign its requests; iwencai may also ask for a logged-in cookie, taken from `params.cookie`
or `IWENCAI_COOKIE`. Its requests go to iwencai's own hosts with `requests`, which honours the usual
proxy variables.
"""
from __future__ import annotations

import asyncio
from typing import Any

from pydantic import Field

from canvas2graph.nodes.base import Params
from canvas2graph.nodes.registry import register
from canvas2graph.nodes.tool import Tool, ToolArg, ToolError, ToolOutput
from canvas2graph.nodes.tools._web import one_of, text_arg
from canvas2graph.nodes.tools.keys import given_key

INSTALL_HINT = "pip install pywencai (or canvas2graph[finance]); it also needs Node.js"
COOKIE_ENV = "IWENCAI_COOKIE"
USER_AGENT = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Safari/537.36"
QUERY_TYPES = ("stock", "zhishu", "fund", "hkstock", "usstock", "threeboard", "conbond", "insurance", "futures",
               "lccp", "foreign_exchange")


class WenCaiParams(Params):
    top_n: int = Field(10, gt=0)
    query_type: str = "stock"
    cookie: str | None = ""            # not in RAGFlow; iwencai answers some questions only to a logged-in cookie

    _query_type = one_of("query_type", QUERY_TYPES)


@register("WenCai", WenCaiParams, outputs=lambda p: {"report"})
class WenCai(Tool):
    function_name = "iwencai"
    tool_description = (
        "iwencai (问财) financial search and screening: pick stocks, indices, funds, Hong Kong and US stocks, "
        "convertible bonds, futures and more by conditions written in plain language (e.g. 'stocks with a "
        "P/E under 15 and rising revenue'), and get the matching data as tables.")
    args = {"query": ToolArg("string", "The question, or the conditions to select by.", required=True)}

    def thoughts(self, state) -> str:
        return f"Pulling live financial data from iwencai for: {self.node_args(state).get('query', '')}"

    async def execute(self, args: dict, ctx) -> ToolOutput:
        query = text_arg(args, "query")
        if not query:
            return ToolOutput({"report": ""}, text="")
        p = self.params
        cookie = given_key(p.cookie, COOKIE_ENV) or None
        answer = await asyncio.to_thread(_ask, query, p.query_type, p.top_n, cookie)
        text = report(answer)
        return ToolOutput({"report": text}, text=text)


def _ask(query: str, query_type: str, perpage: int, cookie: str | None) -> Any:
    try:
        import pywencai
    except ImportError:
        raise ToolError(f"WenCai needs the pywencai library, which is not installed: {INSTALL_HINT}") from None
    try:
        # retry=1: pywencai swallows every failure and retries; one attempt keeps a failure quick and visible
        return pywencai.get(query=query, query_type=query_type, perpage=perpage, cookie=cookie,
                            user_agent=USER_AGENT, retry=1, log=False)
    except AttributeError:       # pywencai's way of saying that its first request failed
        raise ToolError("iwencai did not answer (unreachable, or it refused the request: a cookie in "
                        f"params.cookie or {COOKIE_ENV} may be needed)") from None


def report(answer: Any) -> str:
    """pywencai's answer as RAGFlow formats it: tables as markdown, named sections as "name\\ntext"."""
    import pandas as pd
    parts: list[str] = []
    if isinstance(answer, pd.DataFrame):
        parts.append(answer.to_markdown())
    elif isinstance(answer, dict):
        for name, value in answer.items():
            if isinstance(value, list):
                parts.append(f"{name}\n{pd.DataFrame(value).to_markdown()}")
            elif isinstance(value, str):
                parts.append(f"{name}\n{value}")
            elif isinstance(value, dict):
                if "meta" in value:
                    continue
                parts.append(pd.DataFrame.from_dict(value, orient="index").to_markdown())
            elif isinstance(value, pd.DataFrame):
                if "image_url" in value.columns:
                    continue
                parts.append(value.to_markdown())
            else:
                parts.append(f"{name}\n{value}")
    return "\n\n".join(parts)

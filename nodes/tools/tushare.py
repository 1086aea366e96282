"""TuShare: market news flashes from TuShare Pro's `news` API (`POST http://api.tushare.pro`).

RAGFlow keeps TuShare as a legacy component whose `_run` its current engine never calls (every run
fails there); this is what that code does, as a tool like the others: it asks TuShare for the news of
one source (`src`) between `start_date` and `end_date` and keeps the items whose content contains the
keyword (`params.keyword`, else the query), case-insensitively. `formalized_content` is a markdown
table of them, `json` the same rows as objects. The token comes from `params.token` or
`TUSHARE_TOKEN`; the URL is `http://api.tushare.pro`, or `CANVAS2GRAPH_TUSHARE_URL`.
"""
from __future__ import annotations

import time

from pydantic import Field

from canvas2graph.nodes.base import Params
from canvas2graph.nodes.registry import register
from canvas2graph.nodes.tool import Tool, ToolArg, ToolError, ToolOutput, endpoint
from canvas2graph.nodes.tools._web import json_body, one_of, request, text_arg, timeout_for
from canvas2graph.nodes.tools.keys import PLACEHOLDER, api_key

KEY_ENV = "TUSHARE_TOKEN"
SOURCES = ("sina", "wallstreetcn", "10jqka", "eastmoney", "yuncaijing", "fenghuang", "jinrongjie")


class TuShareParams(Params):
    token: str | None = PLACEHOLDER
    src: str = "eastmoney"
    start_date: str = "2024-01-01 09:00:00"
    end_date: str = Field(default_factory=lambda: time.strftime("%Y-%m-%d %H:%M:%S", time.localtime()))
    keyword: str | None = ""

    _src = one_of("src", SOURCES)


@register("TuShare", TuShareParams, outputs=lambda p: {"formalized_content", "json"})
class TuShare(Tool):
    function_name = "tushare_news"
    tool_description = ("Chinese financial news flashes from TuShare (one news source, over a time window), "
                        "filtered to those that mention a keyword.")
    args = {"query": ToolArg("string", "The keyword the news must mention, e.g. a company or a market.",
                             required=True)}

    def thoughts(self, state) -> str:
        return f"Reading TuShare news about: {self.node_args(state).get('query', '')}"

    async def execute(self, args: dict, ctx) -> ToolOutput:
        query = text_arg(args, "query")
        if not query:
            return ToolOutput({"formalized_content": "", "json": []})
        p = self.params
        token = api_key(p.token, KEY_ENV, "TuShare", "token", what="a token", placeholder=PLACEHOLDER)
        body = {"api_name": "news", "token": token,
                "params": {"src": p.src, "start_date": p.start_date, "end_date": p.end_date}}
        response = await request("TuShare", "POST", endpoint("tushare", "http://api.tushare.pro"), json=body,
                                 secrets=[token], timeout=timeout_for(30))
        data = json_body("TuShare", response)
        if not isinstance(data, dict):
            raise ToolError("TuShare answered with something other than a JSON object")
        if data.get("code") != 0:
            raise ToolError(f"TuShare refused the request (code {data.get('code')}): {data.get('msg') or 'no reason given'}")
        table = data.get("data") or {}
        fields, items = table.get("fields"), table.get("items")
        if not isinstance(fields, list) or not isinstance(items, list):
            raise ToolError("TuShare answered without data.fields and data.items")
        import pandas as pd
        frame = pd.DataFrame(items, columns=fields)
        if "content" not in frame.columns:
            raise ToolError("TuShare's news has no content field")
        keyword = (p.keyword or "").strip() or query
        kept = frame[frame["content"].astype(str).str.contains(keyword, case=False, na=False, regex=False)]
        text = kept.to_markdown() if len(kept) else ""
        return ToolOutput({"formalized_content": text, "json": kept.to_dict(orient="records")})

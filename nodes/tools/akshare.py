"""AkShare: the latest news about a Chinese A-share stock, from East Money through the AkShare library
(`akshare.stock_news_em`), SPEC 3.17.

AkShare is a Python library, not an HTTP API: it is an optional dependency (`pip install akshare`, or
`canvas2graph[finance]`), imported when the tool first runs, and a missing library is an error that
says what to install. Its requests go to East Money's hosts through its own HTTP clients (requests, curl_cffi), which honour
the usual `HTTPS_PROXY`/`NO_PROXY` variables; there is no base URL to move. The first `top_n` articles are
listed as RAGFlow lists them: a link with the title, then the content, time and source.
"""
from __future__ import annotations

import asyncio
from typing import Any

from pydantic import Field

from canvas2graph.nodes.base import Params
from canvas2graph.nodes.registry import register
from canvas2graph.nodes.tool import Tool, ToolArg, ToolError, ToolOutput
from canvas2graph.nodes.tools._web import ServiceUnavailable, text_arg

INSTALL_HINT = "pip install akshare (or canvas2graph[finance])"


class AkShareParams(Params):
    top_n: int = Field(10, gt=0)


@register("AkShare", AkShareParams, outputs=lambda p: {"formalized_content"})
class AkShare(Tool):
    function_name = "akshare_stock_news"
    tool_description = ("Fetch the latest news articles about one Chinese A-share stock from East Money "
                        "(东方财富), through AkShare.")
    args = {"query": ToolArg("string", "The stock code to fetch news for, e.g. 600519.", required=True)}

    def thoughts(self, state) -> str:
        return f"Looking up the latest stock news for: {self.node_args(state).get('query', '')}"

    async def execute(self, args: dict, ctx) -> ToolOutput:
        symbol = text_arg(args, "query")
        if not symbol:
            return ToolOutput({"formalized_content": ""})
        frame = await asyncio.to_thread(_stock_news, symbol)
        rows = frame.head(self.params.top_n).to_dict(orient="records")
        return ToolOutput({"formalized_content": "\n\n".join(news_item(row) for row in rows)})


def _stock_news(symbol: str):
    try:
        import akshare
    except ImportError:
        raise ToolError(f"AkShare needs the akshare library, which is not installed: {INSTALL_HINT}") from None
    try:
        return akshare.stock_news_em(symbol=symbol)
    except (KeyError, ValueError, TypeError, IndexError) as e:   # an answer in a shape the library did not expect
        raise ToolError(f"AkShare found no news for {symbol!r}: East Money's answer could not be read "
                        f"({type(e).__name__}: {e})") from None
    except Exception as e:
        # the library's HTTP clients (requests, curl_cffi) failing to connect: worth a retry
        if type(e).__module__.split(".")[0] in ("requests", "curl_cffi", "urllib3"):
            raise ServiceUnavailable(f"AkShare could not reach East Money: {e}") from None
        raise


def news_item(row: dict[str, Any]) -> str:
    """One article in RAGFlow's layout (its labels: content, published at, source)."""
    return (f'<a href="{row.get("新闻链接", "")}">{row.get("新闻标题", "")}</a>\n'
            f' 新闻内容: {row.get("新闻内容", "")} \n发布时间:{row.get("发布时间", "")} \n文章来源: {row.get("文章来源", "")}')

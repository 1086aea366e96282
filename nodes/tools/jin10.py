"""Jin10: financial flashes, the economic calendar, quotes and news from Jin10's open data API
(`https://open-data-api.jin10.com/data-api/...`).

RAGFlow keeps Jin10 as a legacy component whose `_run` its current engine never calls (every run
fails there); this is what that code does, as a tool like the others. `type` picks the data:
`flash` (`/flash?category=<flash_type>`), `calendar` (`/calendar/<calendar_datatype>?category=...`),
`symbols` (`/<symbols_datatype>?type=<symbols_type>`, codes or quotes) or `news` (`/news`). The query
is the text a flash or a news item must contain when `params.contain` is empty; `filter` excludes.
The key comes from `params.secret_key` or `JIN10_SECRET_KEY` (header `secret-key`); the base URL is
`https://open-data-api.jin10.com/data-api`, or `CANVAS2GRAPH_JIN10_URL`.
"""
from __future__ import annotations

from typing import Any

from canvas2graph.nodes.base import Params
from canvas2graph.nodes.registry import register
from canvas2graph.nodes.tool import Tool, ToolArg, ToolError, ToolOutput, endpoint
from canvas2graph.nodes.tools._web import json_body, one_of, request, text_arg, timeout_for
from canvas2graph.nodes.tools.keys import PLACEHOLDER, api_key

KEY_ENV = "JIN10_SECRET_KEY"
DEFAULT_URL = "https://open-data-api.jin10.com/data-api"
# Jin10's one-letter keys, spelled out as RAGFlow spells them
SYMBOL_NAMES = {"c": "Commodity Code", "e": "Stock Exchange", "n": "Commodity Name", "t": "Commodity Type"}
QUOTE_NAMES = {"a": "Selling Price", "b": "Buying Price", "c": "Commodity Code", "e": "Stock Exchange",
               "h": "Highest Price", "hc": "Yesterday’s Closing Price", "l": "Lowest Price", "o": "Opening Price",
               "p": "Latest Price", "t": "Market Quote Time"}


class Jin10Params(Params):
    type: str = "flash"
    secret_key: str | None = PLACEHOLDER
    flash_type: str = "1"
    calendar_type: str = "cj"
    calendar_datatype: str = "data"
    symbols_type: str = "GOODS"
    symbols_datatype: str = "symbols"
    contain: str | None = ""
    filter: str | None = ""

    _type = one_of("type", ("flash", "calendar", "symbols", "news"))
    _flash = one_of("flash_type", ("1", "2", "3", "4", "5"))
    _calendar = one_of("calendar_type", ("cj", "qh", "hk", "us"))
    _calendar_data = one_of("calendar_datatype", ("data", "event", "holiday"))
    _symbols = one_of("symbols_type", ("GOODS", "FOREX", "FUTURE", "CRYPTO"))
    _symbols_data = one_of("symbols_datatype", ("symbols", "quotes"))


@register("Jin10", Jin10Params, outputs=lambda p: {"formalized_content", "json"})
class Jin10(Tool):
    function_name = "jin10_data"
    tool_description = ("Financial market data from Jin10 (金十数据): the latest flashes, the economic calendar, "
                        "commodity, forex, futures and crypto codes or quotes, or news, as this tool is configured.")
    args = {"query": ToolArg("string", "What the flashes or news must mention (a market, an asset, an event).",
                             required=True)}

    def thoughts(self, state) -> str:
        return f"Reading Jin10 {self.params.type} data."

    async def execute(self, args: dict, ctx) -> ToolOutput:
        query = text_arg(args, "query")
        if not query:
            return ToolOutput({"formalized_content": "", "json": []})
        p = self.params
        key = api_key(p.secret_key, KEY_ENV, "Jin10", "secret_key", what="a secret key", placeholder=PLACEHOLDER)
        base = endpoint("jin10", DEFAULT_URL)
        contain = (p.contain or "").strip() or query
        if p.type == "flash":
            url, params = f"{base}/flash", {"category": p.flash_type, "contain": contain, "filter": p.filter or ""}
        elif p.type == "calendar":
            url, params = f"{base}/calendar/{p.calendar_datatype}", {"category": p.calendar_type}
        elif p.type == "symbols":
            url, params = f"{base}/{p.symbols_datatype}", {"type": p.symbols_type}
            if p.symbols_datatype == "quotes":
                params["codes"] = "BTCUSD"          # the one code RAGFlow asks quotes for
        else:
            url, params = f"{base}/news", {"contain": contain, "filter": p.filter or ""}
        response = await request("Jin10", "GET", url, params=params, headers={"secret-key": key}, secrets=[key],
                                 timeout=timeout_for(30))
        body = json_body("Jin10", response)
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, list):
            detail = body.get("message") or body.get("msg") if isinstance(body, dict) else None
            raise ToolError(f"Jin10 answered without a data list{': ' + str(detail) if detail else ''}")
        rows = [r for r in data if isinstance(r, dict)]
        if p.type == "flash":
            contents = [str((r.get("data") or {}).get("content", "")) for r in rows]
            return ToolOutput({"formalized_content": "\n\n".join(c for c in contents if c), "json": rows})
        if p.type == "symbols":
            rows = [_renamed(r, QUOTE_NAMES if p.symbols_datatype == "quotes" else SYMBOL_NAMES) for r in rows]
        import pandas as pd
        return ToolOutput({"formalized_content": pd.DataFrame(rows).to_markdown() if rows else "", "json": rows})


def _renamed(row: dict[str, Any], names: dict[str, str]) -> dict[str, Any]:
    return {names.get(k, k): v for k, v in row.items()}

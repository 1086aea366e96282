"""YahooFinance: Yahoo Finance's JSON endpoints, the ones the `yfinance` library RAGFlow uses reads, SPEC 3.17.

The output is RAGFlow's `report`: one markdown section per boolean param that is on.

- The stock code or company name goes to the search endpoint (`/v1/finance/search`) first: it names
  the symbol (an exact symbol match wins, else the best match) and, with `news`, brings the news.
- `history`: the chart endpoint (`/v8/finance/chart/{symbol}`), one month of daily prices, as
  `yfinance`'s `history()` by default.
- `info`, `count` (share counts) and `financials` (RAGFlow shows the earnings and dividend calendar
  under this flag): the quoteSummary endpoint (`/v10/finance/quoteSummary/{symbol}`).
- `income_stmt`, `balance_sheet`, `cash_flow_statement`: the fundamentals time series
  (`/ws/fundamentals-timeseries/v1/finance/timeseries/{symbol}`), annual and quarterly.

quoteSummary and the time series want a session: a cookie from `https://fc.yahoo.com` and a "crumb"
from `/v1/test/getcrumb` sent with it, fetched once per call and only when needed. The API base is
`https://query2.finance.yahoo.com` (`CANVAS2GRAPH_YAHOO_FINANCE_URL`), the cookie source
`https://fc.yahoo.com` (`CANVAS2GRAPH_YAHOO_FINANCE_COOKIE_URL`).
"""
from __future__ import annotations

import re
import time
from datetime import datetime, timezone
from typing import Any

from pydantic import field_validator

from canvas2graph.nodes.base import Params
from canvas2graph.nodes.registry import register
from canvas2graph.nodes.tool import Tool, ToolArg, ToolError, ToolOutput, endpoint
from canvas2graph.nodes.tools._web import request, status_error, text_arg, timeout_for

SERVICE = "Yahoo Finance"
# Yahoo answers non-browser user agents with 429 Too Many Requests; yfinance sends a browser's too.
BROWSER_UA = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0 Safari/537.36"
NEWS_COUNT = 10                       # yfinance's Ticker.news default
SERIES_START = 1483142400             # 2016-12-31, where yfinance starts (Yahoo keeps 4 years, 5 quarters)
FLAGS = ("info", "history", "count", "financials", "income_stmt", "balance_sheet", "cash_flow_statement", "news")
_DATE_KEY = re.compile(r"^date|Date")          # exDividendDate, dateShortInterest; not "updateTime"
_SYMBOLISH = re.compile(r"^[A-Za-z0-9^][A-Za-z0-9.\-=^]{0,19}$")

INFO_MODULES = ("price", "summaryDetail", "assetProfile", "defaultKeyStatistics", "financialData", "quoteType")
SHARE_FIELDS = ("sharesOutstanding", "floatShares", "impliedSharesOutstanding", "sharesShort",
                "sharesShortPriorMonth", "dateShortInterest", "heldPercentInsiders", "heldPercentInstitutions")

# The line items of each statement, in the order Yahoo's pages show them.
STATEMENTS = {
    "income_stmt": ("income statement", (
        "TotalRevenue", "CostOfRevenue", "GrossProfit", "OperatingExpense", "ResearchAndDevelopment",
        "SellingGeneralAndAdministration", "OperatingIncome", "NetNonOperatingInterestIncomeExpense", "PretaxIncome",
        "TaxProvision", "NetIncome", "NetIncomeCommonStockholders", "BasicEPS", "DilutedEPS", "BasicAverageShares",
        "DilutedAverageShares", "EBIT", "EBITDA")),
    "balance_sheet": ("balance sheet", (
        "TotalAssets", "CurrentAssets", "CashAndCashEquivalents", "CashCashEquivalentsAndShortTermInvestments",
        "Receivables", "Inventory", "TotalNonCurrentAssets", "NetPPE", "GoodwillAndOtherIntangibleAssets",
        "TotalLiabilitiesNetMinorityInterest", "CurrentLiabilities", "TotalNonCurrentLiabilitiesNetMinorityInterest",
        "TotalDebt", "LongTermDebt", "NetDebt", "StockholdersEquity", "RetainedEarnings",
        "TotalEquityGrossMinorityInterest", "WorkingCapital", "ShareIssued", "OrdinarySharesNumber")),
    "cash_flow_statement": ("cash flow statement", (
        "OperatingCashFlow", "InvestingCashFlow", "FinancingCashFlow", "EndCashPosition", "CapitalExpenditure",
        "FreeCashFlow", "RepurchaseOfCapitalStock", "CashDividendsPaid", "IssuanceOfDebt", "RepaymentOfDebt",
        "DepreciationAndAmortization", "StockBasedCompensation", "ChangeInWorkingCapital")),
}


class YahooFinanceParams(Params):
    info: bool = True
    history: bool = False
    count: bool = False
    financials: bool = False
    income_stmt: bool = False
    balance_sheet: bool = False
    cash_flow_statement: bool = False
    news: bool = True

    # RAGFlow's check_boolean: a real boolean, not a string or number that pydantic would coerce
    @field_validator(*FLAGS, mode="before")
    @classmethod
    def _boolean(cls, v: Any, info) -> Any:
        if not isinstance(v, bool):
            raise ValueError(f"{info.field_name} must be true or false, not {v!r}")
        return v


@register("YahooFinance", YahooFinanceParams, outputs=lambda p: {"report"})
class YahooFinance(Tool):
    function_name = "yahoo_finance"
    tool_description = ("Stock market data from Yahoo Finance for one company: profile and key figures, recent "
                        "daily prices, financial statements and news, as this tool is configured.")
    args = {"stock_code": ToolArg("string", "The stock symbol (e.g. AAPL, 0700.HK, 600519.SS) or the company name.",
                                  required=True)}

    def thoughts(self, state) -> str:
        return f"Fetching market data from Yahoo Finance for: {self.node_args(state).get('stock_code', '')}"

    async def execute(self, args: dict, ctx) -> ToolOutput:
        code = text_arg(args, "stock_code")
        if not code:
            return ToolOutput({"report": ""}, text="")
        p = self.params
        if not any(getattr(p, f) for f in FLAGS):
            return ToolOutput({"report": ""}, text="")
        yahoo = _Yahoo()
        symbol, news = await yahoo.find(code, with_news=p.news)
        sections: list[tuple[str, str]] = []

        modules = [m for m in INFO_MODULES if p.info]
        if p.count and "defaultKeyStatistics" not in modules:
            modules.append("defaultKeyStatistics")
        if p.financials:
            modules.append("calendarEvents")
        summary = await yahoo.quote_summary(symbol, modules) if modules else {}

        if p.info:
            sections.append(("Information", _pairs(_info(summary))))
        if p.history:
            sections.append(("History", _history(await yahoo.chart(symbol))))
        if p.count:
            stats = summary.get("defaultKeyStatistics") or {}
            sections.append(("Share count", _pairs([(k, _value(stats.get(k), k)) for k in SHARE_FIELDS
                                                   if _value(stats.get(k), k) != ""])))
        if p.financials:
            sections.append(("Calendar", _pairs(_calendar(summary.get("calendarEvents") or {}))))
        for flag, (name, items) in STATEMENTS.items():
            if getattr(p, flag):
                series = await yahoo.series(symbol, items)
                sections.append((name.capitalize(), _statement(series, "annual", items)))
                sections.append((f"Quarterly {name}", _statement(series, "quarterly", items)))
        if p.news:
            sections.append(("News", _news(news)))

        report = "\n\n".join(f"# {title}:\n{body}\n" for title, body in sections)
        return ToolOutput({"report": report}, text=report)


class _Yahoo:
    """The requests of one call, sharing the session cookie and crumb once they are fetched."""

    def __init__(self) -> None:
        self.api = endpoint("yahoo_finance", "https://query2.finance.yahoo.com")
        self.cookie_source = endpoint("yahoo_finance_cookie", "https://fc.yahoo.com")
        self.cookie = ""
        self.crumb: str | None = None

    async def find(self, code: str, *, with_news: bool) -> tuple[str, list[dict]]:
        """The symbol for a code or company name, and the news when asked for."""
        data = await self._get("/v1/finance/search", {"q": code, "quotesCount": 6,
                                                      "newsCount": NEWS_COUNT if with_news else 0})
        quotes = [q for q in data.get("quotes") or [] if isinstance(q, dict) and q.get("symbol")]
        exact = next((q["symbol"] for q in quotes if q["symbol"].upper() == code.upper()), None)
        if exact:
            symbol = exact
        elif quotes:
            symbol = quotes[0]["symbol"]
        elif _SYMBOLISH.match(code):
            symbol = code.upper()           # search may not list it, the other endpoints may still know it
        else:
            raise ToolError(f"{SERVICE} found no stock for {code!r}")
        return symbol, [n for n in data.get("news") or [] if isinstance(n, dict)]

    async def chart(self, symbol: str) -> dict:
        data = await self._get(f"/v8/finance/chart/{symbol}", {"range": "1mo", "interval": "1d",
                                                               "includePrePost": "false", "events": "div,splits"})
        return _first_result(data, "chart", symbol)

    async def quote_summary(self, symbol: str, modules: list[str]) -> dict:
        data = await self._get(f"/v10/finance/quoteSummary/{symbol}",
                               {"modules": ",".join(modules), "formatted": "false"}, session=True)
        return _first_result(data, "quoteSummary", symbol)

    async def series(self, symbol: str, items: tuple[str, ...]) -> dict[str, dict[str, Any]]:
        """{"annualTotalRevenue": {"2024-06-30": 245122000000, ...}, ...} for annual and quarterly items."""
        types = [f"{period}{item}" for period in ("annual", "quarterly") for item in items]
        data = await self._get(f"/ws/fundamentals-timeseries/v1/finance/timeseries/{symbol}", {
            "symbol": symbol, "type": ",".join(types), "period1": SERIES_START, "period2": int(time.time())},
            session=True)
        found: dict[str, dict[str, Any]] = {}
        for entry in (data.get("timeseries") or {}).get("result") or []:
            for key, points in entry.items():
                if key in ("meta", "timestamp") or not isinstance(points, list):
                    continue
                found[key] = {pt["asOfDate"]: (pt.get("reportedValue") or {}).get("raw")
                              for pt in points if isinstance(pt, dict) and pt.get("asOfDate")}
        return found

    async def _session(self) -> None:
        """The cookie (fc.yahoo.com answers 404 but sets it), then the crumb that goes with it."""
        headers = {"User-Agent": BROWSER_UA}
        landing = await request(SERVICE, "GET", self.cookie_source, headers=headers, timeout=timeout_for(30),
                                follow_redirects=False, raise_for_status=False)
        self.cookie = "; ".join(c.split(";", 1)[0].strip() for c in landing.headers.get_list("set-cookie"))
        if not self.cookie:
            raise ToolError(f"{SERVICE} set no session cookie at {self.cookie_source} (it may ask for consent "
                            "from this region); quoteSummary and financial statements need one")
        response = await request(SERVICE, "GET", f"{self.api}/v1/test/getcrumb", timeout=timeout_for(30),
                                 headers={**headers, "Cookie": self.cookie}, raise_for_status=False)
        crumb = response.text.strip()
        if response.status_code >= 400:
            raise status_error(SERVICE, response, detail=f"no session crumb: {_error_of(response) or crumb[:200]}")
        if not crumb or len(crumb) > 64 or "<" in crumb or " " in crumb:
            raise ToolError(f"{SERVICE} gave no usable session crumb")
        self.crumb = crumb

    async def _get(self, path: str, params: dict, *, session: bool = False) -> dict:
        if session and self.crumb is None:
            await self._session()
        headers = {"User-Agent": BROWSER_UA, "Accept": "application/json"}
        if self.cookie:
            headers["Cookie"] = self.cookie
        if session:
            params = {**params, "crumb": self.crumb}
        response = await request(SERVICE, "GET", f"{self.api}{path}", params=params, headers=headers,
                                 timeout=timeout_for(30), raise_for_status=False)
        if response.status_code >= 400:
            raise status_error(SERVICE, response, detail=_error_of(response))
        try:
            data = response.json()
        except ValueError:
            raise ToolError(f"{SERVICE} answered {path} with something other than JSON") from None
        if not isinstance(data, dict):
            raise ToolError(f"{SERVICE} answered {path} with something other than a JSON object")
        return data


def _error_of(response) -> str | None:
    """Yahoo's error shape: `{"<endpoint>": {"result": null, "error": {"code", "description"}}}`."""
    try:
        body = response.json()
    except ValueError:
        return None
    for value in (body.values() if isinstance(body, dict) else ()):
        err = value.get("error") if isinstance(value, dict) else None
        if isinstance(err, dict):
            return str(err.get("description") or err.get("code") or err)
    return None


def _first_result(data: dict, key: str, symbol: str) -> dict:
    block = data.get(key) or {}
    err = block.get("error")
    if err:
        raise ToolError(f"{SERVICE}: {err.get('description') or err.get('code') or err}")
    results = block.get("result") or []
    if not results or not isinstance(results[0], dict):
        raise ToolError(f"{SERVICE} has no {key} data for {symbol}")
    return results[0]


# --- rendering -----------------------------------------------------------------------------------

def _value(v: Any, key: str = "") -> Any:
    """A plain value from Yahoo's `{raw, fmt}` pairs; dates (epoch seconds) as ISO dates."""
    is_date = bool(_DATE_KEY.search(key))
    if isinstance(v, dict):
        if "raw" not in v:
            return ""
        if is_date and v.get("fmt"):
            return v["fmt"]
        v = v["raw"]
    if isinstance(v, (int, float)) and not isinstance(v, bool) and is_date and v > 10**8:
        return datetime.fromtimestamp(v, timezone.utc).date().isoformat()
    if isinstance(v, list):
        parts = [_value(x, key) for x in v]
        parts = [str(x) for x in parts if x not in ("", None) and not isinstance(x, dict)]
        return ", ".join(parts)
    return "" if v is None else v


def _info(summary: dict) -> list[tuple[str, Any]]:
    """The quoteSummary modules merged into one flat list of fields, as yfinance's `info` merges them."""
    seen: dict[str, Any] = {}
    for module in INFO_MODULES:
        for key, raw in (summary.get(module) or {}).items():
            if key in seen or key == "maxAge":
                continue
            if key == "companyOfficers" and isinstance(raw, list):
                value = "; ".join(" - ".join(str(o[f]) for f in ("name", "title") if o.get(f))
                                  for o in raw if isinstance(o, dict))
            else:
                value = _value(raw, key)
            if value not in ("", None):
                seen[key] = value
    return list(seen.items())


def _calendar(events: dict) -> list[tuple[str, Any]]:
    earnings = events.get("earnings") or {}
    rows = [("Dividend Date", _value(events.get("dividendDate"), "date")),
            ("Ex-Dividend Date", _value(events.get("exDividendDate"), "date")),
            ("Earnings Date", _value(earnings.get("earningsDate"), "date"))]
    for label, key in (("Earnings High", "earningsHigh"), ("Earnings Low", "earningsLow"),
                       ("Earnings Average", "earningsAverage"), ("Revenue High", "revenueHigh"),
                       ("Revenue Low", "revenueLow"), ("Revenue Average", "revenueAverage")):
        rows.append((label, _value(earnings.get(key), key)))
    return [(k, v) for k, v in rows if v not in ("", None)]


def _history(chart: dict) -> str:
    """Daily rows: Date, Open, High, Low, Close, Volume, Dividends, Stock Splits (yfinance's columns)."""
    stamps = chart.get("timestamp") or []
    quote = ((chart.get("indicators") or {}).get("quote") or [{}])[0]
    offset = (chart.get("meta") or {}).get("gmtoffset") or 0
    events = chart.get("events") or {}
    dividends = {int(k): v.get("amount") for k, v in (events.get("dividends") or {}).items()}
    splits = {int(k): f"{v.get('numerator')}:{v.get('denominator')}" for k, v in (events.get("splits") or {}).items()}
    rows = []
    for i, ts in enumerate(stamps):
        cols = [_at(quote.get(c), i) for c in ("open", "high", "low", "close", "volume")]
        if cols[3] is None:                       # a day without a trade
            continue
        day = datetime.fromtimestamp(ts + offset, timezone.utc).date().isoformat()
        prices = [round(c, 4) if isinstance(c, float) else c for c in cols]
        rows.append([day, *prices, dividends.get(ts, 0), splits.get(ts, 0)])
    if not rows:
        return "No price data."
    return _table(["Date", "Open", "High", "Low", "Close", "Volume", "Dividends", "Stock Splits"], rows)


def _statement(series: dict[str, dict[str, Any]], period: str, items: tuple[str, ...]) -> str:
    """One line item per row, one reporting date per column, newest first (yfinance's layout)."""
    present = [i for i in items if series.get(f"{period}{i}")]
    if not present:
        return "No data."
    dates = sorted({d for i in present for d in series[f"{period}{i}"]}, reverse=True)
    rows = [[_label(i), *(_blank(series[f"{period}{i}"].get(d)) for d in dates)] for i in present]
    return _table(["", *dates], rows)


def _news(news: list[dict]) -> str:
    if not news:
        return "No news."
    rows = []
    for n in news:
        when = n.get("providerPublishTime")
        published = datetime.fromtimestamp(when, timezone.utc).strftime("%Y-%m-%d %H:%M UTC") \
            if isinstance(when, (int, float)) else ""
        rows.append([n.get("title", ""), n.get("publisher", ""), published, n.get("link", "")])
    return _table(["Title", "Publisher", "Published", "Link"], rows)


def _pairs(pairs: list[tuple[str, Any]]) -> str:
    return _table(["", "Value"], [list(p) for p in pairs]) if pairs else "No data."


def _table(header: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(":---" for _ in header) + "|"]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _cell(value: Any) -> str:
    return " ".join(str(value).split()).replace("|", "\\|")


def _at(values: Any, i: int) -> Any:
    return values[i] if isinstance(values, list) and i < len(values) else None


def _blank(value: Any) -> Any:
    return "" if value is None else value


def _label(item: str) -> str:
    """TotalRevenue -> Total Revenue, NetPPE -> Net PPE, EBITDA stays."""
    return re.sub(r"(?<=[a-z])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", " ", item)

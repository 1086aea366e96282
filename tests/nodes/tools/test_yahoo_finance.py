"""YahooFinance reads Yahoo Finance's JSON endpoints: search (symbol and news), chart (price history),
quoteSummary (profile, share counts, calendar) and the fundamentals time series (statements), the last
two with a session cookie and crumb; the output is RAGFlow's markdown `report`, one section per
boolean param; Yahoo's errors, refused sessions, timeouts and unreachable hosts are clear errors."""
from __future__ import annotations

import pytest

from canvas2graph.compiler.canvas import diagnose
from tests.nodes.helpers import build, context, errors, state
from tests.nodes.tools.support import (FakeService, Reply, Seen, agent_dsl, closed_port_url, finished, node_dsl,
                                       run_turn, tool_messages)

COOKIE = "A3=d=AQABBKx7&S=AQAAAk9V"
CRUMB = "Wq1Mb7c.Jx/"

QUOTES = [{"exchange": "NMS", "shortname": "Microsoft Corporation", "quoteType": "EQUITY", "symbol": "MSFT",
           "index": "quotes", "score": 20000, "typeDisp": "Equity", "longname": "Microsoft Corporation",
           "exchDisp": "NASDAQ", "isYahooFinance": True},
          {"exchange": "GER", "shortname": "MICROSOFT", "quoteType": "EQUITY", "symbol": "MSF.DE", "index": "quotes",
           "score": 19000, "isYahooFinance": True}]
NEWS = [{"uuid": "3f1c", "title": "Microsoft beats estimates | cloud grows", "publisher": "Reuters",
         "link": "https://finance.yahoo.com/news/msft-beats.html", "providerPublishTime": 1714075200, "type": "STORY",
         "relatedTickers": ["MSFT"]}]

CHART = {"chart": {"result": [{
    "meta": {"currency": "USD", "symbol": "MSFT", "exchangeName": "NMS", "instrumentType": "EQUITY",
             "gmtoffset": -14400, "timezone": "EDT", "exchangeTimezoneName": "America/New_York",
             "regularMarketPrice": 409.06, "dataGranularity": "1d", "range": "1mo"},
    "timestamp": [1713533400, 1713792600, 1713879000],
    "events": {"dividends": {"1713792600": {"amount": 0.75, "date": 1713792600}}},
    "indicators": {"quote": [{"open": [404.03, 400.07999267578125, 404.24],
                              "high": [405.48, 402.85, 408.2],
                              "low": [398.6, 397.77, 403.06],
                              "close": [399.12, 400.959991455078, None],
                              "volume": [30263100, 20286900, None]}],
                   "adjclose": [{"adjclose": [399.12, 400.96, None]}]}}], "error": None}}

MODULES = {
    "price": {"maxAge": 1, "symbol": "MSFT", "longName": "Microsoft Corporation", "currency": "USD",
              "regularMarketPrice": 409.06, "marketCap": 3039999901696},
    "summaryDetail": {"maxAge": 1, "previousClose": 399.04, "trailingPE": 36.5, "exDividendDate": 1715817600,
                      "currency": "USD"},
    "assetProfile": {"sector": "Technology", "fullTimeEmployees": 221000,
                     "longBusinessSummary": "Microsoft develops software.\nIt sells | licenses it.",
                     "companyOfficers": [{"name": "Mr. Satya Nadella", "title": "Chairman & CEO", "age": 56}]},
    "defaultKeyStatistics": {"maxAge": 1, "sharesOutstanding": 7432309760, "floatShares": 7425170000,
                             "impliedSharesOutstanding": 7432309760, "dateShortInterest": 1713139200},
    "financialData": {"maxAge": 86400, "recommendationKey": "buy", "totalRevenue": 236584000512},
    "quoteType": {"symbol": "MSFT", "quoteType": "EQUITY", "exchange": "NMS"},
    "calendarEvents": {"maxAge": 1, "earnings": {"earningsDate": [1714075200], "earningsAverage": 2.82,
                                                 "earningsLow": 2.7, "earningsHigh": 2.9, "revenueAverage": 60800000000},
                       "exDividendDate": 1715817600, "dividendDate": 1718236800},
}

SERIES = {
    "annualTotalRevenue": {"2023-06-30": 211915000000, "2022-06-30": 198270000000},
    "annualNetIncome": {"2023-06-30": 72361000000},
    "quarterlyTotalRevenue": {"2024-03-31": 61858000000},
    "annualTotalAssets": {"2023-06-30": 411976000000},
    "annualOperatingCashFlow": {"2023-06-30": 87582000000},
}


class Yahoo:
    """Yahoo's endpoints on one server and fc.yahoo.com on another, checking cookie and crumb as Yahoo does."""

    def __init__(self, api: FakeService, cookies: FakeService):
        self.api, self.cookies = api, cookies
        cookies.on("GET", "/", Reply(404, "<html><body>404 Not Found</body></html>", "text/html", headers={
            "Set-Cookie": f"{COOKIE}; Expires=Sat, 26 Apr 2025 10:00:00 GMT; Max-Age=31557600; Domain=.yahoo.com; "
                          "Path=/; SameSite=None; Secure; HttpOnly"}))
        api.on("GET", "/v1/test/getcrumb", self.crumb)
        api.on("GET", "/v1/finance/search", self.search)
        api.on("GET", "/v8/finance/chart/MSFT", Reply(200, CHART))
        api.on("GET", "/v10/finance/quoteSummary/MSFT", self.quote_summary)
        api.on("GET", "/ws/fundamentals-timeseries/v1/finance/timeseries/MSFT", self.timeseries)

    def paths(self) -> list[str]:
        return [r.path for r in self.api.requests]

    @staticmethod
    def crumb(req: Seen) -> Reply:
        if req.headers.get("cookie") != COOKIE:
            return Reply(401, {"finance": {"result": None, "error": {"code": "Unauthorized", "description": "Invalid Cookie"}}})
        return Reply(200, CRUMB, "text/plain;charset=utf-8")

    @staticmethod
    def search(req: Seen) -> Reply:
        quotes = QUOTES if req.arg("q").lower() in ("msft", "microsoft") else []
        news = NEWS[:int(req.arg("newsCount"))] if quotes else []
        return Reply(200, {"explains": [], "count": len(quotes), "quotes": quotes, "news": news, "nav": [],
                           "lists": [], "researchReports": [], "totalTime": 20})

    @staticmethod
    def _unauthorized(req: Seen) -> Reply | None:
        if req.arg("crumb") != CRUMB or req.headers.get("cookie") != COOKIE:
            return Reply(401, {"finance": {"result": None, "error": {"code": "Unauthorized", "description": "Invalid Crumb"}}})
        return None

    def quote_summary(self, req: Seen) -> Reply:
        refused = self._unauthorized(req)
        if refused:
            return refused
        modules = req.arg("modules").split(",")
        return Reply(200, {"quoteSummary": {"result": [{m: MODULES[m] for m in modules}], "error": None}})

    def timeseries(self, req: Seen) -> Reply:
        refused = self._unauthorized(req)
        if refused:
            return refused
        result = []
        for kind in req.arg("type").split(","):
            entry = {"meta": {"symbol": ["MSFT"], "type": [kind]}}
            if kind in SERIES:
                entry["timestamp"] = [1688083200]
                entry[kind] = [None] + [{"dataId": 20100, "asOfDate": day, "periodType": "12M", "currencyCode": "USD",
                                         "reportedValue": {"raw": raw, "fmt": f"{raw / 1e9:.2f}B"}}
                                        for day, raw in SERIES[kind].items()]
            result.append(entry)
        return Reply(200, {"timeseries": {"result": result, "error": None}})


@pytest.fixture
def yahoo(fake, monkeypatch):
    cookies = FakeService().start()
    monkeypatch.setenv("CANVAS2GRAPH_YAHOO_FINANCE_URL", fake.url)
    monkeypatch.setenv("CANVAS2GRAPH_YAHOO_FINANCE_COOKIE_URL", cookies.url)
    yield Yahoo(fake, cookies)
    cookies.stop()


def yahoo_node(**params):
    return node_dsl("YahooFinance:Y", "YahooFinance", {"stock_code": "sys.query", **params}, show="report")


def report_of(events) -> str:
    data = finished(events, "YahooFinance:Y")
    assert data["error"] is None, data["error"]
    return data["outputs"]["report"]


INFORMATION = """# Information:
|  | Value |
|:---|:---|
| symbol | MSFT |
| longName | Microsoft Corporation |
| currency | USD |
| regularMarketPrice | 409.06 |
| marketCap | 3039999901696 |
| previousClose | 399.04 |
| trailingPE | 36.5 |
| exDividendDate | 2024-05-16 |
| sector | Technology |
| fullTimeEmployees | 221000 |
| longBusinessSummary | Microsoft develops software. It sells \\| licenses it. |
| companyOfficers | Mr. Satya Nadella - Chairman & CEO |
| sharesOutstanding | 7432309760 |
| floatShares | 7425170000 |
| impliedSharesOutstanding | 7432309760 |
| dateShortInterest | 2024-04-15 |
| recommendationKey | buy |
| totalRevenue | 236584000512 |
| quoteType | EQUITY |
| exchange | NMS |
"""

NEWS_SECTION = """# News:
| Title | Publisher | Published | Link |
|:---|:---|:---|:---|
| Microsoft beats estimates \\| cloud grows | Reuters | 2024-04-25 20:00 UTC | https://finance.yahoo.com/news/msft-beats.html |
"""


async def test_by_default_the_report_has_the_information_and_the_news(yahoo):
    events = await run_turn(yahoo_node(), "MSFT")
    assert report_of(events) == INFORMATION + "\n\n" + NEWS_SECTION
    search, crumb, summary = yahoo.api.requests
    assert {k: v[0] for k, v in search.query.items()} == {"q": "MSFT", "quotesCount": "6", "newsCount": "10"}
    assert [r.path for r in yahoo.cookies.requests] == ["/"]
    assert crumb.path == "/v1/test/getcrumb" and crumb.headers["cookie"] == COOKIE
    assert summary.path == "/v10/finance/quoteSummary/MSFT"
    assert {k: v[0] for k, v in summary.query.items()} == {
        "modules": "price,summaryDetail,assetProfile,defaultKeyStatistics,financialData,quoteType",
        "formatted": "false", "crumb": CRUMB}
    assert summary.headers["cookie"] == COOKIE
    assert all(r.headers["user-agent"].startswith("Mozilla/5.0") for r in yahoo.api.requests)
    assert finished(events, "YahooFinance:Y")["inputs"] == {"stock_code": "MSFT"}


async def test_a_company_name_is_resolved_and_history_needs_no_session(yahoo):
    events = await run_turn(yahoo_node(info=False, news=False, history=True), "Microsoft")
    assert yahoo.paths() == ["/v1/finance/search", "/v8/finance/chart/MSFT"]
    assert yahoo.api.requests[0].arg("newsCount") == "0" and yahoo.cookies.requests == []
    assert {k: v[0] for k, v in yahoo.api.requests[1].query.items()} == {
        "range": "1mo", "interval": "1d", "includePrePost": "false", "events": "div,splits"}
    assert report_of(events) == """# History:
| Date | Open | High | Low | Close | Volume | Dividends | Stock Splits |
|:---|:---|:---|:---|:---|:---|:---|:---|
| 2024-04-19 | 404.03 | 405.48 | 398.6 | 399.12 | 30263100 | 0 | 0 |
| 2024-04-22 | 400.08 | 402.85 | 397.77 | 400.96 | 20286900 | 0.75 | 0 |
"""


async def test_statements_come_from_the_fundamentals_time_series_annual_and_quarterly(yahoo):
    events = await run_turn(yahoo_node(info=False, news=False, income_stmt=True, balance_sheet=True,
                                       cash_flow_statement=True), "MSFT")
    series = [r for r in yahoo.api.requests if r.path.startswith("/ws/")]
    assert len(series) == 3 and all(r.arg("symbol") == "MSFT" and r.arg("crumb") == CRUMB for r in series)
    income_types = series[0].arg("type").split(",")
    assert income_types[0] == "annualTotalRevenue" and "quarterlyNetIncome" in income_types
    assert series[0].arg("period1") == "1483142400" and int(series[0].arg("period2")) > 1700000000
    report = report_of(events)
    assert report.index("# Income statement:") < report.index("# Quarterly income statement:") \
        < report.index("# Balance sheet:") < report.index("# Quarterly balance sheet:") \
        < report.index("# Cash flow statement:") < report.index("# Quarterly cash flow statement:")
    assert """# Income statement:
|  | 2023-06-30 | 2022-06-30 |
|:---|:---|:---|
| Total Revenue | 211915000000 | 198270000000 |
| Net Income | 72361000000 |  |
""" in report
    assert "# Quarterly income statement:\n|  | 2024-03-31 |\n|:---|:---|\n| Total Revenue | 61858000000 |\n" in report
    assert "# Quarterly balance sheet:\nNo data.\n" in report
    assert "| Operating Cash Flow | 87582000000 |" in report


async def test_share_counts_and_the_calendar_of_the_financials_flag(yahoo):
    events = await run_turn(yahoo_node(info=False, news=False, count=True, financials=True), "MSFT")
    summary = next(r for r in yahoo.api.requests if "quoteSummary" in r.path)
    assert summary.arg("modules") == "defaultKeyStatistics,calendarEvents"
    assert report_of(events) == """# Share count:
|  | Value |
|:---|:---|
| sharesOutstanding | 7432309760 |
| floatShares | 7425170000 |
| impliedSharesOutstanding | 7432309760 |
| dateShortInterest | 2024-04-15 |


# Calendar:
|  | Value |
|:---|:---|
| Dividend Date | 2024-06-13 |
| Ex-Dividend Date | 2024-05-16 |
| Earnings Date | 2024-04-25 |
| Earnings High | 2.9 |
| Earnings Low | 2.7 |
| Earnings Average | 2.82 |
| Revenue Average | 60800000000 |
"""


async def test_the_exact_symbol_wins_and_unknown_names_are_errors(yahoo):
    yahoo.api.on("GET", "/v1/finance/search", Reply(200, {"quotes": list(reversed(QUOTES)), "news": []}))
    await run_turn(yahoo_node(info=False, news=False, history=True), "msft")
    assert yahoo.paths()[-1] == "/v8/finance/chart/MSFT"

    yahoo.api.on("GET", "/v1/finance/search", Reply(200, {"quotes": [], "news": []}))
    events = await run_turn(yahoo_node(), "no such company inc")
    assert finished(events, "YahooFinance:Y")["error"] == "Yahoo Finance found no stock for 'no such company inc'"

    yahoo.api.on("GET", "/v8/finance/chart/ZZZZ", Reply(404, {"chart": {"result": None, "error": {
        "code": "Not Found", "description": "No data found, symbol may be delisted"}}}))
    events = await run_turn(yahoo_node(info=False, news=False, history=True), "zzzz")
    assert yahoo.paths()[-1] == "/v8/finance/chart/ZZZZ"          # a symbol-like code is tried as it is
    assert finished(events, "YahooFinance:Y")["error"] == \
        "Yahoo Finance answered HTTP 404 Not Found: No data found, symbol may be delisted"


async def test_a_refused_session_is_a_clear_error(yahoo):
    yahoo.cookies.on("GET", "/", Reply(404, "<html>Not Found</html>", "text/html"))      # no cookie
    events = await run_turn(yahoo_node(news=False), "MSFT")
    error = finished(events, "YahooFinance:Y")["error"]
    assert error.startswith(f"Yahoo Finance set no session cookie at {yahoo.cookies.url}")

    yahoo.cookies.on("GET", "/", Reply(404, "", headers={"Set-Cookie": "A3=stale; Path=/"}))
    events = await run_turn(yahoo_node(news=False), "MSFT")
    assert finished(events, "YahooFinance:Y")["error"] == \
        "Yahoo Finance answered HTTP 401 Unauthorized: no session crumb: Invalid Cookie"


async def test_rate_limits_are_retried_then_reported(yahoo):
    answers = iter([Reply(429, "Too Many Requests", "text/html"), Reply(200, CHART)])
    yahoo.api.on("GET", "/v8/finance/chart/MSFT", lambda req: next(answers))
    events = await run_turn(yahoo_node(info=False, news=False, history=True, max_retries=1, delay_after_error=0), "MSFT")
    assert yahoo.paths().count("/v8/finance/chart/MSFT") == 2 and "2024-04-19" in report_of(events)

    yahoo.api.on("GET", "/v1/finance/search", Reply(429, "Too Many Requests", "text/html"))
    events = await run_turn(yahoo_node(), "MSFT")
    assert finished(events, "YahooFinance:Y")["error"] == "Yahoo Finance answered HTTP 429 Too Many Requests: Too Many Requests"


async def test_timeouts_and_unreachable_hosts(yahoo, monkeypatch):
    monkeypatch.setenv("CANVAS2GRAPH_TOOL_TIMEOUT", "0.3")
    yahoo.api.on("GET", "/v8/finance/chart/MSFT", Reply(200, CHART, delay=30))
    events = await run_turn(yahoo_node(info=False, news=False, history=True), "MSFT")
    assert finished(events, "YahooFinance:Y")["error"] == \
        f"Yahoo Finance did not answer within 0.3 s ({yahoo.api.url}/v8/finance/chart/MSFT)"

    url = closed_port_url()
    monkeypatch.setenv("CANVAS2GRAPH_YAHOO_FINANCE_URL", url)
    events = await run_turn(yahoo_node(), "MSFT")
    assert finished(events, "YahooFinance:Y")["error"].startswith(f"cannot reach Yahoo Finance at {url}/v1/finance/search: ")


async def test_an_empty_code_or_no_section_asks_nothing(yahoo):
    node = build("YahooFinance:Y", "YahooFinance", {"stock_code": "sys.query"})
    assert (await node.run(state(""), context())).outputs == {"report": ""}
    node = build("YahooFinance:Y", "YahooFinance", {"stock_code": "sys.query", "info": False, "news": False})
    assert (await node.run(state("MSFT"), context())).outputs == {"report": ""}
    assert yahoo.api.requests == []


# --- as an Agent tool ------------------------------------------------------------------------

def agent_with(**params):
    return agent_dsl({"component_name": "YahooFinance", "name": "YahooFinance", "params": params})


async def test_as_agent_tool_the_model_reads_the_report(yahoo):
    call = {"name": "yahoo_finance_0", "arguments": {"stock_code": "Microsoft"}}
    events = await run_turn(agent_with(info=False, history=True), "how did Microsoft trade?",
                            {"replies": [{"tool_calls": [call]}], "auto_reply": "It closed at 400.96."})
    assert yahoo.api.requests[0].arg("q") == "Microsoft"
    [seen] = tool_messages()
    assert seen.startswith("# History:\n| Date |") and "\n\n# News:\n" in seen
    assert finished(events, "Agent:A")["error"] is None


async def test_as_agent_tool_a_failure_is_what_the_model_reads(yahoo):
    yahoo.api.on("GET", "/v1/finance/search", Reply(500, {"finance": {"result": None, "error": {
        "code": "internal-error", "description": "Search is unavailable"}}}))
    call = {"name": "yahoo_finance_0", "arguments": {"stock_code": "MSFT"}}
    events = await run_turn(agent_with(), "q", {"replies": [{"tool_calls": [call]}], "auto_reply": "No data."})
    assert tool_messages() == ["YahooFinance error: Yahoo Finance answered HTTP 500 Internal Server Error: "
                               "Search is unavailable"]
    assert events[-1]["event"] == "workflow_finished"


def test_the_model_sees_ragflows_function_name_and_stock_code():
    agent = build("Agent:A", "Agent", agent_with()["components"]["Agent:A"]["obj"]["params"])
    fn = agent.tools[0].schema["function"]
    assert fn["name"] == "yahoo_finance_0"
    assert list(fn["parameters"]["properties"]) == ["stock_code"] and fn["parameters"]["required"] == ["stock_code"]


@pytest.mark.parametrize("params, field", [({"info": "yes"}, "params.info"), ({"news": 1}, "params.news"),
                                           ({"cash_flow_statement": None}, "params.cash_flow_statement")])
def test_flags_that_are_not_booleans_are_compile_errors_naming_the_field(params, field):
    [error] = errors("YahooFinance", params)
    assert (error.field, error.code) == (field, "invalid-param")


def test_an_agent_tool_with_a_bad_flag_fails_to_compile_naming_the_tool_field():
    [error] = [d for d in diagnose(agent_with(history="true"))[1] if d.severity == "error"]
    assert (error.component_id, error.field) == ("Agent:A", "params.tools.0.params.history")

"""AkShare and WenCai call their libraries (akshare, pywencai) for real; the libraries' HTTP requests are
routed to a fake East Money / iwencai on 127.0.0.1 that answers in the services' shapes."""
from __future__ import annotations

import json

import pytest

from tests.nodes.helpers import errors
from tests.nodes.tools.support import Reply, agent_dsl, finished, node_dsl, route_requests_to, run_turn, tool_messages

pytest.importorskip("akshare", reason="AkShare's tests need the akshare library (in the test extras)")
pytest.importorskip("pywencai", reason="WenCai's tests need the pywencai library (in the test extras)")

CALLBACK = "jQuery35101792940631092459_1764599530165"
ARTICLES = [
    {"date": "2024-05-01 09:30:00", "mediaName": "东方财富", "code": "202405010001", "title": "<em>600519</em> 贵州茅台一季度营收增长",
     "content": "贵州茅台公布一季度业绩。", "image": ""},
    {"date": "2024-04-30 15:00:00", "mediaName": "证券时报", "code": "202404300002", "title": "白酒板块回暖",
     "content": "白酒板块今日上涨。", "image": ""},
]


def eastmoney_answer(articles):
    body = {"code": 0, "result": {"cmsArticleWebOld": articles}}
    return f"{CALLBACK}({json.dumps(body, ensure_ascii=False)})"


@pytest.fixture
def eastmoney(fake, monkeypatch):
    route_requests_to(monkeypatch, fake, "search-api-web.eastmoney.com")
    return fake


@pytest.fixture
def iwencai(fake, monkeypatch):
    route_requests_to(monkeypatch, fake, "www.iwencai.com")
    monkeypatch.delenv("IWENCAI_COOKIE", raising=False)
    return fake


async def test_akshare_lists_the_stocks_news_as_ragflow_does(eastmoney):
    eastmoney.on("GET", "/search/jsonp", Reply(200, eastmoney_answer(ARTICLES), "application/javascript"))
    events = await run_turn(node_dsl("AkShare:A", "AkShare", {"top_n": 1}), "600519")
    inner = json.loads(eastmoney.requests[0].arg("param"))
    assert inner["keyword"] == "600519"
    text = finished(events, "AkShare:A")["outputs"]["formalized_content"]
    assert text.startswith('<a href="http://finance.eastmoney.com/a/202405010001.html">')
    assert "新闻内容: 贵州茅台公布一季度业绩。" in text and "文章来源: 东方财富" in text
    assert "白酒板块" not in text                       # top_n 1


async def test_akshare_unreadable_answers_are_errors(eastmoney):
    eastmoney.on("GET", "/search/jsonp", Reply(200, "<html>blocked</html>", "text/html"))
    events = await run_turn(node_dsl("AkShare:A", "AkShare", {}), "600519")
    assert finished(events, "AkShare:A")["error"].startswith("AkShare found no news for '600519'")
    assert errors("AkShare", {"top_n": 0})


async def test_akshare_as_an_agent_tool(eastmoney):
    eastmoney.on("GET", "/search/jsonp", Reply(200, eastmoney_answer(ARTICLES), "application/javascript"))
    tool = {"component_name": "AkShare", "name": "AkShare", "params": {}}
    script = {"replies": [{"tool_calls": [{"name": "akshare_stock_news_0", "arguments": {"query": "600519"}}]}, "ok"]}
    await run_turn(agent_dsl(tool, cite=False), "news?", script)
    assert "白酒板块今日上涨" in tool_messages()[0]


def robot_answer(components):
    return {"data": {"answer": [{"txt": [{"content": {"components": components}}]}]}}


async def test_wencai_asks_iwencai_and_formats_tables_and_text_as_ragflow_does(iwencai):
    components = [
        {"show_type": "txt1", "title_config": {"data": {"h1": "解读"}}, "data": {"content": "茅台是白酒龙头。"}},
        {"show_type": "table1", "config": {"title": "行情"}, "data": {"datas": [{"股票代码": "600519", "最新价": 1700.5}]}},
    ]
    iwencai.on("POST", "/customized/chart/get-robot-data", Reply(200, robot_answer(components)))
    events = await run_turn(node_dsl("WenCai:W", "WenCai", {"query_type": "stock", "top_n": 5}, show="report"),
                            "贵州茅台")
    body = iwencai.requests[0].json()
    assert (body["question"], body["secondary_intent"]) == ("贵州茅台", "stock")
    assert iwencai.requests[0].headers.get("hexin-v")          # pywencai signed it
    report = finished(events, "WenCai:W")["outputs"]["report"]
    assert report.startswith("解读\n茅台是白酒龙头。\n\n")
    assert "股票代码" in report and "| 600519 |" in report.replace("  ", "") and "1700.5" in report


async def test_wencai_failures_are_errors_and_query_type_is_checked(iwencai):
    iwencai.on("POST", "/customized/chart/get-robot-data", Reply(403, "forbidden"))
    events = await run_turn(node_dsl("WenCai:W", "WenCai", {}, show="report"), "茅台")
    assert "iwencai did not answer" in finished(events, "WenCai:W")["error"]
    assert "query_type" in errors("WenCai", {"query_type": "bonds"})[0].message

"""TuShare and Jin10, RAGFlow's legacy finance components, as tools: TuShare's news API filtered by a
keyword, and Jin10's flash, calendar, symbols and news data, each with its key from params or the environment."""
from __future__ import annotations

import pytest

from tests.nodes.helpers import errors
from tests.nodes.tools.support import Reply, agent_dsl, finished, node_dsl, run_turn, tool_messages

NEWS = {"code": 0, "msg": "", "data": {"fields": ["datetime", "content", "title"], "items": [
    ["2024-05-01 09:30:00", "Moutai shares rose 3% on strong sales", "Moutai up"],
    ["2024-05-01 09:31:00", "Oil prices fell", "Oil down"],
    ["2024-05-01 09:32:00", "MOUTAI announces dividend", ""]]}}


@pytest.fixture
def tushare(fake, monkeypatch):
    monkeypatch.delenv("TUSHARE_TOKEN", raising=False)
    monkeypatch.setenv("CANVAS2GRAPH_TUSHARE_URL", fake.url)
    return fake


@pytest.fixture
def jin10(fake, monkeypatch):
    monkeypatch.delenv("JIN10_SECRET_KEY", raising=False)
    monkeypatch.setenv("CANVAS2GRAPH_JIN10_URL", fake.url)
    return fake


async def test_tushare_asks_for_the_sources_news_and_keeps_what_mentions_the_query(tushare):
    tushare.on("POST", "/", Reply(200, NEWS))
    params = {"token": "ts-secret", "src": "sina", "start_date": "2024-05-01 09:00:00", "end_date": "2024-05-02 00:00:00"}
    events = await run_turn(node_dsl("TuShare:T", "TuShare", params), "moutai")
    assert tushare.requests[0].json() == {"api_name": "news", "token": "ts-secret", "params": {
        "src": "sina", "start_date": "2024-05-01 09:00:00", "end_date": "2024-05-02 00:00:00"}}
    out = finished(events, "TuShare:T")["outputs"]
    assert [r["title"] for r in out["json"]] == ["Moutai up", ""]
    assert "| Moutai shares rose 3% on strong sales" in out["formalized_content"]
    assert "Oil" not in out["formalized_content"]


async def test_tushare_keyword_param_wins_over_the_query_and_a_refusal_is_an_error(tushare, monkeypatch):
    monkeypatch.setenv("TUSHARE_TOKEN", "ts-env")
    tushare.on("POST", "/", Reply(200, NEWS))
    events = await run_turn(node_dsl("TuShare:T", "TuShare", {"keyword": "oil"}), "moutai")
    assert tushare.requests[0].json()["token"] == "ts-env"
    assert [r["title"] for r in finished(events, "TuShare:T")["outputs"]["json"]] == ["Oil down"]
    tushare.on("POST", "/", Reply(200, {"code": 40101, "msg": "token invalid", "data": None}))
    events = await run_turn(node_dsl("TuShare:T", "TuShare", {}), "moutai")
    assert finished(events, "TuShare:T")["error"] == "TuShare refused the request (code 40101): token invalid"


async def test_tushare_without_a_token_says_where_to_set_it(tushare):
    events = await run_turn(node_dsl("TuShare:T", "TuShare", {}), "moutai")
    error = finished(events, "TuShare:T")["error"]
    assert "params.token" in error and "TUSHARE_TOKEN" in error and tushare.requests == []
    assert "src" in errors("TuShare", {"src": "reuters"})[0].message


async def test_jin10_flash_filters_by_the_query_and_lists_the_contents(jin10):
    jin10.on("GET", "/flash", Reply(200, {"status": 200, "data": [
        {"id": "1", "data": {"content": "Gold hits a record"}}, {"id": "2", "data": {"content": "Gold eases"}}]}))
    events = await run_turn(node_dsl("Jin10:J", "Jin10", {"secret_key": "j10-secret", "flash_type": "2"}), "gold")
    [req] = jin10.requests
    assert req.headers["secret-key"] == "j10-secret"
    assert (req.arg("category"), req.arg("contain")) == ("2", "gold")
    assert finished(events, "Jin10:J")["outputs"]["formalized_content"] == "Gold hits a record\n\nGold eases"


async def test_jin10_quotes_spell_out_the_one_letter_keys(jin10, monkeypatch):
    monkeypatch.setenv("JIN10_SECRET_KEY", "j10-env")
    jin10.on("GET", "/quotes", Reply(200, {"data": [{"a": 1.1, "b": 1.0, "c": "BTCUSD", "e": "X", "h": 2, "hc": 1,
                                                     "l": 0.5, "o": 0.9, "p": 1.05, "t": "10:00"}]}))
    params = {"type": "symbols", "symbols_type": "CRYPTO", "symbols_datatype": "quotes"}
    events = await run_turn(node_dsl("Jin10:J", "Jin10", params), "btc")
    assert (jin10.requests[0].arg("type"), jin10.requests[0].arg("codes")) == ("CRYPTO", "BTCUSD")
    out = finished(events, "Jin10:J")["outputs"]
    assert out["json"][0]["Latest Price"] == 1.05 and "Yesterday’s Closing Price" in out["formalized_content"]


async def test_jin10_calendar_and_errors(jin10):
    jin10.on("GET", "/calendar/event", Reply(200, {"data": [{"pub_time": "2024-05-01", "title": "CPI"}]}))
    params = {"secret_key": "k", "type": "calendar", "calendar_datatype": "event", "calendar_type": "us"}
    events = await run_turn(node_dsl("Jin10:J", "Jin10", params), "cpi")
    assert jin10.requests[0].arg("category") == "us"
    assert "CPI" in finished(events, "Jin10:J")["outputs"]["formalized_content"]
    events = await run_turn(node_dsl("Jin10:J", "Jin10", {}), "cpi")
    assert "JIN10_SECRET_KEY" in finished(events, "Jin10:J")["error"]
    assert "flash_type" in errors("Jin10", {"flash_type": "9"})[0].message


async def test_both_work_as_agent_tools(tushare, monkeypatch):
    monkeypatch.setenv("TUSHARE_TOKEN", "ts-env")
    tushare.on("POST", "/", Reply(200, NEWS))
    tool = {"component_name": "TuShare", "name": "TuShare", "params": {}}
    script = {"replies": [{"tool_calls": [{"name": "tushare_news_0", "arguments": {"query": "oil"}}]}, "Oil fell."]}
    await run_turn(agent_dsl(tool, cite=False), "oil news?", script)
    assert "Oil prices fell" in tool_messages()[0]

"""QWeather looks the place up with GeoAPI, then asks the v7 API for the weather (now or a daily
forecast), the life indices or the air quality, on the free or the paid host; QWeather's status codes,
HTTP errors, missing keys, timeouts and unreachable hosts are clear errors that never show the key."""
from __future__ import annotations

import pytest

from canvas2graph.compiler.canvas import diagnose
from tests.nodes.helpers import build, context, errors, state
from tests.nodes.tools.support import (FakeService, Reply, agent_dsl, closed_port_url, finished, node_dsl, run_turn,
                                       tool_messages)

KEY = "qw-0123456789abcdef"
REFER = {"sources": ["QWeather"], "license": ["QWeather Developers License"]}
BEIJING = {"code": "200", "location": [{
    "name": "Beijing", "id": "101010100", "lat": "39.90499", "lon": "116.40529", "adm2": "Beijing", "adm1": "Beijing",
    "country": "China", "tz": "Asia/Shanghai", "utcOffset": "+08:00", "isDst": "0", "type": "city", "rank": "10",
    "fxLink": "https://www.qweather.com/weather/beijing-101010100.html"}], "refer": REFER}
NOW = {"code": "200", "updateTime": "2024-06-30T22:00+08:00", "fxLink": "https://www.qweather.com/weather/beijing.html",
       "now": {"obsTime": "2024-06-30T21:40+08:00", "temp": "24", "feelsLike": "26", "icon": "101", "text": "Cloudy",
               "windDir": "SE", "windScale": "1", "humidity": "72", "precip": "0.0", "cloud": ""}, "refer": REFER}
DAILY = {"code": "200", "updateTime": "2024-06-30T22:00+08:00", "daily": [
    {"fxDate": "2024-07-01", "tempMax": "31", "tempMin": "22", "textDay": "Sunny", "textNight": "Clear"},
    {"fxDate": "2024-07-02", "tempMax": "29", "tempMin": "21", "textDay": "Shower", "textNight": "Cloudy"}],
    "refer": REFER}
INDICES = {"code": "200", "daily": [
    {"date": "2024-07-01", "type": "1", "name": "Sport", "level": "3", "category": "Fair", "text": "Indoor sports suit."},
    {"date": "2024-07-01", "type": "3", "name": "Dressing", "level": "6", "category": "Hot", "text": "Wear light clothes."}],
    "refer": REFER}
AIR = {"code": "200", "now": {"pubTime": "2024-06-30T21:00+08:00", "aqi": "28", "level": "1", "category": "Excellent",
                              "primary": "NA", "pm10": "28", "pm2p5": "5"}, "station": [], "refer": REFER}


@pytest.fixture
def qweather(fake, monkeypatch):
    """GeoAPI and the free host on one server, the paid host on another (`qweather.paid`)."""
    paid = FakeService().start()
    monkeypatch.setenv("CANVAS2GRAPH_QWEATHER_GEO_URL", fake.url)
    monkeypatch.setenv("CANVAS2GRAPH_QWEATHER_FREE_URL", fake.url)
    monkeypatch.setenv("CANVAS2GRAPH_QWEATHER_PAID_URL", paid.url)
    for name in ("CANVAS2GRAPH_QWEATHER_URL", "QWEATHER_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    fake.on("GET", "/v2/city/lookup", Reply(200, BEIJING))
    fake.paid = paid
    yield fake
    paid.stop()


def weather_node(**params):
    return node_dsl("QWeather:W", "QWeather", {"query": "sys.query", "web_apikey": KEY, **params})


def args(req) -> dict:
    return {k: v[0] for k, v in req.query.items()}


async def test_current_weather_looks_up_the_place_then_asks_the_free_host(qweather):
    qweather.on("GET", "/v7/weather/now", Reply(200, NOW))
    events = await run_turn(weather_node(), "Beijing")
    geo, weather = qweather.requests
    assert geo.path == "/v2/city/lookup"
    assert args(geo) == {"location": "Beijing", "key": KEY, "lang": "zh", "number": "1"}
    assert weather.path == "/v7/weather/now" and args(weather) == {"location": "101010100", "key": KEY, "lang": "zh"}
    data = finished(events, "QWeather:W")
    assert data["error"] is None and data["inputs"] == {"query": "Beijing"}
    assert data["outputs"]["formalized_content"] == (
        "Current weather in Beijing, China:\nobsTime: 2024-06-30T21:40+08:00\ntemp: 24\nfeelsLike: 26\nicon: 101\n"
        "text: Cloudy\nwindDir: SE\nwindScale: 1\nhumidity: 72\nprecip: 0.0")


async def test_a_forecast_on_a_paid_plan_asks_the_paid_host_for_the_period(qweather):
    qweather.paid.on("GET", "/v7/weather/7d", Reply(200, DAILY))
    events = await run_turn(weather_node(user_type="paid", time_period="7d", lang="en"), "Beijing")
    [forecast] = qweather.paid.requests
    assert args(forecast) == {"location": "101010100", "key": KEY, "lang": "en"}
    assert [r.path for r in qweather.requests] == ["/v2/city/lookup"]
    assert finished(events, "QWeather:W")["outputs"]["formalized_content"] == (
        "7d forecast for Beijing, China:\n"
        "fxDate: 2024-07-01; tempMax: 31; tempMin: 22; textDay: Sunny; textNight: Clear\n"
        "fxDate: 2024-07-02; tempMax: 29; tempMin: 21; textDay: Shower; textNight: Cloudy")


async def test_indices_and_air_quality(qweather):
    qweather.on("GET", "/v7/indices/1d", Reply(200, INDICES))
    qweather.on("GET", "/v7/air/now", Reply(200, AIR))
    node = build("QWeather:W", "QWeather", {"query": "sys.query", "web_apikey": KEY, "type": "indices"})
    result = await node.run(state("Beijing"), context())
    assert args(qweather.requests[-1]) == {"location": "101010100", "key": KEY, "lang": "zh", "type": "0"}
    assert result.outputs["formalized_content"] == ("Weather indices for Beijing, China, 2024-07-01:\n"
                                                    "Sport: Fair, Indoor sports suit.\nDressing: Hot, Wear light clothes.")
    node = build("QWeather:W", "QWeather", {"query": "sys.query", "web_apikey": KEY, "type": "airquality"})
    result = await node.run(state("Beijing"), context())
    assert qweather.requests[-1].path == "/v7/air/now"
    assert result.outputs["formalized_content"] == ("Air quality in Beijing, China:\npubTime: 2024-06-30T21:00+08:00\n"
                                                    "aqi: 28\nlevel: 1\ncategory: Excellent\nprimary: NA\npm10: 28\npm2p5: 5")


async def test_an_account_api_host_serves_the_lookup_and_the_data(qweather, monkeypatch):
    account = FakeService().start()
    try:
        monkeypatch.setenv("CANVAS2GRAPH_QWEATHER_URL", account.url)
        account.on("GET", "/geo/v2/city/lookup", Reply(200, BEIJING))
        account.on("GET", "/v7/weather/now", Reply(200, NOW))
        events = await run_turn(weather_node(user_type="paid"), "Beijing")
        assert [r.path for r in account.requests] == ["/geo/v2/city/lookup", "/v7/weather/now"]
        assert finished(events, "QWeather:W")["error"] is None
        assert qweather.requests == [] and qweather.paid.requests == []
    finally:
        account.stop()


async def test_qweather_status_codes_in_the_body_are_explained_without_the_key(qweather):
    qweather.on("GET", "/v2/city/lookup", Reply(200, {"code": "404"}))
    events = await run_turn(weather_node(), "Atlantis")
    assert finished(events, "QWeather:W")["error"] == "QWeather answered code 404: no such location or data"

    qweather.on("GET", "/v2/city/lookup", Reply(200, {"code": "401"}))
    events = await run_turn(weather_node(), "Beijing")
    error = finished(events, "QWeather:W")["error"]
    assert error == "QWeather answered code 401: authentication failed: the key is wrong, or not a Web API key"


async def test_no_data_for_the_place_is_a_result_not_an_error(qweather):
    qweather.on("GET", "/v7/air/now", Reply(200, {"code": "204"}))
    events = await run_turn(weather_node(type="airquality"), "Beijing")
    data = finished(events, "QWeather:W")
    assert data["error"] is None
    assert data["outputs"]["formalized_content"] == "QWeather has no data of this kind for Beijing, China at the moment."


async def test_http_errors_of_account_hosts_carry_their_title_and_detail(qweather):
    qweather.on("GET", "/v2/city/lookup", Reply(401, {"error": {
        "status": 401, "type": "https://dev.qweather.com/docs/resource/error-code/#unauthorized",
        "title": "Unauthorized", "detail": "Invalid Authentication"}}))
    events = await run_turn(weather_node(), "Beijing")
    assert finished(events, "QWeather:W")["error"] == \
        "QWeather answered HTTP 401 Unauthorized (check the API key): Unauthorized - Invalid Authentication"


async def test_rate_limits_are_retried_as_max_retries_say(qweather):
    answers = iter([Reply(200, {"code": "429"}), Reply(200, NOW)])
    qweather.on("GET", "/v7/weather/now", lambda req: next(answers))
    events = await run_turn(weather_node(max_retries=1, delay_after_error=0), "Beijing")
    assert [r.path for r in qweather.requests].count("/v7/weather/now") == 2
    assert finished(events, "QWeather:W")["error"] is None


async def test_the_key_comes_from_the_dsl_or_the_environment(qweather, monkeypatch):
    node = build("QWeather:W", "QWeather", {"query": "sys.query"})          # RAGFlow's "xxx" placeholder
    with pytest.raises(Exception, match="QWeather needs an API key: set params.web_apikey in the DSL or the "
                                        "QWEATHER_API_KEY environment variable"):
        await node.run(state("Beijing"), context())
    assert qweather.requests == []

    monkeypatch.setenv("QWEATHER_API_KEY", "qw-from-env-42")
    qweather.on("GET", "/v7/weather/now", Reply(200, NOW))
    await node.run(state("Beijing"), context())
    assert {r.arg("key") for r in qweather.requests} == {"qw-from-env-42"}


async def test_an_empty_place_asks_nothing(qweather):
    node = build("QWeather:W", "QWeather", {"query": "sys.query", "web_apikey": KEY})
    result = await node.run(state(""), context())
    assert result.outputs == {"formalized_content": ""} and qweather.requests == []


async def test_timeouts_and_unreachable_hosts(qweather, monkeypatch):
    monkeypatch.setenv("CANVAS2GRAPH_TOOL_TIMEOUT", "0.3")
    qweather.on("GET", "/v7/weather/now", Reply(200, NOW, delay=30))
    events = await run_turn(weather_node(), "Beijing")
    assert finished(events, "QWeather:W")["error"] == f"QWeather did not answer within 0.3 s ({qweather.url}/v7/weather/now)"

    url = closed_port_url()
    monkeypatch.setenv("CANVAS2GRAPH_QWEATHER_GEO_URL", url)
    events = await run_turn(weather_node(), "Beijing")
    error = finished(events, "QWeather:W")["error"]
    assert error.startswith(f"cannot reach QWeather at {url}/v2/city/lookup: ") and KEY not in error


# --- as an Agent tool ------------------------------------------------------------------------

def agent_with(**params):
    return agent_dsl({"component_name": "QWeather", "name": "QWeather", "params": {"web_apikey": KEY, **params}})


async def test_as_agent_tool_the_model_reads_the_weather_of_the_place_it_named(qweather):
    qweather.on("GET", "/v7/weather/now", Reply(200, NOW))
    call = {"name": "qweather_0", "arguments": {"query": "Beijing"}}
    events = await run_turn(agent_with(lang="en"), "is it warm in Beijing?",
                            {"replies": [{"tool_calls": [call]}], "auto_reply": "Yes, 24 degrees."})
    assert qweather.requests[0].arg("location") == "Beijing" and qweather.requests[1].arg("lang") == "en"
    [seen] = tool_messages()
    assert seen.startswith("Current weather in Beijing, China:\n") and "temp: 24" in seen
    assert finished(events, "Agent:A")["error"] is None


async def test_as_agent_tool_a_failure_is_what_the_model_reads(qweather):
    qweather.on("GET", "/v2/city/lookup", Reply(200, {"code": "402"}))
    call = {"name": "qweather_0", "arguments": {"query": "Beijing"}}
    events = await run_turn(agent_with(), "q", {"replies": [{"tool_calls": [call]}], "auto_reply": "Out of quota."})
    assert tool_messages() == ["QWeather error: QWeather answered code 402: the request quota or the account balance "
                               "is used up"]
    assert events[-1]["event"] == "workflow_finished"


def test_the_model_sees_the_function_name():
    agent = build("Agent:A", "Agent", agent_with()["components"]["Agent:A"]["obj"]["params"])
    fn = agent.tools[0].schema["function"]
    assert fn["name"] == "qweather_0" and fn["parameters"]["required"] == ["query"]


@pytest.mark.parametrize("params, field", [
    ({"type": "forecast"}, "params.type"),
    ({"user_type": "enterprise"}, "params.user_type"),
    ({"lang": "xx"}, "params.lang"),
    ({"time_period": "24h"}, "params.time_period"),
])
def test_bad_params_are_compile_errors_naming_the_field(params, field):
    [error] = errors("QWeather", params)
    assert (error.field, error.code) == (field, "invalid-param")


def test_an_agent_tool_with_bad_params_fails_to_compile_naming_the_tool_field():
    [error] = [d for d in diagnose(agent_with(time_period="1y"))[1] if d.severity == "error"]
    assert (error.component_id, error.field) == ("Agent:A", "params.tools.0.params.time_period")

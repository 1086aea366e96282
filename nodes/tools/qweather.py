"""QWeather: QWeather's GeoAPI city lookup, then its v7 weather, indices or air-quality API, SPEC 3.17.

The query names a place; the lookup turns it into a location id, then `type` picks the data:
`weather` (`/v7/weather/{time_period}`), `indices` (`/v7/indices/1d`, every index) or `airquality`
(`/v7/air/now`), in the `lang` language. The key comes from `params.web_apikey` or `QWEATHER_API_KEY`
and travels as the `key` query parameter, as RAGFlow sends it (error messages never show it).

Hosts, as RAGFlow uses them: `https://geoapi.qweather.com` for the lookup, `https://devapi.qweather.com`
for the free plan (`user_type: free`) and `https://api.qweather.com` for paid plans; each can be moved
(`CANVAS2GRAPH_QWEATHER_GEO_URL`, `..._FREE_URL`, `..._PAID_URL`). QWeather now gives each account an API
host of its own: `CANVAS2GRAPH_QWEATHER_URL` set to it serves everything from there (`/geo/v2/...`, `/v7/...`).
"""
from __future__ import annotations


from canvas2graph.nodes.base import Params
from canvas2graph.nodes.registry import register
from canvas2graph.nodes.tool import Tool, ToolArg, ToolError, ToolOutput, endpoint
from canvas2graph.nodes.tools._web import one_of, ServiceUnavailable, json_body, request, status_error, text_arg, timeout_for
from canvas2graph.nodes.tools.keys import PLACEHOLDER, api_key

KEY_ENV = "QWEATHER_API_KEY"

TYPES = ("weather", "indices", "airquality")
USER_TYPES = ("free", "paid")
TIME_PERIODS = ("now", "3d", "7d", "10d", "15d", "30d")
# The languages RAGFlow's QWeatherParam.check() accepts.
LANGS = ("zh", "zh-hant", "en", "de", "es", "fr", "it", "ja", "ko", "ru", "hi", "th", "ar", "pt", "bn", "ms", "nl",
         "el", "la", "sv", "id", "pl", "tr", "cs", "et", "vi", "fil", "fi", "he", "is", "nb")

# What QWeather's status codes (in the body's `code`, or the HTTP status on account hosts) mean.
CODES = {
    "400": "the request was malformed or lacks a required parameter",
    "401": "authentication failed: the key is wrong, or not a Web API key",
    "402": "the request quota or the account balance is used up",
    "403": "access denied: the key's restrictions (domain, IP, app) refuse it, or the data needs a paid plan",
    "404": "no such location or data",
    "429": "too many requests per minute",
    "500": "QWeather's service failed or timed out",
}


class QWeatherParams(Params):
    # RAGFlow refuses an empty key when the canvas loads; here the key may come from the environment,
    # so a missing key is reported when the tool runs, naming both places.
    web_apikey: str | None = PLACEHOLDER
    lang: str = "zh"
    type: str = "weather"
    user_type: str = "free"
    time_period: str = "now"

    _type = one_of("type", TYPES)
    _user_type = one_of("user_type", USER_TYPES)
    _lang = one_of("lang", LANGS)
    _time_period = one_of("time_period", TIME_PERIODS)


@register("QWeather", QWeatherParams, outputs=lambda p: {"formalized_content"})
class QWeather(Tool):
    function_name = "qweather"
    tool_description = ("Weather from QWeather for a city or place: current conditions or a daily forecast, "
                        "life indices, or air quality, as this tool is configured.")
    args = {"query": ToolArg("string", "The place to ask about: a city or district name (e.g. Beijing, "
                             "Paris), or longitude,latitude.", required=True)}

    def thoughts(self, state) -> str:
        return f"Checking QWeather ({self.params.type}) for: {self.node_args(state).get('query', '')}"

    async def execute(self, args: dict, ctx) -> ToolOutput:
        place = text_arg(args, "query")
        if not place:
            return ToolOutput({"formalized_content": ""})
        p = self.params
        key = api_key(p.web_apikey, KEY_ENV, "QWeather", "web_apikey", placeholder=PLACEHOLDER)
        account_host = endpoint("qweather", "")
        if account_host:
            geo_url, data_base = f"{account_host}/geo/v2/city/lookup", f"{account_host}/v7"
        else:
            geo_url = f"{endpoint('qweather_geo', 'https://geoapi.qweather.com')}/v2/city/lookup"
            data_base = (endpoint("qweather_paid", "https://api.qweather.com") if p.user_type == "paid"
                         else endpoint("qweather_free", "https://devapi.qweather.com")) + "/v7"

        geo = await _call(geo_url, {"location": place, "key": key, "lang": p.lang, "number": 1}, key)
        if geo is None or not geo.get("location"):
            raise ToolError(f"QWeather knows no location called {place!r}")
        found_place = geo["location"][0]
        location = _place_name(found_place)
        params = {"location": found_place.get("id"), "key": key, "lang": p.lang}

        if p.type == "weather":
            data = await _call(f"{data_base}/weather/{p.time_period}", params, key)
            if data is None:
                return _no_data(location)
            if p.time_period == "now":
                text = f"Current weather in {location}:\n{_fields(data.get('now') or {})}"
            else:
                days = data.get("daily") or []
                if not days:
                    return _no_data(location)
                text = f"{p.time_period} forecast for {location}:\n" + "\n".join(_fields(d, "; ") for d in days)
        elif p.type == "indices":
            data = await _call(f"{data_base}/indices/1d", {**params, "type": 0}, key)
            days = (data or {}).get("daily") or []
            if not days:
                return _no_data(location)
            lines = [f"{d.get('name')}: {d.get('category')}, {d.get('text')}" for d in days]
            text = f"Weather indices for {location}, {days[0].get('date')}:\n" + "\n".join(lines)
        else:
            data = await _call(f"{data_base}/air/now", params, key)
            if data is None:
                return _no_data(location)
            text = f"Air quality in {location}:\n{_fields(data.get('now') or {})}"
        return ToolOutput({"formalized_content": text})


async def _call(url: str, params: dict, key: str) -> dict | None:
    """One QWeather request. Its answer carries a status `code`: "200" is data, "204" no data for
    the place right now (None), anything else an error explained in plain words."""
    response = await request("QWeather", "GET", url, params=params, timeout=timeout_for(30), secrets=[key],
                             raise_for_status=False)
    if response.status_code >= 400:
        raise status_error("QWeather", response, [key], detail=_http_detail(response))
    data = json_body("QWeather", response)
    if not isinstance(data, dict):
        raise ToolError("QWeather answered with something other than a JSON object")
    code = str(data.get("code", "200"))
    if code == "200":
        return data
    if code == "204":
        return None
    message = f"QWeather answered code {code}: {CODES.get(code, 'an unknown error')}"
    error = ServiceUnavailable(message) if code in ("429", "500") else ToolError(message)
    error.status = int(code) if code.isdigit() else None
    raise error


def _http_detail(response) -> str:
    """Account hosts answer errors as `{"error": {"title", "detail"}}`; older hosts with a status only."""
    try:
        body = response.json()
    except ValueError:
        body = None
    err = body.get("error") if isinstance(body, dict) else None
    if isinstance(err, dict):
        return " - ".join(str(err[k]) for k in ("title", "detail") if err.get(k))
    return CODES.get(str(response.status_code), "")


def _place_name(loc: dict) -> str:
    """"Haidian, Beijing, China": the place and the regions above it, without repeats."""
    parts: list[str] = []
    for k in ("name", "adm2", "adm1", "country"):
        v = str(loc.get(k) or "").strip()
        if v and v not in parts:
            parts.append(v)
    return ", ".join(parts) or str(loc.get("id", ""))


def _fields(record: dict, sep: str = "\n") -> str:
    """A QWeather record as `field: value` pairs, empty fields left out."""
    return sep.join(f"{k}: {v}" for k, v in record.items() if v not in (None, "", [], {}))


def _no_data(location: str) -> ToolOutput:
    return ToolOutput({"formalized_content": f"QWeather has no data of this kind for {location} at the moment."})

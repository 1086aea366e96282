"""Invoke sends one HTTP request to a real server on 127.0.0.1 and returns its body as `result`: references
fill the URL, the headers and the variables; GET sends query parameters, POST and PUT a JSON or form
body. Failures are component errors that the exception settings handle, and the SSRF guard refuses
private hosts (lifted here with CANVAS2GRAPH_INVOKE_ALLOW_PRIVATE=1, as the test server is local)."""
from __future__ import annotations

import pytest

from canvas2graph.nodes.invoke import InvokeError
from canvas2graph.runtime.services.netguard import HostRefused
from tests.conftest import cpn
from tests.fake_dns import FakeDNS
from tests.nodes.helpers import build, context, errors, state
from tests.nodes.tools.support import FakeService, Reply, closed_port_url, finished, run_turn

ALLOW = "CANVAS2GRAPH_INVOKE_ALLOW_PRIVATE"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    monkeypatch.delenv(ALLOW, raising=False)


@pytest.fixture
def allowed(monkeypatch):
    monkeypatch.setenv(ALLOW, "1")


@pytest.fixture
def api():
    service = FakeService().start()
    yield service
    service.stop()


def invoke_dsl(params: dict, **more) -> dict:
    """Begin -> Invoke -> a Message showing its result; `variables` become conversation variables."""
    return {"components": {
        "begin": cpn("Begin", downstream=["Invoke:I"]),
        "Invoke:I": cpn("Invoke", params, downstream=["Message:M"]),
        "Message:M": cpn("Message", {"content": ["{Invoke:I@result}"]}),
    }, **more}


async def test_get_sends_the_variables_as_query_parameters_and_returns_the_body(api, allowed):
    api.on("GET", "/users/ada/orders", Reply(200, {"orders": [7, 9]}))
    params = {
        "url": f"{api.url}/users/{{sys.query}}/orders?lang=en",
        "headers": '{"Authorization": "Bearer {env.token}", "X-User": "{sys.query}", "X-Raw": "{Agent:A@content}"}',
        "variables": [{"key": "q", "ref": "sys.query"}, {"key": "ids", "value": "[1, 2]"},
                      {"key": "note", "value": "for {sys.query}"}, {"key": "empty"}],
    }
    events = await run_turn(invoke_dsl(params, variables={"token": {"type": "string", "value": "t0k3n"}}), "ada")
    [seen] = api.requests
    assert seen.query == {"lang": ["en"], "q": ["ada"], "ids": ["1", "2"], "note": ["forada"], "empty": [""]}
    assert seen.headers["authorization"] == "Bearer t0k3n" and seen.headers["x-user"] == "ada"
    assert seen.headers["x-raw"] == "{Agent:A@content}"       # RAGFlow's header placeholders have no ':'
    done = finished(events, "Invoke:I")
    assert done["outputs"]["result"] == '{"orders": [7, 9]}'
    assert done["inputs"] == {"sys.query": "ada"}
    assert events[-1]["data"]["outputs"]["content"] == '{"orders": [7, 9]}'


async def test_post_sends_a_json_body_and_json_text_becomes_json(api, allowed):
    api.on("POST", "/tickets", lambda seen: Reply(201, "created"))
    node = build("Invoke:I", "Invoke", {"url": f"{api.url}/tickets", "method": "POST", "variables": [
        {"key": "title", "ref": "{sys.query}"}, {"key": "meta", "value": '{"priority": 2}'}, {"key": "count", "value": 3},
        {"key": "text", "value": "not json"}]})
    result = await node.run(state("Printer on fire"), context())
    [seen] = api.requests
    assert seen.headers["content-type"] == "application/json"
    assert seen.json() == {"title": "Printer on fire", "meta": {"priority": 2}, "count": 3, "text": "not json"}
    assert result.outputs == {"result": "created"}


async def test_put_with_formdata_sends_a_form(api, allowed):
    api.on("PUT", "/profile", Reply(200, "saved"))
    node = build("Invoke:I", "Invoke", {"url": api.url.removeprefix("http://") + "/profile", "method": "put",
                                        "datatype": "formdata", "variables": [
                                            {"key": "name", "ref": "sys.query"}, {"key": "tags", "value": "[1, 2]"}]})
    result = await node.run(state("Ada Lovelace"), context())
    [seen] = api.requests
    assert seen.method == "PUT" and seen.headers["content-type"] == "application/x-www-form-urlencoded"
    assert seen.form() == {"name": "Ada Lovelace", "tags": "[1, 2]"}          # no JSON parsing in a form
    assert result.outputs["result"] == "saved"                                 # http:// was added to the URL


async def test_an_error_status_is_a_result_and_redirects_are_not_followed(api, allowed):
    api.on("GET", "/missing", Reply(404, "no such thing"))
    api.on("GET", "/old", Reply(302, "moved", headers={"Location": "/new"}))
    node = build("Invoke:I", "Invoke", {"url": f"{api.url}/missing"})
    assert (await node.run(state(), context())).outputs["result"] == "no such thing"
    node = build("Invoke:I", "Invoke", {"url": f"{api.url}/old"})
    assert (await node.run(state(), context())).outputs["result"] == "moved"
    assert [r.path for r in api.requests] == ["/missing", "/old"]


async def test_clean_html_keeps_the_title_and_the_text_of_each_block(api, allowed):
    page = ("<html><head><title>Status</title><style>p {color: red}</style></head><body>"
            "<h1>All systems  normal</h1><script>track()</script><p>Updated <b>5 min</b> ago.</p>"
            "<ul><li>API: up</li><li>Web: up</li></ul></body></html>")
    api.on("GET", "/status", Reply(200, page, "text/html"))
    node = build("Invoke:I", "Invoke", {"url": f"{api.url}/status", "clean_html": True})
    result = await node.run(state(), context())
    assert result.outputs["result"] == "Status\nAll systems normal\nUpdated 5 min ago.\nAPI: up\nWeb: up"


async def test_timeouts_are_retried_and_then_a_component_error(api, allowed):
    api.on("GET", "/slow", Reply(200, "late", delay=30))
    node = build("Invoke:I", "Invoke", {"url": f"{api.url}/slow", "timeout": 1, "max_retries": 1,
                                        "delay_after_error": 0})
    with pytest.raises(InvokeError, match=f"^{api.url}/slow did not answer within 1 s \\(2 attempts\\)$"):
        await node.run(state(), context())
    assert len(api.requests) == 2


async def test_an_unreachable_server_is_an_error_the_exception_settings_handle(allowed):
    url = closed_port_url()
    events = await run_turn(invoke_dsl({"url": f"{url}/x"}), "q")
    assert finished(events, "Invoke:I")["error"].startswith(f"cannot reach {url}/x: ")
    events = await run_turn(invoke_dsl({"url": f"{url}/x", "exception_method": "comment",
                                        "exception_default_value": "service unavailable"}), "q")
    assert finished(events, "Invoke:I")["outputs"]["result"] == "service unavailable"
    assert events[-1]["data"]["outputs"]["content"] == "service unavailable"


@pytest.mark.parametrize("url", ["http://127.0.0.1:9/", "http://localhost:9/", "http://169.254.169.254/latest/meta-data",
                                 "http://[::1]:9/", "http://10.1.2.3/", "http://0.0.0.0:9/"])
async def test_private_and_loopback_hosts_are_refused(url):
    node = build("Invoke:I", "Invoke", {"url": url})
    with pytest.raises(HostRefused, match="private, loopback or otherwise non-public address; set "
                                          "CANVAS2GRAPH_INVOKE_ALLOW_PRIVATE=1"):
        await node.run(state(), context())


async def test_a_run_service_may_lift_the_guard(api):
    api.on("GET", "/ok", Reply(200, "fine"))
    node = build("Invoke:I", "Invoke", {"url": f"{api.url}/ok"})
    ctx = context()
    ctx.extras["allow_private"] = {"Invoke"}
    assert (await node.run(state(), ctx)).outputs["result"] == "fine"


async def test_the_host_is_resolved_once_and_the_request_goes_to_the_address_checked(api, monkeypatch):
    """A name the guard accepts is connected to at the address it checked (no second lookup that a
    rebinding DNS could answer differently); the server still sees the name in the Host header."""
    dns = FakeDNS.install(monkeypatch)                # 127.0.0.1 passes as public
    dns.names["api.example.com"] = ["127.0.0.1"]
    api.on("GET", "/v1/data", Reply(200, "pinned"))
    port = api.url.rsplit(":", 1)[1]
    node = build("Invoke:I", "Invoke", {"url": f"http://api.example.com:{port}/v1/data"})
    assert (await node.run(state(), context())).outputs["result"] == "pinned"
    assert dns.lookups == ["api.example.com"]
    assert api.requests[0].headers["host"] == f"api.example.com:{port}"


async def test_a_proxy_carries_the_request(api, allowed):
    api.on("GET", "/data", Reply(200, "via proxy"))          # the fake service answers as the proxy
    node = build("Invoke:I", "Invoke", {"url": "http://upstream.example/data?x=1", "proxy": api.url})
    assert (await node.run(state(), context())).outputs["result"] == "via proxy"
    [seen] = api.requests
    assert seen.headers["host"] == "upstream.example" and seen.query == {"x": ["1"]}


async def test_a_proxy_on_a_private_address_is_refused(api, monkeypatch):
    dns = FakeDNS.install(monkeypatch)
    dns.public = set()
    dns.names["upstream.example"] = ["93.184.216.34"]
    node = build("Invoke:I", "Invoke", {"url": "http://upstream.example/data", "proxy": api.url})
    with pytest.raises(HostRefused, match="127.0.0.1 is a private, loopback or otherwise non-public address; set "
                                          "CANVAS2GRAPH_INVOKE_ALLOW_PRIVATE=1"):
        await node.run(state(), context())
    assert api.requests == []


@pytest.mark.parametrize("params, field", [
    ({"method": "delete"}, "params.method"),
    ({"datatype": "xml"}, "params.datatype"),
    ({"url": " "}, "params.url"),
    ({"timeout": 0}, "params.timeout"),
    ({"clean_html": "yes"}, "params.clean_html"),
    ({"headers": "{not json"}, "params.headers"),
    ({"headers": "[1, 2]"}, "params.headers"),
    ({"headers": '{"X-Key": "{token}"}'}, "params.headers"),
    ({"variables": [{"value": "x"}]}, "params.variables.0.key"),
    ({"variables": [{"key": "a", "ref": "not a reference"}]}, "params.variables.0.ref"),
    ({"proxy": "socks5://127.0.0.1:1080"}, "params.proxy"),
    ({"url": "http://x.example/{Nowhere:X@id}"}, "params.url"),
    ({"variables": [{"key": "a", "ref": "Nowhere:X@id"}]}, "params.variables.0.ref"),
])
def test_bad_params_are_compile_errors_naming_the_field(params, field):
    [error] = errors("Invoke", {"url": "http://api.example/", **params})
    assert error.field == field


def test_a_proxy_that_is_only_a_scheme_means_no_proxy():
    node = build("Invoke:I", "Invoke", {"url": "http://api.example/", "proxy": "http://"})
    assert node.params.proxy is None

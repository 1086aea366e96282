"""DeepL translates through DeepL's REST API (POST /v2/translate with a `DeepL-Auth-Key` header): keys of
the free plan (ending in ":fx") go to the free host, others to the pro host; the translation is
`formalized_content`; missing and rejected keys, quota, rate limits, timeouts and unreachable
servers are clear errors that never show the key."""
from __future__ import annotations

import pytest

from canvas2graph.compiler.canvas import diagnose
from tests.nodes.helpers import build, context, errors, state
from tests.nodes.tools.support import (FakeService, Reply, agent_dsl, closed_port_url, finished, node_dsl, run_turn,
                                       tool_messages)

PRO_KEY = "0f3c9a2e-6b1d-4c55-9f0e-1234567890ab"
FREE_KEY = "0f3c9a2e-6b1d-4c55-9f0e-1234567890ab:fx"
TRANSLATED = {"translations": [{"detected_source_language": "ZH", "text": "The weather is nice today."}]}


@pytest.fixture
def deepl(fake, monkeypatch):
    """The pro host; the free host is another server (`deepl.free`)."""
    free = FakeService().start()
    monkeypatch.setenv("CANVAS2GRAPH_DEEPL_URL", fake.url)
    monkeypatch.setenv("CANVAS2GRAPH_DEEPL_FREE_URL", free.url)
    monkeypatch.delenv("DEEPL_AUTH_KEY", raising=False)
    fake.free = free
    yield fake
    free.stop()


def deepl_node(**params):
    return node_dsl("DeepL:T", "DeepL", {"query": "sys.query", "auth_key": PRO_KEY, **params})


async def test_a_pro_key_translates_on_the_pro_host_with_the_configured_languages(deepl):
    deepl.on("POST", "/v2/translate", Reply(200, TRANSLATED))
    events = await run_turn(deepl_node(), "今天天气很好。")
    [req] = deepl.requests
    assert req.headers["authorization"] == f"DeepL-Auth-Key {PRO_KEY}"
    assert req.json() == {"text": ["今天天气很好。"], "source_lang": "ZH", "target_lang": "EN-GB"}
    data = finished(events, "DeepL:T")
    assert data["error"] is None and data["outputs"]["formalized_content"] == "The weather is nice today."
    assert data["inputs"] == {"query": "今天天气很好。"}
    assert deepl.free.requests == []


async def test_a_free_plan_key_goes_to_the_free_host(deepl):
    deepl.free.on("POST", "/v2/translate", Reply(200, {"translations": [{"text": "Guten Morgen"}]}))
    events = await run_turn(deepl_node(auth_key=FREE_KEY, source_lang="EN", target_lang="DE"), "Good morning")
    [req] = deepl.free.requests
    assert req.headers["authorization"] == f"DeepL-Auth-Key {FREE_KEY}"
    assert req.json()["source_lang"] == "EN" and req.json()["target_lang"] == "DE"
    assert finished(events, "DeepL:T")["outputs"]["formalized_content"] == "Guten Morgen"
    assert deepl.requests == []


async def test_the_key_may_come_from_the_environment_and_ragflows_placeholder_is_no_key(deepl, monkeypatch):
    events = await run_turn(deepl_node(auth_key="xxx"), "你好")
    assert finished(events, "DeepL:T")["error"] == \
        "DeepL needs an auth key: set params.auth_key in the DSL or the DEEPL_AUTH_KEY environment variable"
    assert deepl.requests == []

    monkeypatch.setenv("DEEPL_AUTH_KEY", "env-key-123")
    deepl.on("POST", "/v2/translate", Reply(200, TRANSLATED))
    await run_turn(deepl_node(auth_key="xxx"), "你好")
    assert deepl.requests[0].headers["authorization"] == "DeepL-Auth-Key env-key-123"


async def test_a_list_is_joined_with_dashes_and_an_empty_text_is_not_sent(deepl):
    deepl.on("POST", "/v2/translate", Reply(200, TRANSLATED))
    node = build("DeepL:T", "DeepL", {"query": ["第一段", "第二段"], "auth_key": PRO_KEY})
    result = await node.run(state("ignored"), context())
    assert deepl.requests[0].json()["text"] == ["第一段 - 第二段"]
    assert result.outputs == {"formalized_content": "The weather is nice today."}

    node = build("DeepL:T", "DeepL", {"query": "sys.query", "auth_key": PRO_KEY})
    result = await node.run(state("  "), context())
    assert result.outputs == {"formalized_content": ""} and len(deepl.requests) == 1


async def test_a_rejected_key_and_a_used_up_quota_are_clear_errors_without_the_key(deepl):
    deepl.on("POST", "/v2/translate", Reply(403, {"message": f"Wrong endpoint. Use https://api-free.deepl.com {PRO_KEY}"}))
    events = await run_turn(deepl_node(), "你好")
    error = finished(events, "DeepL:T")["error"]
    assert error == "DeepL answered HTTP 403 Forbidden (check the API key): Wrong endpoint. Use https://api-free.deepl.com ***"

    deepl.on("POST", "/v2/translate", Reply(456, {"message": "Quota exceeded"}))
    events = await run_turn(deepl_node(max_retries=2, delay_after_error=0), "你好")
    assert finished(events, "DeepL:T")["error"] == "DeepL answered HTTP 456: the character quota of this key is used up"
    assert len(deepl.requests) == 2                   # a used-up quota is not retried


async def test_rate_limits_are_retried_and_timeouts_and_unreachable_hosts_reported(deepl, monkeypatch):
    answers = iter([Reply(429, {"message": "Too many requests"}), Reply(200, TRANSLATED)])
    deepl.on("POST", "/v2/translate", lambda req: next(answers))
    events = await run_turn(deepl_node(max_retries=1, delay_after_error=0), "你好")
    assert len(deepl.requests) == 2 and finished(events, "DeepL:T")["error"] is None

    monkeypatch.setenv("CANVAS2GRAPH_TOOL_TIMEOUT", "0.3")
    deepl.on("POST", "/v2/translate", Reply(200, TRANSLATED, delay=30))
    events = await run_turn(deepl_node(), "你好")
    assert finished(events, "DeepL:T")["error"] == f"DeepL did not answer within 0.3 s ({deepl.url}/v2/translate)"

    url = closed_port_url()
    monkeypatch.setenv("CANVAS2GRAPH_DEEPL_URL", url)
    events = await run_turn(deepl_node(), "你好")
    assert finished(events, "DeepL:T")["error"].startswith(f"cannot reach DeepL at {url}/v2/translate: ")


# --- as an Agent tool ------------------------------------------------------------------------

def agent_with(**params):
    return agent_dsl({"component_name": "DeepL", "name": "DeepL", "params": {"auth_key": PRO_KEY, **params}})


async def test_as_agent_tool_the_model_reads_the_translation(deepl):
    deepl.on("POST", "/v2/translate", Reply(200, {"translations": [{"text": "Bonjour le monde"}]}))
    call = {"name": "deepl_translate_0", "arguments": {"query": "Hello world"}}
    events = await run_turn(agent_with(source_lang="EN", target_lang="FR"), "translate 'Hello world' to French",
                            {"replies": [{"tool_calls": [call]}], "auto_reply": "Bonjour le monde"})
    assert deepl.requests[0].json() == {"text": ["Hello world"], "source_lang": "EN", "target_lang": "FR"}
    assert tool_messages() == ["Bonjour le monde"]
    assert finished(events, "Agent:A")["error"] is None


async def test_as_agent_tool_a_missing_key_tells_the_model_where_to_set_it(deepl):
    call = {"name": "deepl_translate_0", "arguments": {"query": "Hello"}}
    events = await run_turn(agent_with(auth_key=""), "q", {"replies": [{"tool_calls": [call]}], "auto_reply": "No key."})
    assert tool_messages() == ["DeepL error: DeepL needs an auth key: set params.auth_key in the DSL or the "
                               "DEEPL_AUTH_KEY environment variable"]
    assert events[-1]["event"] == "workflow_finished"


def test_the_model_sees_the_function_name_and_one_required_text():
    agent = build("Agent:A", "Agent", agent_with()["components"]["Agent:A"]["obj"]["params"])
    fn = agent.tools[0].schema["function"]
    assert fn["name"] == "deepl_translate_0"
    assert list(fn["parameters"]["properties"]) == ["query"] and fn["parameters"]["required"] == ["query"]


@pytest.mark.parametrize("params, field", [
    ({"source_lang": "EN-GB"}, "params.source_lang"),        # a target-only variant
    ({"source_lang": "auto"}, "params.source_lang"),
    ({"target_lang": "EN"}, "params.target_lang"),           # DeepL wants EN-GB or EN-US
    ({"target_lang": "klingon"}, "params.target_lang"),
])
def test_bad_languages_are_compile_errors_naming_the_field(params, field):
    [error] = errors("DeepL", params)
    assert (error.field, error.code) == (field, "invalid-param")


def test_an_agent_tool_with_a_bad_language_fails_to_compile_naming_the_tool_field():
    [error] = [d for d in diagnose(agent_with(target_lang="EN"))[1] if d.severity == "error"]
    assert (error.component_id, error.field) == ("Agent:A", "params.tools.0.params.target_lang")

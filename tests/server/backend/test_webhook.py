"""Begin's Webhook settings applied to a request, without a server: the schema's fields and types,
content types and the immediate answer (the security modes are driven over HTTP in tests/server)."""
from __future__ import annotations

import pytest

from canvas2graph.server.backend.webhook import (WebhookRefused, WebhookRequest, extract, immediate_response, parse_request,
                             run_payload, webhook_settings)


def request(body: bytes = b"", ctype: str = "application/json", **kw) -> WebhookRequest:
    return WebhookRequest(method="POST", client_ip="127.0.0.1", headers=[("content-type", ctype), *kw.pop("headers", [])],
                          query=kw.pop("query", []), body=body, **kw)


def test_fields_are_cast_to_their_types_and_missing_optional_ones_get_empty_values():
    schema = {"required": ["n"], "properties": {
        "n": {"type": "number"}, "ratio": {"type": "number"}, "on": {"type": "boolean"}, "ids": {"type": "array<number>"},
        "meta": {"type": "object"}, "doc": {"type": "file"}, "note": {"type": "string"}}}
    data = {"n": "-3", "ratio": "0.5", "on": "1", "ids": "[1, 2]", "meta": '{"a": 1}'}
    assert extract(data, schema, "query") == {"n": -3, "ratio": 0.5, "on": True, "ids": [1, 2], "meta": {"a": 1},
                                              "doc": [], "note": ""}
    with pytest.raises(WebhookRefused, match=r"query.ids must be array<number>"):
        extract({"n": 1, "ids": '["x"]'}, schema, "query")
    with pytest.raises(WebhookRefused, match="not a boolean"):
        extract({"n": 1, "on": "maybe"}, schema, "query")
    with pytest.raises(WebhookRefused, match="lacks the required field 'n'"):
        extract({}, schema, "query")
    assert extract({"anything": 1}, None, "body") == {}           # no schema, no fields


def test_the_request_parts_and_begins_payload():
    settings = {"mode": "Webhook", "content_types": "application/json",
                "security": {"auth_type": "token", "token": {"token_header": "X-Key", "token_value": "k"}},
                "schema": {"body": {"properties": {"name": {"type": "string"}}},
                           "headers": {"properties": {"X-Trace": {"type": "string"}}}}}
    incoming = request(b'{"name": "Ada", "age": 3}', headers=[("x-key", "k"), ("x-trace", "t1")],
                       query=[("a", "1"), ("a", "2")])
    parsed = parse_request(settings, incoming)
    assert parsed["query"] == {"a": "1"} and parsed["headers"]["x-key"] == "[redacted]"
    payload = run_payload(settings, parsed)
    assert payload["body"] == {"name": "Ada"} and payload["headers"] == {"X-Trace": "t1"}
    assert payload["input"]["body"] == {"name": "Ada", "age": 3}
    assert parse_request({}, request(b"not json", "text/plain"))["body"] == {}     # text that is not JSON: nothing
    with pytest.raises(WebhookRefused, match="not valid JSON"):
        parse_request({}, request(b"{oops"))
    # a multipart body's file parts sit beside its fields, as the entries the server stored them under
    entry = {"id": "0" * 32, "name": "a.csv", "content": "x"}
    multipart = request(ctype="multipart/form-data; boundary=x", form={"note": "hi"}, files={"doc": [entry]})
    assert parse_request({}, multipart)["body"] == {"note": "hi", "doc": [entry]}


def test_the_immediate_answer_and_where_the_settings_are():
    assert immediate_response({}) == (200, b"null", "application/json")
    assert immediate_response({"response": {"status": "204", "body_template": '{"ok": 1}'}}) == \
        (204, b'{"ok": 1}', "application/json")
    assert immediate_response({"response": {"body_template": "thanks"}})[1:] == (b"thanks", "text/plain; charset=utf-8")
    with pytest.raises(WebhookRefused, match="not a number"):
        immediate_response({"response": {"status": "ok"}})
    dsl = {"components": {"begin": {"obj": {"component_name": "Begin", "params": {"mode": "Webhook", "x": 1}}}}}
    assert webhook_settings(dsl) == {"mode": "Webhook", "x": 1}
    assert webhook_settings({"components": {"begin": {"obj": {"component_name": "Begin", "params": {}}}}}) is None
    assert webhook_settings("not a dsl") is None

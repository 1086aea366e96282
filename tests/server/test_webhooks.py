"""Webhook triggers: an agent whose Begin is in Webhook mode runs from a plain HTTP call.

Every security mode RAGFlow's Begin declares is driven with httpx against a real server: anonymous
(only when allowed), a token header, Basic auth, JWT, the IP allow-list, the body size and the rate
limit. The request's query, headers and body reach the run through Begin's outputs; `Streaming`
calls answer with the run's message, `Immediately` calls answer at once and run in the background,
and a background run survives a server that is killed in the middle of it.
"""
from __future__ import annotations

import base64
import time
import uuid

import httpx
import jwt

from tests.server.helpers import SLOW_SCRIPT, Api, Server, cpn, make_token, wait_for

ANONYMOUS = {"auth_type": "none", "allow_anonymous": True}
SECRET = "a-jwt-secret-of-at-least-32-bytes!"
GREETING = "Hello {begin@body.name} #{begin@query.n} via {begin@headers.X-Source}"
SCHEMA = {"body": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}},
          "query": {"type": "object", "required": [], "properties": {"n": {"type": "number"}}},
          "headers": {"type": "object", "required": [], "properties": {"X-Source": {"type": "string"}}}}


def webhook_dsl(security: dict | None = ANONYMOUS, *, mode: str = "Streaming", methods: list | None = None,
                content_type: str = "application/json", response: dict | None = None, status: int | None = None,
                schema: dict | None = None) -> dict:
    """begin (Webhook) -> Message:Out, whose text shows what the request brought."""
    params = {"mode": "Webhook", "methods": methods or ["POST"], "execution_mode": mode,
              "content_types": content_type, "schema": schema or SCHEMA, "response": response or {"status": 200}}
    if security is not None:
        params["security"] = security
    message = {"content": [GREETING], "stream": False}       # exact substitution: spaces kept
    if status is not None:
        message["status"] = status
    return {"components": {"begin": cpn("Begin", params, ["Message:Out"]),
                           "Message:Out": cpn("Message", message)}}


def hook(server: Server, agent_id: str, *, test: bool = False) -> str:
    return f"{server.url}/api/v1/agents/{agent_id}/webhook" + ("/test" if test else "")


def call(server: Server, agent_id: str, body: dict | None = None, **kw) -> httpx.Response:
    kw.setdefault("params", {"n": "7"})
    return httpx.post(hook(server, agent_id), json=body if body is not None else {"name": "Ada"}, timeout=60, **kw)


def assert_refused(response: httpx.Response, status: int, words: str) -> None:
    assert response.status_code == status, response.text
    assert response.json()["code"] == status and words in response.json()["message"], response.json()


# --- the run and its answer ---------------------------------------------------------------------------
def test_a_streaming_webhook_answers_with_the_runs_message(server, alice):
    agent_id = alice.agent(webhook_dsl())
    response = call(server, agent_id, headers={"x-source": "crm"})      # any case matches the schema's name
    assert response.status_code == 200
    assert response.json() == {"message": "Hello Ada #7 via crm", "success": True, "code": 200}


def test_the_query_headers_and_body_reach_begin_as_ragflow_maps_them(server, alice):
    agent_id = alice.agent(webhook_dsl())
    logs = f"/agents/{agent_id}/webhook/logs"
    since = alice.ok("GET", logs)["next_since_ts"]
    response = alice.http.post(hook(server, agent_id, test=True), json={"name": "Ada", "extra": 1},
                               params={"n": "7"}, headers={"X-Source": "crm"})
    assert response.json()["message"] == "Hello Ada #7 via crm"
    webhook_id = alice.ok("GET", logs, params={"since_ts": since})["webhook_id"]
    events = alice.ok("GET", logs, params={"since_ts": since, "webhook_id": webhook_id})["events"]
    [begin] = [e["data"] for e in events if e["event"] == "node_finished" and e["data"]["component_id"] == "begin"]
    # Begin's outputs are the schema's fields, strings cast to their types; its input is the whole request
    assert {k: v for k, v in begin["outputs"].items() if not k.startswith("_")} == {
        "query": {"n": 7}, "headers": {"X-Source": "crm"}, "body": {"name": "Ada"}}
    request = begin["inputs"]["request"]
    assert request["body"] == {"name": "Ada", "extra": 1} and request["query"] == {"n": "7"}
    assert request["content_type"] == "application/json"
    assert request["headers"]["authorization"] == "[redacted]"      # credentials are not kept with the session
    [session] = [s for s in alice.ok("GET", f"/agents/{agent_id}/sessions") if s["source"] == "webhook"]
    assert session["messages"][-1]["content"] == "Hello Ada #7 via crm"
    [logged] = alice.ok("GET", logs)["calls"]
    assert logged["status"] == "finished" and logged["session_id"] == session["id"] and logged["test"] is True


def test_a_message_status_is_the_http_status_of_the_answer(server, alice):
    agent_id = alice.agent(webhook_dsl(status=201))
    response = call(server, agent_id, headers={"X-Source": "x"})
    assert response.status_code == 201 and response.json()["code"] == 201


def test_an_immediate_webhook_answers_at_once_and_runs_in_the_background(server, alice):
    response_cfg = {"status": 202, "body_template": '{"accepted": true}'}
    agent_id = alice.agent(webhook_dsl(mode="Immediately", response=response_cfg))
    response = call(server, agent_id, headers={"X-Source": "queue"})
    assert response.status_code == 202 and response.json() == {"accepted": True}

    def answered():
        sessions = [s for s in alice.ok("GET", f"/agents/{agent_id}/sessions") if s["source"] == "webhook"]
        return sessions and sessions[0]["messages"][-1]["content"] == "Hello Ada #7 via queue"
    wait_for(answered, what="the background run's answer")
    [logged] = alice.ok("GET", f"/agents/{agent_id}/webhook/logs")["calls"]
    assert logged["mode"] == "Immediately" and wait_for(
        lambda: alice.ok("GET", f"/agents/{agent_id}/webhook/logs")["calls"][0]["status"] == "finished")


def test_an_immediate_webhook_with_a_text_template_answers_text(server, alice):
    agent_id = alice.agent(webhook_dsl(mode="Immediately", response={"status": 200, "body_template": "thanks"}))
    response = call(server, agent_id)
    assert response.status_code == 200 and response.text == "thanks"
    assert response.headers["content-type"].startswith("text/plain")


def test_a_response_status_outside_200_to_399_is_refused(server, alice):
    agent_id = alice.agent(webhook_dsl(mode="Immediately", response={"status": 500}))
    assert_refused(call(server, agent_id), 400, "between 200 and 399")


# --- security -----------------------------------------------------------------------------------------
def test_anonymous_calls_need_allow_anonymous(server, alice):
    assert_refused(call(server, alice.agent(webhook_dsl({"auth_type": "none"}))), 400, "allow_anonymous")
    assert_refused(call(server, alice.agent(webhook_dsl(None))), 400, "no security settings")


def test_token_authentication(server, alice):
    agent_id = alice.agent(webhook_dsl({"auth_type": "token",
                                        "token": {"token_header": "X-Hook-Token", "token_value": "t0k3n"}}))
    assert call(server, agent_id, headers={"X-Hook-Token": "t0k3n"}).status_code == 200
    assert_refused(call(server, agent_id, headers={"X-Hook-Token": "wrong"}), 400, "invalid token")
    assert_refused(call(server, agent_id), 400, "invalid token")


def test_basic_authentication(server, alice):
    agent_id = alice.agent(webhook_dsl({"auth_type": "basic", "basic_auth": {"username": "hook", "password": "pw"}}))
    assert call(server, agent_id, auth=("hook", "pw")).status_code == 200
    assert_refused(call(server, agent_id, auth=("hook", "nope")), 400, "Basic Auth")
    assert_refused(call(server, agent_id, headers={"Authorization": "Basic !!!"}), 400, "Basic Auth")


def test_jwt_authentication_checks_signature_audience_issuer_and_claims(server, alice):
    settings = {"secret": SECRET, "algorithm": "hs256", "audience": "hooks", "issuer": "crm",
                "required_claims": ["tenant"]}
    agent_id = alice.agent(webhook_dsl({"auth_type": "jwt", "jwt": settings}))

    def bearer(claims: dict, secret: str = SECRET) -> dict:
        return {"Authorization": "Bearer " + jwt.encode(claims, secret, algorithm="HS256")}
    good = {"aud": "hooks", "iss": "crm", "tenant": "acme", "exp": int(time.time()) + 60}
    assert call(server, agent_id, headers=bearer(good)).status_code == 200
    assert_refused(call(server, agent_id, headers=bearer(good, SECRET[::-1])), 400, "invalid JWT")
    assert_refused(call(server, agent_id, headers=bearer({**good, "aud": "else"})), 400, "invalid JWT")
    assert_refused(call(server, agent_id, headers=bearer({**good, "exp": int(time.time()) - 60})), 400, "expired")
    assert_refused(call(server, agent_id, headers=bearer({k: v for k, v in good.items() if k != "tenant"})), 400,
                   "'tenant'")
    assert_refused(call(server, agent_id), 400, "Bearer")


def test_jwt_settings_that_would_weaken_it_are_refused(server, alice):
    unsigned = alice.agent(webhook_dsl({"auth_type": "jwt", "jwt": {"secret": SECRET, "algorithm": "none"}}))
    token = jwt.encode({"a": 1}, None, algorithm="none")
    assert_refused(call(server, unsigned, headers={"Authorization": f"Bearer {token}"}), 400, "unsigned")
    reserved = alice.agent(webhook_dsl({"auth_type": "jwt", "jwt": {"secret": SECRET, "required_claims": ["exp"]}}))
    token = jwt.encode({"exp": int(time.time()) + 60}, SECRET, algorithm="HS256")
    assert_refused(call(server, reserved, headers={"Authorization": f"Bearer {token}"}), 400, "'exp'")


def test_the_ip_allow_list(server, alice):
    assert_refused(call(server, alice.agent(webhook_dsl({**ANONYMOUS, "ip_whitelist": ["10.0.0.0/8"]}))), 400,
                   "not on this webhook's allow-list")
    assert call(server, alice.agent(webhook_dsl({**ANONYMOUS, "ip_whitelist": ["127.0.0.1"]}))).status_code == 200
    assert call(server, alice.agent(webhook_dsl({**ANONYMOUS, "ip_whitelist": ["127.0.0.0/8"]}))).status_code == 200
    assert_refused(call(server, alice.agent(webhook_dsl({**ANONYMOUS, "ip_whitelist": ["not-an-ip"]}))), 400,
                   "neither an address nor a range")


def test_the_body_size_limit(server, alice):
    agent_id = alice.agent(webhook_dsl({**ANONYMOUS, "max_body_size": "1KB"}))
    assert call(server, agent_id, {"name": "x" * 500}).status_code == 200
    assert_refused(call(server, agent_id, {"name": "x" * 2000}), 400, "larger than this webhook accepts")
    assert_refused(call(server, alice.agent(webhook_dsl({**ANONYMOUS, "max_body_size": "20MB"}))), 400, "10MB")
    assert_refused(call(server, alice.agent(webhook_dsl({**ANONYMOUS, "max_body_size": "lots"}))), 400, "not a size")


def test_the_rate_limit(server, alice):
    agent_id = alice.agent(webhook_dsl({**ANONYMOUS, "rate_limit": {"limit": 2, "per": "minute"}}))
    assert [call(server, agent_id).status_code for _ in range(2)] == [200, 200]
    assert_refused(call(server, agent_id), 429, "too many requests")
    other = alice.agent(webhook_dsl({**ANONYMOUS, "rate_limit": {"limit": 2, "per": "minute"}}))
    assert call(server, other).status_code == 200          # each webhook has its own bucket


# --- the request ---------------------------------------------------------------------------------------
def test_methods_content_type_and_schema_are_enforced(server, alice):
    agent_id = alice.agent(webhook_dsl())
    assert_refused(httpx.get(hook(server, agent_id)), 400, "does not accept GET")
    assert_refused(httpx.post(hook(server, agent_id), content=b"name=Ada",
                              headers={"Content-Type": "application/x-www-form-urlencoded"}), 400, "Content-Type")
    assert_refused(call(server, agent_id, {"other": 1}), 400, "required field 'name'")
    assert_refused(call(server, agent_id, {"name": 5}), 400, "body.name must be string")
    assert_refused(call(server, agent_id, params={"n": "seven"}), 400, "not a number")
    assert_refused(httpx.post(hook(server, agent_id), content=b"{not json",
                              headers={"Content-Type": "application/json"}), 400, "not valid JSON")


def test_a_form_encoded_webhook(server, alice):
    agent_id = alice.agent(webhook_dsl(content_type="application/x-www-form-urlencoded", methods=["PUT"]))
    response = httpx.put(hook(server, agent_id), data={"name": "Bea"}, params={"n": "2"})
    assert response.status_code == 200 and response.json()["message"] == "Hello Bea #2 via "


def test_agents_without_a_webhook_and_unknown_agents_are_refused(server, alice):
    from tests.server.helpers import CHAT_DSL
    assert_refused(call(server, alice.agent(CHAT_DSL)), 400, "not in Webhook mode")
    assert_refused(call(server, uuid.uuid4().hex), 400, "not found")


# --- test calls and their logs ---------------------------------------------------------------------------
def test_the_owners_test_call_is_logged_event_by_event(server, alice, bob):
    agent_id = alice.agent(webhook_dsl())
    logs = f"/agents/{agent_id}/webhook/logs"
    start = alice.ok("GET", logs)["next_since_ts"]
    response = alice.http.post(hook(server, agent_id, test=True), json={"name": "Ada"}, params={"n": "1"})
    assert response.status_code == 200 and response.json()["message"] == "Hello Ada #1 via "
    # RAGFlow's polling: since_ts finds the next test call, then its events until `finished`
    found = alice.ok("GET", logs, params={"since_ts": start})
    assert found["webhook_id"] and found["events"] == [] and found["next_since_ts"] > start
    trace = alice.ok("GET", logs, params={"since_ts": found["next_since_ts"], "webhook_id": found["webhook_id"]})
    kinds = [e["event"] for e in trace["events"]]
    assert kinds[0] == "workflow_started" and "message" in kinds and kinds[-1] == "finished" and trace["finished"]
    assert trace["events"][-1]["success"] is True
    again = alice.ok("GET", logs, params={"since_ts": trace["next_since_ts"], "webhook_id": found["webhook_id"]})
    assert again["events"] == [] and again["finished"] is False
    assert alice.ok("GET", logs)["calls"][0]["test"] is True


def test_another_tenant_cannot_test_or_read_the_webhook(server, alice, bob):
    agent_id = alice.agent(webhook_dsl())
    unknown = uuid.uuid4().hex
    for path in (f"/agents/{agent_id}/webhook/logs", f"/agents/{agent_id}/webhook/test"):
        theirs = bob.call("POST" if path.endswith("test") else "GET", path, {"name": "x"})
        missing = bob.call("POST" if path.endswith("test") else "GET", path.replace(agent_id, unknown), {"name": "x"})
        assert theirs["code"] == missing["code"] == 102
        assert theirs["message"].replace(agent_id, unknown) == missing["message"]
    assert alice.ok("GET", f"/agents/{agent_id}/webhook/logs")["calls"] == []


def test_a_malformed_log_query_is_refused(alice):
    agent_id = alice.agent(webhook_dsl())
    reply = alice.call("GET", f"/agents/{agent_id}/webhook/logs", params={"since_ts": "yesterday"})
    assert reply["code"] == 101 and "since_ts" in reply["message"]


# --- durability -----------------------------------------------------------------------------------------
# begin (Webhook, answered at once) -> LLM:A -> Message:M1 -> LLM:B -> Message:M2, with a slow model
SLOW_WEBHOOK_DSL = {"components": {
    "begin": cpn("Begin", {"mode": "Webhook", "methods": ["POST"], "execution_mode": "Immediately",
                           "security": ANONYMOUS, "response": {"status": 202}}, ["LLM:A"]),
    "LLM:A": cpn("LLM", {"llm_id": "gpt-4o@OpenAI", "prompts": [{"role": "user", "content": "go"}]}, ["Message:M1"]),
    "Message:M1": cpn("Message", {"content": ["{LLM:A@content}"]}, ["LLM:B"]),
    "LLM:B": cpn("LLM", {"llm_id": "gpt-4o@OpenAI", "prompts": [{"role": "user", "content": "more"}]}, ["Message:M2"]),
    "Message:M2": cpn("Message", {"content": ["{LLM:B@content}"]}),
}}


def test_a_background_webhook_run_survives_a_killed_server(durable_url, tmp_path):
    token = make_token(durable_url, f"tenant-{uuid.uuid4().hex[:8]}")
    first = Server(durable_url, tmp_path, SLOW_SCRIPT).start()
    api = Api(first, token)
    agent_id = api.agent(SLOW_WEBHOOK_DSL)
    logs = f"/agents/{agent_id}/webhook/logs"
    since = api.ok("GET", logs)["next_since_ts"]
    assert api.http.post(hook(first, agent_id, test=True), json={}).status_code == 202
    webhook_id = wait_for(lambda: api.ok("GET", logs, params={"since_ts": since})["webhook_id"], what="the call")

    def streaming():
        events = api.ok("GET", logs, params={"since_ts": since, "webhook_id": webhook_id})["events"]
        return any(e["event"] == "message" for e in events)
    wait_for(streaming, what="Message:M1 streaming")
    first.kill()                                   # SIGKILL in the middle of the background run
    api.close()

    with Server(durable_url, tmp_path, SLOW_SCRIPT) as second:
        api = Api(second, token)

        def answer():
            sessions = [s for s in api.ok("GET", f"/agents/{agent_id}/sessions") if s["source"] == "webhook"]
            return sessions[0]["messages"][-1]["content"] if sessions and len(sessions[0]["messages"]) > 1 else None
        assert wait_for(answer, timeout=90, what="the resumed run's answer") == \
            "Answer 1 from LLM:A.Answer 2 from LLM:B."
        # the call's log entry is closed just after the session records the answer
        [logged] = wait_for(lambda: [c for c in api.ok("GET", logs)["calls"] if c["status"] != "running"],
                            what="the call's log entry to close")
        assert logged["status"] == "finished" and logged["id"] == webhook_id
        events = api.ok("GET", logs, params={"since_ts": since, "webhook_id": webhook_id})["events"]
        finished = [e["data"]["component_id"] for e in events if e["event"] == "node_finished"]
        assert finished.count("begin") == 1 and finished[-1] == "Message:M2"     # begin did not run again
        assert events[-1] == {**events[-1], "event": "finished", "success": True}
        api.close()


def test_the_basic_scheme_name_is_case_insensitive(server, alice):
    agent_id = alice.agent(webhook_dsl({"auth_type": "basic", "basic_auth": {"username": "hook", "password": "pw"}}))
    credentials = base64.b64encode(b"hook:pw").decode()
    assert call(server, agent_id, headers={"Authorization": f"basic {credentials}"}).status_code == 200

"""The OpenAI-compatible mode, driven by the `openai` Python client and by plain HTTP."""
from __future__ import annotations

import json

import openai
import pytest

from tests.server.helpers import CHAT_DSL, FEEDBACK_DSL, TIPS, chat_answer


@pytest.fixture(scope="module")
def agent_id(alice):
    return alice.agent(CHAT_DSL)


def client(server, token: str, agent_id: str) -> openai.OpenAI:
    return openai.OpenAI(api_key=token, base_url=f"{server.url}/api/v1/agents_openai/{agent_id}", max_retries=0)


def test_a_non_streamed_completion_is_a_chat_completion(server, alice, agent_id):
    reply = client(server, alice.token, agent_id).chat.completions.create(
        model="anything", messages=[{"role": "user", "content": "hello"}])
    assert reply.object == "chat.completion" and reply.model == agent_id
    assert reply.choices[0].message.content == chat_answer(1)
    assert reply.choices[0].finish_reason == "stop"
    assert reply.usage.prompt_tokens == 1 and reply.usage.completion_tokens == 4 and reply.usage.total_tokens == 5


def test_a_stream_ends_with_finish_reason_stop_and_the_usage(server, alice, agent_id):
    chunks = list(client(server, alice.token, agent_id).chat.completions.create(
        model="anything", messages=[{"role": "user", "content": "hello"}], stream=True))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == chat_answer(1)
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert all(c.choices[0].finish_reason is None for c in chunks[:-1])
    assert chunks[-1].usage.total_tokens == 5
    assert all(c.usage is None for c in chunks[:-1])


def test_the_reply_id_is_the_session_and_continues_the_conversation(server, alice, agent_id):
    api = client(server, alice.token, agent_id)
    first = api.chat.completions.create(model="m", messages=[{"role": "user", "content": "one"}])
    second = api.chat.completions.create(model="m", messages=[{"role": "user", "content": "two"}],
                                         extra_body={"session_id": first.id})
    assert second.id == first.id and second.choices[0].message.content == chat_answer(2)
    log = alice.ok("GET", f"/agents/{agent_id}/sessions/{first.id}")["messages"]
    assert [m["content"] for m in log if m["role"] == "user"] == ["one", "two"]


def test_only_the_last_user_message_is_asked(server, alice, agent_id):
    reply = client(server, alice.token, agent_id).chat.completions.create(model="m", messages=[
        {"role": "system", "content": "be brief"}, {"role": "user", "content": "earlier"},
        {"role": "assistant", "content": "sure"}, {"role": "user", "content": [{"type": "text", "text": "latest"}]}])
    log = alice.ok("GET", f"/agents/{agent_id}/sessions/{reply.id}")["messages"]
    assert [m["content"] for m in log if m["role"] == "user"] == ["latest"]


def test_the_openai_compatible_flag_on_the_ragflow_route(alice, agent_id):
    text = alice.stream_text("/agents/chat/completions", {"agent_id": agent_id, "openai-compatible": True, "stream": True,
                                                          "messages": [{"role": "user", "content": "hi"}]})
    frames = text.split("\n\n")
    assert frames[-2:] == ["data: [DONE]", ""]          # OpenAI framing: a space after "data:"
    chunks = [json.loads(f[len("data: "):]) for f in frames[:-2]]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    data = alice.http.post("/agents/chat/completions", json={
        "agent_id": agent_id, "openai-compatible": True, "messages": [{"role": "user", "content": "hi"}]}).json()
    assert data["object"] == "chat.completion" and data["choices"][0]["message"]["content"] == chat_answer(1)


def test_a_pause_shows_its_tips_as_the_answer(server, alice):
    agent_id = alice.agent(FEEDBACK_DSL)
    reply = client(server, alice.token, agent_id).chat.completions.create(
        model="m", messages=[{"role": "user", "content": "coffee"}])
    assert reply.choices[0].message.content == TIPS


def test_errors_raise_in_the_openai_client(server, alice, bob, agent_id):
    with pytest.raises(openai.AuthenticationError):
        client(server, "wrong-token", agent_id).chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
    with pytest.raises(openai.NotFoundError):
        client(server, bob.token, agent_id).chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
    with pytest.raises(openai.BadRequestError) as raised:
        client(server, alice.token, agent_id).chat.completions.create(model="m", messages=[{"role": "system", "content": "x"}])
    assert "no user message" in str(raised.value)


def test_a_reasoning_models_thinking_is_reasoning_content_not_the_answer(tmp_path):
    """The demo's billing model reasons first: OpenAI clients get its thinking as `reasoning_content` (as RAGFlow's
    chat API sends it), never glued to the answer."""
    from pathlib import Path
    from tests.server.helpers import Api, Server, make_token
    repo = Path(__file__).resolve().parents[2]
    script = json.loads((repo / "fixtures" / "demo" / "support_desk.script.json").read_text())
    dsl = json.loads((repo / "fixtures" / "demo" / "support_desk.json").read_text())
    db = str(tmp_path / "s.db")
    with Server(db, tmp_path, script) as server:
        api = Api(server, make_token(db, "alice"))
        desk = client(server, api.token, api.agent(dsl))
        question = [{"role": "user", "content": "Why was I charged twice?"}]
        reply = desk.chat.completions.create(model="m", messages=question).choices[0].message
        assert "You were charged twice" in reply.content and "customer sees two charges" not in reply.content
        assert reply.model_extra["reasoning_content"].startswith("The customer sees two charges")
        chunks = [c.choices[0].delta for c in desk.chat.completions.create(model="m", messages=question, stream=True)
                  if c.choices]
        answer = "".join(d.content or "" for d in chunks)
        thought = "".join((d.model_extra or {}).get("reasoning_content") or "" for d in chunks)
        assert "You were charged twice" in answer and "customer sees two charges" not in answer
        assert thought.startswith("The customer sees two charges")
        api.close()

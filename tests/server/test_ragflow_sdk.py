"""RAGFlow's own Python SDK, from PyPI, against canvas2graph's server, unchanged.

- ragflow-sdk 0.22.1 (Python <= 3.12) runs in this interpreter (a test extra): it posts
  `{question, stream, session_id}` to the legacy `/agents/{id}/completions` and reads `message` events
  until `message_end`.
- ragflow-sdk 0.27.3 needs Python 3.13: it runs in its own virtual environment, created by the test
  with the first Python 3.13 found (cached under the temp folder between runs), and posts to
  `/agents/chat/completions`.
Under CI=true a missing SDK or Python 3.13 fails the test; elsewhere it skips, saying why.
"""
from __future__ import annotations

import json
import subprocess

import pytest

from tests.server.helpers import CHAT_DSL, FEEDBACK_DSL, FINAL, TIPS, chat_answer

from tests.server.sdk027 import unavailable as _unavailable


# --- 0.22.1, in this interpreter --------------------------------------------------------------------
@pytest.fixture(scope="module")
def sdk022():
    try:
        import ragflow_sdk  # noqa: F401
        from importlib.metadata import version
    except ImportError:
        _unavailable("ragflow-sdk 0.22.1 is not installed (pip install -e '.[test]' on Python <= 3.12)")
    if version("ragflow-sdk") != "0.22.1":
        _unavailable(f"ragflow-sdk {version('ragflow-sdk')} is installed, not 0.22.1")
    return ragflow_sdk


def test_ragflow_sdk_022_sessions_and_answers(server, alice, sdk022):
    rag = sdk022.RAGFlow(api_key=alice.token, base_url=server.url)
    rag.create_agent(title="sdk-022", dsl=CHAT_DSL)
    [agent] = rag.list_agents(title="sdk-022")           # how 0.22 users find the agent they created
    session = agent.create_session()
    assert session.messages == [{"role": "assistant", "content": "Hello! Ask me anything."}]

    streamed = [m.content for m in session.ask("hello", stream=True)]
    assert "".join(streamed) == chat_answer(1) and len(streamed) > 1
    [answer] = list(session.ask("again", stream=False))
    assert answer.content == chat_answer(2)

    other = agent.create_session()
    assert {s.id for s in agent.list_sessions()} == {session.id, other.id}
    agent.delete_sessions(ids=[session.id])
    assert [s.id for s in agent.list_sessions()] == [other.id]


def test_ragflow_sdk_022_pause_and_resume(server, alice, sdk022):
    rag = sdk022.RAGFlow(api_key=alice.token, base_url=server.url)
    rag.create_agent(title="sdk-022-pause", dsl=FEEDBACK_DSL)
    [agent] = rag.list_agents(title="sdk-022-pause")
    session = agent.create_session()
    assert "".join(m.content for m in session.ask("coffee", stream=True)) == TIPS
    resumed = session.ask("", stream=True, inputs={"feedback": {"type": "line", "value": "bolder"}})
    assert "".join(m.content for m in resumed) == FINAL


# --- 0.27.3, in its own virtual environment ----------------------------------------------------------
SDK027_SCRIPT = r"""
import json, sys
from ragflow_sdk import RAGFlow
token, url, dsl = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
rag = RAGFlow(api_key=token, base_url=url)
rag.create_agent(title="sdk-027", dsl=dsl)
agents = rag.list_agents(page_size=100)
[agent] = [a for a in agents if a.title == "sdk-027"]
session = agent.create_session()
streamed = [m.content for m in session.ask("hello", stream=True)]
[answer] = list(session.ask("again", stream=False))
other = agent.create_session()
before = sorted(s.id for s in agent.list_sessions())
agent.delete_sessions(ids=[session.id])
after = [s.id for s in agent.list_sessions()]
print(json.dumps({"agents": [a.title for a in agents], "same_agent": rag.get_agent(agent.id).id == agent.id,
                  "prologue": session.messages, "streamed": streamed, "answer": answer.content,
                  "before": before, "after": after, "ids": [session.id, other.id]}))
"""


def test_ragflow_sdk_027_agents_sessions_and_answers(server, alice, sdk027_python):
    run = subprocess.run([sdk027_python, "-c", SDK027_SCRIPT, alice.token, server.url, json.dumps(CHAT_DSL)],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert "sdk-027" in out["agents"] and out["same_agent"]
    assert out["prologue"] == [{"role": "assistant", "content": "Hello! Ask me anything."}]
    assert "".join(out["streamed"]) == chat_answer(1) and len(out["streamed"]) > 1
    assert out["answer"] == chat_answer(2)
    first, other = out["ids"]
    assert out["before"] == sorted([first, other]) and out["after"] == [other]



# Every agent-related method of ragflow-sdk 0.27.3, each called as its users call it: RAGFlow.list_agents,
# get_agent, create_agent, update_agent, delete_agent; Agent.create_session, list_sessions,
# delete_sessions; Session.ask (streamed or not, with inputs, return_trace, release, user_id).
SDK027_ALL_METHODS = r"""
import json, sys
from ragflow_sdk import RAGFlow
token, url, first, second = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), json.loads(sys.argv[4])
rag = RAGFlow(api_key=token, base_url=url)
out = {}
rag.create_agent(title="sdk-all", dsl=first, description="first draft", canvas_type="Agent")
[agent] = [a for a in rag.list_agents(page=1, page_size=100, orderby="create_time", desc=False) if a.title == "sdk-all"]
got = rag.get_agent(agent.id)
out["created"] = [got.title, got.description, got.canvas_type, got.dsl.to_json()["components"] == first["components"]]

# publish the first DSL (the SDK's own request method), then save a second draft
rag.put(f"/agents/{agent.id}", {"dsl": first, "release": True})
rag.update_agent(agent.id, title="sdk-all-2", description="second draft", dsl=second, canvas_type="Customer Support")
got = rag.get_agent(agent.id)
out["updated"] = [got.title, got.description, got.canvas_type]

session = agent.create_session(name="chat", user_id="user-7")
out["session"] = [session.name, session.messages]
out["streamed"] = [m.content for m in session.ask("hello", stream=True)]
out["inputs"] = [m.content for m in session.ask("", stream=False, inputs={"topic": {"type": "line", "value": "tides"}})]
out["trace"] = [m.content for m in session.ask("again", stream=False, return_trace=True, user_id="user-7")]
released = agent.create_session(release=True)
out["released"] = [m.content for m in released.ask("hello", stream=False)]

out["by_id"] = [s.id for s in agent.list_sessions(page=1, page_size=10, orderby="create_time", desc=True, id=session.id)]
out["all"] = sorted(s.id for s in agent.list_sessions())
agent.delete_sessions(ids=[session.id])
out["after_ids"] = [s.id for s in agent.list_sessions()]
agent.delete_sessions(delete_all=True)
out["after_all"] = [s.id for s in agent.list_sessions()]
out["ids"] = [session.id, released.id]
rag.delete_agent(agent.id)
try:
    rag.get_agent(agent.id)
    out["deleted"] = False
except Exception as e:
    out["deleted"] = str(e)
print(json.dumps(out))
"""


def _topic_dsl(label: str) -> dict:
    """begin (an optional `topic`) -> LLM:A -> Message:M "<label>:<topic>|<answer>"."""
    from tests.server.helpers import cpn
    return {"components": {
        "begin": cpn("Begin", {"prologue": f"{label} here.",
                               "inputs": {"topic": {"type": "line", "name": "Topic", "optional": True}}}, ["LLM:A"]),
        "LLM:A": cpn("LLM", {"llm_id": "gpt-4o@OpenAI", "prompts": [{"role": "user", "content": "{sys.query}"}]},
                     ["Message:M"]),
        "Message:M": cpn("Message", {"content": [label + ":{begin@topic}|{LLM:A@content}"]}),
    }}


def test_ragflow_sdk_027_every_agent_method(server, alice, sdk027_python):
    run = subprocess.run([sdk027_python, "-c", SDK027_ALL_METHODS, alice.token, server.url,
                          json.dumps(_topic_dsl("v1")), json.dumps(_topic_dsl("v2"))],
                         capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert out["created"] == ["sdk-all", "first draft", "Agent", True]
    assert out["updated"] == ["sdk-all-2", "second draft", "Customer Support"]
    assert out["session"] == ["chat", [{"role": "assistant", "content": "v2 here."}]]
    assert "".join(out["streamed"]) == "v2:hello|Answer 1 from LLM:A." and len(out["streamed"]) > 1
    assert out["inputs"] == ["v2:tides|Answer 1 from LLM:A."]
    assert out["trace"] == ["v2:again|Answer 1 from LLM:A."]
    assert out["released"] == ["v1:hello|Answer 1 from LLM:A."]          # the published version, not the draft
    session_id, released_id = out["ids"]
    assert out["by_id"] == [session_id] and out["all"] == sorted([session_id, released_id])
    assert out["after_ids"] == [released_id] and out["after_all"] == []
    assert "not found" in out["deleted"]

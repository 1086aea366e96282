"""Agents as MCP tools over streamable HTTP, driven by the official `mcp` client (`ClientSession` over
`streamable_http_client`), on SQLite and PostgreSQL: listing, calling, conversations on one MCP session,
progress, a form asked through elicitation or answered in the next call, cancelling, and tenants kept apart."""
from __future__ import annotations

import asyncio
import uuid
from contextlib import asynccontextmanager

import httpx
import httpx2
import mcp_types as types
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from tests.server.helpers import CHAT_DSL, FEEDBACK_DSL, FINAL, TIPS, chat_answer, cpn, wait_for
from tests.server.protocols.conftest import long_dsl

FORM_DSL = {"components": {
    "begin": cpn("Begin", {"mode": "task", "inputs": {
        "city": {"type": "line", "name": "City"},
        "days": {"type": "integer", "name": "Days", "optional": True},
        "unit": {"type": "options", "name": "Unit", "options": ["C", "F"], "optional": True}}}, ["Message:M"]),
    "Message:M": cpn("Message", {"content": ["Weather in {begin@city} for {begin@days} days"], "stream": False}),
}}


@asynccontextmanager
async def connect(url: str, token: str | None, **session_options):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=120)) as http:
        async with streamable_http_client(url, http_client=http) as (read, write, *_):
            async with ClientSession(read, write, **session_options) as session:
                await session.initialize()
                yield session


def agent_url(server, agent_id: str) -> str:
    return f"{server.url}/api/v1/agents/{agent_id}/mcp"


def text(result: types.CallToolResult) -> str:
    return "".join(part.text for part in result.content if isinstance(part, types.TextContent))


def title() -> str:
    return f"Desk {uuid.uuid4().hex[:6]}"


async def test_an_agent_endpoint_lists_its_agent_as_one_tool_with_begins_form(server, alice):
    name = title()
    agent_id = alice.ok("POST", "/agents", {"title": name, "description": "Tells the weather.", "dsl": FORM_DSL})["id"]
    async with connect(agent_url(server, agent_id), alice.token) as session:
        tools = (await session.list_tools()).tools
        assert [t.name for t in tools] == [name.lower().replace(" ", "_")]
        tool = tools[0]
        assert tool.title == name and tool.description == "Tells the weather."
        assert tool.input_schema["properties"]["city"] == {"type": "string", "title": "City"}
        assert tool.input_schema["properties"]["days"]["type"] == "integer"
        assert tool.input_schema["properties"]["unit"]["enum"] == ["C", "F"]
        assert tool.input_schema["required"] == ["city"]            # a task agent: no message needed
        result = await session.call_tool(tool.name, {"city": "Oslo", "days": 3})
        assert not result.is_error and text(result) == "Weather in Oslo for 3 days"


async def test_a_call_answers_and_the_next_call_on_the_mcp_session_continues_the_conversation(server, alice):
    agent_id = alice.agent(CHAT_DSL, title())
    progress: list[tuple[float, str]] = []

    async def on_progress(value, total, message):
        progress.append((value, message))

    async with connect(agent_url(server, agent_id), alice.token) as session:
        tool = (await session.list_tools()).tools[0]
        assert tool.input_schema["required"] == ["query"]
        first = await session.call_tool(tool.name, {"query": "hello"}, progress_callback=on_progress)
        assert text(first) == chat_answer(1) and first.structured_content["status"] == "finished"
        second = await session.call_tool(tool.name, {"query": "again"})
        assert text(second) == chat_answer(2)
        assert second.structured_content["session_id"] == first.structured_content["session_id"]
    # each component reported as it started and finished, in the order of RAGFlow's events (LLM:A's answer
    # streams through the Message that shows it, so the Message starts before the LLM finishes)
    assert progress == [(1.0, "begin (Begin) started"), (2.0, "begin (Begin) finished"), (3.0, "LLM:A (LLM) started"),
                        (4.0, "Message:M (Message) started"), (5.0, "LLM:A (LLM) finished"),
                        (6.0, "Message:M (Message) finished")]
    # the session is a stored session of the agent, as RAGFlow's API lists it
    sessions = alice.ok("GET", f"/agents/{agent_id}/sessions")
    assert [m["content"] for m in sessions[0]["messages"] if m["role"] == "user"] == ["hello", "again"]


async def test_a_form_is_asked_through_elicitation_and_the_answer_resumes_the_run(server, alice):
    agent_id = alice.agent(FEEDBACK_DSL, title())
    asked: list[types.ElicitRequestParams] = []

    async def elicit(context, params):
        asked.append(params)
        return types.ElicitResult(action="accept", content={"feedback": "bolder"})

    async with connect(agent_url(server, agent_id), alice.token, elicitation_callback=elicit) as session:
        tool = (await session.list_tools()).tools[0]
        result = await session.call_tool(tool.name, {"query": "coffee"})
    assert text(result) == FINAL and result.structured_content["status"] == "finished"
    assert asked[0].message == TIPS
    assert asked[0].requested_schema["properties"]["feedback"]["type"] == "string"
    assert asked[0].requested_schema["required"] == ["feedback"]


async def test_a_client_without_elicitation_gets_the_question_and_answers_it_in_its_next_call(server, alice):
    agent_id = alice.agent(FEEDBACK_DSL, title())
    async with connect(agent_url(server, agent_id), alice.token) as session:
        tool = (await session.list_tools()).tools[0]
        asked = await session.call_tool(tool.name, {"query": "coffee"})
        assert TIPS in text(asked) and asked.structured_content["status"] == "paused"
        assert asked.structured_content["waiting_for"]["inputs"]["feedback"]["name"] == "Feedback"
        answered = await session.call_tool(tool.name, {"query": "bolder"})
    assert text(answered) == FINAL


async def test_cancelling_a_call_cancels_the_turn_and_the_session_takes_the_next_call(server, alice):
    agent_id = alice.agent(long_dsl(), title())
    started = asyncio.Event()

    async def on_progress(value, total, message):
        if "LLM:S2" in (message or ""):
            started.set()

    async with connect(agent_url(server, agent_id), alice.token) as session:
        tool = (await session.list_tools()).tools[0]
        call = asyncio.create_task(session.call_tool(tool.name, {"query": "go"}, progress_callback=on_progress))
        await asyncio.wait_for(started.wait(), 60)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        sid = alice.ok("GET", f"/agents/{agent_id}/sessions")[0]["id"]

        def last_turn():
            turns = alice.ok("GET", f"/agents/{agent_id}/sessions/{sid}/trace")["turns"]
            return turns and turns[-1]["status"] not in ("running", None) and turns[-1]

        turn = await asyncio.to_thread(wait_for, last_turn, 60, "the cancelled turn's end")
        assert turn["status"] == "cancelled"
        assert len(turn["steps"]) < 10           # it stopped long before LLM:S40
        again = await session.call_tool(tool.name, {"query": "short"})
        assert again.structured_content["session_id"] == sid and again.structured_content["status"] == "finished"


async def test_tokens_are_required_and_another_tenants_agents_stay_invisible(server, alice, bob):
    mine, theirs = title(), title()
    alice_agent = alice.ok("POST", "/agents", {"title": mine, "dsl": CHAT_DSL})["id"]
    bob.ok("POST", "/agents", {"title": theirs, "dsl": CHAT_DSL})
    for headers in ({}, {"Authorization": "Bearer c2g-not-a-token"}):
        reply = httpx.post(f"{server.url}/api/v1/mcp", headers=headers, json={})
        assert reply.status_code == 401 and reply.headers["www-authenticate"].startswith("Bearer")
    reply = httpx.post(agent_url(server, alice_agent), headers={"Authorization": f"Bearer {bob.token}"}, json={})
    assert reply.status_code == 404 and alice_agent in reply.json()["error"]

    async with connect(f"{server.url}/api/v1/mcp", bob.token) as session:
        names = {t.name for t in (await session.list_tools()).tools}
        assert theirs.lower().replace(" ", "_") in names and mine.lower().replace(" ", "_") not in names
        refused = await session.call_tool(mine.lower().replace(" ", "_"), {"query": "hi"})
        assert refused.is_error and "no tool named" in text(refused)
    async with connect(f"{server.url}/api/v1/mcp", alice.token) as session:
        names = {t.name for t in (await session.list_tools()).tools}
        assert mine.lower().replace(" ", "_") in names and theirs.lower().replace(" ", "_") not in names


DOC_DSL = {"components": {
    "begin": cpn("Begin", {}, ["DocGenerator:D"]),
    "DocGenerator:D": cpn("DocGenerator", {"output_format": "pdf", "content": "# Minutes\n\n{sys.query}",
                                           "filename": "minutes"}, ["Message:M"]),
    "Message:M": cpn("Message", {"content": ["Your document: {DocGenerator:D@download}"]}),
}}


async def test_a_file_the_run_produced_is_a_resource_link_to_its_download(server, alice):
    agent_id = alice.agent(DOC_DSL, title())
    async with connect(agent_url(server, agent_id), alice.token) as session:
        tool = (await session.list_tools()).tools[0]
        result = await session.call_tool(tool.name, {"query": "We agreed."})
    [link] = [part for part in result.content if isinstance(part, types.ResourceLink)]
    assert link.name == "minutes.pdf" and link.mime_type == "application/pdf"
    assert str(link.uri).startswith(f"{server.url}/api/v1/agents/attachments/")
    document = httpx.get(str(link.uri), headers={"Authorization": f"Bearer {alice.token}"})
    assert document.status_code == 200 and document.content.startswith(b"%PDF")


# the embedded retrieval store is indexed beside the sessions file (with PostgreSQL it would be the user's
# ~/.canvas2graph): SQLite only
@pytest.mark.parametrize("server", ["sqlite"], indirect=True)
async def test_the_chunks_an_answer_cites_are_embedded_resources(server, alice):
    import json
    import subprocess

    from tests.server.helpers import CLI, REPO
    index = subprocess.run(CLI + ["index", "fixtures/kb/docs", "--kb", "support-kb", "--db", server.db, "--quiet"],
                           cwd=REPO, capture_output=True, text=True)
    assert index.returncode == 0, index.stderr
    agent_id = alice.agent(json.loads((REPO / "fixtures/kb/kb_answer.json").read_text()), title())
    async with connect(agent_url(server, agent_id), alice.token) as session:
        tool = (await session.list_tools()).tools[0]
        result = await session.call_tool(tool.name, {"query": "I was charged twice for my order"})
    cited = [part.resource for part in result.content if isinstance(part, types.EmbeddedResource)]
    assert cited and all(str(r.uri).startswith("canvas2graph://chunks/") and r.text for r in cited), result
    assert "refunds.md" in {r.meta["document_name"] for r in cited}

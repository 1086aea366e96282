"""One MCP client, two `canvas2graph serve` processes on one PostgreSQL database, no session affinity.

The official client (`ClientSession` over `streamable_http_client`) talks through a transport that sends
each of its HTTP requests to the process the test names, as a load balancer without affinity might:
the session opened on A is listed and called on B, one conversation continues across both, a form left by
a call on one process is answered on the other (by the next call, or through elicitation with the answer
reaching the other process), a cancellation reaching the other process cancels the turn, and another
tenant is refused the session on both."""
from __future__ import annotations

import asyncio
import json
import time
import uuid
from contextlib import asynccontextmanager

import httpx
import httpx2
import mcp_types as types
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from tests import forkserver
from tests.runtime.checkpointers import postgres_url
from tests.server.helpers import CHAT_DSL, FEEDBACK_DSL, FINAL, TIPS, Api, Server, chat_answer, make_token, wait_for
from tests.server.protocols.conftest import PACED_SCRIPT, long_dsl

A, B = 0, 1


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    db, tmp = postgres_url(), tmp_path_factory.mktemp("mcp-two-processes")
    with Server(db, tmp, PACED_SCRIPT) as first, Server(db, tmp, PACED_SCRIPT) as second:
        yield [first, second]


@pytest.fixture(scope="module")
def alice(servers):
    api = Api(servers[A], make_token(servers[A].db, f"alice-{uuid.uuid4().hex[:6]}"))
    yield api
    api.close()


@pytest.fixture(scope="module")
def bob(servers):
    api = Api(servers[A], make_token(servers[A].db, f"bob-{uuid.uuid4().hex[:6]}"))
    yield api
    api.close()


class Balancer(httpx2.AsyncBaseTransport):
    """Sends each request to one server: `initialize` to `opens_on`, the client's answers and cancellations
    (which belong to a call already running) to `answers_to`, everything else to `to`. `sent` records
    (what, server) for every request: a JSON-RPC method, `response`, `GET` or `DELETE`."""

    def __init__(self, servers: list[Server]):
        self.servers = servers
        self.inner = httpx2.AsyncHTTPTransport()
        self.opens_on, self.to, self.answers_to = A, B, A
        self.sent: list[tuple[str, int]] = []

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        what = request.method
        if what == "POST":
            message = json.loads(request.content)
            what = message.get("method") or "response"
        where = self.opens_on if what == "initialize" else \
            self.answers_to if what in ("response", "notifications/cancelled") else self.to
        port = self.servers[where].port
        request.url = request.url.copy_with(port=port)
        request.headers["host"] = f"127.0.0.1:{port}"
        self.sent.append((what, where))
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


@asynccontextmanager
async def connect(balancer: Balancer, agent_id: str, token: str, **session_options):
    url = f"{balancer.servers[A].url}/api/v1/agents/{agent_id}/mcp"
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, transport=balancer,
                                  timeout=httpx2.Timeout(30, read=120)) as http:
        async with streamable_http_client(url, http_client=http) as (read, write, *_):
            async with ClientSession(read, write, **session_options) as session:
                await session.initialize()
                yield session


def text(result: types.CallToolResult) -> str:
    return "".join(part.text for part in result.content if isinstance(part, types.TextContent))


def title() -> str:
    return f"Desk {uuid.uuid4().hex[:6]}"


async def test_a_session_opened_on_one_process_lists_and_continues_its_conversation_on_both(servers, alice):
    agent_id = alice.agent(CHAT_DSL, title())
    balancer = Balancer(servers)
    async with connect(balancer, agent_id, alice.token) as session:
        tool = (await session.list_tools()).tools[0]
        first = await session.call_tool(tool.name, {"query": "hello"})
        balancer.to = A
        second = await session.call_tool(tool.name, {"query": "again"})
        balancer.to = B
        third = await session.call_tool(tool.name, {"query": "once more"})
    assert [text(first), text(second), text(third)] == [chat_answer(1), chat_answer(2), chat_answer(3)]
    assert first.structured_content["session_id"] == second.structured_content["session_id"] \
        == third.structured_content["session_id"]
    assert ("initialize", A) in balancer.sent and ("initialize", B) not in balancer.sent
    calls = [where for what, where in balancer.sent if what in ("tools/list", "tools/call")]
    assert calls == [B, B, A, B]
    # one stored session of the agent, whose log holds the three messages
    [stored] = alice.ok("GET", f"/agents/{agent_id}/sessions")
    assert [m["content"] for m in stored["messages"] if m["role"] == "user"] == ["hello", "again", "once more"]


async def test_a_form_a_call_left_on_one_process_is_answered_by_the_next_call_on_the_other(servers, alice):
    agent_id = alice.agent(FEEDBACK_DSL, title())
    balancer = Balancer(servers)
    async with connect(balancer, agent_id, alice.token) as session:
        tool = (await session.list_tools()).tools[0]
        balancer.to = A
        asked = await session.call_tool(tool.name, {"query": "coffee"})
        assert TIPS in text(asked) and asked.structured_content["status"] == "paused"
        balancer.to = B
        answered = await session.call_tool(tool.name, {"query": "bolder"})
    assert text(answered) == FINAL and answered.structured_content["status"] == "finished"
    assert answered.structured_content["session_id"] == asked.structured_content["session_id"]


async def test_an_elicitation_asked_on_one_process_is_answered_through_the_other(servers, alice):
    agent_id = alice.agent(FEEDBACK_DSL, title())
    balancer = Balancer(servers)
    asked: list[types.ElicitRequestParams] = []

    async def elicit(context, params):
        asked.append(params)
        return types.ElicitResult(action="accept", content={"feedback": "bolder"})

    # opened on A, called on B (which learns the client's capabilities from the store), answered through A
    async with connect(balancer, agent_id, alice.token, elicitation_callback=elicit) as session:
        tool = (await session.list_tools()).tools[0]
        result = await session.call_tool(tool.name, {"query": "coffee"})
    assert text(result) == FINAL and result.structured_content["status"] == "finished"
    assert [params.message for params in asked] == [TIPS]
    assert ("tools/call", B) in balancer.sent and ("response", A) in balancer.sent


async def test_cancelling_a_call_through_the_other_process_cancels_its_turn(servers, alice):
    agent_id = alice.agent(long_dsl(), title())
    balancer = Balancer(servers)
    started = asyncio.Event()

    async def on_progress(value, total, message):
        if "LLM:S2" in (message or ""):
            started.set()

    async with connect(balancer, agent_id, alice.token) as session:
        tool = (await session.list_tools()).tools[0]
        call = asyncio.create_task(session.call_tool(tool.name, {"query": "go"}, progress_callback=on_progress))
        await asyncio.wait_for(started.wait(), 60)
        call.cancel()           # the client's notifications/cancelled goes to A; the turn runs on B
        with pytest.raises(asyncio.CancelledError):
            await call
        sid = alice.ok("GET", f"/agents/{agent_id}/sessions")[0]["id"]

        def last_turn():
            turns = alice.ok("GET", f"/agents/{agent_id}/sessions/{sid}/trace")["turns"]
            return turns and turns[-1]["status"] not in ("running", None) and turns[-1]

        turn = await asyncio.to_thread(wait_for, last_turn, 60, "the cancelled turn's end")
        assert ("notifications/cancelled", A) in balancer.sent
        assert turn["status"] == "cancelled" and len(turn["steps"]) < 10       # long before LLM:S40
        balancer.to = A
        again = await session.call_tool(tool.name, {"query": "short"})
        assert again.structured_content["session_id"] == sid and again.structured_content["status"] == "finished"


def raw(server: Server, agent_id: str, token: str, session_id: str | None, message: dict, method: str = "POST"):
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream",
               "MCP-Protocol-Version": "2025-11-25"}
    if session_id:
        headers["Mcp-Session-Id"] = session_id
    url = f"{server.url}/api/v1/agents/{agent_id}/mcp"
    return httpx.request(method, url, headers=headers, json=message if method == "POST" else None, timeout=30)


def opened(server: Server, agent_id: str, token: str) -> str:
    reply = raw(server, agent_id, token, None, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}})
    assert reply.status_code == 200, reply.text
    return reply.headers["mcp-session-id"]


LIST = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}


def test_a_session_is_refused_to_another_tenant_on_every_process(servers, alice, bob):
    agent_id = alice.agent(CHAT_DSL, title())
    bobs_agent = bob.agent(CHAT_DSL, title())
    session_id = opened(servers[A], agent_id, alice.token)
    for server in servers:
        # bob's token on his own agent's endpoint, with alice's session: no such session, as far as he can tell
        refused = raw(server, bobs_agent, bob.token, session_id, LIST)
        assert refused.status_code == 404 and refused.json()["error"]["message"] == "Session not found"
        listed = raw(server, agent_id, alice.token, session_id, LIST)
        assert listed.status_code == 200 and "tools" in listed.text
    assert raw(servers[B], agent_id, alice.token, "not-a-session", LIST).status_code == 404


def test_a_session_the_client_ends_on_one_process_is_ended_on_the_other(servers, alice):
    agent_id = alice.agent(CHAT_DSL, title())
    session_id = opened(servers[A], agent_id, alice.token)
    assert raw(servers[B], agent_id, alice.token, session_id, LIST).status_code == 200     # B holds it now
    assert raw(servers[A], agent_id, alice.token, session_id, {}, method="DELETE").status_code == 200
    assert raw(servers[A], agent_id, alice.token, session_id, LIST).status_code == 404
    time.sleep(5.5)         # B takes the store's word again after CHECK_SECONDS (5 s) without asking it
    assert raw(servers[B], agent_id, alice.token, session_id, LIST).status_code == 404


def test_serve_forgets_mcp_sessions_idle_for_their_ttl(tmp_path):
    db = str(tmp_path / "server.db")
    api_token = make_token(db, f"ttl-{uuid.uuid4().hex[:6]}")
    with Server(db, tmp_path, PACED_SCRIPT, "--mcp-session-ttl", "2s") as server:
        api = Api(server, api_token)
        agent_id = api.agent(CHAT_DSL, title())
        session_id = opened(server, agent_id, api_token)
        assert raw(server, agent_id, api_token, session_id, LIST).status_code == 200
        time.sleep(7.5)     # idle past the TTL, and past the 5 s the process trusts what it last read
        assert raw(server, agent_id, api_token, session_id, LIST).status_code == 404
        api.close()


def test_serve_refuses_an_mcp_session_ttl_that_is_no_duration(tmp_path):
    import subprocess
    for value, said in (("forever", "--mcp-session-ttl: 'forever' is not a duration"),
                        ("0s", "--mcp-session-ttl must be more than 0")):
        done = subprocess.run([*forkserver.python(), "-m", "canvas2graph.cli", "serve", "--db",
                               str(tmp_path / "s.db"), "--mcp-session-ttl", value], capture_output=True, text=True, timeout=60)
        assert done.returncode == 2 and said in done.stderr, done.stderr


def test_malformed_messages_on_a_shared_session_get_clear_errors_on_either_process(servers, alice):
    agent_id = alice.agent(CHAT_DSL, title())
    session_id = opened(servers[A], agent_id, alice.token)
    bad = [b"{not json", b'{"jsonrpc": "2.0", "id": 5, "error": "nope"}', b'[{"result": 1}]',
           b'{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": 5}',
           b'{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": {"x": 1}}}',
           b'{"jsonrpc": "2.0", "id": 9, "result": {}}']         # an answer to nothing: ignored
    headers = {"Authorization": f"Bearer {alice.token}", "Accept": "application/json, text/event-stream",
               "Content-Type": "application/json", "Mcp-Session-Id": session_id}
    for server in servers:
        url = f"{server.url}/api/v1/agents/{agent_id}/mcp"
        statuses = [httpx.post(url, headers=headers, content=body, timeout=30).status_code for body in bad]
        assert statuses == [400, 400, 400, 400, 202, 202]
        weird = httpx.post(url, headers={**headers, "Mcp-Session-Id": "x" * 5000}, content=b"{}", timeout=30)
        assert weird.status_code == 404
        assert raw(server, agent_id, alice.token, session_id, LIST).status_code == 200     # the session still works
        assert "Traceback" not in server.log.read_text()

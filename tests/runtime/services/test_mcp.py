"""MCP tools: an Agent calls the tools the DSL lists on a real MCP server, over streamable HTTP and SSE.

The server (tests/runtime/mcp_server.py, the official `mcp` SDK) runs in its own process, wants an
Authorization header, and logs every tool call and HTTP request, so the tests see what really
reached it. The model is the scripted one, which records every request it gets.
"""
from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from tests import forkserver

from canvas2graph.compiler.canvas import compile_dsl
from canvas2graph.runtime.services.mcp import MCPConfigError, MCPConnection, MCPServerConfig, MCPServers, MCPSessions, result_text
from canvas2graph.runtime.services.models import ModelFactory
from canvas2graph.runtime.services.scripted import Script
from canvas2graph.runtime.run.runner import Runner, TurnRequest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
PATHS = {"streamable-http": "/mcp", "sse": "/sse"}
AUTH = {"headers": {"Authorization": "Bearer ${token}"}, "variables": {"token": "test-token"}}

TOOL_META = {   # what RAGFlow stores in the DSL when a user picks a server's tools
    "add": {"name": "add", "description": "Add two integers.",
            "inputSchema": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                            "required": ["a", "b"]}},
    "explode": {"name": "explode", "description": "Fail with the given reason.",
                "inputSchema": {"type": "object", "properties": {"reason": {"type": "string"}}, "required": ["reason"]}},
}


class ServerProcess:
    def __init__(self, transport: str, log: Path):
        self.transport, self.log = transport, log
        self.proc = subprocess.Popen([sys.executable, str(HERE.parent / "mcp_server.py"), transport, str(log)],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        line = self.proc.stdout.readline()         # the port, printed once the socket listens
        if not line.strip():
            self.proc.kill()
            raise RuntimeError("the test MCP server did not start")
        self.url = f"http://127.0.0.1:{int(line)}{PATHS[transport]}"

    def config(self, **overrides) -> dict:
        return {"url": self.url, "transport": self.transport, **AUTH, **overrides}

    def entries(self) -> list[dict]:
        return [json.loads(line) for line in self.log.read_text().splitlines()] if self.log.exists() else []

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)
        self.proc.stdout.close()


@pytest.fixture(scope="module", params=["streamable-http", "sse"])
def server(request, tmp_path_factory):
    proc = ServerProcess(request.param, tmp_path_factory.mktemp("mcp") / "log.jsonl")
    yield proc
    proc.stop()


def closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/mcp"        # nothing listens there any more


def agent_dsl(mcp_id: str = "local", listed=("add", "explode")) -> dict:
    helper = {"component_name": "Agent", "name": "Helper",
              "params": {"llm_id": "m@OpenAI", "sys_prompt": "Help.", "prompts": [{"role": "user", "content": "{sys.query}"}]}}
    return {"components": {
        "begin": {"obj": {"component_name": "Begin", "params": {}}, "downstream": ["Agent:Calc"]},
        "Agent:Calc": {"obj": {"component_name": "Agent", "params": {
            "llm_id": "m@OpenAI", "sys_prompt": "Use the tools.", "prompts": [{"role": "user", "content": "{sys.query}"}],
            "max_rounds": 3, "tools": [helper],
            "mcp": [{"mcp_id": mcp_id, "tools": {name: TOOL_META[name] for name in listed}}]}},
            "downstream": ["Message:M"]},
        "Message:M": {"obj": {"component_name": "Message", "params": {"content": ["{Agent:Calc@content}"]}},
                      "downstream": []},
    }}


CALL_BOTH = {"tool_calls": [{"name": "add_1", "arguments": {"a": 2, "b": 3}},
                            {"name": "explode_2", "arguments": {"reason": "testing"}}]}


async def run_turn(dsl: dict, script: Script, mcp: MCPServers | None) -> tuple[list[dict], Runner]:
    services = {"mcp": mcp} if mcp is not None else {}
    runner = Runner(compile_dsl(dsl), None, ModelFactory(script=script), script, services=services)
    events = [e async for e in runner.run_turn("s1", TurnRequest(query="What is 2 + 3?"))]
    return events, runner


def agent_answer(events: list[dict]) -> str:
    [finished] = [e for e in events if e["event"] == "node_finished" and e["data"]["component_id"] == "Agent:Calc"]
    return finished["data"]["outputs"]["content"]


def tool_messages(script: Script, call: int) -> list[str]:
    return [m["content"] for m in script.requests[call]["messages"] if m["role"] == "tool"]


async def wait_for_entry(server: ServerProcess, wanted: dict, after: int) -> None:
    """The server logs a closed SSE stream when it notices the client went away."""
    for _ in range(100):
        if any(wanted.items() <= e.items() for e in server.entries()[after:]):
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"the server never logged {wanted}")


# --- the config file --------------------------------------------------------------------------
def test_the_config_file_names_servers_by_id(tmp_path):
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"servers": {"local": {"url": "http://127.0.0.1:9/mcp", **AUTH},
                                            "legacy": {"url": "http://127.0.0.1:9/sse", "transport": "sse", "timeout": 5}}}))
    servers = MCPServers.load(path)
    assert servers.get("local").transport == "streamable-http"
    assert servers.get("local").request_headers() == {"Authorization": "Bearer test-token"}
    assert (servers.get("legacy").transport, servers.get("legacy").timeout) == ("sse", 5.0)
    assert servers.get("other") is None


@pytest.mark.parametrize("servers, message", [
    ({"local": {"url": "ftp://x"}}, "servers.local.url must be an http:// or https:// URL"),
    ({"local": {"url": "http://x/mcp", "transport": "stdio"}}, "servers.local.transport must be one of"),
    ({"local": {"url": "http://x/mcp", "header": {}}}, "servers.local: unknown key(s) ['header']"),
    ({"local": {"url": "http://x/mcp", "timeout": 0}}, "servers.local.timeout must be a positive number"),
])
def test_a_bad_config_names_the_field(tmp_path, servers, message):
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"servers": servers}))
    with pytest.raises(MCPConfigError, match="^MCP config .*mcp.json: ") as e:
        MCPServers.load(path)
    assert message in str(e.value)


def test_headers_fill_variables_drop_unset_tokens_and_take_the_agents_custom_header():
    config = MCPServerConfig(id="x", url="http://x/mcp", headers={"Authorization": "Bearer ${token}", "X-Team": "${team}"},
                             variables={"team": "blue"})
    assert config.request_headers({"X-Trace": "7"}) == {"X-Team": "blue", "Authorization": "Bearer ${token}", "X-Trace": "7"}
    assert MCPServerConfig(id="x", url="http://x", headers={"Authorization": "Bearer ${t}"},
                           variables={"t": ""}).request_headers() == {}


# --- the client -------------------------------------------------------------------------------
async def test_the_client_lists_and_calls_the_servers_tools(server):
    config = MCPServers.from_dict({"servers": {"local": server.config()}}).get("local")
    async with MCPConnection(config) as connection:
        assert {t.name for t in await connection.list_tools()} == {"add", "explode", "hidden"}
        assert result_text(await connection.call_tool("add", {"a": 40, "b": 2})) == "40 + 2 = 42"
    assert {"tool": "add", "args": {"a": 40, "b": 2}} in server.entries()


async def test_failures_become_text_for_the_model(server):
    config = MCPServers.from_dict({"servers": {"local": server.config()}}).get("local")
    async with MCPSessions() as sessions:
        raised = await sessions.call(config, "explode", {"reason": "a test"})
        unknown = await sessions.call(config, "no_such_tool", {})
        bad_args = await sessions.call(config, "add", {"a": "two"})
    assert raised.startswith("MCP tool error:") and "exploded because a test" in raised
    assert unknown.startswith("MCP tool error:") and "no_such_tool" in unknown
    assert bad_args.startswith("MCP tool error:") and "add" in bad_args


async def test_a_server_that_refuses_the_headers_is_a_tool_result_naming_the_status(server):
    config = MCPServerConfig(id="local", url=server.url, transport=server.transport, allow_private=True)  # no Authorization
    async with MCPSessions() as sessions:
        text = await sessions.call(config, "add", {"a": 1, "b": 1})
    assert text.startswith(f"MCP server 'local' at {server.url} cannot be used:")
    assert "401" in text
    assert not any(e.get("tool") for e in server.entries() if e.get("args") == {"a": 1, "b": 1})


async def test_an_unreachable_server_is_a_tool_result():
    config = MCPServerConfig(id="gone", url=closed_port_url(), allow_private=True)
    async with MCPSessions() as sessions:
        first, second = await asyncio.gather(sessions.call(config, "add", {}), sessions.call(config, "add", {}))
    assert first == second
    assert first.startswith(f"MCP server 'gone' at {config.url} cannot be used: ConnectError")


# --- the host guard ----------------------------------------------------------------------------
async def test_a_server_not_listed_by_the_operator_is_refused_on_a_private_address(server, monkeypatch):
    """A server from anywhere but the operator's file (built in code, e.g. from a tenant's request)
    goes through the host guard: 127.0.0.1 is refused before any request reaches it."""
    monkeypatch.delenv("CANVAS2GRAPH_MCP_ALLOW_PRIVATE", raising=False)
    config = MCPServerConfig(id="theirs", url=server.url, transport=server.transport, **AUTH)
    mark = len(server.entries())
    async with MCPSessions() as sessions:
        text = await sessions.call(config, "add", {"a": 1, "b": 2})
    assert text == (f"MCP server 'theirs' at {server.url} cannot be used: HostRefused: 127.0.0.1 is a private, "
                    "loopback or otherwise non-public address; set CANVAS2GRAPH_MCP_ALLOW_PRIVATE=1 to let MCP "
                    "connect to such hosts")
    assert server.entries()[mark:] == []
    monkeypatch.setenv("CANVAS2GRAPH_MCP_ALLOW_PRIVATE", "1")             # the operator's switch
    async with MCPSessions() as sessions:
        assert await sessions.call(config, "add", {"a": 1, "b": 2}) == "1 + 2 = 3"


def test_the_operators_file_allows_private_servers_unless_it_says_otherwise(tmp_path):
    servers = MCPServers.from_dict({"servers": {"mine": {"url": "http://127.0.0.1:9/mcp"},
                                                "guarded": {"url": "http://10.0.0.7/mcp", "allow_private": False}}})
    assert servers.get("mine").allow_private is True and servers.get("guarded").allow_private is False
    with pytest.raises(MCPConfigError, match="servers.x.allow_private must be true or false"):
        MCPServers.from_dict({"servers": {"x": {"url": "http://h/mcp", "allow_private": "yes"}}})


# --- an Agent on the real runtime ------------------------------------------------------------
async def test_an_agent_calls_the_listed_tools_on_the_server_and_reads_their_results(server):
    script = Script.load({"replies": [CALL_BOTH, "The sum is 5."]})
    mark = len(server.entries())
    events, runner = await run_turn(agent_dsl(), script, MCPServers.from_dict({"servers": {"local": server.config()}}))

    assert runner.outcome.status == "finished"
    assert agent_answer(events) == "The sum is 5."
    # tools continue the Agent's numbering after params.tools; the server's unlisted tool is not offered
    assert script.requests[0]["tools"] == ["Helper_0", "add_1", "explode_2"]
    results = tool_messages(script, 1)
    assert results[0] == "2 + 3 = 5"
    assert results[1].startswith("MCP tool error:") and "exploded because testing" in results[1]
    calls = [e for e in server.entries()[mark:] if "tool" in e]
    assert calls == [{"tool": "add", "args": {"a": 2, "b": 3}}, {"tool": "explode", "args": {"reason": "testing"}}] \
        or calls == [{"tool": "explode", "args": {"reason": "testing"}}, {"tool": "add", "args": {"a": 2, "b": 3}}]
    # one session for the loop, closed when it ends
    opened = [e for e in server.entries()[mark:] if e.get("event") == "request" and e["method"] == "GET"]
    assert len(opened) == 1
    goodbye = {"event": "request", "method": "DELETE"} if server.transport == "streamable-http" \
        else {"event": "done", "method": "GET", "path": "/sse"}
    await wait_for_entry(server, goodbye, mark)
    assert not [t for t in asyncio.all_tasks() if t.get_name().startswith("mcp-session-")]


async def test_an_empty_tools_object_exposes_nothing_and_needs_no_server():
    script = Script.load({"replies": ["Plain answer."]})
    events, runner = await run_turn(agent_dsl(mcp_id="not-configured", listed=()), script, None)
    assert runner.outcome.status == "finished"
    assert script.requests[0]["tools"] == ["Helper_0"]


async def test_an_unreachable_server_is_read_by_the_model_and_the_turn_goes_on():
    script = Script.load({"replies": [{"tool_calls": [{"name": "add_1", "arguments": {"a": 1, "b": 2}}]}, "It is down."]})
    mcp = MCPServers.from_dict({"servers": {"local": {"url": closed_port_url()}}})
    events, runner = await run_turn(agent_dsl(), script, mcp)
    assert runner.outcome.status == "finished"
    [result] = tool_messages(script, 1)
    assert result.startswith("MCP server 'local' at http://127.0.0.1:") and "cannot be used" in result


@pytest.mark.parametrize("mcp, hint", [
    (MCPServers({}, source="MCP config servers.json"), "is not in MCP config servers.json"),
    (None, "is not in the MCP config (none was given: use --mcp-config FILE or $CANVAS2GRAPH_MCP_CONFIG)"),
])
async def test_an_agent_naming_an_unconfigured_server_fails_naming_the_field(mcp, hint):
    script = Script.load({"replies": [{"tool_calls": [{"name": "add_1", "arguments": {"a": 1, "b": 2}}]}, "unused"]})
    events, runner = await run_turn(agent_dsl(mcp_id="nowhere"), script, mcp)
    assert runner.outcome.status == "stopped"
    assert "params.mcp.0.mcp_id: MCP server 'nowhere' " + hint in runner.outcome.error
    assert runner.outcome.error.startswith("Agent:Calc: ")


@pytest.mark.parametrize("key", ["add_1", "MCP"])
async def test_a_script_can_stand_in_for_an_mcp_tool_offline(key):
    script = Script.load({"replies": [{"tool_calls": [{"name": "add_1", "arguments": {"a": 1, "b": 2}}]}, "Three."],
                          "tool_results": {key: ["1 + 2 = 3 (scripted)"]}})
    events, runner = await run_turn(agent_dsl(mcp_id="offline"), script, None)
    assert runner.outcome.status == "finished"
    assert tool_messages(script, 1) == ["1 + 2 = 3 (scripted)"]


# --- the command line -------------------------------------------------------------------------
def test_canvas2graph_run_takes_the_mcp_config_file(tmp_path, server):
    (tmp_path / "dsl.json").write_text(json.dumps(agent_dsl()))
    (tmp_path / "mcp.json").write_text(json.dumps({"servers": {"local": server.config()}}))
    (tmp_path / "script.json").write_text(json.dumps({"replies": [
        {"tool_calls": [{"name": "add_1", "arguments": {"a": 20, "b": 22}}]}, "Forty-two."]}))
    done = subprocess.run([*forkserver.python(), "-m", "canvas2graph.cli", "run", str(tmp_path / "dsl.json"), "--query", "20+22?",
                           "--db", str(tmp_path / "s.db"), "--llm-script", str(tmp_path / "script.json"),
                           "--mcp-config", str(tmp_path / "mcp.json"), "--format", "jsonl"],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    assert agent_answer(events) == "Forty-two."
    assert {"tool": "add", "args": {"a": 20, "b": 22}} in server.entries()


def test_canvas2graph_run_rejects_a_bad_mcp_config(tmp_path):
    (tmp_path / "dsl.json").write_text(json.dumps(agent_dsl()))
    (tmp_path / "mcp.json").write_text('{"servers": {"local": {"url": "nowhere"}}}')
    done = subprocess.run([*forkserver.python(), "-m", "canvas2graph.cli", "run", str(tmp_path / "dsl.json"),
                           "--db", str(tmp_path / "s.db"), "--mcp-config", str(tmp_path / "mcp.json")],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "servers.local.url must be an http:// or https:// URL" in done.stderr

"""An agent's reply lists where it is served over MCP, A2A and LangGraph's API, with a client snippet for
each; the snippets run as given (top-level `await`, as `python -m asyncio` runs them), on SQLite and PostgreSQL."""
from __future__ import annotations

import ast
import uuid

import pytest

from tests.server.helpers import CHAT_DSL, chat_answer


async def run_snippet(source: str) -> None:
    code = compile(source, "<snippet>", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    result = eval(code, {"__name__": "__snippet__"})
    if result is not None:
        await result


@pytest.mark.parametrize("protocol", ["mcp", "a2a", "langgraph"])
async def test_each_snippet_of_an_agent_runs_as_given(server, alice, protocol, monkeypatch, capsys):
    agent_id = alice.agent(CHAT_DSL, f"Snippets {uuid.uuid4().hex[:6]}")
    endpoints = alice.ok("GET", f"/agents/{agent_id}")["endpoints"]
    assert endpoints["mcp"]["url"] == f"{server.url}/api/v1/agents/{agent_id}/mcp"
    assert endpoints["mcp"]["tenant_url"] == f"{server.url}/api/v1/mcp"
    assert endpoints["a2a"]["card_url"] == f"{server.url}/api/v1/agents/{agent_id}/a2a/.well-known/agent-card.json"
    assert endpoints["langgraph"] == {**endpoints["langgraph"], "url": f"{server.url}/langgraph", "assistant_id": agent_id}
    monkeypatch.setenv("C2G_TOKEN", alice.token)
    await run_snippet(endpoints[protocol]["snippet"])
    assert chat_answer(1) in capsys.readouterr().out

"""An Agent's MCP tools as the DSL lists them: names, schemas and checks (SPEC 7, "MCP config").

Calls on a real MCP server are in tests/runtime/services/test_mcp.py.
"""
from __future__ import annotations

import pytest

from canvas2graph.compiler.canvas import compile_dsl, diagnose
from canvas2graph.nodes.mcp_tools import MCPTool, mcp_sessions
from canvas2graph.types import RunContext
from canvas2graph.runtime.services.mcp import MCPServerNotConfigured, MCPServers
from tests.conftest import cpn

ADD = {"name": "add", "description": "Add two integers.",
       "inputSchema": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}}
SUB_AGENT = {"component_name": "Agent", "name": "Math whiz",
             "params": {"llm_id": "m@OpenAI", "prompts": [{"role": "user", "content": "{sys.query}"}]}}


def agent_dsl(**params) -> dict:
    agent = {"llm_id": "m@OpenAI", "prompts": [{"role": "user", "content": "{sys.query}"}], **params}
    return {"components": {"begin": cpn("Begin", downstream=["Agent:A"]), "Agent:A": cpn("Agent", agent)}}


def agent(dsl: dict):
    return compile_dsl(dsl).plan.nodes["Agent:A"]


def test_listed_tools_continue_the_numbering_after_params_tools_with_the_stored_schema():
    node = agent(agent_dsl(tools=[SUB_AGENT], mcp=[
        {"mcp_id": "math", "tools": {"add": ADD}},
        {"mcp_id": "none-listed", "tools": {}},
        {"mcp_id": "text", "tools": {"upper": {"name": "upper", "description": "Upper-case."}}},
    ]))
    assert [t.name for t in node.tools] == ["Math_whiz_0", "add_1", "upper_2"]
    assert node.tools[1].schema == {"type": "function", "function": {
        "name": "add_1", "description": "Add two integers.", "parameters": ADD["inputSchema"]}}
    assert (node.tools[1].tool, node.tools[1].mcp_id) == ("add", "math")
    # a tool stored without a schema takes no arguments
    assert node.tools[2].schema["function"]["parameters"] == {"type": "object", "properties": {}}


@pytest.mark.parametrize("mcp, field", [
    (["math"], "params.mcp.0"),
    ([{"mcp_id": "math", "tools": ["add"]}], "params.mcp.0.tools"),
    ([{"tools": {"add": ADD}}], "params.mcp.0.mcp_id"),
    ([{"mcp_id": "math", "tools": {"add": "adds"}}], "params.mcp.0.tools.add"),
    ([{"mcp_id": "math", "tools": {"add": {"inputSchema": "a, b"}}}], "params.mcp.0.tools.add.inputSchema"),
])
def test_a_malformed_mcp_entry_is_a_compile_error_naming_the_field(mcp, field):
    _, diags = diagnose(agent_dsl(mcp=mcp))
    assert any(d.component_id == "Agent:A" and d.field == field and d.severity == "error" for d in diags), diags


async def test_without_a_script_an_unconfigured_server_fails_before_the_first_model_call():
    node = agent(agent_dsl(mcp=[{"mcp_id": "math", "tools": {"add": ADD}}]))
    ctx = RunContext(models=None, services={"mcp": MCPServers({}, source="MCP config mcp.json")})
    with pytest.raises(MCPServerNotConfigured, match=r"^params\.mcp\.0\.mcp_id: MCP server 'math' is not in MCP config mcp\.json"):
        async with mcp_sessions(node, ctx, {}):
            pass


async def test_a_configured_agent_gets_sessions_for_its_loop_only():
    node = agent(agent_dsl(mcp=[{"mcp_id": "math", "tools": {"add": ADD}}]))
    servers = MCPServers.from_dict({"servers": {"math": {"url": "http://127.0.0.1:9/mcp"}}})
    sink: dict = {}
    async with mcp_sessions(node, RunContext(models=None, services={"mcp": servers}), sink):
        assert "mcp_sessions" in sink
    assert sink == {}
    assert all(isinstance(t, MCPTool) for t in node.tools)

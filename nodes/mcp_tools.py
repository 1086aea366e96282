"""An Agent's MCP tools (SPEC 7, "MCP config").

`params.mcp = [{"mcp_id": "<server id>", "tools": {"<tool>": {"name", "description", "inputSchema"}}}]`:
only the listed tools are exposed (an empty `{}` exposes none), with the schema the DSL stored when
the tool was picked, so compiling needs no server. Their names continue the Agent's numbering
after `params.tools`: `<tool>_<n>`. Servers are found by id in the run's MCP config
(`ctx.extras["mcp"]`, a `canvas2graph.runtime.services.mcp.MCPServers`); a session to a server opens at its first call
in a tool loop and closes when the loop ends.
"""
from __future__ import annotations

from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, AsyncIterator

from canvas2graph.types import NodeConfigError
from canvas2graph.nodes.tool import as_text
from canvas2graph.runtime.services.mcp import ENV_VAR, MCPServerConfig, MCPServerNotConfigured, MCPSessions
from canvas2graph.runtime.services.netguard import private_allowed

if TYPE_CHECKING:
    from canvas2graph.nodes.agent import Agent

SESSIONS = "mcp_sessions"         # the sink key holding the tool loop's MCPSessions
SCRIPT_NAME = "MCP"               # what a script's `tool_results` key names for every MCP tool


@dataclass
class MCPTool:
    name: str                 # what the model calls: "<tool>_<n>"
    schema: dict              # OpenAI function schema
    tool: str                 # the tool's name on the server
    mcp_id: str
    where: str                # "params.mcp.<i>", for errors
    component: None = None    # not a canvas component (AgentTool's other entries have one)


def build_mcp_tools(agent: "Agent", first_index: int) -> list[MCPTool]:
    """The MCP tools the DSL lists, checked at compile time; numbering starts at `first_index`."""
    tools: list[MCPTool] = []
    for i, entry in enumerate(agent.params.mcp):
        where = f"params.mcp.{i}"
        if not isinstance(entry, dict):
            raise NodeConfigError(where, "each MCP entry must be an object with an mcp_id and its tools")
        listed = entry.get("tools") or {}
        if not isinstance(listed, dict):
            raise NodeConfigError(f"{where}.tools", "must be an object of tool name: tool description")
        if not listed:
            continue                       # an entry without tools exposes none and needs no server
        mcp_id = entry.get("mcp_id")
        if not isinstance(mcp_id, str) or not mcp_id.strip():
            raise NodeConfigError(f"{where}.mcp_id", "must name the MCP server (its id in the MCP config)")
        for tool, meta in listed.items():
            field = f"{where}.tools.{tool}"
            if not isinstance(meta, dict):
                raise NodeConfigError(field, "must be the tool's description: {name, description, inputSchema}")
            schema = meta.get("inputSchema", meta.get("input_schema"))
            if schema is None:
                schema = {"type": "object", "properties": {}}
            if not isinstance(schema, dict):
                raise NodeConfigError(f"{field}.inputSchema", "must be a JSON schema object")
            name = f"{tool}_{first_index + len(tools)}"
            function = {"name": name, "description": str(meta.get("description") or ""), "parameters": schema}
            tools.append(MCPTool(name, {"type": "function", "function": function}, tool, mcp_id.strip(), where))
    return tools


def _server(tool_or_entry: MCPTool, ctx) -> MCPServerConfig:
    servers = (getattr(ctx, "extras", None) or {}).get("mcp")
    config = servers.get(tool_or_entry.mcp_id) if servers is not None else None
    if config is None:
        source = "the MCP config" if servers is None else getattr(servers, "source", "the MCP config")
        hint = "" if servers is not None else f" (none was given: use --mcp-config FILE or ${ENV_VAR})"
        raise MCPServerNotConfigured(f"{tool_or_entry.where}.mcp_id: MCP server {tool_or_entry.mcp_id!r} "
                                     f"is not in {source}{hint}")
    return config


@asynccontextmanager
async def mcp_sessions(agent: "Agent", ctx, sink: dict) -> AsyncIterator[None]:
    """The MCP sessions of one tool loop: checked before the first model call, closed at the end."""
    tools = [t for t in agent.tools if isinstance(t, MCPTool)]
    if not tools:
        yield
        return
    if getattr(ctx, "script", None) is None:       # a script may stand in for every call (offline runs)
        for tool in tools:
            _server(tool, ctx)
    custom = agent.params.extra("custom_header")
    sessions = MCPSessions(custom if isinstance(custom, dict) else None, allow_private=private_allowed(ctx, "MCP"))
    sink[SESSIONS] = sessions
    try:
        yield
    finally:
        sink.pop(SESSIONS, None)
        await sessions.aclose()


async def call_mcp_tool(tool: MCPTool, call: dict, ctx, sink: dict) -> str:
    """One MCP tool call's result text; an unconfigured server fails the Agent (a config error)."""
    script = getattr(ctx, "script", None)
    if script is not None:
        scripted = script.next_tool_result(component_name=SCRIPT_NAME, function_name=tool.name)
        if scripted is not None:
            return as_text(scripted.get("return", "")) if isinstance(scripted, dict) else str(scripted)
    config = _server(tool, ctx)
    arguments = call.get("args") or {}
    if not isinstance(arguments, dict):
        return f"The arguments of {tool.name} must be an object."
    sessions: MCPSessions | None = sink.get(SESSIONS)
    if sessions is None:              # called outside a tool loop: a session for this call only
        async with MCPSessions(allow_private=private_allowed(ctx, "MCP")) as sessions:
            return await sessions.call(config, tool.tool, arguments)
    return await sessions.call(config, tool.tool, arguments)


def is_mcp_tool(tool: Any) -> bool:
    return isinstance(tool, MCPTool)

"""Agents served over other protocols than RAGFlow's: MCP (`mcp_server`), A2A (`a2a_server`) and
LangGraph Server's API (`langgraph_api`). Each maps its protocol onto the same stored agents, sessions,
checkpoints, tenants and turns (`common`) as the RAGFlow routes."""

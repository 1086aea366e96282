"""The services nodes reach while they run: models (`models`, `model_calls`, `scripted`), the run's
configuration (`environment`), files (`files`, `file_text`), the host guard (`netguard`), MCP servers
(`mcp`), the code sandbox (`sandbox/`), retrieval (`retrieval/`) and observability (`observability`:
LangSmith, Langfuse). They import only each other and `canvas2graph.types`.
"""

"""What every run of a server gets in `ctx.extras`: the code-execution policy, the MCP servers, and the
retrieval backend (opened at the first run that retrieves, as `canvas2graph run` opens it per run)."""
from __future__ import annotations

from typing import Any

from server.config import ServerConfig


class RunServices:
    """`services(compiled)` -> the extras for a run of that canvas."""

    def __init__(self, config: ServerConfig, extra: dict[str, Any] | None = None):
        self.config = config
        self.base: dict[str, Any] = {"code": {"allow_local": config.allow_local_code}}
        if config.mcp_config:
            from runtime.mcp import MCPServers
            self.base["mcp"] = MCPServers.load(config.mcp_config)       # MCPConfigError names the file and field
        self.base.update(extra or {})
        self._retrieval = None

    def __call__(self, compiled) -> dict[str, Any]:
        from runtime.retrieval.service import uses_retrieval
        if "retrieval" in self.base or not uses_retrieval(compiled.plan.dsl.components):
            return self.base
        if self._retrieval is None:
            from runtime.retrieval import open_backend
            self._retrieval = open_backend(self.config.retrieval, session_db=self.config.db)
        return {**self.base, "retrieval": self._retrieval}

    async def aclose(self) -> None:
        if self._retrieval is not None:
            await self._retrieval.aclose()

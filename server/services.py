"""What every run of a server gets in `ctx.extras`: the code-execution and browser policies, the MCP servers,
and the retrieval backend (opened at the first run that retrieves, as `canvas2graph run` opens it per run)."""
from __future__ import annotations

import os
from typing import Any

from runtime.sandbox import CodePolicy
from server.config import ServerConfig
from server.routes.artifacts import ROUTE as ARTIFACT_ROUTE


class RunServices:
    """`services(compiled)` -> the extras for a run of that canvas."""

    def __init__(self, config: ServerConfig, extra: dict[str, Any] | None = None):
        self.config = config
        # a tenant's script runs in the sandbox or nowhere: the unsandboxed mode is for `canvas2graph run` only
        code: dict[str, Any] = {"allow_local": config.allow_local_code, "unsafe_local": False}
        if not os.environ.get("CANVAS2GRAPH_ARTIFACT_URL"):
            code["artifact_url"] = ARTIFACT_ROUTE         # answers link artifacts to this server, which serves them
        self.base: dict[str, Any] = {"code": code, "browser": {"allow": config.allow_browser}}
        if config.mcp_config:
            from runtime.mcp import MCPServers
            self.base["mcp"] = MCPServers.load(config.mcp_config)       # MCPConfigError names the file and field
        self.base.update(extra or {})
        self.code_policy = CodePolicy.resolve(self.base["code"])      # CodePolicyError names the field
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

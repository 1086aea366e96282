"""What every run of a server gets: its models and, in `ctx.services`, the code-execution and browser
policies, the MCP servers, the run file store (uploads, read on behalf of the session's tenant) and the
retrieval backend (opened at the first run that retrieves). The server's options say which
(`ServerConfig`); `canvas2graph.runtime.services.environment` builds the runs, as it does for the command line and for
LangGraph Server."""
from __future__ import annotations

import os
from typing import Any

from canvas2graph.runtime.services.environment import RunEnvironment, RunSettings
from canvas2graph.runtime.services.files import EXTRAS_KEY as FILES_KEY, LocalFileStore, default_store
from canvas2graph.runtime.services.memory import EMBEDDER_SERVICE, MEMORY_SERVICE, memory_ids_of
from canvas2graph.server.config import ARTIFACT_ROUTE, ServerConfig


class RunServices:
    """`services(compiled)` -> the services for a run of that canvas; `models()` -> its models."""

    def __init__(self, config: ServerConfig, extra: dict[str, Any] | None = None):
        self.config = config
        # a tenant's script runs in the sandbox or nowhere: the unsandboxed mode is for `canvas2graph run` only
        code: dict[str, Any] = {"allow_local": config.allow_local_code, "unsafe_local": False}
        if not os.environ.get("CANVAS2GRAPH_ARTIFACT_URL"):
            code["artifact_url"] = ARTIFACT_ROUTE         # answers link artifacts to this server, which serves them
        # the upload route writes here and runs read here: one store (services given in code may replace it)
        given = (extra or {}).get(FILES_KEY)
        if given is not None and not isinstance(given, (str, os.PathLike, LocalFileStore)):
            raise TypeError("the server's file store is a folder: give services={'files': <path or LocalFileStore>}")
        if given is not None:
            self.files = given if isinstance(given, LocalFileStore) else LocalFileStore(given)
        else:
            self.files = LocalFileStore(config.files_dir) if config.files_dir else default_store()
        # ScriptError, MCPConfigError and CodePolicyError name the file or field at startup
        self.environment = RunEnvironment(RunSettings(
            llm_script=config.llm_script, models_config=config.models_config, mcp_config=config.mcp_config,
            retrieval=config.retrieval, db=config.db, code=code, browser={"allow": config.allow_browser}),
            services={FILES_KEY: self.files, **(extra or {})})
        self.code_policy = self.environment.code_policy
        self.models = self.environment.models
        self._endpoints: Any = None
        self.memory: Any = None         # LangGraph's memory store, once the server opened it (server/background.py)

    @property
    def base(self) -> dict[str, Any]:
        """The services every run gets (the retrieval backend is added for canvases that retrieve)."""
        return self.environment.base

    def __call__(self, compiled) -> dict[str, Any]:
        components = compiled.plan.dsl.components
        services = self.environment.services(components)
        if self.memory is not None and memory_ids_of(components):
            services = {**services, MEMORY_SERVICE: self.memory, EMBEDDER_SERVICE: self.memory_embedder}
        return services

    def memory_embedder(self, embd_id: str) -> Any:
        """A memory's embedding model, as datasets' are configured (the retrieval config, the models' providers)."""
        if self._endpoints is None:
            from canvas2graph.runtime.services.retrieval.config import RetrievalConfig
            from canvas2graph.runtime.services.retrieval.embeddings import ModelEndpoints
            self._endpoints = ModelEndpoints(RetrievalConfig.load())
        return self._endpoints.embedder(embd_id)

    async def aclose(self) -> None:
        await self.environment.aclose()

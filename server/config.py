"""What a server process is configured with: its database, its models and its limits."""
from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path

DEFAULT_MAX_BODY = 16 * 1024 * 1024


@dataclass
class ServerConfig:
    db: str                                   # SQLite path or postgresql:// URL (agents, sessions, tokens, checkpoints)
    llm_script: str | None = None             # testing aid: every model of every turn answers from this script
    models_config: str | None = None          # the models TOML (default $CANVAS2GRAPH_MODELS)
    allow_local_code: bool = False            # CodeExec may run code on this machine only when set
    allow_browser: bool = False               # the Browser component may drive Chromium only when set
    max_body_bytes: int = DEFAULT_MAX_BODY
    busy_wait: float = 30.0                   # seconds a request waits for its session's running turn to end
    retrieval: str | None = None              # retrieval backend URL (default: the embedded store beside db)
    mcp_config: str | None = None             # JSON file of the MCP servers Agents call, by mcp_id
    default_llm: str | None = None            # model@Factory for components stored with an empty llm_id
    compile_timeout: float = 10.0             # seconds one DSL may take to compile (in a worker process)
    compile_memory_mb: int = 1024             # memory one compile may use beyond the worker's own
    compile_workers: int = 1                  # worker processes that compile requests' DSLs


class ModelSource:
    """Models for each turn: the configured providers, or a fresh copy of the script (testing aid).

    A script's queues are consumed as models are called, so every turn gets its own copy: turns of
    different sessions never take each other's replies.
    """

    def __init__(self, config: ServerConfig):
        from runtime.models import ModelFactory
        from runtime.scripted import Script, ScriptError

        self._script_data = None
        if config.llm_script:
            try:
                self._script_data = json.loads(Path(config.llm_script).read_text(encoding="utf-8"))
            except OSError as e:
                raise ScriptError(f"cannot read script file {config.llm_script}: {e.strerror or e}") from None
            except ValueError as e:
                raise ScriptError(f"script file {config.llm_script} is not valid JSON: {e}") from None
            Script.load(copy.deepcopy(self._script_data))      # a malformed script fails at startup
        self._config_path = config.models_config
        self._shared = None if self._script_data is not None else ModelFactory(config_path=config.models_config)

    def __call__(self):
        from runtime.models import ModelFactory
        from runtime.scripted import Script

        if self._shared is not None:
            return self._shared, None
        script = Script.load(copy.deepcopy(self._script_data))
        return ModelFactory(script=script, config_path=self._config_path), script

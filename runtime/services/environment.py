"""Where a run's models and services come from when its caller does not name them: the environment.

`canvas2graph serve`, `canvas2graph run`, the folder `canvas2graph langgraph` writes for LangGraph
Server, and a plain `graph.ainvoke(request, config)` without a `context` all build their runs here, from
the same settings:

| variable                    | what it sets                                                            |
|-----------------------------|-------------------------------------------------------------------------|
| CANVAS2GRAPH_LLM_SCRIPT     | every model answers from this script, a fresh copy per run (testing aid) |
| CANVAS2GRAPH_MODELS         | the models config (TOML); keys and base URLs also come from the environment |
| CANVAS2GRAPH_MCP_CONFIG     | the MCP servers Agents call                                             |
| CANVAS2GRAPH_RETRIEVAL      | the retrieval backend URL (default: `retrieval.db` beside CANVAS2GRAPH_DB) |
| CANVAS2GRAPH_DB             | the sessions database, which places the default retrieval store        |
| CANVAS2GRAPH_ALLOW_LOCAL_CODE and the other CANVAS2GRAPH_CODE_* / SANDBOX_* variables | CodeExec's policy (`canvas2graph.runtime.services.sandbox.policy`) |
| CANVAS2GRAPH_ALLOW_BROWSER and the other CANVAS2GRAPH_BROWSER_* variables | the Browser's policy (`canvas2graph.nodes.browser.policy`) |

(`CANVAS2GRAPH_DEFAULT_LLM` acts when a DSL is compiled, not when it runs.)

A `RunEnvironment` reads its settings once (a broken script or MCP file fails there, naming the file)
and then hands out one `RunContext` per run: a fresh copy of the script, the shared model factory
otherwise, and the services; the retrieval backend opens at the first run of a canvas that retrieves.

Under LangGraph Server nodes get no context: `resolve_context` gives each run its own, built from the
process's default environment (`default_environment()`), and completes a partial one (a context with
services but no models, say) the same way.
"""
from __future__ import annotations

import asyncio
import collections
import copy
import json
import os
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping

from canvas2graph.types import RunContext

SCRIPT_ENV = "CANVAS2GRAPH_LLM_SCRIPT"
MODELS_ENV = "CANVAS2GRAPH_MODELS"
MCP_ENV = "CANVAS2GRAPH_MCP_CONFIG"
RETRIEVAL_ENV = "CANVAS2GRAPH_RETRIEVAL"
DB_ENV = "CANVAS2GRAPH_DB"
DEFAULT_LLM_ENV = "CANVAS2GRAPH_DEFAULT_LLM"
ALLOW_LOCAL_CODE_ENV = "CANVAS2GRAPH_ALLOW_LOCAL_CODE"
ALLOW_BROWSER_ENV = "CANVAS2GRAPH_ALLOW_BROWSER"
DEFAULT_DB = os.path.join(os.path.expanduser("~"), ".canvas2graph", "sessions.db")


def _env(environ: Mapping[str, str], name: str) -> str | None:
    value = (environ.get(name) or "").strip()
    return value or None


@dataclass(frozen=True)
class RunSettings:
    """What runs are configured with; `from_env()` reads the variables above."""

    llm_script: str | None = None           # a script file: every model answers from a fresh copy per run
    models_config: str | None = None        # the models TOML (None: $CANVAS2GRAPH_MODELS, read by ModelFactory)
    mcp_config: str | None = None           # the MCP servers JSON
    retrieval: str | None = None            # backend URL (None: $CANVAS2GRAPH_RETRIEVAL, else beside `db`)
    db: str | None = None                   # the sessions database (where the default retrieval store lives)
    code: Mapping[str, Any] = field(default_factory=dict)   # CodePolicy fields over the environment's
    browser: Mapping[str, Any] = field(default_factory=dict)    # BrowserPolicy fields over the environment's

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> "RunSettings":
        """The settings of a server (`serve`, LangGraph Server): CodeExec runs code on this machine
        only when CANVAS2GRAPH_ALLOW_LOCAL_CODE says so, as `serve` needs `--allow-local-code`, and the
        Browser drives Chromium only when CANVAS2GRAPH_ALLOW_BROWSER does (`serve --allow-browser`)."""
        environ = os.environ if environ is None else environ
        browser = {} if _env(environ, ALLOW_BROWSER_ENV) else {"allow": False}
        # never without the sandbox: that opt-in is `canvas2graph run --unsafe-local-code`'s alone
        code = {"unsafe_local": False} if _env(environ, ALLOW_LOCAL_CODE_ENV) else {"allow_local": False, "unsafe_local": False}
        return cls(llm_script=_env(environ, SCRIPT_ENV), models_config=_env(environ, MODELS_ENV),
                   mcp_config=_env(environ, MCP_ENV), retrieval=_env(environ, RETRIEVAL_ENV),
                   db=_env(environ, DB_ENV) or DEFAULT_DB, code=code, browser=browser)


class ModelSource:
    """Models for each run: the configured providers, or a fresh copy of the script.

    A script's queues are consumed as models are called, so every run gets its own copy: runs of
    different sessions never take each other's replies. Calling it returns `(ModelFactory, Script | None)`.
    """

    def __init__(self, llm_script: str | None = None, models_config: str | None = None):
        from canvas2graph.runtime.services.models import ModelFactory
        from canvas2graph.runtime.services.scripted import Script, ScriptError

        self._script_data = None
        if llm_script:
            try:
                self._script_data = json.loads(Path(llm_script).read_text(encoding="utf-8"))
            except OSError as e:
                raise ScriptError(f"cannot read script file {llm_script}: {e.strerror or e}") from None
            except ValueError as e:
                raise ScriptError(f"script file {llm_script} is not valid JSON: {e}") from None
            Script.load(copy.deepcopy(self._script_data))      # a malformed script fails now, not mid-run
        self._config_path = models_config
        self._shared = None if self._script_data is not None else ModelFactory(config_path=models_config)

    @property
    def scripted(self) -> bool:
        return self._script_data is not None

    def __call__(self):
        from canvas2graph.runtime.services.models import ModelFactory
        from canvas2graph.runtime.services.scripted import Script

        if self._shared is not None:
            return self._shared, None
        script = Script.load(copy.deepcopy(self._script_data))
        return ModelFactory(script=script, config_path=self._config_path), script


class RunEnvironment:
    """Per-run contexts from `RunSettings`: `context(session_id, components)`; `aclose()` at the end."""

    def __init__(self, settings: RunSettings | None = None, *, services: Mapping[str, Any] | None = None):
        from canvas2graph.runtime.services.sandbox import CodePolicy

        self.settings = settings or RunSettings.from_env()
        self.models = ModelSource(self.settings.llm_script, self.settings.models_config)
        base: dict[str, Any] = {"code": dict(self.settings.code)}
        if self.settings.browser:
            base["browser"] = dict(self.settings.browser)
        if self.settings.mcp_config:
            from canvas2graph.runtime.services.mcp import MCPServers
            base["mcp"] = MCPServers.load(self.settings.mcp_config)    # MCPConfigError names the file and field
        base.update(services or {})
        self.base = base
        self.code_policy = CodePolicy.resolve(base["code"])          # CodePolicyError names the field
        self._retrieval = None
        self._lock = threading.Lock()

    def services(self, components: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The services for a run of a canvas with these components (a DSL's or a plan's entries):
        the retrieval backend, opened once, only for canvases that retrieve (not without components)."""
        from canvas2graph.runtime.services.retrieval.service import uses_retrieval
        if "retrieval" in self.base or components is None or not uses_retrieval(components):
            return self.base
        with self._lock:
            if self._retrieval is None:
                from canvas2graph.runtime.services.retrieval import open_backend
                self._retrieval = open_backend(self.settings.retrieval, session_db=self.settings.db)
                try:
                    asyncio.get_running_loop()
                except RuntimeError:            # no event loop here: the first retrieval loads the tokenizer
                    pass
                else:
                    self._retrieval.warm()      # the tokenizer loads (about a second) while the run starts
        return {**self.base, "retrieval": self._retrieval}

    def retrieval_backend(self):
        """The retrieval backend of this environment's runs, opened once (what ingestion writes to)."""
        with self._lock:
            if self._retrieval is None:
                from canvas2graph.runtime.services.retrieval import open_backend
                self._retrieval = open_backend(self.settings.retrieval, session_db=self.settings.db)
        return self._retrieval

    def context(self, session_id: str = "", components: Mapping[str, Any] | None = None) -> RunContext:
        """A run's context: its own copy of the script (if any), the models and the services."""
        models, script = self.models()
        return RunContext(models=models, script=script, session_id=session_id, services=self.services(components))

    async def aclose(self) -> None:
        backend, self._retrieval = self._retrieval, None
        if backend is not None:
            await backend.aclose()


# --- runs without a (complete) context ------------------------------------------------------------
_default: RunEnvironment | None = None
_default_lock = threading.Lock()


def default_environment() -> RunEnvironment:
    """This process's environment for runs that bring no context, read from os.environ once."""
    global _default
    with _default_lock:
        if _default is None:
            _default = RunEnvironment(RunSettings.from_env())
        return _default


def reset_default_environment() -> None:
    """Read the environment again at the next run (after os.environ changed, in tests)."""
    global _default
    with _default_lock:
        _default = None


class _RunContexts:
    """One resolved context per graph run, found again by every node of that run.

    A run is known by LangGraph's per-run `RunControl` object, which every task of the run shares
    (it cannot be weakly referenced, so the most recently used contexts are kept, plenty of them:
    a context is evicted only after that many other runs have started since its run last ran a node)."""

    def __init__(self, size: int = 4096):
        self.size = size
        self._items: collections.OrderedDict[Any, RunContext] = collections.OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Any, make) -> RunContext:
        with self._lock:
            found = self._items.get(key)
            if found is not None:
                self._items.move_to_end(key)
                return found
        made = make()
        with self._lock:
            found = self._items.setdefault(key, made)
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)
            return found


_RUNS = _RunContexts()


def resolve_context(runtime: Any, components: Mapping[str, Any] | None = None) -> RunContext:
    """The context of the run `runtime` belongs to (LangGraph's `Runtime` a node receives).

    A complete context (with models) is used as given. Otherwise the run gets its own context from the
    default environment, keeping what the given one names (its script, session id, services and a fork's overrides)."""
    given = getattr(runtime, "context", None)
    if isinstance(given, RunContext) and given.models is not None:
        return given
    info = getattr(runtime, "execution_info", None)
    thread_id = (getattr(info, "thread_id", None) or "") if info is not None else ""

    def make() -> RunContext:
        env = default_environment()
        made = env.context(session_id=thread_id, components=components)
        if isinstance(given, RunContext):
            if given.script is not None:
                from canvas2graph.runtime.services.models import ModelFactory
                from canvas2graph.runtime.services.scripted import Script
                # a Script, or its JSON as a LangGraph Server client sends it (loaded afresh for each run)
                script = Script.load(copy.deepcopy(given.script) if isinstance(given.script, (dict, list))
                                     else given.script)
                made = replace(made, models=ModelFactory(script=script, config_path=env.settings.models_config),
                               script=script)
            made = replace(made, session_id=given.session_id or made.session_id,
                           services={**made.services, **given.services}, cancel_requested=given.cancel_requested,
                           overrides=given.overrides)      # a fork's edits (runtime/run/steps.py)
        return made

    control = getattr(runtime, "control", None)
    return make() if control is None else _RUNS.get(control, make)


__all__ = ["RunSettings", "ModelSource", "RunEnvironment", "default_environment", "reset_default_environment",
           "resolve_context"]

"""The types and errors every layer shares: the lowest module of canvas2graph.

It imports nothing of the project, so `compiler`, `nodes`, `runtime` and `server` all import from
here without importing each other (the data flows DSL -> plan -> graph -> events; the imports
follow it, and this module sits under all of them). Users of the public API meet these types too:
a `CompileError` and its `Diagnostic`s, the `RunContext` a graph runs with, the `ComponentError`
a failed component raises.
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Literal, Mapping, Protocol

Severity = Literal["error", "warning"]
# A lone UTF-16 surrogate: valid in JSON text ("\ud800") and in a Python str, encodable by nothing.
# `canvas2graph.text` repairs values with these.
SURROGATE = re.compile("[\ud800-\udfff]")
REPLACEMENT = "\ufffd"


# --- compile time --------------------------------------------------------------------------
@dataclass(frozen=True)
class Diagnostic:
    """One problem found in a DSL, named by component, field and reason."""

    code: str                    # stable, machine-readable, e.g. "unknown-component"
    message: str                 # one sentence for people
    component_id: str | None = None
    field: str | None = None
    severity: Severity = "error"
    line: int | None = None      # for JSON syntax errors
    column: int | None = None

    def __post_init__(self) -> None:
        # a diagnostic quotes the DSL (ids, fields, values), which may hold lone surrogates: whatever
        # prints or sends it must be able to encode it
        for name in ("message", "component_id", "field"):
            value = getattr(self, name)
            if isinstance(value, str) and SURROGATE.search(value):
                object.__setattr__(self, name, SURROGATE.sub(REPLACEMENT, value))

    def to_dict(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v is not None}

    def __str__(self) -> str:
        where = []
        if self.line is not None:
            where.append(f"line {self.line}, column {self.column}")
        if self.component_id:
            where.append(self.component_id)
        if self.field:
            where.append(self.field)
        prefix = ": ".join([self.severity, " ".join(where) if len(where) < 2 else " / ".join(where)]) if where else self.severity
        return f"{prefix}: {self.message} [{self.code}]"


class CompileError(Exception):
    """The DSL cannot be compiled; `diagnostics` lists every reason (errors and warnings)."""

    def __init__(self, diagnostics: Iterable[Diagnostic]):
        self.diagnostics = list(diagnostics)
        errors = [d for d in self.diagnostics if d.severity == "error"]
        first = str(errors[0]) if errors else "no errors"
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        super().__init__(first + more)

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.severity == "error"]


class NodeConfigError(Exception):
    """Raised by a Node while preparing, for a param that passes the model but cannot work."""

    def __init__(self, field: str, message: str, code: str = "invalid-param"):
        super().__init__(message)
        self.field = field
        self.message = message
        self.code = code


# --- run time ------------------------------------------------------------------------------
class ChatModels(Protocol):
    """What nodes ask of a run's models (`canvas2graph.runtime.services.models.ModelFactory` is one)."""

    def chat_model(self, llm_id: str, *, component_id: str | None = None,
                   gen_conf: Mapping[str, Any] | None = None) -> Any:
        """The LangChain chat model of `llm_id` (a `BaseChatModel`), configured for one component."""


class ScriptedResults(Protocol):
    """What nodes ask of a run's script besides models (`canvas2graph.runtime.services.scripted.Script` is one)."""

    retrieval: Any      # scripted chunks by dataset, or None to retrieve for real

    def next_tool_result(self, *, component_name: str, function_name: str | None = None,
                         component_id: str | None = None) -> dict | None:
        """The next scripted result of a tool call, or None to run the tool for real."""


SCRIPTED_LLM = "scripted@LLMScript"     # the model of empty llm_ids under --llm-script: the script answers them all


@dataclass
class RunContext:
    """What a run hands every node besides the state: models, the script, and services.

    It travels as LangGraph's run `context` (the graph's `context_schema`), so one compiled graph
    serves any configuration: `graph.ainvoke(request, config, context=RunContext(...))`.

    - `models`: a `canvas2graph.runtime.services.models.ModelFactory` (chat models by `llm_id`);
    - `script`: a `canvas2graph.runtime.services.scripted.Script` (or its JSON): every model answers from it (offline runs, tests);
    - `services`: what components reach besides models: `"retrieval"` (a backend), `"mcp"` (the MCP
      servers), `"code"` (CodeExec's policy, a `canvas2graph.runtime.services.sandbox.CodePolicy` or a dict of its fields),
      `"allow_private"` (hosts Invoke, ExeSQL and Crawler may reach).

    Whatever is left out comes from the environment, as `canvas2graph serve` reads it
    (`canvas2graph.runtime.services.environment`): no context at all, as under `langgraph dev`, means all of it. With a
    script, `models` answer from it.
    """

    models: ChatModels | None = None
    script: ScriptedResults | None = None
    session_id: str = ""
    services: dict[str, Any] = field(default_factory=dict)
    cancel_requested: bool = False      # set by Runner.cancel(); nodes check it before they start
    # a fork's edits, component id -> {"inputs": {ref: value}} or {"outputs": {...}}: the component's next
    # step in this run takes them (runtime/run/steps.py)
    overrides: dict[str, Any] = field(default_factory=dict)
    # one future per pending generation (its producer and that run's `_created_time`) that a reader started:
    # a Message streaming it and a component reading it in the same step share one model call
    # (canvas2graph.nodes.base.shared_generation)
    generations: dict[Any, Any] = field(default_factory=dict)
    # the tasks of each running LangGraph step, by graph namespace and step (canvas2graph.nodes.base.StepTasks): a
    # component that fails without an exception handler lets the rest of its step finish before it stops the
    # turn, as RAGFlow finishes a batch; LangGraph would cancel them
    running: dict[Any, Any] = field(default_factory=dict)

    @property
    def extras(self) -> dict[str, Any]:
        """The former name of `services`, which components still read."""
        return self.services

    # LangGraph Server and Studio read the context's JSON schema, and LangGraph builds a RunContext from
    # the JSON a client sends: only its JSON-valued fields can come that way.
    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        from pydantic_core import core_schema
        return core_schema.any_schema()

    @classmethod
    def __get_pydantic_json_schema__(cls, schema: Any, handler: Any) -> dict[str, Any]:
        return {"title": "RunContext", "type": "object", "description": (
            "The run's models and services; what is left out comes from the server's environment."),
            "properties": {
                "script": {"type": ["object", "array"], "description": "every model answers from this script "
                           "(the JSON of --llm-script), a fresh copy per run"},
                "session_id": {"type": "string"},
                "services": {"type": "object", "description": "JSON-valued services: code (CodeExec's policy "
                             "fields), allow_private"}}}


class TurnRejected(Exception):
    """The request cannot run on this session as it is (e.g. a pause needs inputs it did not give, or a value no
    session can store)."""


class ComponentError(RuntimeError):
    """A component failed; carries the outputs RAGFlow reports in node_finished. A RuntimeError, so that LangGraph
    Server (which shows the message of a few exception types only, "An internal error occurred" for others) tells
    a client why a run failed: a model without its key, say."""

    def __init__(self, component_id: str, message: str, outputs: dict[str, Any] | None = None,
                 inputs: dict[str, Any] | None = None):
        super().__init__(message)
        self.component_id = component_id
        self.message = message
        self.outputs = outputs or {"_ERROR": message}
        self.inputs = inputs or {}


class TurnCancelled(Exception):
    """Raised at a node boundary after the turn was cancelled."""


# --- the command line ------------------------------------------------------------------------
class UsageError(Exception):
    """A wrong command line or unreadable file: printed as one line, exit status 2."""


__all__ = ["Severity", "Diagnostic", "CompileError", "NodeConfigError", "RunContext", "ComponentError",
           "TurnCancelled", "UsageError"]

"""canvas2graph: RAGFlow agent canvases compiled into LangGraph graphs.

    import canvas2graph
    graph = canvas2graph.compile("agent.json", checkpointer=saver)        # a CompiledStateGraph
    graph.invoke({"query": "Hi"}, {"configurable": {"thread_id": "t1"}})  # {"answer", "outputs"}

- `compile(source, *, checkpointer=None, default_llm=None, **options)`: a DSL (a path, JSON text or a
  dict) as a LangGraph `CompiledStateGraph`; `builder(source)` is the uncompiled `StateGraph`, `load(source)`
  the `CompiledCanvas` (plan, diagnostics).
- The graph's input is `CanvasInput` (`query`, `inputs`, `files`, `user_id`), its output `CanvasOutput`
  (`answer`, `outputs`); a turn on a thread continues its conversation; a paused form resumes with
  `Command(resume={field: value})`.
- `RunContext(models=..., script=..., services=...)` is the run's `context=` (`ModelFactory` resolves
  `llm_id`s, `Script` answers offline); without one, the environment configures the run as it
  configures `canvas2graph serve` (`RunEnvironment`, `RunSettings`).
- `ragflow_events(graph, input, config, context=...)`: RAGFlow's events from the graph's own stream,
  as `canvas2graph run --format jsonl` prints them.
- `diagnose(source)`: every problem of a DSL without raising; `CompileError` carries them as `Diagnostic`s.
- `trace(graph, config)` / `atrace(graph, config)`: a thread's step trace read from its checkpoints, as
  turns of steps (inputs, outputs, elapsed, prompts, token usage, tool calls, checkpoint ids to fork from).

The names load on first use (PEP 562): importing `canvas2graph.types`, which every layer does, costs
nothing more than that module.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from canvas2graph.api import builder, compile, load
    from canvas2graph.types import CompileError, ComponentError, Diagnostic, RunContext
    from canvas2graph.compiler.canvas import CompiledCanvas, compile_dsl, diagnose
    from canvas2graph.runtime.services.environment import RunEnvironment, RunSettings
    from canvas2graph.runtime.run.events import EventAdapter, TurnEvents, ragflow_events
    from canvas2graph.runtime.services.models import ModelFactory
    from canvas2graph.runtime.services.scripted import Script
    from canvas2graph.runtime.graph.state import CanvasInput, CanvasOutput
    from canvas2graph.runtime.run.steps import atrace, trace

_EXPORTS = {
    "compile": "canvas2graph.api",
    "builder": "canvas2graph.api",
    "load": "canvas2graph.api",
    "ragflow_events": "canvas2graph.runtime.run.events",
    "trace": "canvas2graph.runtime.run.steps",
    "atrace": "canvas2graph.runtime.run.steps",
    "TurnEvents": "canvas2graph.runtime.run.events",
    "EventAdapter": "canvas2graph.runtime.run.events",
    "CanvasInput": "canvas2graph.runtime.graph.state",
    "CanvasOutput": "canvas2graph.runtime.graph.state",
    "ModelFactory": "canvas2graph.runtime.services.models",
    "Script": "canvas2graph.runtime.services.scripted",
    "RunEnvironment": "canvas2graph.runtime.services.environment",
    "RunSettings": "canvas2graph.runtime.services.environment",
    "compile_dsl": "canvas2graph.compiler.canvas",
    "diagnose": "canvas2graph.compiler.canvas",
    "CompiledCanvas": "canvas2graph.compiler.canvas",
    "CompileError": "canvas2graph.types",
    "ComponentError": "canvas2graph.types",
    "Diagnostic": "canvas2graph.types",
    "RunContext": "canvas2graph.types",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'canvas2graph' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted(_EXPORTS)


__all__ = list(_EXPORTS)

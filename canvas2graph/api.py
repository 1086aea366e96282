"""The public Python API: a RAGFlow DSL compiled into a LangGraph graph that LangGraph's own calls drive.

    import canvas2graph
    from langgraph.checkpoint.memory import InMemorySaver

    graph = canvas2graph.compile("agent.json", checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t1"}}
    graph.invoke({"query": "Hi"}, config)                 # {"answer": "...", "outputs": {...}}

See README.md ("Python API") for the input and output, the run context, forms, forks and RAGFlow's events.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from canvas2graph.compiler.canvas import CompiledCanvas, compile_dsl

def load(source: Any, *, default_llm: str | None = None) -> CompiledCanvas:
    """Compile a DSL once (checked, planned; `CompileError` lists every problem): a path to a JSON
    file, JSON text, or the parsed JSON (a bare DSL, a RAGFlow template `{id, title, dsl}` or an agent
    record). `default_llm` (`model@Factory`, default `$CANVAS2GRAPH_DEFAULT_LLM`) is the model of LLM,
    Agent and Categorize components whose `llm_id` is empty."""
    if default_llm is None:
        default_llm = (os.environ.get("CANVAS2GRAPH_DEFAULT_LLM") or "").strip() or None
    return compile_dsl(_read(source), default_llm=default_llm)


def builder(source: Any, *, default_llm: str | None = None):
    """The uncompiled LangGraph `StateGraph` of a DSL: add to it, then `.compile(checkpointer=...)`."""
    return load(source, default_llm=default_llm).builder()


def compile(source: Any, *, checkpointer: Any = None, default_llm: str | None = None, **options: Any):
    """A DSL as a LangGraph `CompiledStateGraph`, with any checkpointer (`InMemorySaver`, `SqliteSaver`,
    `PostgresSaver`, their async variants, or None as LangGraph Server wants).

    `options` go to `StateGraph.compile` (`store`, `interrupt_before`, `name`, ...). The graph's
    default config carries the turn's step limit, derived from the DSL (its loops and iterations)."""
    canvas = load(source, default_llm=default_llm)
    graph = canvas.builder().compile(checkpointer=checkpointer, **options)
    return graph.with_config(recursion_limit=canvas.recursion_limit)


def _read(source: Any) -> Any:
    """A path's contents; anything else as it is (JSON text, bytes, a dict)."""
    if isinstance(source, os.PathLike):
        return Path(source).read_bytes()
    if isinstance(source, str) and not source.lstrip().startswith(("{", "[")) and len(source) < 4096:
        path = Path(source).expanduser()
        if path.is_file():
            return path.read_bytes()
        raise FileNotFoundError(f"no DSL file at {source} (pass JSON text, a dict or a path to a JSON file)")
    return source


__all__ = ["compile", "builder", "load"]

"""canvas2graph's compiler: RAGFlow DSL -> checked plan -> LangGraph graph.

    compiled = compile_dsl(text_or_dict)        # raises CompileError with diagnostics
    graph = compiled.graph(checkpointer)        # a compiled LangGraph, cached per checkpointer

`diagnose()` returns the diagnostics without raising (what `canvas2graph compile` prints).

The names below load on first use (PEP 562), so importing a leaf of the compiler such as
`compiler.refs`, which nodes do while they prepare, does not load the planner and with it every
component family: the imports run one way, from the compiler down to the nodes.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from canvas2graph.types import CompileError, Diagnostic
    from compiler.canvas import CompiledCanvas, compile_dsl, diagnose

_EXPORTS = {
    "compile_dsl": "compiler.canvas",
    "diagnose": "compiler.canvas",
    "CompiledCanvas": "compiler.canvas",
    "_CACHE": "compiler.canvas",
    "CompileError": "canvas2graph.types",
    "Diagnostic": "canvas2graph.types",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'compiler' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


__all__ = ["compile_dsl", "diagnose", "CompiledCanvas", "CompileError", "Diagnostic"]

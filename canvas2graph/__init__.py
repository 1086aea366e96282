"""canvas2graph: RAGFlow agent canvases compiled into LangGraph graphs.

The public names load on first use (PEP 562): importing `canvas2graph.types`, which every layer
does, costs nothing more than that module.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from canvas2graph.types import CompileError, ComponentError, Diagnostic, RunContext
    from compiler.canvas import CompiledCanvas, compile_dsl, diagnose

_EXPORTS = {
    "compile_dsl": "compiler.canvas",
    "diagnose": "compiler.canvas",
    "CompiledCanvas": "compiler.canvas",
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


__all__ = list(_EXPORTS)

"""Diagnostics: every problem found in a DSL, named by component, field and reason.

The compiler never raises on bad input with anything but `CompileError`, which carries
every diagnostic found so a user can fix them all in one pass. `Diagnostic` and `CompileError`
live in `canvas2graph.types` (every layer reports them); the `Collector` the passes fill is here.
"""
from __future__ import annotations

from canvas2graph.types import CompileError, Diagnostic, Severity


class Collector:
    """Accumulates diagnostics while a pass walks the DSL."""

    def __init__(self) -> None:
        self.items: list[Diagnostic] = []

    def error(self, code: str, message: str, component_id: str | None = None, field: str | None = None, **kw) -> None:
        self.items.append(Diagnostic(code, message, component_id, field, "error", **kw))

    def warning(self, code: str, message: str, component_id: str | None = None, field: str | None = None) -> None:
        self.items.append(Diagnostic(code, message, component_id, field, "warning"))

    @property
    def has_errors(self) -> bool:
        return any(d.severity == "error" for d in self.items)


__all__ = ["Collector", "CompileError", "Diagnostic", "Severity"]

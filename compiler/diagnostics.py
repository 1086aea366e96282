"""Diagnostics: every problem found in a DSL, named by component, field and reason.

The compiler never raises on bad input with anything but `CompileError`, which carries
every diagnostic found so a user can fix them all in one pass.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Iterable, Literal

Severity = Literal["error", "warning"]


@dataclass(frozen=True)
class Diagnostic:
    code: str                    # stable, machine-readable, e.g. "unknown-component"
    message: str                 # one sentence for people
    component_id: str | None = None
    field: str | None = None
    severity: Severity = "error"
    line: int | None = None      # for JSON syntax errors
    column: int | None = None

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

"""The loaded DSL as typed data (what `compiler.load` produces and `compiler.check` reads)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Globals RAGFlow's Canvas always has (SPEC 2.1); a DSL may omit them.
DEFAULT_GLOBALS: dict[str, Any] = {
    "sys.query": "",
    "sys.user_id": "",
    "sys.conversation_turns": 0,
    "sys.files": [],
    "sys.history": [],
    "sys.date": "",
}


@dataclass
class ComponentEntry:
    id: str
    component_name: str
    params: dict[str, Any]
    downstream: list[str]
    parent_id: str | None = None
    display_name: str = ""


@dataclass
class CanvasDSL:
    components: dict[str, ComponentEntry]
    globals: dict[str, Any] = field(default_factory=dict)
    variables: dict[str, Any] = field(default_factory=dict)
    raw: dict[str, Any] = field(default_factory=dict)
    title: str = ""            # the agent's title when the DSL came in a template or agent record

    def initial_globals(self) -> dict[str, Any]:
        """sys.* defaults, then the DSL's globals, then env.* defaults from `variables`."""
        values = dict(DEFAULT_GLOBALS)
        values.update(self.globals)
        for name, decl in self.variables.items():
            key = name if name.startswith("env.") else f"env.{name}"
            if key not in values and isinstance(decl, dict):
                values[key] = decl.get("value")
        return values

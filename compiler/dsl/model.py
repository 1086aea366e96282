"""The loaded DSL as typed data (what `canvas2graph.compiler.dsl.load` produces and `canvas2graph.compiler.check` reads)."""
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

MAX_TURNS = 2 ** 53        # counted up by one each turn; a JSON number every client reads exactly
_TYPES: dict[str, tuple[type, str]] = {
    "sys.query": (str, "a string"),
    "sys.user_id": (str, "a string"),
    "sys.date": (str, "a string"),
    "sys.files": (list, "a list"),
    "sys.history": (list, "a list"),
}


def global_problem(name: str, value: Any) -> str | None:
    """What is wrong with `value` as the system variable `name` ("sys.files must be a list"), or None.

    The DSL's `globals` seed these (checked at compile time), and a VariableAssigner may set them
    (checked when it runs): every turn's start reads them."""
    if name == "sys.conversation_turns":
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < MAX_TURNS:
            return "sys.conversation_turns counts the turns so far: it must be a whole number from 0 to 2^53"
        return None
    if name in _TYPES and not isinstance(value, _TYPES[name][0]):
        return f"{name} must be {_TYPES[name][1]}"
    return None


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


@dataclass
class CanvasInfo:
    """What nodes may ask about the rest of the canvas while they prepare."""

    entries: dict[str, ComponentEntry]
    nodes: dict[str, Any] = field(default_factory=dict)     # filled once every component is built
    _items: dict[str, str] | None = None                    # Iteration id -> its IterationItem, built once

    def type_of(self, cid: str) -> str | None:
        e = self.entries.get(cid)
        return e.component_name if e else None

    def display_name(self, cid: str) -> str:
        e = self.entries.get(cid)
        return e.display_name if e else ""

    def iteration_item_for(self, cid: str) -> str | None:
        """The IterationItem of the nearest Iteration around `cid`, which defines {item} and {index}."""
        if self._items is None:
            self._items = {}
            for c, e in self.entries.items():
                if e.component_name == "IterationItem" and e.parent_id:
                    self._items.setdefault(e.parent_id, c)
        seen: set[str] = set()        # canvas2graph.compiler.dsl.load refuses parent cycles; this only keeps the walk finite
        parent = self.entries[cid].parent_id if cid in self.entries else None
        while parent and parent in self.entries and parent not in seen:
            if self.entries[parent].component_name == "Iteration":
                return self._items.get(parent)
            seen.add(parent)
            parent = self.entries[parent].parent_id
        return None

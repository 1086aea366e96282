"""The JSON schema of every component's params model, for editors (the web UI's params forms).

Each registered component (nodes/registry.py) has a pydantic params model holding RAGFlow's defaults and
checks; its JSON schema says which fields it has, their types, defaults and bounds. An editor builds its
form from it, so a new component or field shows up there without UI work.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Any

from canvas2graph.nodes.registry import NO_ENGINE_CLASS, REGISTRY, lookup
from canvas2graph.nodes.tool import Tool

# fields every component inherits that say how the engine treats it rather than what it does: an editor
# shows them apart, as RAGFlow's forms keep them under "exception handling" or leave them out
COMMON = ("message_history_window_size", "inputs", "outputs", "description", "max_retries", "delay_after_error",
          "exception_method", "exception_default_value", "exception_goto", "debug_inputs")


def _schema(model: type) -> dict[str, Any]:
    try:
        return model.model_json_schema(mode="validation")
    except Exception as e:        # noqa: BLE001 - one odd default must not hide every other component's form
        return {"type": "object", "title": model.__name__, "description": f"no schema: {e}"}


@lru_cache(maxsize=1)
def params_schemas() -> list[dict[str, Any]]:
    """[{component_name, kind: component|tool|container|start|exit, schema, common}] for every component."""
    lookup("Begin")          # loads every family
    out = []
    for name in sorted(REGISTRY):
        spec = REGISTRY[name]
        role = getattr(spec.node, "role", None)
        kind = role or ("tool" if issubclass(spec.node, Tool) else "component")
        out.append({"component_name": name, "kind": kind, "routes": spec.routes, "schema": _schema(spec.params),
                    "common": list(COMMON)})
    return out


def no_engine_components() -> list[str]:
    """Frontend-only operators (notes and the like) an editor may draw but the engine never runs."""
    return sorted(NO_ENGINE_CLASS)

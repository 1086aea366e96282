"""The JSON schema of every component's params model, for editors (the web UI's params forms).

Each registered component (nodes/registry.py) has a pydantic params model holding RAGFlow's defaults and
checks; its JSON schema says which fields it has, their types, defaults and bounds. An editor builds its
form from it, so a new component or field shows up there without UI work. A schema's `x-initial` holds what
RAGFlow's canvas gives a new component where that differs from the engine's default (an LLM's sampling
values and their "enabled" switches: the engine's 0s stand for "not set" in DSLs that omit them).

Each entry also lists the outputs the component declares with its default params (`outputs`: name and
type, as RAGFlow's variable picker shows them), so an editor can offer references to them. Outputs that
depend on the params (Begin's inputs, a UserFillUp's form, an Iteration's or Loop's declared outputs) are
read from the DSL by the editor (server/ui/web/src/scope.js).
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


# The type RAGFlow's variable picker shows for an output, where the params model's own `outputs` default does
# not say (its web constants: initial<Component>Values.outputs).
OUTPUT_TYPES = {
    "content": "string", "structured": "object", "formalized_content": "string", "json": "Array<Object>",
    "category_name": "string", "tips": "string", "downloads": "Array<Object>", "attachment": "object",
    "result": "any", "first": "any", "last": "any", "item": "any", "index": "number", "report": "string",
    "success": "boolean", "downloaded_files": "Array<Object>", "next": "string",
}
# the outputs a component's picker lists first (the rest follow in name order)
_FIRST = ("content", "formalized_content", "result", "item", "index", "category_name")
_TYPE_NAMES = {"str": "string", "Array of Object": "Array<Object>", "Array<String>": "Array<string>"}


def declared_outputs(spec: Any) -> list[dict[str, str]]:
    """[{name, type}] of the outputs `spec` (a registry entry) sets with its default params; the engine's
    internal keys (`_next`, `_ERROR`...) are left out."""
    try:
        params = spec.params.model_construct()           # the defaults, without the checks an empty DSL fails
        names = spec.outputs(params) or set()
        defaults = params.outputs if isinstance(params.outputs, dict) else {}
    except Exception:       # noqa: BLE001 - an odd outputs rule leaves the list empty, never the route down
        return []
    out = []
    for name in sorted((n for n in names if isinstance(n, str) and not n.startswith("_")),
                       key=lambda n: (_FIRST.index(n) if n in _FIRST else len(_FIRST), n)):
        given = defaults.get(name) if isinstance(defaults.get(name), dict) else {}
        kind = str(given.get("type") or OUTPUT_TYPES.get(name) or "any")
        out.append({"name": name, "type": _TYPE_NAMES.get(kind, kind)})
    return out


def _schema(model: type) -> dict[str, Any]:
    try:
        return model.model_json_schema(mode="validation")
    except Exception as e:        # noqa: BLE001 - one odd default must not hide every other component's form
        return {"type": "object", "title": model.__name__, "description": f"no schema: {e}"}


@lru_cache(maxsize=1)
def params_schemas() -> list[dict[str, Any]]:
    """[{component_name, kind: component|tool|container|start|exit, schema, common, outputs}] for every component."""
    lookup("Begin")          # loads every family
    out = []
    for name in sorted(REGISTRY):
        spec = REGISTRY[name]
        role = getattr(spec.node, "role", None)
        kind = role or ("tool" if issubclass(spec.node, Tool) else "component")
        out.append({"component_name": name, "kind": kind, "routes": spec.routes, "schema": _schema(spec.params),
                    "common": list(COMMON), "outputs": declared_outputs(spec)})
    return out


def no_engine_components() -> list[str]:
    """Frontend-only operators (notes and the like) an editor may draw but the engine never runs."""
    return sorted(NO_ENGINE_CLASS)

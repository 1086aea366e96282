"""Reset a DSL as RAGFlow's `canvas.reset()` does: what earlier runs left in it goes, the design stays.

A DSL saved by RAGFlow's editor carries the state of its last runs: component output and input
values, the history, the path, the reference store and memory, the `sys.*` globals. canvas2graph
keeps run state in checkpoints and never writes it into an agent, but agents imported from RAGFlow
have it, and it seeds new sessions (their globals, for one). `reset_dsl` clears it:

- every component's `params.outputs.*.value` and `params.inputs.*.value` become None (Begin's and
  UserFillUp's form fields keep their definitions);
- `history`, `path`, `retrieval` and `memory` become empty lists;
- each `sys.*` global becomes the empty value of its type, each `env.*` global its variable's default.
"""
from __future__ import annotations

import copy
from typing import Any

RUN_STATE_LISTS = ("history", "path", "retrieval", "memory")
TYPE_DEFAULTS = {"number": 0, "boolean": False, "object": {}}


def _clear_values(fields: Any) -> None:
    if isinstance(fields, dict):
        for field in fields.values():
            if isinstance(field, dict) and "value" in field:
                field["value"] = None


def _empty_like(value: Any) -> Any:
    if isinstance(value, str):
        return ""
    if isinstance(value, (int, float)):        # bool too, as RAGFlow (an int) makes it 0
        return 0
    if isinstance(value, list):
        return []
    if isinstance(value, dict):
        return {}
    return None


def _env_default(variables: dict, name: str) -> Any:
    variable = variables.get(name)
    if not isinstance(variable, dict):
        return ""
    if variable.get("value") is not None:
        return variable["value"]
    kind = str(variable.get("type") or "")
    if kind.startswith("array"):
        return []
    return copy.deepcopy(TYPE_DEFAULTS.get(kind, ""))


def reset_dsl(dsl: dict) -> dict:
    """A copy of `dsl` without the state of earlier runs (RAGFlow's Canvas.reset)."""
    out = copy.deepcopy(dsl)
    for entry in (out.get("components") or {}).values():
        params = ((entry or {}).get("obj") or {}).get("params") if isinstance(entry, dict) else None
        if isinstance(params, dict):
            _clear_values(params.get("outputs"))
            _clear_values(params.get("inputs"))
    for key in RUN_STATE_LISTS:
        out[key] = []
    globals_ = out.get("globals")
    if isinstance(globals_, dict):
        variables = out.get("variables") if isinstance(out.get("variables"), dict) else {}
        for name, value in globals_.items():
            if name.startswith("sys."):
                globals_[name] = _empty_like(value)
            elif name.startswith("env."):
                globals_[name] = _env_default(variables, name[4:])
    return out

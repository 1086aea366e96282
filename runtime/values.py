"""Reading references from state and turning values into text (SPEC 4.2).

Nothing here scans text: templates were parsed at compile time (`compiler.refs`).
"""
from __future__ import annotations

import json
from typing import Any, Callable, Iterable, Mapping

from compiler.refs import Ref, Template
from runtime.state import GLOBALS, outputs_of

# An LLM or Agent whose direct downstream is a Message does not call its model itself: like
# RAGFlow's lazy partial, it leaves this marker as its `content` and the Message runs the
# generation while streaming, so the Message's own text and the tokens interleave as in RAGFlow.
PENDING = "__pending_generation__"


class ReferenceError_(Exception):
    """A reference could not be resolved at run time (a missing global, for example)."""


def is_pending(value: Any) -> bool:
    return isinstance(value, dict) and PENDING in value


def resolve(state: Mapping[str, Any], ref: Ref, aliases: Mapping[str, Any] | None = None) -> Any:
    """The value of `ref` in `state`, following RAGFlow's rules for nested paths."""
    if ref.kind == "global":
        values = state.get(GLOBALS) or {}
        if ref.name not in values:
            raise ReferenceError_(f"Can't find variable: '{ref.expr}'")
        return values[ref.name]
    if not ref.name and aliases is not None:          # {item} / {index} / {result} inside an Iteration
        return aliases.get(ref.key, "")
    outputs = outputs_of(state, ref.name)
    value = outputs.get(ref.key, "")
    for seg in ref.path:
        value = _step(value, seg)
        if value is None:
            return None
    return value


def _step(value: Any, seg: str) -> Any:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except (ValueError, TypeError):
            return None
    if isinstance(value, dict):
        return value.get(seg)
    if isinstance(value, (list, tuple)):
        try:
            return value[int(seg)]
        except (ValueError, IndexError):
            return None
    if value is None:
        return None
    return getattr(value, seg, None)


def as_json_text(value: Any) -> str:
    """How prompts, Message and get_value_with_variable print a value."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def as_python_text(value: Any) -> str:
    """How RAGFlow's string_format prints a value: str(), so lists look like Python reprs."""
    if value is None:
        return ""
    return str(value)


def render(template: Template, state: Mapping[str, Any], *, spliced: bool = False,
           to_text: Callable[[Any], str] = as_json_text, aliases: Mapping[str, Any] | None = None) -> str:
    parts = template.spliced if spliced else template.exact
    if template.is_literal:
        return template.text if not spliced else "".join(parts)  # type: ignore[arg-type]
    out: list[str] = []
    for part in parts:
        out.append(part if isinstance(part, str) else to_text(resolve(state, part, aliases)))
    return "".join(out)


def ref_values(refs: Iterable[Ref], state: Mapping[str, Any], aliases: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """{expr: value} for node_finished.inputs."""
    values: dict[str, Any] = {}
    for ref in refs:
        try:
            values[ref.expr] = resolve(state, ref, aliases)
        except ReferenceError_:
            values[ref.expr] = None
    return values

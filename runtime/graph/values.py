"""Reading references from state and turning values into text (SPEC 4.2).

Nothing here scans text: templates were parsed at compile time (`canvas2graph.compiler.dsl.refs`).
"""
from __future__ import annotations

import json
import math
import os
from typing import Any, Callable, Iterable, Mapping

from canvas2graph.compiler.dsl.refs import Ref, Template
from canvas2graph.runtime.graph.state import GLOBALS, outputs_of

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


def _is_read_file(value: Any) -> bool:
    """An uploaded file's entry that a run has read (`canvas2graph.runtime.services.file_text.with_contents`)."""
    return isinstance(value, dict) and "content" in value and "created_by" in value and "mime_type" in value


def shown_files(value: Any) -> Any:
    """A value with read files replaced by their content: RAGFlow hands components an upload as its parsed
    text (or an image's data URI), so that is how a file prints. (Lists of files are lists of entries:
    looking at the first item keeps this cheap for every other list.)"""
    if isinstance(value, list):
        if value and _is_read_file(value[0]):
            return [v["content"] if _is_read_file(v) else v for v in value]
        return value
    return value["content"] if _is_read_file(value) else value


def as_json_text(value: Any) -> str:
    """How prompts, Message and get_value_with_variable print a value."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    value = shown_files(value)
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def as_python_text(value: Any) -> str:
    """How RAGFlow's string_format prints a value: str(), so lists look like Python reprs."""
    if value is None:
        return ""
    return str(shown_files(value))


def render(template: Template, state: Mapping[str, Any], *, spliced: bool = False,
           to_text: Callable[[Any], str] = as_json_text, aliases: Mapping[str, Any] | None = None) -> str:
    parts = template.spliced if spliced else template.exact
    if template.is_literal:
        return template.text if not spliced else "".join(parts)  # type: ignore[arg-type]
    out: list[str] = []
    size, limit = 0, max_output_chars()
    for part in parts:
        text = part if isinstance(part, str) else to_text(resolve(state, part, aliases))
        size += len(text)
        if size > limit:          # a text that repeats a large value: stop before building it
            raise ValueError(f"the text passes {limit:,} characters (CANVAS2GRAPH_MAX_OUTPUT_CHARS)")
        out.append(text)
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


# --- what a component may write -------------------------------------------------------------------
INT64 = (-2 ** 63, 2 ** 63 - 1)          # what the checkpointers' serializer stores
MAX_NESTING = 100                       # JSON readers and the serializer recurse per level
DEFAULT_MAX_OUTPUT_CHARS = 8_000_000


def max_output_chars() -> int:
    """CANVAS2GRAPH_MAX_OUTPUT_CHARS: the size one component's outputs may reach (characters of text plus
    items of lists and objects, default 8,000,000); a loop that doubles a text stops there."""
    try:
        return max(1000, int(os.environ.get("CANVAS2GRAPH_MAX_OUTPUT_CHARS", DEFAULT_MAX_OUTPUT_CHARS)))
    except ValueError:
        return DEFAULT_MAX_OUTPUT_CHARS


def unstorable(outputs: Mapping[str, Any], limit: int | None = None) -> str | None:
    """Why `outputs` cannot be kept in a session and sent as events, or None when they can.

    A component's outputs go into the checkpoint (msgpack: integers of at most 64 bits) and into
    JSON events (no NaN or infinity), and a pass of a Loop can grow them without end; so each
    output is walked once, stopping at the first problem or when the size bound is passed.
    """
    budget = limit if limit is not None else max_output_chars()
    for key, value in outputs.items():
        stack = [(value, 0)]
        while stack:
            v, depth = stack.pop()
            if isinstance(v, str):
                budget -= len(v)
            elif isinstance(v, bool) or v is None:
                pass
            elif isinstance(v, int):
                if not INT64[0] <= v <= INT64[1]:
                    return f"output '{key}' holds an integer beyond 64 bits, which a session cannot store"
            elif isinstance(v, float):
                if not math.isfinite(v):
                    return f"output '{key}' holds {v}, which is not a JSON number"
            elif isinstance(v, (list, tuple, dict)):
                if depth >= MAX_NESTING:
                    return f"output '{key}' nests deeper than {MAX_NESTING} levels"
                budget -= len(v)
                items = v.values() if isinstance(v, dict) else v
                stack.extend((x, depth + 1) for x in items)
            if budget < 0:
                return (f"the outputs exceed {limit if limit is not None else max_output_chars():,} characters "
                        "(CANVAS2GRAPH_MAX_OUTPUT_CHARS)")
    return None

"""CodeExec's output contract (RAGFlow's, SPEC 3.17): one business output with a declared type.

The DSL's `outputs` name the component's outputs. Besides RAGFlow's system outputs (content,
actual_type, attachments, raw_result, _ERROR, _ARTIFACTS, _ATTACHMENT_CONTENT and the timing keys),
exactly one is the *business* output: it receives the value `main` returned, after the value was
checked against the output's declared type. Types: String, Number, Boolean, Object, Null, Any and
Array<T> (nested), case-insensitive; no type means Any.
"""
from __future__ import annotations

import json
from typing import Any, Mapping

SYSTEM_OUTPUTS = frozenset({"content", "actual_type", "attachments", "_ERROR", "_ARTIFACTS", "_ATTACHMENT_CONTENT",
                            "raw_result", "_created_time", "_elapsed_time"})
SIMPLE_TYPES = {"string": "String", "number": "Number", "boolean": "Boolean", "object": "Object", "null": "Null",
                "any": "Any"}


class ContractError(ValueError):
    pass


def business_output(outputs: Mapping[str, Any]) -> tuple[str, str]:
    """(name, normalized type) of the business output; ContractError when there is not exactly one.

    A single declared output is the business output even with a system name, as in RAGFlow, except
    that it still may not be a reserved name.
    """
    if len(outputs) == 1:
        name, meta = next(iter(outputs.items()))
    else:
        candidates = [(n, m) for n, m in outputs.items() if n not in SYSTEM_OUTPUTS]
        if len(candidates) != 1:
            found = ", ".join(n for n, _ in candidates) or "none"
            raise ContractError(f"CodeExec needs exactly one output besides its system outputs "
                                f"({', '.join(sorted(SYSTEM_OUTPUTS - {'_created_time', '_elapsed_time'}))}); found {found}")
        name, meta = candidates[0]
    if not name.strip():
        raise ContractError("the business output's name is empty")
    if name in SYSTEM_OUTPUTS:
        raise ContractError(f"{name!r} is a reserved output name; name the business output something else")
    if "." in name:
        raise ContractError(f"the business output's name may not contain '.': {name!r}")
    declared = meta.get("type") if isinstance(meta, Mapping) else None
    return name, normalize_type(str(declared or ""))


def normalize_type(declared: str) -> str:
    """A declared type in canonical spelling ("" and "any" are Any); ContractError for unknown types."""
    text = declared.strip()
    if not text:
        return "Any"
    low = text.lower()
    if low in SIMPLE_TYPES:
        return SIMPLE_TYPES[low]
    if low.startswith("array<") and low.endswith(">"):
        inner = text[text.index("<") + 1:-1].strip()
        if inner:
            return f"Array<{normalize_type(inner)}>"
    raise ContractError(f"unsupported output type {declared!r} (String, Number, Boolean, Object, Null, Any or Array<...>)")


def normalize_value(value: Any) -> Any:
    """Tuples become lists, recursively, as JSON would have them."""
    if isinstance(value, (list, tuple)):
        return [normalize_value(v) for v in value]
    if isinstance(value, dict):
        return {k: normalize_value(v) for k, v in value.items()}
    return value


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def actual_type(value: Any) -> str:
    if value is None:
        return "Null"
    if isinstance(value, bool):
        return "Boolean"
    if _is_number(value):
        return "Number"
    if isinstance(value, str):
        return "String"
    if isinstance(value, dict):
        return "Object"
    if isinstance(value, (list, tuple)):
        kinds = {actual_type(v) for v in value}
        return f"Array<{kinds.pop()}>" if len(kinds) == 1 else "Array<Any>"
    return "Any"


def check_value(expected: str, value: Any, path: str = "") -> None:
    """ContractError when `value` is not of the (normalized) `expected` type."""
    if expected == "Any":
        return
    where = path or "the result"
    if expected.startswith("Array<"):
        if not isinstance(value, list):
            raise ContractError(f"{where} should be {expected} but is {actual_type(value)}")
        inner = expected[len("Array<"):-1]
        for i, item in enumerate(value):
            check_value(inner, item, f"{path or 'the result'}[{i}]")
        return
    valid = {"String": isinstance(value, str), "Number": _is_number(value), "Boolean": isinstance(value, bool),
             "Object": isinstance(value, dict), "Null": value is None}[expected]
    if not valid:
        raise ContractError(f"{where} should be {expected} but is {actual_type(value)}")


def check_domain(value: Any) -> None:
    """The top-level value must be a JSON value (a Python literal printed by the script may not be)."""
    if not (value is None or isinstance(value, (bool, str, dict, list)) or _is_number(value)):
        raise ContractError(f"the result is a {type(value).__name__}; CodeExec results are strings, numbers, "
                            "booleans, objects, arrays or null")


def canonical_text(value: Any) -> str:
    """`content`: strings as they are, objects and arrays as indented JSON with sorted keys, null as ""."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False, indent=2, sort_keys=True, default=str)
    return str(value)

"""How a case's expectation is compared with what a run did: exactly, by substring, by regular
expression or as a JSON subset (docs/testing.md, "Comparisons").

An expectation is either a plain value, compared exactly, or an object with exactly one of the keys
`exact`, `contains`, `regex`, `json`, which names the comparison. `match(expected, actual, what)` answers
the differences as lines a person reads in a failing test ("" when it matches); `still_holds` keeps the
form of an expectation that passes when `--update` rewrites a case.
"""
from __future__ import annotations

import difflib
import json
import re
from typing import Any

__all__ = ["KINDS", "MatchError", "kind_of", "match", "subset_problems", "as_text"]

KINDS = ("exact", "contains", "regex", "json")
PATH_JOIN = " > "           # a path (a list of component ids) as text, for `contains` and `regex`


class MatchError(ValueError):
    """An expectation that cannot be used (a regular expression that does not compile, say)."""


def kind_of(expected: Any) -> tuple[str, Any]:
    """(the comparison, the value to compare with): `{"contains": "x"}` -> ("contains", "x")."""
    if isinstance(expected, dict) and len(expected) == 1:
        (key, value), = expected.items()
        if key in KINDS:
            return key, value
    return "exact", expected


def as_text(value: Any) -> str:
    """What `contains` and `regex` read: text as it is, a list of ids joined as a path, else its JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return PATH_JOIN.join(value)
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def _show(value: Any, limit: int = 300) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[:limit] + f"… ({len(text):,} characters)"


def _text_diff(expected: str, actual: str) -> str:
    """Two texts side by side: short ones inline, several lines as a unified diff."""
    if "\n" not in expected and "\n" not in actual:
        return f"expected {_show(expected)}, got {_show(actual)}"
    lines = difflib.unified_diff(expected.splitlines(), actual.splitlines(), "expected", "actual", lineterm="")
    return "differs:\n    " + "\n    ".join(lines)


def _contains(needle: Any, actual: Any) -> bool:
    """A list in a list: its items appear in order (a path that goes through these components); else
    the needle's text is a substring of the value's text."""
    if isinstance(needle, list) and isinstance(actual, list):
        position = 0
        for item in needle:
            try:
                position = actual.index(item, position) + 1
            except ValueError:
                return False
        return True
    return as_text(needle) in as_text(actual)


def subset_problems(expected: Any, actual: Any, where: str = "") -> list[str]:
    """Where `expected` is not a JSON subset of `actual`: every key of an object is in the other with a
    matching value, lists match item by item and have the same length, other values are equal."""
    here = where or "the value"
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return [f"{here}: expected an object, got {_show(actual)}"]
        problems = []
        for key, value in expected.items():
            if key not in actual:
                problems.append(f"{where}.{key}: missing" if where else f"{key}: missing")
            else:
                problems += subset_problems(value, actual[key], f"{where}.{key}" if where else str(key))
        return problems
    if isinstance(expected, list):
        if not isinstance(actual, list):
            return [f"{here}: expected a list, got {_show(actual)}"]
        if len(expected) != len(actual):
            return [f"{here}: expected {len(expected)} item(s), got {len(actual)}: {_show(actual)}"]
        return [p for i, (e, a) in enumerate(zip(expected, actual)) for p in subset_problems(e, a, f"{where}[{i}]")]
    if expected != actual:
        return [f"{here}: expected {_show(expected)}, got {_show(actual)}"]
    return []


def _exact_problems(expected: Any, actual: Any, where: str) -> list[str]:
    """Where two structures differ, each place named (`[1].content`), texts shown as a diff."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        problems = [f"{where}.{k}: missing" for k in expected if k not in actual]
        problems += [f"{where}.{k}: not expected, got {_show(actual[k])}" for k in actual if k not in expected]
        return problems + [p for k in expected if k in actual for p in _exact_problems(expected[k], actual[k], f"{where}.{k}")]
    if isinstance(expected, list) and isinstance(actual, list):
        problems = [p for i, (e, a) in enumerate(zip(expected, actual)) for p in _exact_problems(e, a, f"{where}[{i}]")]
        if len(expected) != len(actual):
            problems.append(f"{where}: expected {len(expected)} item(s), got {len(actual)}")
        return problems
    if expected == actual:
        return []
    if isinstance(expected, str) and isinstance(actual, str):
        return [f"{where} {_text_diff(expected, actual)}"]
    return [f"{where}: expected {_show(expected)}, got {_show(actual)}"]


def match(expected: Any, actual: Any, what: str) -> list[str]:
    """The differences between an expectation and the actual value, each a line naming `what`."""
    kind, value = kind_of(expected)
    if kind == "exact":
        if value == actual:
            return []
        if isinstance(value, str) and isinstance(actual, str):
            return [f"{what} {_text_diff(value, actual)}"]
        if isinstance(value, list) and isinstance(actual, list) and all(isinstance(v, str) for v in value + actual):
            return [f"{what}: expected {as_text(value)}\n    got      {as_text(actual)}"]
        if isinstance(value, (list, dict)) and type(value) is type(actual):
            return [f"{what}{p}" for p in _exact_problems(value, actual, "")][:5]
        return [f"{what}: expected {_show(value)}, got {_show(actual)}"]
    if kind == "contains":
        if _contains(value, actual):
            return []
        return [f"{what}: expected to contain {_show(as_text(value))}, got {_show(as_text(actual))}"]
    if kind == "regex":
        if not isinstance(value, str):
            raise MatchError(f"{what}: a regex must be a string, got {_show(value)}")
        try:
            found = re.search(value, as_text(actual), re.S)
        except re.error as e:
            raise MatchError(f"{what}: the regex {value!r} does not compile: {e}")
        return [] if found else [f"{what}: expected to match /{value}/, got {_show(as_text(actual))}"]
    return [f"{what}: {p}" for p in subset_problems(value, actual)]

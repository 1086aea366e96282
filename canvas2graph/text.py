"""Text that every encoder takes: lone UTF-16 surrogates replaced.

JSON text may escape a lone surrogate ("\\ud800"), and Python keeps it in a `str`; no UTF-8 encoder
(stdout, orjson, a database driver) accepts it. What comes in from outside (a DSL, a query, a form,
a model's reply) is repaired once at the boundary, so nothing downstream meets one.
"""
from __future__ import annotations

from typing import Any

from canvas2graph.types import REPLACEMENT, SURROGATE


def has_surrogate(value: Any) -> bool:
    """Whether a JSON value holds a lone surrogate anywhere (keys included)."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            if SURROGATE.search(v):
                return True
        elif isinstance(v, dict):
            stack.extend(v)
            stack.extend(v.values())
        elif isinstance(v, (list, tuple)):
            stack.extend(v)
    return False


def scrub(value: Any) -> Any:
    """`value` with every lone surrogate replaced by U+FFFD; the same object when there is none."""
    if not has_surrogate(value):
        return value
    return _scrub(value)


def _scrub(value: Any) -> Any:
    if isinstance(value, str):
        return SURROGATE.sub(REPLACEMENT, value)
    if isinstance(value, dict):
        return {_scrub(k): _scrub(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_scrub(v) for v in value]
    return value


__all__ = ["SURROGATE", "REPLACEMENT", "has_surrogate", "scrub"]

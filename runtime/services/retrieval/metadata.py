"""Manual metadata filters (Retrieval's `meta_data_filter` with method "manual"): which documents pass.

Conditions compare a document's metadata values with the filter's value; numbers compare as
numbers when both sides are numeric. `and` keeps documents that pass every condition, `or` those
that pass any. A filter that keeps nothing selects no document (RAGFlow's ["-999"]).
"""
from __future__ import annotations

from typing import Any

OPERATOR_ALIASES = {"is": "=", "not is": "≠", "!=": "≠", ">=": "≥", "<=": "≤", "==": "="}
NO_DOCUMENT = "-999"


def _compare(op: str, have: Any, want: Any) -> bool:
    if op in ("=", "≠", ">", "<", "≥", "≤"):
        try:
            a, b = float(have), float(want)
        except (TypeError, ValueError):
            a, b = str(have), str(want)
        return {"=": a == b, "≠": a != b, ">": a > b, "<": a < b, "≥": a >= b, "≤": a <= b}[op]
    h, w = str(have).lower(), str(want).lower()
    checks = {"contains": w in h, "not contains": w not in h, "in": h in w, "not in": h not in w,
              "start with": h.startswith(w), "end with": h.endswith(w),
              "empty": not have, "not empty": bool(have)}
    if op not in checks:
        raise ValueError(f"unknown metadata filter operator {op!r}")
    return checks[op]


def matching_documents(metas: dict[str, dict[str, list[str]]], conditions: list[dict], logic: str = "and") -> list[str]:
    """Document ids that pass the conditions ({key|name, op|comparison_operator, value})."""
    selected: set[str] | None = None
    for cond in conditions:
        key = cond.get("key", cond.get("name"))
        op = str(cond.get("op", cond.get("comparison_operator", "="))).strip()
        op = OPERATOR_ALIASES.get(op, op)
        passing = {d for value, docs in (metas.get(key) or {}).items() if _compare(op, value, cond.get("value"))
                   for d in docs}
        if selected is None:
            selected = passing
        elif logic == "or":
            selected |= passing
        else:
            selected &= passing
    return sorted(selected or [])


def doc_filter(metas: dict[str, dict[str, list[str]]], conditions: list[dict], logic: str = "and") -> list[str]:
    """The doc_id filter a manual metadata filter gives retrieval: the matches, or [NO_DOCUMENT]."""
    found = matching_documents(metas, conditions, logic)
    return found if found or not conditions else [NO_DOCUMENT]

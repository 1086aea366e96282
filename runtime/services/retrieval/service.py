"""Which canvases retrieve.

A run's backend is opened by `canvas2graph.runtime.services.environment.RunEnvironment` for canvases that retrieve (a
Retrieval component, or an Agent with the Retrieval tool); other canvases get none.
"""
from __future__ import annotations

from typing import Any

from canvas2graph.runtime.services.retrieval.config import default_url


def uses_retrieval(components: dict) -> bool:
    """True when a component is a Retrieval or an Agent lists one among its tools (at any depth)."""
    def walk(value: Any) -> bool:
        if isinstance(value, dict):
            if value.get("component_name") == "Retrieval":
                return True
            return any(walk(v) for v in value.values())
        if isinstance(value, list):
            return any(walk(v) for v in value)
        return False
    return any(e.component_name == "Retrieval" or walk(e.params.get("tools")) for e in components.values())


__all__ = ["uses_retrieval", "default_url"]

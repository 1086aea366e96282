"""Running one pipeline component on given upstream outputs, as the pipeline graph does."""
from __future__ import annotations

import asyncio
from typing import Any

from canvas2graph.types import RunContext
from canvas2graph.compiler.dsl.model import ComponentEntry
from canvas2graph.compiler.dsl.model import CanvasInfo
from canvas2graph.nodes.pipeline.base import Job
from canvas2graph.nodes.registry import lookup_pipeline


def node(name: str, params: dict[str, Any] | None = None, cid: str | None = None):
    spec = lookup_pipeline(name)
    entry = ComponentEntry(cid or f"{name}:T", name, params or {}, [])
    return spec.node(entry, spec.params.model_validate(params or {}), CanvasInfo({entry.id: entry}))


def run(component, upstream: dict[str, Any], *, file: dict | None = None, outputs: dict | None = None,
        ctx: RunContext | None = None) -> tuple[dict[str, Any], list[tuple[float, str]]]:
    progress: list[tuple[float, str]] = []
    job = Job(ctx=ctx or RunContext(), file=file or {"name": upstream.get("name", "")}, outputs=outputs or {},
              progress=lambda p, m: progress.append((p, m)))
    return asyncio.run(component.process(upstream, job)), progress


def texts(out: dict[str, Any]) -> list[str]:
    return [c["text"] for c in out["chunks"]]

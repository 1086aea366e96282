"""Iteration and IterationItem: run the body once per item of a list (SPEC 3.8, 5.4).

The Iteration resolves its list and enters its IterationItem. Each IterationItem pass first
collects the previous pass's declared outputs (`{"ref": "Child@key"}`) into the Iteration's lists,
then either hands out the next item (`item`, `index`, and the legacy alias `result`) or, past the
end, leaves for the Iteration's downstream. The pass counter lives in the `loops` state channel,
so it is checkpointed with everything else.
"""
from __future__ import annotations

import os
from typing import Any

from pydantic import Field

from canvas2graph.compiler.dsl.refs import Ref, parse_ref
from canvas2graph.nodes.base import Node, Params, Result, require_ref, settle_pending
from canvas2graph.nodes.registry import register
from canvas2graph.runtime.graph.state import LOOPS, appended, channel, outputs_of
from canvas2graph.runtime.graph.values import resolve

DEFAULT_MAX_ITEMS = 10_000


def max_items() -> int:
    """Items one Iteration may process; the compiled graph's recursion limit is derived from it."""
    try:
        return max(1, int(os.environ.get("CANVAS2GRAPH_MAX_ITEMS", DEFAULT_MAX_ITEMS)))
    except ValueError:
        return DEFAULT_MAX_ITEMS


MAX_CONCURRENCY = 1_000


class IterationParams(Params):
    items_ref: str = ""
    variable: Any = None
    # items run at once (RAGFlow's Go engine and PR #19066); 0 and 1 run them one after another, as RAGFlow's
    # Python engine does. Above 1 the compiler runs the items through LangGraph's fan-out (compiler/parallel.py)
    max_concurrency: int = Field(1, ge=0, le=MAX_CONCURRENCY)


def collected_outputs(outputs: Any) -> list[tuple[str, Ref]]:
    """The Iteration's declared outputs that collect a body component's output per pass."""
    found = []
    for key, decl in (outputs or {}).items() if isinstance(outputs, dict) else []:
        if isinstance(decl, dict) and isinstance(decl.get("ref"), str) and "@" in decl["ref"]:
            found.append((key, parse_ref(decl["ref"])))
    return found


def progress(state, container_id: str) -> dict:
    return (state.get(LOOPS) or {}).get(container_id) or {}


@register("Iteration", IterationParams, outputs=lambda p: {k for k, _ in collected_outputs(p.outputs)})
class Iteration(Node):
    role = "container"
    start_type = "IterationItem"

    def prepare(self) -> None:
        self.items_ref = require_ref(self.params.items_ref, "params.items_ref", "items_ref")
        self.collect = collected_outputs(self.params.outputs)

    def references(self):
        return [("params.items_ref", self.items_ref)] + [(f"params.outputs.{k}.ref", r) for k, r in self.collect]

    def max_passes(self) -> int:
        return max_items() + 1

    def thoughts(self, state) -> str:
        items = resolve(state, self.items_ref)
        return f"Need to process {len(items)} items." if isinstance(items, list) else ""

    async def run(self, state, ctx) -> Result:
        items = resolve(state, self.items_ref)
        if not isinstance(items, list):
            raise ValueError(f"items_ref {self.items_ref.expr} must be a list, got {type(items).__name__}")
        if len(items) > max_items():
            raise ValueError(f"{len(items)} items exceed the limit of {max_items()} (CANVAS2GRAPH_MAX_ITEMS)")
        # collected outputs start as None; an empty list leaves them None, as in RAGFlow
        return Result(outputs={key: None for key, _ in self.collect},
                      writes={LOOPS: {self.id: {"idx": 0, "done": False}}})


@register("IterationItem", Params, outputs=lambda p: {"item", "index", "result"})
class IterationItem(Node):
    role = "start"
    thoughts_text = "Next turn..."

    def prepare(self) -> None:
        parent = self.canvas.entries.get(self.parent_id or "")
        params = parent.params if parent else {}
        self.items_ref = parse_ref(str(params.get("items_ref") or "")) if params.get("items_ref") else None
        self.collect = collected_outputs(params.get("outputs"))

    async def run(self, state, ctx) -> Result:
        container = self.parent_id or ""
        passed = progress(state, container)
        idx = int(passed.get("idx") or 0)
        if passed.get("item_only") and "item" in passed:
            # one item of a parallel Iteration, sent with its item rather than the list (compiler/parallel.py)
            item = passed["item"]
            return Result(outputs={"item": item, "result": item, "index": idx},
                          writes={LOOPS: {container: {"idx": idx + 1, "done": False}}})
        items = resolve(state, self.items_ref) if self.items_ref else []
        if not isinstance(items, list):
            # the list changed in the body (a VariableAssigner overwrote it): RAGFlow's IterationItem reads it
            # again on every pass and stops the turn, before collecting the pass that changed it
            raise ValueError(f"{self.items_ref.expr} must be an array, but its type is {type(items)}")
        writes: dict[str, Any] = {}
        # one item of a parallel Iteration (compiler/parallel.py) collects nothing: its items node does
        if idx > 0 and self.collect and not passed.get("item_only"):
            # a collected LLM content that no Message streamed is still a pending generation: run it here,
            # unseen, and collect its text (RAGFlow collects the unrun generator itself: docs/compatibility.md)
            state, writes = await settle_pending(self, [ref for _, ref in self.collect], state, ctx)
            # an append: the pass stores the item it collects, not the list again (docs/performance.md, Storage)
            writes[channel(container)] = {key: appended([resolve(state, ref)]) for key, ref in self.collect}
        if idx >= len(items):
            writes[LOOPS] = {container: {"idx": idx, "done": True}}
            # the last pass reports the last item again, as RAGFlow does
            previous = {k: v for k, v in outputs_of(state, self.id).items() if not k.startswith("_")}
            return Result(outputs=previous, writes=writes)
        writes[LOOPS] = {container: {"idx": idx + 1, "done": False}}
        return Result(outputs={"item": items[idx], "result": items[idx], "index": idx}, writes=writes)

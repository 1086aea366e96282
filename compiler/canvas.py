"""DSL -> compiled canvas: load, plan and check once, build LangGraph graphs from the result.

    compiled = compile_dsl(text_or_dict)        # raises CompileError with diagnostics
    graph = compiled.graph(checkpointer)        # a compiled LangGraph, cached per checkpointer

`diagnose()` returns the diagnostics without raising (what `canvas2graph compile` prints).
"""
from __future__ import annotations

import hashlib
import json
import os
import weakref
from dataclasses import dataclass, field
from typing import Any

from canvas2graph.types import CompileError, Diagnostic
from canvas2graph.compiler.dsl.diagnostics import Collector
from canvas2graph.compiler.fusion import enabled as fusion_enabled
from canvas2graph.compiler.dsl.load import load_dsl
from canvas2graph.compiler.plan import Plan, make_plan


@dataclass
class CompiledCanvas:
    plan: Plan
    diagnostics: list[Diagnostic]
    digest: str
    _graphs: dict[int, Any] = field(default_factory=dict)
    # a StateGraph wired elsewhere (an ejected canvas's module, `canvas2graph.eject`) to run instead of
    # the one `canvas2graph.compiler.build` derives from the plan
    wired: Any = None
    kind: str = "agent"        # or "pipeline": RAGFlow's ingestion pipeline (compiler/pipeline.py)

    @property
    def component_ids(self) -> list[str]:
        return list(self.plan.nodes)

    @property
    def recursion_limit(self) -> int:
        """Supersteps one turn may take, derived from the DSL: every component once, and each
        container's body as many times as it may pass (Loop: maximum_loop_count; Iteration:
        the item limit), nested containers multiplied; at most `max_steps()` (a turn always ends)."""
        nodes = self.plan.nodes
        children: dict[str, list[str]] = {}
        for cid, node in nodes.items():
            if node.parent_id:
                children.setdefault(node.parent_id, []).append(cid)

        def cost(cid: str) -> int:
            node = nodes[cid]
            if node.role != "container":
                return 1
            body = sum(cost(c) for c in children.get(cid, []))
            return 1 + node.max_passes() * (body + 1)

        return min(sum(cost(cid) for cid, node in nodes.items() if not node.parent_id) + 10, max_steps())

    @property
    def parallel(self) -> dict[str, int]:
        """Iterations that run items at once (id -> max_concurrency): their items run in item graphs,
        whose steps reach the event stream only when it streams subgraphs (compiler/parallel.py)."""
        if "_parallel" not in self.__dict__:
            from canvas2graph.compiler.parallel import parallel_iterations
            self.__dict__["_parallel"] = parallel_iterations(self.plan) if self.kind == "agent" else {}
        return self.__dict__["_parallel"]

    @property
    def fused(self) -> dict[str, list[str]]:
        """Node name -> the component ids it runs, for every chain the builder fused (`canvas2graph.compiler.fusion`);
        none for a graph wired elsewhere (an ejected module has a node per component)."""
        if "_fused" not in self.__dict__:
            from canvas2graph.compiler.fusion import fused_chains
            chains = {} if self.wired is not None or self.kind != "agent" else fused_chains(self.plan)
            self.__dict__["_fused"] = {self.plan.node_names[first]: chain for first, chain in chains.items()}
        return self.__dict__["_fused"]

    def builder(self):
        """A new LangGraph `StateGraph` for this canvas, to compile with any checkpointer."""
        if self.kind == "pipeline":
            from canvas2graph.compiler.pipeline_build import build_pipeline_graph
            builder = build_pipeline_graph(self.plan)
        else:
            from canvas2graph.compiler.build import build_graph
            builder = self.wired if self.wired is not None else build_graph(self.plan)
        _CANVAS_OF[builder] = self
        return builder

    def graph(self, checkpointer=None):
        key = id(checkpointer)
        if key not in self._graphs:
            self._graphs[key] = self.builder().compile(checkpointer=checkpointer)
        return self._graphs[key]

    def node_by_name(self) -> dict[str, Any]:
        if "_by_name" not in self.__dict__:
            self.__dict__["_by_name"] = {self.plan.node_names[cid]: node for cid, node in self.plan.nodes.items()}
        return self.__dict__["_by_name"]


# the canvas each StateGraph was built from, so RAGFlow's events can be read off any graph compiled from it
_CANVAS_OF: "weakref.WeakKeyDictionary[Any, CompiledCanvas]" = weakref.WeakKeyDictionary()


def canvas_of(graph: Any) -> CompiledCanvas:
    """The compiled canvas behind a graph (a `StateGraph` from `CompiledCanvas.builder()`, or a graph
    compiled from one); TypeError for any other graph."""
    builder = getattr(graph, "builder", graph)
    try:
        return _CANVAS_OF[builder]
    except (KeyError, TypeError):
        raise TypeError(f"{type(graph).__name__} was not built by canvas2graph: compile the DSL with "
                        "canvas2graph.compile()") from None


def diagnose(source: Any, *, default_llm: str | None = None) -> tuple[CompiledCanvas | None, list[Diagnostic]]:
    """Load, plan and check; return the compiled canvas (None if there are errors) and all diagnostics.
    `default_llm` is the model of components whose `llm_id` is empty."""
    from canvas2graph.compiler.check import check_plan
    repaired: list[Diagnostic] = []
    try:
        dsl = load_dsl(source, default_llm=default_llm, warnings=repaired)
    except CompileError as e:
        return None, repaired + e.diagnostics
    out = Collector()
    out.items.extend(repaired)
    from canvas2graph.compiler.pipeline import check_pipeline, is_pipeline, plan_pipeline
    kind = "pipeline" if is_pipeline(dsl) else "agent"
    if kind == "pipeline":
        plan = plan_pipeline(dsl, out)
        check_pipeline(plan, out)
    else:
        plan = make_plan(dsl, out)
        check_plan(plan, out)
    if out.has_errors:
        return None, out.items
    return CompiledCanvas(plan, out.items, _digest(dsl.raw), kind=kind), out.items


DEFAULT_MAX_STEPS = 100_000


def max_steps() -> int:
    """CANVAS2GRAPH_MAX_STEPS: the most supersteps any turn may take (default 100,000), whatever its
    containers allow; the turn stops naming this bound when it is reached."""
    try:
        return max(10, int(os.environ.get("CANVAS2GRAPH_MAX_STEPS", DEFAULT_MAX_STEPS)))
    except ValueError:
        return DEFAULT_MAX_STEPS


_CACHE: dict[str, CompiledCanvas] = {}


def compile_dsl(source: Any, *, default_llm: str | None = None) -> CompiledCanvas:
    """Compile once per DSL content: the same DSL text returns the same CompiledCanvas."""
    key = _source_key(source)
    if key is not None and default_llm:
        key += "\0" + default_llm
    if key is not None and not fusion_enabled():       # CANVAS2GRAPH_FUSION=0 builds another graph
        key += "\0unfused"
    if key is not None and key in _CACHE:
        return _CACHE[key]
    compiled, diags = diagnose(source, default_llm=default_llm)
    if compiled is None:
        raise CompileError(diags)
    if key is not None:
        if len(_CACHE) > 256:
            _CACHE.clear()
        _CACHE[key] = compiled
    return compiled


def _source_key(source: Any) -> str | None:
    """The cache key of a source; None when it cannot be hashed (too deep, odd keys): diagnose decides."""
    if isinstance(source, (str, bytes)):
        # "surrogatepass": JSON text may hold lone surrogates; compile reports them, the key only hashes
        return hashlib.sha256(source if isinstance(source, bytes) else source.encode("utf-8", "surrogatepass")).hexdigest()
    try:
        return _digest(source)
    except (RecursionError, TypeError, ValueError):
        return None


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


__all__ = ["compile_dsl", "diagnose", "canvas_of", "CompiledCanvas", "CompileError", "Diagnostic"]

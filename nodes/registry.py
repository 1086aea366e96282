"""component_name -> ComponentSpec: how the compiler finds each component family.

Each family module registers its components with `@register(...)`. The registry holds the
params model (RAGFlow's defaults and `check()` rules), the node class that runs it, and the
outputs it declares (so the compiler can check references to them).
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from canvas2graph.nodes.base import Node, Params

OutputsOf = Callable[["Params"], "set[str] | None"]


@dataclass(frozen=True)
class ComponentSpec:
    name: str
    params: type["Params"]
    node: type["Node"]
    outputs: OutputsOf            # the keys it sets; None means open-ended
    routes: bool = False          # routes through its `_next` output (Switch, Categorize)


REGISTRY: dict[str, ComponentSpec] = {}

# RAGFlow's ingestion-pipeline components (rag/flow): they make up a dataflow canvas that builds a
# dataset, not an agent canvas, and have no place in an agent's graph. A DSL using them gets an
# "unsupported" diagnostic saying so instead of "unknown component". Every agent component is registered.
KNOWN_ELSEWHERE = {"File", "Parser", "TokenChunker", "TitleChunker", "Tokenizer", "Extractor"}
# Frontend operators with no engine class at all (SPEC 2.2).
NO_ENGINE_CLASS = {"Bing", "RewriteQuestion", "WaitingDialogue", "Note", "Tool", "Placeholder"}


def register(name: str, params: type["Params"], *, outputs: OutputsOf | None = None, routes: bool = False):
    def deco(node_cls: type["Node"]) -> type["Node"]:
        REGISTRY[name] = ComponentSpec(name, params, node_cls, outputs or (lambda p: None), routes)
        node_cls.component_type = name
        return node_cls
    return deco


def lookup(name: str) -> ComponentSpec | None:
    _load_families()
    return REGISTRY.get(name)


# The ingestion-pipeline canvas's own registry (nodes/pipeline/): the same specs, kept apart because an
# agent canvas cannot hold them and a pipeline canvas holds nothing else (compiler/pipeline.py).
PIPELINE_REGISTRY: dict[str, ComponentSpec] = {}


def register_pipeline(name: str, params: type["Params"], *, outputs: OutputsOf | None = None):
    def deco(node_cls: type["Node"]) -> type["Node"]:
        PIPELINE_REGISTRY[name] = ComponentSpec(name, params, node_cls, outputs or (lambda p: None))
        node_cls.component_type = name
        return node_cls
    return deco


def lookup_pipeline(name: str) -> ComponentSpec | None:
    """A pipeline component's spec (File, Parser, TokenChunker, ...), or None."""
    import canvas2graph.nodes.pipeline  # noqa: F401  (its modules register themselves)
    return PIPELINE_REGISTRY.get(name)


_loaded = False
_loading = False
_lock = threading.RLock()


def _load_families() -> None:
    """Import every family module once so their @register calls run.

    Several threads may ask at once (a server compiles agents in worker threads): the others wait
    until every family is registered, or the first would see half a registry ("unknown component").
    A family module that asks while it is being imported (same thread) gets what is there so far.
    """
    global _loaded, _loading
    if _loaded:
        return
    with _lock:
        if _loaded or _loading:
            return
        _loading = True
        try:
            _import_families()
        finally:
            _loading = False
        _loaded = True


def _import_families() -> None:
    import canvas2graph.nodes.begin  # noqa: F401
    import canvas2graph.nodes.message  # noqa: F401
    import canvas2graph.nodes.llm  # noqa: F401
    import canvas2graph.nodes.categorize  # noqa: F401
    import canvas2graph.nodes.switch  # noqa: F401
    import canvas2graph.nodes.variables  # noqa: F401
    import canvas2graph.nodes.transforms  # noqa: F401
    import canvas2graph.nodes.iteration  # noqa: F401
    import canvas2graph.nodes.loop  # noqa: F401
    import canvas2graph.nodes.fillup  # noqa: F401
    import canvas2graph.nodes.retrieval  # noqa: F401
    import canvas2graph.nodes.invoke  # noqa: F401
    import canvas2graph.nodes.agent  # noqa: F401
    import canvas2graph.nodes.excel  # noqa: F401
    import canvas2graph.nodes.docgen  # noqa: F401
    import canvas2graph.nodes.browser  # noqa: F401
    import canvas2graph.nodes.tools
    canvas2graph.nodes.tools.load_all()

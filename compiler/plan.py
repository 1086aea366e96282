"""DSL model -> Plan: every component checked and turned into a Node, plus the edges between them.

The plan is what both the graph builder and the exporters read, so a Mermaid drawing shows
exactly the edges the compiled graph has.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from canvas2graph.types import NodeConfigError
from canvas2graph.compiler.dsl.diagnostics import Collector
from canvas2graph.compiler.dsl.model import CanvasDSL, CanvasInfo, ComponentEntry
from canvas2graph.nodes.registry import KNOWN_ELSEWHERE, NO_ENGINE_CLASS, ComponentSpec, lookup


FINISH = "__finish__"     # pseudo-target: the end of the turn

# Edge kinds. Static kinds become plain LangGraph edges; conditional kinds share one router per source.
STATIC_EDGES = ("next", "enter", "loop", "exit")
CONDITIONAL_EDGES = ("route", "item")


@dataclass
class Edge:
    source: str
    target: str               # a component id, or FINISH
    kind: str = "next"        # next | route | enter | item | loop | exit | error
    label: str = ""


@dataclass
class Plan:
    dsl: CanvasDSL
    nodes: dict[str, Any]                          # component id -> Node
    specs: dict[str, ComponentSpec]
    edges: list[Edge] = field(default_factory=list)
    node_names: dict[str, str] = field(default_factory=dict)   # component id -> LangGraph node name

    starts: dict[str, str] = field(default_factory=dict)        # container id -> its start item id

    def successors(self, cid: str) -> list[str]:
        return [e.target for e in self.edges if e.source == cid]

    def exits(self, container: str) -> list[str]:
        """Where control goes when a container is done: its downstream, else back to the enclosing
        container's start item, else the end of the turn."""
        node = self.nodes[container]
        if node.downstream:
            return list(node.downstream)
        if node.parent_id and node.parent_id in self.starts:
            return [self.starts[node.parent_id]]
        return [FINISH]

    def loop_container(self, cid: str) -> str | None:
        """The nearest enclosing Loop of a component (for ExitLoop)."""
        parent = self.nodes[cid].parent_id
        seen: set[str] = set()
        while parent and parent in self.nodes and parent not in seen:
            if self.nodes[parent].role == "container" and self.nodes[parent].component_type == "Loop":
                return parent
            seen.add(parent)
            parent = self.nodes[parent].parent_id
        return None


def node_name(cid: str, taken: set[str]) -> str:
    """A LangGraph node name for a component id, unique among `taken`.

    LangGraph reserves ':' and '|' in node names (RAGFlow ids use ':') and names of its own that start
    with '__' (`__start__`, `__end__`, `__input__`, `__error_handler__<node>`, ...), as does the builder
    (`__canvas_finish__`): an id starting with '__' gets a prefix."""
    base = cid.replace(":", ".").replace("|", "/")
    if base.startswith("__"):
        base = "cpn." + base
    name, n = base, 1
    while name in taken:
        n += 1
        name = f"{base}~{n}"
    taken.add(name)
    return name


def make_plan(dsl: CanvasDSL, out: Collector) -> Plan:
    info = CanvasInfo(dsl.components)
    nodes: dict[str, Any] = {}
    specs: dict[str, ComponentSpec] = {}
    for cid, entry in dsl.components.items():
        spec = _spec_for(entry, out)
        _check_tools(entry, out)
        if spec is None:
            continue
        params = _params_for(entry, spec, out)
        if params is None:
            continue
        try:
            node = spec.node(entry, params, info)
            routes = _routes_of(node) if spec.routes else []
        except NodeConfigError as e:
            if not any(d.component_id == cid and d.field == e.field for d in out.items):   # said once per field
                out.error(e.code, e.message, cid, e.field)
            continue
        except Exception as e:     # a params shape the node's checks did not foresee
            out.error("invalid-param", f"the params cannot be used: {_reason(e)}", cid, "params")
            continue
        if routes is None:
            out.error("invalid-param", "every branch target must be a component id (a string)", cid, "params")
            continue
        nodes[cid] = node
        specs[cid] = spec
    info.nodes = nodes
    plan = Plan(dsl=dsl, nodes=nodes, specs=specs)
    taken: set[str] = set()
    plan.node_names = {cid: node_name(cid, taken) for cid in dsl.components}
    plan.starts = _start_items(plan, out)
    plan.edges = _edges(plan)
    _rank_paths(plan)
    return plan


def _rank_paths(plan: Plan) -> None:
    """Each node's `path_rank`: where RAGFlow's path would put it among the components it runs with.

    RAGFlow appends to its path, batch after batch, each component's downstream (or chosen targets) in the
    DSL's order, taking the batch's components in path order; a breadth-first walk from Begin along the
    plan's edges (in the DSL's order) visits them in that order. Components of one LangGraph step that
    write the same channel (the turn's last component, `runtime.graph.state.LAST`) are ordered by it."""
    following: dict[str, list[str]] = {}
    for e in plan.edges:
        following.setdefault(e.source, []).append(e.target)
    order: dict[str, int] = {}
    queue = [cid for cid, node in plan.nodes.items() if node.component_type == "Begin"][:1]
    for cid in queue:            # the queue grows while it is walked: breadth-first, each node once
        if cid in order or cid not in plan.nodes:
            continue
        order[cid] = len(order)
        queue.extend(t for t in following.get(cid, ()) if t not in order)
    for cid in plan.nodes:       # not reachable from Begin (error gotos' targets, say): after, in canvas order
        order.setdefault(cid, len(order))
    for cid, node in plan.nodes.items():
        node.path_rank = order[cid]


def _start_items(plan: Plan, out: Collector) -> dict[str, str]:
    """Each Iteration/Loop's start item: its IterationItem/LoopItem child."""
    starts: dict[str, str] = {}
    for cid, node in plan.nodes.items():
        if node.role != "start":
            continue
        if node.parent_id in plan.dsl.components and node.parent_id not in plan.nodes:
            continue                  # the container failed to plan; its own diagnostics say why
        parent = plan.nodes.get(node.parent_id or "")
        if parent is None or parent.role != "container" or parent.start_type != node.component_type:
            out.error("misplaced-start", f"a {node.component_type} must be the child of a "
                      f"{node.component_type.replace('Item', '')}", cid, "parent_id")
        elif node.parent_id in starts:
            out.error("duplicate-start", f"'{node.parent_id}' already starts at '{starts[node.parent_id]}'", cid, "parent_id")
        else:
            starts[node.parent_id] = cid
    for cid, node in plan.nodes.items():
        if node.role == "container" and cid not in starts:
            out.error("no-start-item", f"a {node.component_type} needs a {node.start_type} child to start its body", cid)
    return starts


def _edges(plan: Plan) -> list[Edge]:
    """Every edge of the compiled graph, containers' implicit ones included (SPEC 5.4)."""
    edges: list[Edge] = []
    for cid, node in plan.nodes.items():
        role = node.role
        if plan.specs[cid].routes:
            edges += [Edge(cid, t, "route", label) for label, targets in node.routes() for t in targets]
        elif role == "container":
            if cid in plan.starts:
                edges.append(Edge(cid, plan.starts[cid], "enter"))
        elif role == "start":
            container = node.parent_id
            if plan.starts.get(container) == cid:
                # an empty body (nothing connected yet) makes passes that do nothing: back to the start
                edges += [Edge(cid, t, "item", "next pass") for t in node.downstream or [cid]]
                edges += [Edge(cid, t, "item", "done") for t in plan.exits(container)]
        elif role == "exit":
            loop = plan.loop_container(cid)
            edges += [Edge(cid, t, "exit") for t in (plan.exits(loop) if loop else node.downstream or [FINISH])]
        elif node.downstream:
            edges += [Edge(cid, t, "next") for t in node.downstream]
        elif node.parent_id in plan.starts:          # a body sink returns to its container's start item
            edges.append(Edge(cid, plan.starts[node.parent_id], "loop"))
        else:
            edges.append(Edge(cid, FINISH, "next"))
        edges += [Edge(cid, t, "error", "on error") for t in node.error_targets()]
    return edges


def _routes_of(node) -> list | None:
    """A routing node's (label, targets) pairs, or None when a target is not a string."""
    routes = [(label, list(targets)) for label, targets in node.routes()]
    if not all(isinstance(t, str) for _, targets in routes for t in targets):
        return None
    return routes


def _reason(e: Exception) -> str:
    return f"{type(e).__name__}: {e}" if str(e) else type(e).__name__


# Tools that RAGFlow's v0.20 rewrite removed but some of its shipped templates still name.
REMOVED_TOOLS = {
    "Bing": "tool 'Bing' was removed in RAGFlow 0.20 (its engine has no Bing class, so this template fails "
            "there too); replace it with DuckDuckGo (no key), TavilySearch or Google (docs/compatibility.md)",
}


def _check_tools(entry: ComponentEntry, out: Collector, tools=None, where: str = "params.tools") -> None:
    """Agent tools (and sub-agents' tools) are components too: RAGFlow imports each by name."""
    tools = entry.params.get("tools") if tools is None else tools
    if not isinstance(tools, list):
        return
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict) or not isinstance(tool.get("component_name"), str):
            continue
        name, field_ = tool["component_name"], f"{where}.{i}.component_name"
        if name in REMOVED_TOOLS:
            out.error("removed-tool", REMOVED_TOOLS[name], entry.id, field_)
        elif name in NO_ENGINE_CLASS:
            out.error("no-engine-class", f"tool '{name}' is a canvas operator that RAGFlow's engine cannot run "
                      "either; remove it or replace it with a supported tool", entry.id, field_)
        elif lookup(name) is None and name not in KNOWN_ELSEWHERE:
            out.error("unknown-component", f"unknown tool component_name '{name}'{did_you_mean(name)}", entry.id, field_)
        sub = tool.get("params")
        if isinstance(sub, dict) and isinstance(sub.get("tools"), list):
            _check_tools(entry, out, sub["tools"], f"{where}.{i}.params.tools")


def _spec_for(entry: ComponentEntry, out: Collector) -> ComponentSpec | None:
    name = entry.component_name
    spec = lookup(name)
    if spec is not None:
        return spec
    if name in NO_ENGINE_CLASS:
        out.error("no-engine-class", f"'{name}' is a canvas operator that RAGFlow's engine cannot run either; "
                  "replace it with a supported component", entry.id, "obj.component_name")
    elif name in KNOWN_ELSEWHERE:
        out.error("unsupported", f"component '{name}' belongs to RAGFlow's ingestion pipeline (a dataflow canvas "
                  "that builds a dataset), not to an agent canvas: agent canvases only hold agent components; a pipeline DSL "
                  "builds a dataset with `canvas2graph ingest`",
                  entry.id, "obj.component_name")
    else:
        out.error("unknown-component", f"unknown component_name '{name}'{did_you_mean(name)}", entry.id,
                  "obj.component_name")
    return None


def did_you_mean(name: str) -> str:
    """"; did you mean 'Categorize'?" for a misspelt component name, or ""."""
    from canvas2graph.nodes.registry import REGISTRY
    lookup(name)              # loads the component families, which fill the registry
    known = sorted(set(REGISTRY) | KNOWN_ELSEWHERE)
    by_case = {k.lower(): k for k in known}
    close = [by_case[name.lower()]] if name.lower() in by_case else \
        difflib.get_close_matches(name, known, n=3, cutoff=0.75)
    if not close:
        return ""
    return "; did you mean " + " or ".join(f"'{c}'" for c in close) + "?"


def _params_for(entry: ComponentEntry, spec: ComponentSpec, out: Collector):
    """RAGFlow merges params onto the Param defaults, then runs check() on the result (SPEC 2.2):
    the defaults are checked too (`validate_default` on Params), so an LLM without `llm_id`
    fails like one with `llm_id: ""`."""
    try:
        return spec.params.model_validate(entry.params)
    except ValidationError as e:
        for err in e.errors():
            loc = ".".join(str(p) for p in err["loc"]) or "params"
            msg = err["msg"]
            if msg.startswith("Value error, "):
                msg = msg[len("Value error, "):]
            out.error("invalid-param", msg, entry.id, f"params.{loc}" if loc != "params" else "params")
        return None
    except Exception as e:     # a validator that did not expect this type (TypeError etc.)
        out.error("invalid-param", f"the params cannot be used: {_reason(e)}", entry.id, "params")
        return None

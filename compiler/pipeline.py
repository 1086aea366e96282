"""Ingestion-pipeline DSLs (RAGFlow's `canvas_type: "Ingestion Pipeline"`): planned and checked.

A pipeline is RAGFlow's other canvas: File -> Parser -> TokenChunker or TitleChunker -> Extractor ->
Tokenizer, run once per file. It shares the agent canvas's DSL, loader and reference syntax, so it goes
through `canvas2graph.compiler.dsl.load` and the same diagnostics, and its plan is the agent's `Plan` (so Mermaid, JSON
and pictures export it as they export agents). What differs is checked here: its components come from
the pipeline registry, it starts at a File, and each component leads to at most one other (RAGFlow's
Pipeline walks one path, feeding each component the outputs of the one before).
"""
from __future__ import annotations

from canvas2graph.compiler.dsl.diagnostics import Collector
from canvas2graph.compiler.dsl.model import CanvasDSL
from canvas2graph.compiler.dsl.model import CanvasInfo
from canvas2graph.compiler.plan import FINISH, Edge, Plan, _params_for, _reason, node_name
from canvas2graph.types import NodeConfigError

NOT_YET: dict[str, str] = {}     # pipeline components RAGFlow has that are not run here (none now)
PIPELINE_COMPONENTS = {"File", "Parser", "TokenChunker", "TitleChunker", "Extractor", "Tokenizer", "Compiler"}


def is_pipeline(dsl: CanvasDSL) -> bool:
    """A DSL is a pipeline when it has no Begin and holds a File (every RAGFlow pipeline starts there)."""
    names = {e.component_name for e in dsl.components.values()}
    return "Begin" not in names and "File" in names


def plan_pipeline(dsl: CanvasDSL, out: Collector) -> Plan:
    from canvas2graph.nodes.registry import lookup, lookup_pipeline
    info = CanvasInfo(dsl.components)
    nodes, specs = {}, {}
    for cid, entry in dsl.components.items():
        name = entry.component_name
        spec = lookup_pipeline(name)
        if spec is None:
            if name in NOT_YET:
                out.error("unsupported", f"{NOT_YET[name]} is not run by canvas2graph yet", cid, "obj.component_name")
            elif lookup(name) is not None:
                out.error("unsupported", f"'{name}' is an agent component: an ingestion pipeline holds File, Parser, "
                          "TokenChunker, TitleChunker, Extractor and Tokenizer", cid, "obj.component_name")
            else:
                out.error("unknown-component", f"unknown pipeline component_name '{name}'", cid, "obj.component_name")
            continue
        params = _params_for(entry, spec, out)
        if params is None:
            continue
        try:
            nodes[cid] = spec.node(entry, params, info)
        except NodeConfigError as e:
            out.error(e.code, e.message, cid, e.field)
            continue
        except Exception as e:
            out.error("invalid-param", f"the params cannot be used: {_reason(e)}", cid, "params")
            continue
        specs[cid] = spec
    info.nodes = nodes
    plan = Plan(dsl=dsl, nodes=nodes, specs=specs)
    taken: set[str] = set()
    plan.node_names = {cid: node_name(cid, taken) for cid in dsl.components}
    plan.edges = [Edge(cid, t, "next") for cid, n in nodes.items() for t in n.downstream] + \
        [Edge(cid, FINISH, "next") for cid, n in nodes.items() if not n.downstream]
    return plan


def check_pipeline(plan: Plan, out: Collector) -> None:
    comps = plan.dsl.components
    files = [cid for cid, e in comps.items() if e.component_name == "File"]
    if len(files) != 1:
        out.error("no-file", "an ingestion pipeline starts at exactly one File component "
                  f"({len(files)} found)", files[1] if len(files) > 1 else None)
        return
    for cid, entry in comps.items():
        for t in entry.downstream:
            if t not in comps:
                out.error("dangling-downstream", f"downstream names '{t}', which is not a component", cid, "downstream")
        if len(entry.downstream) > 1:
            out.error("branching-pipeline", f"leads to {len(entry.downstream)} components; a pipeline is one path "
                      "(RAGFlow would feed the second the first one's outputs)", cid, "downstream")
        if entry.parent_id:
            out.error("bad-parent", "pipeline components have no containers", cid, "parent_id")
    order = pipeline_order(plan)
    last = comps[order[-1]].downstream
    if last and last[0] in order:
        out.error("cycle", f"the path from the File comes back to '{last[0]}': a pipeline runs each component once",
                  order[-1], "downstream")
    seen = set(order)
    for cid in comps:
        if cid not in seen and cid in plan.nodes:
            out.warning("unreachable", "no path from the File reaches this component; it never runs", cid)
    for cid, node in plan.nodes.items():
        for field, ref in node.references():
            if ref.kind != "component":
                continue
            if ref.name not in comps:
                out.error("dangling-reference", f"{{{ref.expr}}} names '{ref.name}', which is not a component", cid, field)
            elif ref.name not in order or cid not in order or order.index(ref.name) >= order.index(cid):
                out.error("reference-order", f"{{{ref.expr}}} reads '{ref.name}', which does not run before this "
                          "component", cid, field)
        for code, message, field in node.warnings():
            out.warning(code, message, cid, field)


def pipeline_order(plan: Plan) -> list[str]:
    """The components in the order a file passes them: from the File along each first downstream."""
    comps = plan.dsl.components
    start = next((cid for cid, e in comps.items() if e.component_name == "File"), None)
    order: list[str] = []
    cid = start
    while cid is not None and cid in comps and cid not in order:
        order.append(cid)
        downstream = comps[cid].downstream
        cid = downstream[0] if downstream else None
    return order

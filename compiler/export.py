"""Plan -> Mermaid flowchart or JSON, with every branch drawn and labelled.

The pictures (`canvas2graph.compiler.picture`, SVG and PNG through Graphviz) read the same plan edges."""
from __future__ import annotations

from typing import Any

from canvas2graph.compiler.parallel import concurrency
from canvas2graph.compiler.plan import Plan


def _label(plan: Plan, cid: str) -> str:
    node = plan.nodes.get(cid)
    entry = plan.dsl.components.get(cid)
    name = (entry.display_name if entry else "") or cid
    ctype = node.component_type if node else (entry.component_name if entry else "?")
    limit = concurrency(node) if node is not None else 1
    if limit > 1:           # a parallel Iteration (compiler/parallel.py): its items run this many at once
        ctype = f"{ctype}, max_concurrency {limit}"
    return f"{_text(name)}<br/><small>{_text(ctype)}</small>"


def _text(value: str) -> str:
    """Text inside a quoted Mermaid label: no double quotes, and no line breaks, which end a statement."""
    return " ".join(str(value).replace('"', "#quot;").splitlines())


def to_mermaid(plan: Plan) -> str:
    ids = {cid: f"n{i}" for i, cid in enumerate(plan.dsl.components)}
    lines = ["flowchart TD"]
    for cid, nid in ids.items():
        lines.append(f'    {nid}["{_label(plan, cid)}"]')
    lines.append("    finish([finish])")
    for edge in plan.edges:
        if edge.target not in ids:
            continue
        if edge.label:          # a Switch case, a category, a container's pass, an error goto
            lines.append(f'    {ids[edge.source]} -. "{_text(edge.label)}" .-> {ids[edge.target]}')
        else:
            lines.append(f"    {ids[edge.source]} --> {ids[edge.target]}")
    for cid, node in plan.nodes.items():
        if not plan.specs[cid].routes and not node.downstream and not node.parent_id:
            lines.append(f"    {ids[cid]} --> finish")
    return "\n".join(lines) + "\n"


def to_json(plan: Plan) -> dict[str, Any]:
    return {
        "nodes": [{"id": cid, "node": plan.node_names[cid], "type": node.component_type,
                   "name": node.display_name, "parent_id": node.parent_id,
                   **({"max_concurrency": concurrency(node)} if concurrency(node) > 1 else {})}
                  for cid, node in plan.nodes.items()],
        "edges": [{"source": e.source, "target": e.target, "kind": e.kind, **({"label": e.label} if e.label else {})}
                  for e in plan.edges],
        "entry": "begin",
    }

"""Plan -> a Python module that builds the same LangGraph `StateGraph` explicitly (eject).

`canvas2graph export DSL --format python` writes it. The generator walks the plan the builder walks
(`canvas2graph.compiler.build`): one `canvas.component(...)` per DSL component (its params a Python literal, as
the DSL writes them), one `add_node` per plan node in the builder's order with the builder's options
(a join is `defer=True`, `max_retries` a retry policy, `exception_method` an error handler whose way
is written out), the static edges as `add_edge`, every route as `add_conditional_edges` with its
path map written out, and a `__main__` that runs a turn as `canvas2graph run` does. The library it
calls is `canvas2graph.eject`.
"""
from __future__ import annotations

import keyword
import re
from typing import Any

from canvas2graph.compiler.build import FINISH as FINISH_NODE, STATIC_EDGES, Wiring
from canvas2graph.compiler.parallel import hidden, parallel_iterations
from canvas2graph.compiler.plan import FINISH as TURN_END

WIDTH = 100           # a literal longer than this on one line is written over several lines
INDENT = "    "


def literal(value: Any, indent: str = "") -> str:
    """A JSON value as a Python literal, over several lines (indented after `indent`) when long."""
    flat = repr(value)
    if len(flat) + len(indent) <= WIDTH or not isinstance(value, (dict, list)) or not value:
        return flat
    inner = indent + INDENT
    if isinstance(value, dict):
        items = [f"{inner}{repr(k)}: {literal(v, inner)}," for k, v in value.items()]
        return "{\n" + "\n".join(items) + f"\n{indent}}}"
    items = [f"{inner}{literal(v, inner)}," for v in value]
    return "[\n" + "\n".join(items) + f"\n{indent}]"


def _comment(text: Any) -> str:
    """Text for a comment or the docstring: one line, no backslashes or lone surrogates."""
    text = " ".join(str(text).split()).replace("\\", "/")
    return text.encode("utf-8", "backslashreplace").decode("utf-8").replace("\\", "/")


def _identifier(text: str) -> str:
    name = re.sub(r"\W+", "_", text).strip("_").lower() or "agent"
    return f"_{name}" if name[0].isdigit() or keyword.iskeyword(name) else name


def to_python(compiled, *, source: str | None = None) -> str:
    """The module (its text) for a compiled canvas; `source` names the DSL file it came from.
    The params are the loaded DSL's: `llm_id`s a default model filled are written filled."""
    if getattr(compiled, "kind", "agent") == "pipeline":
        from canvas2graph.types import UsageError
        raise UsageError("ejecting to Python is for agent canvases; an ingestion pipeline exports as mermaid, "
                         "json, dot, svg or png")
    plan = compiled.plan
    wiring = Wiring(plan)
    parallel = parallel_iterations(plan)
    hide = hidden(plan, parallel)             # the bodies of parallel Iterations: they run in item graphs
    out = (_head(plan.dsl, source) + _components(plan) + _nodes(plan, wiring, parallel, hide)
           + _edges(plan, wiring, hide) + _tail())
    text = "\n".join(out) + "\n"
    body = text.split("{imports}", 1)[1]
    used = [n for n in ("END", "FINISH_NODE", "START", "TURN_END") if re.search(rf"\b{n}\b", body)]
    return text.replace("{imports}", ", ".join(used + ["Canvas", "main"]), 1)


def _head(dsl, source: str | None) -> list[str]:
    """The docstring, the imports (`{imports}`, filled in last) and the `Canvas` with the DSL's globals."""
    title = dsl.title
    module = _identifier(title or (source or "agent").rsplit(".", 1)[0])
    what = f"{title}: a" if title else "A"
    origin = f" from {source}" if source else ""
    out = [
        '"""' + _comment(f"{what} RAGFlow agent canvas ejected to Python{origin} by canvas2graph.").replace('"""', "'''"),
        "",
        "This module builds the canvas's LangGraph StateGraph explicitly: edit it like code you wrote",
        "(add a node, move an edge, replace a route). Run one turn as `canvas2graph run` runs the DSL:",
        "",
        f'    python {module}.py --query "Hello" [--format jsonl] [--session ID] [--llm-script replies.json]',
        "",
        "Nodes are named after their component ids (':' becomes '.', which LangGraph reserves), so",
        "checkpoints, LangGraph Studio and RAGFlow's events name them as the compiled DSL does.",
        '"""',
        "from canvas2graph.eject import {imports}",
        "",
    ]
    args = []
    if title:
        args.append(f"{INDENT}title={title!r},")
    args.append(f"{INDENT}globals={literal(dsl.globals, INDENT)},")
    if dsl.variables:
        args.append(f"{INDENT}variables={literal(dsl.variables, INDENT)},")
    return out + ["canvas = Canvas(\n" + "\n".join(args) + "\n)", ""]


def _components(plan) -> list[str]:
    """One `canvas.component(...)` per component the plan runs, its params as the DSL writes them."""
    out = [
        "# --- Components: canvas2graph's component library, params as the DSL writes them --------------",
        "# (references such as {Component:Id@output} and {sys.query} are read when the component runs;",
        "#  `downstream` is the canvas's own wiring, which the graph below starts from)",
    ]
    for cid, entry in plan.dsl.components.items():
        if cid not in plan.nodes:
            continue
        call = [f"{cid!r}", f"{entry.component_name!r}"]
        if entry.display_name:
            call.append(f"name={entry.display_name!r}")
        text = f"canvas.component({', '.join(call)}"
        if entry.parent_id:
            text += f", parent={entry.parent_id!r}"
        if entry.downstream:
            text += f", downstream={entry.downstream!r}"
        text += f", params={literal(entry.params)})"
        if len(text.splitlines()[0]) > WIDTH:          # the params on lines of their own
            text = (f"canvas.component(\n{INDENT}" + f",\n{INDENT}".join(call)
                    + (f",\n{INDENT}parent={entry.parent_id!r}" if entry.parent_id else "")
                    + (f",\n{INDENT}downstream={entry.downstream!r}" if entry.downstream else "")
                    + f",\n{INDENT}params={literal(entry.params, INDENT)},\n)")
        out.append(text)
    return out + [""]


def _nodes(plan, wiring: Wiring, parallel: dict, hide: set) -> list[str]:
    """`add_node` per plan node, in the builder's order and with its options, then the turn's end."""
    out = ["# --- Nodes: one per component, named after its id ---------------------------------------------",
           "builder = canvas.state_graph()"]
    w = out.append
    scope: str | None = None
    for cid, node in plan.nodes.items():
        if cid in hide:
            continue
        if cid in parallel:
            w(f"# {_comment(cid)} (Iteration, max_concurrency {parallel[cid]}): its items run {parallel[cid]} at a time,")
            w("# each through its body compiled into a graph of its own; three nodes: the Iteration, its items, their collection")
            w(f"canvas.parallel_iteration(builder, {cid!r})")
            continue
        parent = node.parent_id if node.parent_id in plan.starts else None
        if parent != scope:
            if parent:
                container = plan.nodes[parent]
                w(f"# inside {_comment(parent)} ({container.component_type}): its body, run once per pass")
            else:
                w("# back on the canvas, outside any Iteration or Loop")
            scope = parent
        if node.role == "container":
            w(f"# {_comment(cid)} ({node.component_type}): enters {_comment(plan.starts.get(cid))}, which starts "
              "each pass of the body and leaves when it is done")
        w(_add_node(cid, node, plan, wiring))
    w("# the end of the turn (records the answer) when a branch may still be running elsewhere")
    w("builder.add_node(FINISH_NODE, canvas.finish(), **canvas.finish_options())")
    return out + [""]


def _add_node(cid: str, node, plan, wiring: Wiring) -> str:
    """The `builder.add_node(...)` line of one component: a join deferred, retries, an error handler."""
    extra = []
    if wiring.joins(cid):
        extra.append("defer=True")          # a join: runs once, after every branch that runs
    if node.params.max_retries > 0:
        extra.append(f"retry_policy=canvas.retry({cid!r})")
    if node.params.exception_method:
        from canvas2graph.nodes.errors import error_targets
        goto = ["FINISH_NODE" if t == FINISH_NODE else repr(t) for t in error_targets(node, plan, wiring.names)]
        extra.append(f"error_handler=canvas.on_error({cid!r}, goto=[{', '.join(goto)}])")
    line = (f"builder.add_node({wiring.names[cid]!r}, canvas.node({cid!r}), "
            f"{', '.join(extra + [f'**canvas.options({cid!r})'])})")
    if wiring.joins(cid):
        line += "   # a join: runs once all branches that run reach it"
    return line


def _edges(plan, wiring: Wiring, hide: set) -> list[str]:
    """The static edges as `add_edge`, every route as `add_conditional_edges` with its path map."""
    names = wiring.names
    out = ["# --- Edges ------------------------------------------------------------------------------------",
           f"builder.add_edge(START, {names['begin']!r})"]
    w = out.append
    routed_done: set[str] = set()
    for e in plan.edges:
        if e.source in hide or e.target in hide:
            continue
        if e.kind in STATIC_EDGES:
            target = _target_name(e.target, wiring)
            comment = {"enter": f"   # {_comment(e.source)} enters its body", "loop": "   # the end of a pass: back to the start",
                       "exit": "   # leaves the loop"}.get(e.kind, "")
            if e.target == TURN_END and wiring.inline:
                comment = "   # the end of the turn: this step records the answer"
            w(f"builder.add_edge({names[e.source]!r}, {target}){comment}")
        elif e.kind == "error":
            w(f"# on error, {_comment(e.source)} goes to {_comment(e.target)} (its error_handler above)")
        elif e.source in wiring.routed and e.source not in routed_done:
            routed_done.add(e.source)
            out += _route(e.source, plan, wiring)
    w("builder.add_edge(FINISH_NODE, END)")
    return out + [""]


def _route(source: str, plan, wiring: Wiring) -> list[str]:
    """The `add_conditional_edges` of a routing node, each target labelled with the routes to it."""
    node = plan.nodes[source]
    how = "passes" if node.role == "start" else "chosen"
    if node.role == "start":
        out = [f"# {_comment(node.parent_id)}: another pass of the body, or its way out when it is done"]
    else:
        out = [f"# {_comment(source)} ({node.component_type}): the components its run chose"]
    out.append(f"builder.add_conditional_edges({wiring.names[source]!r}, canvas.{how}({source!r}), {{")
    labels: dict[str, list[str]] = {}
    for edge in wiring.routed[source]:
        labels.setdefault(edge.target, [])
        if edge.label and edge.label not in labels[edge.target]:
            labels[edge.target].append(edge.label)
    for target, lab in labels.items():
        key = "TURN_END" if target == TURN_END else repr(target)
        comment = f"   # {_comment(' / '.join(lab))}" if lab else ""
        out.append(f"{INDENT}{key}: {_target_name(target, wiring)},{comment}")
    return out + ["})"]


def _tail() -> list[str]:
    """The compiled graph, and a `__main__` that runs a turn as `canvas2graph run` does."""
    return ["graph = canvas.compile(builder)   # no checkpointer: `main` opens the sessions database, as `run` does",
            "",
            'if __name__ == "__main__":',
            f"{INDENT}raise SystemExit(main(canvas, builder))"]


def _target_name(target: str, wiring: Wiring) -> str:
    """The Python expression of a graph node a plan edge leads to."""
    if target == TURN_END:
        return "END" if wiring.inline else "FINISH_NODE"
    if wiring.names.get(target) == FINISH_NODE:
        return "FINISH_NODE"
    return repr(wiring.names[target])

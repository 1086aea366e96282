"""Plan -> a picture of the compiled graph (SVG or PNG), laid out by Graphviz, with no web service.

The drawing reads the same plan edges as the Mermaid and JSON exports (`canvas2graph.compiler.export`), so every
export shows the same graph:
- one box per component: its display name and its type (the LangGraph node name is the box's id,
  the component id its tooltip);
- Iteration and Loop as clusters holding their body, nested as the canvas nests them; the container's
  own node sits in its cluster and enters the start item, which starts a pass or leaves ("done");
- branch labels on every Switch case, Categorize category, container pass and error goto.

Why Graphviz (Debian's `graphviz`, driven through the PyPI `graphviz` package) and not a pure-Python
layout: docs/architecture.md#pictures.
"""
from __future__ import annotations

import html
import os
import shutil
import subprocess
from typing import Any

import graphviz

from canvas2graph.types import UsageError
from canvas2graph.compiler.parallel import concurrency
from canvas2graph.compiler.plan import FINISH, Plan

FORMATS = ("svg", "png")
CONTENT_TYPES = {"svg": "image/svg+xml", "png": "image/png", "dot": "text/vnd.graphviz"}
FINISH_NODE = "__finish__"
DEFAULT_TIMEOUT_S = 30.0        # CANVAS2GRAPH_DRAW_TIMEOUT: a canvas of thousands of nodes lays out in a few s
MAX_TEXT = 80                   # longer names and labels are cut: the picture stays readable

# Fill colours by component family (light, so the black text reads on screen and in print).
_FILL = {
    "Begin": "#d9f2d9", "Message": "#eeeeee", "UserFillUp": "#fde9c9",
    "LLM": "#dbe8fb", "Agent": "#dbe8fb", "Categorize": "#fff2b3", "Switch": "#fff2b3",
    "Iteration": "#e8def8", "Loop": "#e8def8", "IterationItem": "#f3eefc", "LoopItem": "#f3eefc",
    "ExitLoop": "#f3eefc", "Retrieval": "#d6f0f0",
}
_DEFAULT_FILL = "#f7f7f7"

# How each plan edge kind is drawn: (style, colour).
_EDGE_STYLE = {
    "next": ("solid", "#333333"),
    "enter": ("bold", "#6a4fb3"),
    "item": ("dashed", "#6a4fb3"),
    "loop": ("dotted", "#6a4fb3"),
    "exit": ("dashed", "#6a4fb3"),
    "route": ("dashed", "#b08800"),
    "error": ("dashed", "#c62828"),
}


class DrawingError(UsageError):
    """The picture cannot be drawn here: Graphviz is missing, failed or took too long."""


def _text(value: Any) -> str:
    """Text for a Graphviz HTML-like label: one line, cut to MAX_TEXT, markup escaped.

    HTML-like labels (not quoted strings) keep backslashes and quotes in names literal: in a
    quoted DOT label `\\n` or `\\l` would be read as layout escapes."""
    text = " ".join(str(value).split())
    if len(text) > MAX_TEXT:
        text = text[:MAX_TEXT - 1] + "…"
    return html.escape(text, quote=True)


def _node_label(name: str, ctype: str) -> str:
    return f'<<B>{_text(name)}</B><BR/><FONT POINT-SIZE="10" COLOR="#555555">{_text(ctype)}</FONT>>'


def _children(plan: Plan) -> dict[str | None, list[str]]:
    """Components by the container they sit in (None: the canvas itself)."""
    containers = {cid for cid, node in plan.nodes.items() if node.role == "container"}
    out: dict[str | None, list[str]] = {}
    for cid, node in plan.nodes.items():
        parent = node.parent_id if node.parent_id in containers else None
        out.setdefault(parent, []).append(cid)
    return out


def to_dot(plan: Plan, *, title: str | None = None) -> str:
    """The plan as Graphviz DOT source (what `dot` lays out for the SVG and PNG pictures)."""
    graph = graphviz.Digraph("canvas", graph_attr={
        "rankdir": "TB", "fontname": "Helvetica", "fontsize": "12", "nodesep": "0.35", "ranksep": "0.45",
        "labelloc": "t", **({"label": f"<<B>{_text(title)}</B>>"} if title else {}),
    }, node_attr={"shape": "box", "style": "rounded,filled", "fontname": "Helvetica", "fontsize": "12",
                  "margin": "0.15,0.06", "color": "#777777"},
        edge_attr={"fontname": "Helvetica", "fontsize": "10", "arrowsize": "0.7"})
    names = plan.node_names
    children = _children(plan)

    def add_component(g: graphviz.Digraph, cid: str) -> None:
        node = plan.nodes[cid]
        name = node.display_name or cid
        g.node(names[cid], _node_label(name, node.component_type), tooltip=cid,
               fillcolor=_FILL.get(node.component_type, _DEFAULT_FILL),
               **({"shape": "box3d"} if node.role == "container" else {}))

    def add_members(g: graphviz.Digraph, parent: str | None) -> None:
        for cid in children.get(parent, []):
            if plan.nodes[cid].role == "container":
                node = plan.nodes[cid]
                # "cluster" is how Graphviz knows a subgraph is drawn as a box around its members
                with g.subgraph(name=f"cluster_{names[cid]}") as box:
                    kind = node.component_type + (f", max_concurrency {concurrency(node)}" if concurrency(node) > 1 else "")
                    box.attr(label=f"<{_text(node.display_name or cid)} <I>({_text(kind)})</I>>",
                             style="rounded,dashed", color="#6a4fb3", bgcolor="#faf8fe", fontcolor="#4a3591",
                             id=f"cluster:{names[cid]}", labeljust="l")
                    add_component(box, cid)
                    add_members(box, cid)
            else:
                add_component(g, cid)

    add_members(graph, None)
    if any(e.target == FINISH for e in plan.edges):
        graph.node(FINISH_NODE, "<<I>finish</I>>", shape="oval", style="filled", fillcolor="#ffffff",
                   tooltip="the end of the turn")
    for edge in plan.edges:
        target = FINISH_NODE if edge.target == FINISH else names.get(edge.target)
        if target is None or edge.source not in names:
            continue
        style, colour = _EDGE_STYLE.get(edge.kind, _EDGE_STYLE["next"])
        attrs = {"style": style, "color": colour}
        if edge.label:
            attrs.update(label=f"<{_text(edge.label)}>", fontcolor=colour)
        if edge.kind == "loop":
            attrs["constraint"] = "false"      # a body's way back up must not stretch the ranks
        graph.edge(names[edge.source], target, **attrs)
    return graph.source


def dot_binary() -> str | None:
    """The `dot` executable, or None when Graphviz is not installed."""
    return shutil.which("dot")


def draw_timeout() -> float:
    raw = os.environ.get("CANVAS2GRAPH_DRAW_TIMEOUT", "")
    try:
        return float(raw) if raw else DEFAULT_TIMEOUT_S
    except ValueError:
        return DEFAULT_TIMEOUT_S


def render(plan: Plan, fmt: str, *, title: str | None = None) -> bytes:
    """The picture of a plan as SVG or PNG bytes, laid out by Graphviz's `dot`.

    `dot` runs as a child process with a time limit (`CANVAS2GRAPH_DRAW_TIMEOUT`, 30 s): the
    `graphviz` package's own `pipe()` has none, and a server must not wait forever on a huge canvas."""
    if fmt not in FORMATS:
        raise DrawingError(f"cannot draw '{fmt}': choose one of {', '.join(FORMATS)}")
    dot = dot_binary()
    if dot is None:
        raise DrawingError("drawing SVG or PNG needs Graphviz's `dot` program: install Graphviz "
                           "(Debian/Ubuntu: apt-get install graphviz; macOS: brew install graphviz)")
    timeout = draw_timeout()
    try:
        done = subprocess.run([dot, f"-T{fmt}"], input=to_dot(plan, title=title).encode("utf-8"),
                              capture_output=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise DrawingError(f"Graphviz took longer than {timeout:g} s to lay out the graph "
                           "(CANVAS2GRAPH_DRAW_TIMEOUT sets the limit)") from None
    except OSError as e:
        raise DrawingError(f"Graphviz's `dot` could not run: {e.strerror or e}") from None
    if done.returncode != 0 or not done.stdout:
        reason = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise DrawingError(f"Graphviz's `dot` failed: {reason[-1] if reason else f'exit status {done.returncode}'}")
    return done.stdout

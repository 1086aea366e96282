"""Build-and-fix: one component's input form, and running that component alone (RAGFlow's debug).

RAGFlow's editor asks a component for its *input form* (what it reads) and runs it with values the
user types, without the rest of the canvas. Here the component is planned from the agent's DSL
(its own params must be valid; the rest of the canvas may still be under construction), put alone
in a one-node LangGraph graph, and run on a state built from the given values:

- a reference (`sys.query`, `Component:Id@key.path`, `env.x`) gets the value in the state, so every
  template that reads it sees it;
- a Begin or UserFillUp field is a request input, or the answer to the form the component asks for;
- a tool argument (`query`, `sql`, ...) or a CodeExec argument is passed to the tool call;
- a param whose value is a reference (Categorize's `query`) sets that reference.

An LLM or Agent that would stream into a Message runs its generation to the end, so the reply holds
its text, as RAGFlow drains its partials. A failure is the component's `_ERROR` output, as in RAGFlow.
"""
from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from functools import partial
from typing import Any, Mapping

from canvas2graph.types import CompileError, ComponentError, Diagnostic, RunContext
from canvas2graph.compiler.dsl.refs import Ref, looks_like_ref, parse_ref
from canvas2graph.runtime.graph.state import GLOBALS, HISTORY, LAST, OUTPUTS, REFERENCE, REQUEST, build_state_schema
from canvas2graph.runtime.graph.values import is_pending

FORM_COMPONENTS = {"Begin", "UserFillUp"}
LABELS = {"query": "Query", "sql": "SQL", "urls": "URLs", "q": "Query"}


class DebugError(Exception):
    """The component cannot be debugged as asked; `diagnostics` say why when its DSL is the reason."""

    def __init__(self, message: str, diagnostics: list[Diagnostic] | None = None):
        super().__init__(message)
        self.diagnostics = diagnostics or []


@dataclass
class PlannedCanvas:
    """A canvas planned without the graph-level checks (`plan` is what run services are chosen from)."""
    plan: Any
    diagnostics: list[Diagnostic]


def plan_canvas(dsl: Any) -> PlannedCanvas:
    """Plan every component whose own params are valid; graph-level problems (a dangling branch, an
    unreachable component) do not stop one component from being debugged."""
    from canvas2graph.compiler.dsl.diagnostics import Collector
    from canvas2graph.compiler.dsl.load import load_dsl
    from canvas2graph.compiler.plan import make_plan
    try:
        loaded = load_dsl(dsl)
    except CompileError as e:
        raise DebugError("the agent's DSL cannot be read", e.diagnostics)
    out = Collector()
    plan = make_plan(loaded, out)
    return PlannedCanvas(plan, out.items)


def component(canvas: PlannedCanvas, component_id: str):
    """The planned node of `component_id`; DebugError naming the reason when there is none."""
    plan = canvas.plan
    node = plan.nodes.get(component_id)
    if node is not None:
        return node
    if component_id not in plan.dsl.components:
        raise DebugError(f"the agent has no component {component_id!r}")
    own = [d for d in canvas.diagnostics if d.component_id == component_id]
    first = f": {own[0].message}" if own else ""
    raise DebugError(f"component {component_id} cannot run as configured{first}", own)


# --- input forms -------------------------------------------------------------------------------
def _label(name: str) -> str:
    return LABELS.get(name, name.replace("_", " ").capitalize())


def _ref_label(ref: Ref, canvas: PlannedCanvas) -> str:
    if ref.kind != "component":
        return ref.expr
    entry = canvas.plan.dsl.components.get(ref.name)
    return f"{entry.display_name if entry else ''}@{ref.expr.split('@', 1)[1]}"


def _tool_args(node) -> list[str]:
    """A tool's arguments its node reads from the canvas (a reference or a template), as RAGFlow's forms."""
    if node.component_type == "CodeExec":
        return list(node.params.arguments)
    return [name for name, (kind, _) in node.arg_sources.items() if kind in ("ref", "template")]


def input_form(canvas: PlannedCanvas, component_id: str) -> dict[str, dict]:
    """What the component reads, as RAGFlow's `get_input_form()`: `{key: {type, name, ...}}`."""
    from canvas2graph.nodes.tool import Tool
    node = component(canvas, component_id)
    if node.component_type in FORM_COMPONENTS:
        return {key: dict(field) for key, field in node.params.form().items()}
    if node.component_type == "CodeExec":          # its arguments, named as they are
        return {name: {"type": "line", "name": name} for name in _tool_args(node)}
    if isinstance(node, Tool):
        return {name: {"type": "line", "name": _label(name)} for name in _tool_args(node)}
    if node.component_type == "Categorize":
        return {"query": {"type": "line", "name": "Query"}}
    form: dict[str, dict] = {}
    for _, ref in node.references():
        if ref.expr not in form:
            form[ref.expr] = {"type": "line", "name": _ref_label(ref, canvas)}
    return form


# --- running one component ----------------------------------------------------------------------
def _value(key: str, given: Any) -> Any:
    """RAGFlow's debug params are `{key: {"value": ...}}`."""
    if not isinstance(given, Mapping) or "value" not in given:
        raise DebugError(f"`params.{key}` must be an object with a `value`, e.g. {{\"value\": \"...\"}}")
    return given["value"]


def _set_path(target: dict, keys: list[str], value: Any) -> None:
    for key in keys[:-1]:
        nested = target.get(key)
        if not isinstance(nested, dict):
            nested = target[key] = {}
        target = nested
    target[keys[-1]] = value


def _place(state: dict, ref: Ref, value: Any) -> None:
    if ref.kind == "global":
        state[GLOBALS][ref.name] = value
    else:
        _set_path(state[OUTPUTS].setdefault(ref.name, {}), [ref.key, *ref.path], value)


def debug_state(canvas: PlannedCanvas, node, params: Mapping[str, Any]) -> tuple[dict, dict, dict]:
    """(graph state, form values, tool arguments) from RAGFlow's debug `params`."""
    from canvas2graph.nodes.tool import Tool
    globals_ = dict(canvas.plan.dsl.initial_globals())
    state: dict[str, Any] = {OUTPUTS: {}, GLOBALS: globals_, HISTORY: [], LAST: {}, REFERENCE: None}
    form_keys = set(node.params.form()) if node.component_type in FORM_COMPONENTS else set()
    tool_keys = set(_tool_args(node)) | set(getattr(node, "args", {})) if isinstance(node, Tool) else set()
    form_values: dict[str, Any] = {}
    tool_args: dict[str, Any] = {}
    for key, given in params.items():
        value = _value(key, given)
        param = getattr(node.params, key, None) if key not in ("inputs", "outputs") else None
        if key in form_keys:
            form_values[key] = value
        elif key in tool_keys:
            tool_args[key] = value
        elif looks_like_ref(key):
            _place(state, parse_ref(key), value)
        elif isinstance(param, str) and looks_like_ref(param):
            _place(state, parse_ref(param), value)       # e.g. Categorize's `query`: "sys.query"
        else:
            known = ", ".join(sorted(input_form(canvas, node.id))) or "none"
            raise DebugError(f"`params.{key}` is not an input of component {node.id} (its inputs: {known})")
    query = globals_.get("sys.query", "")
    state[REQUEST] = {"query": query if isinstance(query, str) else json.dumps(query, ensure_ascii=False),
                      "inputs": dict(form_values), "open": True}
    return state, form_values, tool_args


async def _drain(node, pending: dict, ctx: RunContext, state: Mapping[str, Any]) -> str:
    """A pending generation run to its end: the text the component would record (no reasoning)."""
    producer = node.canvas.nodes.get(pending.get("component_id")) or node
    sink: dict[str, Any] = {}
    answer: list[str] = []
    thinking = False
    async for piece in producer.stream_pending(pending, ctx, sink, state):
        if piece in ("<think>", "</think>"):
            thinking = piece == "<think>"
        elif not thinking:
            answer.append(piece)
    return sink.get("answer", "".join(answer))


def _failed(node, error: ComponentError) -> dict:
    outputs = dict(error.outputs)
    default = node.params.exception_default_value
    if node.params.exception_method == "comment" and default:     # RAGFlow's exception default value
        from canvas2graph.nodes.errors import CONTENT_DEFAULT
        outputs.pop("_ERROR", None)
        outputs["content" if node.component_type in CONTENT_DEFAULT else "result"] = default
    return outputs


async def debug_component(canvas: PlannedCanvas, component_id: str, params: Mapping[str, Any], *,
                          models, script=None, services: dict[str, Any] | None = None) -> dict[str, Any]:
    """Run one component with the given inputs and return its outputs (RAGFlow's debug reply)."""
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import Command

    from canvas2graph.compiler.build import component_timeout
    from canvas2graph.nodes.begin import resume_value
    from canvas2graph.nodes.tool import Tool

    node = component(canvas, component_id)
    if not isinstance(params, Mapping):
        raise DebugError("`params` must be an object of {key: {\"value\": ...}}")
    state, form_values, tool_args = debug_state(canvas, node, params)
    ctx = RunContext(models=models, script=script, session_id=f"debug-{uuid.uuid4().hex}", services=dict(services or {}))

    async def run_tool(graph_state, runtime):
        """A tool with the given arguments over what its DSL says (RAGFlow passes them to invoke())."""
        args = {**node.node_args(graph_state), **tool_args}
        outputs, reference, _ = await node.call(args, runtime.context, retry=False, state=graph_state)
        update: dict[str, Any] = {OUTPUTS: {node.id: outputs}, LAST: {"component_id": node.id, "inputs": args}}
        if reference["chunks"] or reference["doc_aggs"]:
            update[REFERENCE] = reference
        return update

    step = run_tool if isinstance(node, Tool) and tool_args else partial(type(node).__call__, node,
                                                                         timeout=component_timeout())
    builder = StateGraph(build_state_schema("DebugState"), context_schema=RunContext)
    builder.add_node("component", step)
    builder.add_edge(START, "component")
    builder.add_edge("component", END)
    graph = builder.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": ctx.session_id}}
    try:
        await graph.ainvoke(state, config, context=ctx)
        snapshot = await graph.aget_state(config)
        if any(task.interrupts for task in snapshot.tasks):      # Begin or UserFillUp asks for its form
            await graph.ainvoke(Command(resume=resume_value(form_values)), config, context=ctx)
            snapshot = await graph.aget_state(config)
    except ComponentError as e:
        if e.component_id != node.id:
            raise DebugError(f"{e.component_id}: {e.message}")
        return _failed(node, e)
    values = snapshot.values
    outputs = dict((values.get(OUTPUTS) or {}).get(node.id) or {})
    for key, value in list(outputs.items()):
        if is_pending(value):
            try:
                outputs[key] = await _drain(node, value, ctx, values)
            except Exception as e:      # noqa: BLE001 - the generation's failure is the component's
                outputs[key], outputs["_ERROR"] = None, str(e) or type(e).__name__
    return outputs

"""What an ejected canvas calls: the component library, node by node, and `main` to run a turn.

`canvas2graph export DSL --format python` writes a module that builds the canvas's LangGraph
`StateGraph` explicitly (see docs/langgraph.md#eject):

    canvas = Canvas(title="Support desk")
    canvas.component("begin", "Begin", params={...})
    canvas.component("LLM:Answer", "LLM", name="Answer", params={...}, downstream=["Message:Reply"])
    ...
    builder = canvas.state_graph()
    builder.add_node("begin", canvas.node("begin"), **canvas.options("begin"))
    builder.add_edge(START, "begin")
    builder.add_conditional_edges("Switch.Which", canvas.chosen("Switch:Which"), {...})
    ...
    if __name__ == "__main__":
        raise SystemExit(main(canvas, builder))

The components are what the DSL declares (their params as the DSL writes them, references such
as `{LLM:Answer@content}` included); they compile exactly as the DSL does (`compiler`), into the
nodes `canvas2graph.compiler.build` makes. The wiring (nodes, edges, routes, the error handlers' ways) is the
module's own: a node added or an edge moved there is what runs. Node names are the graph node names
the compiled DSL has (component ids with ':' as '.'), so checkpoints, Studio and RAGFlow's events keep them.
"""
from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path
from typing import Any, Callable

from langgraph.graph import END, START, StateGraph

from canvas2graph.types import UsageError
from canvas2graph.compiler.build import FINISH as FINISH_NODE, Wiring
from canvas2graph.compiler.canvas import CompiledCanvas, compile_dsl
from canvas2graph.compiler.plan import FINISH as TURN_END

__all__ = ["Canvas", "main", "START", "END", "FINISH_NODE", "TURN_END"]


class EjectError(UsageError):
    """An ejected module uses the library in a way it cannot honour (named in the message)."""


class Canvas:
    """The components of an ejected canvas, and the pieces of its graph built from them."""

    def __init__(self, *, title: str = "", globals: dict[str, Any] | None = None,
                 variables: dict[str, Any] | None = None):
        self.title = title
        self.globals = dict(globals or {})
        self.variables = dict(variables or {})
        self.components: dict[str, dict[str, Any]] = {}
        self.names: dict[str, str] = {}
        self.default_llm: str | None = None
        self._compiled: CompiledCanvas | None = None
        self._wiring: Wiring | None = None
        if sys._getframe(1).f_globals.get("__name__") == "__main__":
            _plain_errors()         # a script run as `python agent.py`: its canvas's errors are messages

    # --- the components ---------------------------------------------------------------------
    def component(self, cid: str, component_name: str, *, name: str = "", params: dict[str, Any] | None = None,
                  downstream: list[str] | None = None, parent: str | None = None) -> str:
        """Declare a component as the DSL does: its type (`component_name`), params, the components
        it leads to on the canvas (`downstream`) and the Iteration or Loop it sits in (`parent`)."""
        if self._compiled is not None:
            raise EjectError(f"component {cid!r} is declared after the graph was built from the canvas: "
                             "declare every component before canvas.state_graph()")
        entry: dict[str, Any] = {"obj": {"component_name": component_name, "params": dict(params or {})},
                                 "downstream": list(downstream or [])}
        if parent:
            entry["parent_id"] = parent
        self.components[cid] = entry
        if name:
            self.names[cid] = name
        return cid

    def dsl(self) -> dict[str, Any]:
        """The canvas as a RAGFlow DSL (in the envelope that carries its title)."""
        dsl = {"components": self.components, "globals": self.globals, "variables": self.variables,
               "graph": {"nodes": [{"id": cid, "data": {"name": name}} for cid, name in self.names.items()]}}
        return {"title": self.title, "dsl": dsl} if self.title else dsl

    @property
    def compiled(self) -> CompiledCanvas:
        """The components compiled as the DSL would be (`CompileError` names every problem)."""
        if self._compiled is None:
            self._compiled = compile_dsl(self.dsl(), default_llm=self.effective_default_llm())
        return self._compiled

    def effective_default_llm(self) -> str | None:
        """The model of LLM, Agent and Categorize components whose llm_id is empty: `default_llm`,
        else $CANVAS2GRAPH_DEFAULT_LLM (as `canvas2graph run` reads it)."""
        return self.default_llm or (os.environ.get("CANVAS2GRAPH_DEFAULT_LLM") or "").strip() or None

    @property
    def wiring(self) -> Wiring:
        """How each node runs and routes, derived from the compiled components (`canvas2graph.compiler.build`)."""
        if self._wiring is None:
            self._wiring = Wiring(self.compiled.plan)
        return self._wiring

    def _known(self, cid: str) -> None:
        if cid not in self.wiring.plan.nodes:
            raise EjectError(f"no component {cid!r} is declared: canvas.component({cid!r}, ...) first")

    # --- the graph --------------------------------------------------------------------------
    def state_graph(self) -> StateGraph:
        """An empty `StateGraph` with canvas2graph's state, input, output and context: add the nodes."""
        from canvas2graph.types import RunContext
        from canvas2graph.runtime.graph.state import CanvasInput, CanvasOutput, build_state_schema
        builder = StateGraph(build_state_schema(), context_schema=RunContext, input_schema=CanvasInput,
                             output_schema=CanvasOutput)
        self.runnable(builder)          # so the events and the Runner know the canvas behind it
        return builder

    def runnable(self, builder: StateGraph) -> CompiledCanvas:
        """The compiled canvas that runs `builder` (this module's wiring) instead of the derived graph."""
        canvas = dataclasses.replace(self.compiled, _graphs={}, wired=builder)
        canvas.builder()                # registers the builder with its canvas (`compiler.canvas_of`)
        return canvas

    def node(self, cid: str):
        """The component's step: the node `canvas2graph.compiler.build` makes of it, which returns its update
        (a routing component's route is read by its conditional edge: `chosen`, `passes`)."""
        self._known(cid)
        return self.wiring.step(cid, goto=False)

    def parallel_iteration(self, builder: StateGraph, cid: str) -> None:
        """An Iteration whose items run at once (`max_concurrency` above 1) as the nodes `canvas2graph.compiler.build` makes
        of it: its own step, which sends the first items; the items node, which runs one item's body (the
        IterationItem and the components inside, compiled into a graph of their own) per `Send`; and the
        collect node, which sends the next items or leaves with the outputs in the items' order."""
        from canvas2graph.compiler.parallel import add_parallel_iteration, concurrency
        self._known(cid)
        node = self.wiring.plan.nodes[cid]
        if concurrency(node) < 2 or cid not in self.wiring.plan.starts:
            raise EjectError(f"{cid} is not an Iteration whose items run at once (max_concurrency above 1)")
        add_parallel_iteration(builder, self.wiring, cid, concurrency(node))

    def options(self, cid: str) -> dict[str, Any]:
        """`add_node` options every component node has: what it reads of the state, and its metadata."""
        self._known(cid)
        return {"input_schema": self.wiring.input_schema(cid), "metadata": self.wiring.metadata(cid)}

    def retry(self, cid: str):
        """The component's RetryPolicy (`max_retries`, `delay_after_error`), or None."""
        from canvas2graph.nodes.errors import retry_policy_for
        self._known(cid)
        return retry_policy_for(self.wiring.plan.nodes[cid])

    def on_error(self, cid: str, goto: list[str]):
        """The component's error handler (`exception_method`): records the failure as RAGFlow does,
        then goes to the graph nodes `goto` (FINISH_NODE: the end of the turn)."""
        self._known(cid)
        handler = self.wiring.error_handler(cid, list(goto))
        if handler is None:
            raise EjectError(f"{cid!r} has no exception_method: it has no error handler")
        return handler

    def chosen(self, cid: str) -> Callable[[dict], list[str]]:
        """A Switch's or Categorize's route: the component ids its run chose (its `_next` output)."""
        return self._router(cid, "route")

    def passes(self, cid: str) -> Callable[[dict], list[str]]:
        """An Iteration's or Loop's start item: the body's first components for another pass, or
        the container's exits when it is done (TURN_END: the end of the turn)."""
        return self._router(cid, "pass")

    def _router(self, cid: str, kind: str) -> Callable[[dict], list[str]]:
        self._known(cid)
        route = self.wiring.router(cid)
        role = self.wiring.plan.nodes[cid].role
        if route is None or (role == "start") != (kind == "pass"):
            raise EjectError(f"{cid!r} does not route that way: use canvas.{'passes' if role == 'start' else 'chosen'}")

        def routes(state: dict) -> list[str]:
            return list(route(state, state))        # the state holds the step's own writes by now
        routes.__name__ = f"route_{self.wiring.names[cid]}"
        return routes

    def finish(self):
        """The node that ends the turn (the answer, the conversation's history) when several branches may."""
        return self.wiring.finish_node()

    def finish_options(self) -> dict[str, Any]:
        return {"input_schema": self.wiring.view, "defer": True}

    def compile(self, builder: StateGraph, checkpointer=None):
        """`builder.compile(checkpointer=...)`, the graph known as this canvas's (for `ragflow_events`)."""
        return self.runnable(builder).graph(checkpointer)


def _plain_errors() -> None:
    """Errors the module meets while it builds its graph (a component's bad params, say) are printed as
    `canvas2graph run` prints them, one line each, not as a traceback; other errors are left alone."""
    previous = sys.excepthook
    if getattr(previous, "canvas2graph", False):
        return
    script = Path(sys.argv[0]).name

    def hook(kind, value, traceback) -> None:
        from canvas2graph.types import CompileError
        if isinstance(value, CompileError):
            for d in value.diagnostics:
                print(f"{script}: {d}", file=sys.stderr)
        elif isinstance(value, UsageError):
            print(f"canvas2graph: {value}", file=sys.stderr)
        else:
            previous(kind, value, traceback)
    hook.canvas2graph = True        # type: ignore[attr-defined]
    sys.excepthook = hook


def main(canvas: Canvas, builder: StateGraph, argv: list[str] | None = None) -> int:
    """Run one turn of the module's graph as `canvas2graph run DSL` runs the DSL: the same options
    (--query, --inputs, --session, --db, --llm-script, --format jsonl, ...), events and exit status."""
    import argparse

    from canvas2graph import cli
    from canvas2graph.cli.parser import add_run_options

    cli.printable_streams()
    script = Path(sys.argv[0]).name or "agent.py"
    parser = argparse.ArgumentParser(prog=f"python {script}",
                                     description=f"Run one turn of {canvas.title or 'this agent'} and print "
                                                 "RAGFlow's events, as `canvas2graph run` does.")
    add_run_options(parser)
    args = parser.parse_args(argv)
    args.file, args.func, args.ejected = script, "canvas2graph.eject:_run", (canvas, builder)
    try:
        return cli.dispatch(args)
    except BrokenPipeError:
        return cli.quiet_broken_pipe()


def _run(args) -> int:
    from canvas2graph.cli.run import run_compiled
    canvas, builder = args.ejected
    if args.default_llm and args.default_llm != canvas.effective_default_llm():
        # the module built its graph when it was loaded, with every llm_id set (or it would not have built)
        raise EjectError("--default-llm cannot change the models of a built graph: give it when ejecting "
                         "(canvas2graph export DSL --format python --default-llm ...), which writes it into "
                         "the params, or set CANVAS2GRAPH_DEFAULT_LLM")
    return run_compiled(canvas.runnable(builder), args)

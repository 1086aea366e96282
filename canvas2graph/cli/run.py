"""`run` and `trace`: one turn of a DSL with RAGFlow's events, and a session's step trace."""
from __future__ import annotations

import asyncio
import json
import os
import signal
import uuid
from pathlib import Path
from typing import Any

from canvas2graph.cli.compile import agent_name, read_json_file, read_source
from canvas2graph.cli.parser import default_llm_of
from canvas2graph.types import UsageError


# --- run -------------------------------------------------------------------------------------
def cmd_run(args) -> int:
    from canvas2graph.compiler.canvas import compile_dsl
    compiled = compile_dsl(read_source(args.file), default_llm=default_llm_of(args))
    return run_compiled(compiled, args)


def run_compiled(compiled, args) -> int:
    """One turn of a compiled canvas, as `run`'s options (`add_run_options`) ask; an ejected canvas's
    `__main__` runs here too (`canvas2graph.eject.main`)."""
    from canvas2graph.cli.printers import JsonlPrinter, PrettyPrinter

    inputs = read_json_file(args.inputs, "inputs file") if args.inputs else None
    if inputs is not None and not isinstance(inputs, dict):
        raise UsageError(f"inputs file {args.inputs} must hold a JSON object of field: value")
    files, inputs = upload_files(args.upload or [], inputs)
    environment = run_environment(args)
    session = args.session or str(uuid.uuid4())
    printer = JsonlPrinter() if args.format == "jsonl" else PrettyPrinter(session, show_thinking=args.show_thinking)
    from canvas2graph.runtime.services.observability import flush, reachable_tracers
    with reachable_tracers():
        try:
            return asyncio.run(_run(compiled, environment, session, args, inputs, printer, files))
        finally:
            flush()         # the process ends next: send what the tracers hold (nothing when tracing is off)


def upload_files(specs: list[str], inputs: dict | None) -> tuple[list | None, dict | None]:
    """`--file PATH` and `--file FIELD=PATH`: each file goes into the local file store (canvas2graph.runtime.services.files);
    plain ones become the request's files (sys.files), named ones a Begin file field's value."""
    if not specs:
        return None, inputs
    from canvas2graph.runtime.services.files import FileStoreError, default_store
    store = default_store()
    files: list = []
    fields: dict[str, list] = {}
    for spec in specs:
        field, sep, path = spec.partition("=")
        if not sep or os.path.exists(spec):
            field, path = "", spec
        try:
            entry = store.put(os.path.basename(path), Path(path).read_bytes())
        except OSError as e:
            raise UsageError(f"cannot read {path}: {e.strerror}")
        except FileStoreError as e:
            raise UsageError(str(e))
        if field:
            fields.setdefault(field, []).append(entry)
        else:
            files.append(entry)
    if fields:
        inputs = dict(inputs or {})
        for field, entries in fields.items():
            inputs[field] = {"type": "file", "value": entries}
    return files or None, inputs


def run_environment(args):
    """The run's models and services from the options (each defaulting to its environment variable);
    CodeExec runs code on this machine unless the environment says otherwise: the user's own canvas."""
    from canvas2graph.runtime.services.environment import RunEnvironment, RunSettings
    from canvas2graph.runtime.services.mcp import MCPConfigError
    try:
        return RunEnvironment(RunSettings(llm_script=args.llm_script, models_config=args.models,
                                          mcp_config=args.mcp_config, retrieval=args.retrieval, db=args.db,
                                          code={"unsafe_local": True} if args.unsafe_local_code else {}))
    except MCPConfigError as e:
        raise UsageError(str(e))


async def _run(compiled, environment, session, args, inputs, printer, files=None) -> int:
    from canvas2graph.runtime.run.checkpoint import open_checkpointer
    from canvas2graph.runtime.run.runner import Runner, TurnFailed, TurnRequest
    from canvas2graph.runtime.services.memory import MEMORY_SERVICE, saves_memory

    async with open_checkpointer(args.db) as saver, _memories(compiled, args.db) as memory:
        context = environment.context(session, compiled.plan.dsl.components)
        services = context.services if memory is None else {**context.services, MEMORY_SERVICE: memory}
        runner = Runner(compiled, saver, context.models, context.script, services=services,
                        name=agent_name(compiled, args.file))
        runner.preflight()
        # a new session's first turn: with no query, its first model call would be empty (a continued
        # session keeps its last query, or resumes a paused or interrupted turn, as RAGFlow's do)
        if not args.query and inputs is None and _converses(compiled) \
                and await saver.aget_tuple({"configurable": {"thread_id": session}}) is None:
            raise UsageError(f"{args.file} is a conversational agent: give the user's message with --query \"...\" "
                             "(or answer a paused form with --session ID --inputs FILE)")
        request = TurnRequest(query=args.query or "", inputs=inputs, files=files)
        interrupted = await runner.interrupted(session)
        if interrupted is not None:
            asked = f" ({interrupted['query']!r})" if interrupted.get("query") else ""
            printer.note(f"session {session}: its last turn{asked} was interrupted; finishing it first"
                         + (", then answering this one" if request.carries_message() else ""))
        interrupts = _on_ctrl_c(runner, printer)
        try:
            async for event in runner.run_turn(session, request):
                printer.event(event)
        except TurnFailed:          # closed by the Runner; the outcome says why
            pass
        except asyncio.CancelledError:
            printer.note("stopped at once; the session resumes from its last checkpoint")
            return 130
        finally:
            interrupts.close()
            await environment.aclose()
        printer.done(runner.outcome)
        if memory is not None and saves_memory(compiled.plan.dsl.components):
            # the answer is out: now the typed memories of what the Messages saved (runtime/services/memory)
            from canvas2graph.runtime.services.memory.extraction import extract_pending
            await extract_pending(memory, context.models, tenant="")
        return {"finished": 0, "paused": 0, "cancelled": 130}.get(runner.outcome.status, 1)


def _memories(compiled, db: str):
    """LangGraph's memory store beside the sessions database, for a canvas that names memories (issue 35)."""
    import contextlib
    from canvas2graph.runtime.services.memory import memory_ids_of
    from canvas2graph.runtime.services.memory.stores import open_memory_store
    if not memory_ids_of(compiled.plan.dsl.components):
        return contextlib.nullcontext()
    return open_memory_store(db)


MODEL_TYPES = ("LLM", "Agent", "Categorize")


def _converses(compiled) -> bool:
    """A conversational agent (Begin's mode, no Begin form) that reads the user's message: a model gets
    it, or a component refers to {sys.query}. Without one, its first model call would be empty."""
    nodes = compiled.plan.nodes
    params = getattr(nodes.get("begin"), "params", None)
    if getattr(params, "mode", "") != "conversational" or getattr(params, "inputs", None):
        return False
    return any(node.component_type in MODEL_TYPES or any(ref.name == "sys.query" for _, ref in node.references())
               for node in nodes.values())


class _on_ctrl_c:
    """First Ctrl-C: cancel the turn at the next node boundary. Second: stop at once."""

    def __init__(self, runner, printer):
        self.runner, self.printer, self.count = runner, printer, 0
        self.task = asyncio.current_task()
        self.loop = asyncio.get_running_loop()
        try:
            self.loop.add_signal_handler(signal.SIGINT, self._pressed)
        except (NotImplementedError, RuntimeError):
            self.loop = None

    def _pressed(self) -> None:
        self.count += 1
        if self.count == 1:
            self.printer.note("cancelling after the running step (Ctrl-C again to stop at once)")
            self.runner.cancel(at_once=False)
        else:
            self.task.cancel()

    def close(self) -> None:
        if self.loop is not None:
            self.loop.remove_signal_handler(signal.SIGINT)


# --- trace -----------------------------------------------------------------------------------
def cmd_trace(args) -> int:
    return asyncio.run(_trace(args))


async def _trace(args) -> int:
    """A session's step trace as JSON: its DSL from --dsl, else the one `serve` stored with the session."""
    from canvas2graph.runtime.run.steps import ForkError
    config: dict[str, Any] = {"configurable": {"thread_id": args.session}}
    if args.checkpoint:
        config["configurable"]["checkpoint_id"] = args.checkpoint
    try:
        if args.dsl:
            from canvas2graph.runtime.run.checkpoint import open_checkpointer
            source = read_source(args.dsl)
            async with open_checkpointer(args.db) as saver:
                turns = await _trace_turns(source, saver, config, args)
        else:
            from canvas2graph.server.backend.store import open_store
            async with open_store(args.db) as store:
                source = await store.session_dsl(args.session)
                if source is None:
                    raise UsageError(f"{args.db} stores no DSL for session {args.session} (sessions of "
                                     "`canvas2graph run` keep none): give it with --dsl FILE")
                turns = await _trace_turns(source, store.checkpointer, config, args)
    except ForkError as e:
        raise UsageError(str(e))
    if not turns:
        raise UsageError(f"session {args.session} has no steps in {args.db}")
    print(json.dumps({"session_id": args.session, "turns": turns}, ensure_ascii=False, indent=2, default=str))
    return 0


async def _trace_turns(source: Any, saver, config: dict, args) -> list[dict]:
    from canvas2graph.compiler.canvas import compile_dsl
    from canvas2graph.runtime.run.steps import atrace
    graph = compile_dsl(source, default_llm=args.default_llm).graph(saver)
    return await atrace(graph, config)

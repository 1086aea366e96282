"""The `canvas2graph` command: compile, run, export, index and serve RAGFlow agent DSLs.

    canvas2graph compile DSL [--format text|json]
    canvas2graph run DSL [--query Q] [--inputs FILE] [--file [FIELD=]PATH] [--session ID] [--db PATH] ...
    canvas2graph export DSL [--format mermaid|json|dot|svg|png|python] [--out FILE]
    canvas2graph trace --session ID [--db PATH] [--dsl DSL]
    canvas2graph langgraph DSL... --out DIR
    canvas2graph index PATH... --kb NAME
    canvas2graph serve ... / canvas2graph tokens create|list|revoke ...
    canvas2graph templates list | export TEMPLATE | create TEMPLATE --tenant NAME

Every command's options are declared here, and each command names the function that runs it as
"module:function", imported only when that command runs: `--help` loads neither LangGraph nor the
server, and `run` never loads FastAPI. Every failure is a message on stderr and a non-zero exit,
never a traceback.
"""
from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import signal
import sys
import uuid
from pathlib import Path
from typing import Any

from canvas2graph.types import UsageError

DEFAULT_DB = os.path.join(os.path.expanduser("~"), ".canvas2graph", "sessions.db")


def default_db() -> str:
    return os.environ.get("CANVAS2GRAPH_DB", DEFAULT_DB)


def read_source(path: str) -> bytes:
    try:
        return Path(path).read_bytes() if path != "-" else sys.stdin.buffer.read()
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror}")
    except (UnicodeError, ValueError):      # a name no file system takes (a lone surrogate, a NUL)
        raise UsageError(f"cannot read {path!r}: not a valid file name")


def read_json_file(path: str, what: str) -> Any:
    try:
        return json.loads(read_source(path))
    except json.JSONDecodeError as e:
        raise UsageError(f"{what} {path} is not valid JSON: {e.msg} at line {e.lineno}, column {e.colno}")


# --- compile ---------------------------------------------------------------------------------
def cmd_compile(args) -> int:
    from compiler import diagnose
    compiled, diags = diagnose(read_source(args.file), default_llm=args.default_llm)
    if args.format == "json":
        print(json.dumps({"ok": compiled is not None, "diagnostics": [d.to_dict() for d in diags]}, ensure_ascii=False, indent=2))
    else:
        for d in diags:
            print(f"{args.file}: {d}")
        errors = sum(d.severity == "error" for d in diags)
        warnings = len(diags) - errors
        if compiled is not None:
            print(f"{args.file}: compiles ({len(compiled.plan.nodes)} components, {warnings} warning(s))")
        else:
            print(f"{args.file}: does not compile ({errors} error(s), {warnings} warning(s))")
    return 0 if compiled is not None else 1


# --- export ----------------------------------------------------------------------------------
def agent_name(compiled, path: str) -> str:
    """What a run or a picture is named after: the agent's title (a template or agent record has
    one), else the DSL file's name; "" for a bare DSL read from stdin."""
    return compiled.plan.dsl.title or ("" if path == "-" else Path(path).stem)


def cmd_export(args) -> int:
    from compiler import compile_dsl
    compiled = compile_dsl(read_source(args.file), default_llm=args.default_llm)
    if args.format in ("svg", "png"):
        from compiler.picture import render
        data = render(compiled.plan, args.format, title=agent_name(compiled, args.file) or None)
    elif args.format == "dot":
        from compiler.picture import to_dot
        data = to_dot(compiled.plan, title=agent_name(compiled, args.file) or None).encode()
    elif args.format == "python":
        from compiler.eject import to_python
        data = to_python(compiled, source=None if args.file == "-" else Path(args.file).name).encode()
    elif args.format == "mermaid":
        from compiler.export import to_mermaid
        data = to_mermaid(compiled.plan).encode()
    else:
        from compiler.export import to_json
        data = (json.dumps(to_json(compiled.plan), ensure_ascii=False, indent=2) + "\n").encode()
    if args.out:
        try:
            Path(args.out).write_bytes(data)
        except OSError as e:
            raise UsageError(f"cannot write {args.out}: {e.strerror}")
        return 0
    if args.format == "png" and sys.stdout.isatty():
        raise UsageError("a PNG is binary: write it with --out FILE (or redirect stdout to a file)")
    sys.stdout.flush()
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()
    return 0


# --- run -------------------------------------------------------------------------------------
def cmd_run(args) -> int:
    from compiler import compile_dsl
    compiled = compile_dsl(read_source(args.file), default_llm=args.default_llm)
    return run_compiled(compiled, args)


def run_compiled(compiled, args) -> int:
    """One turn of a compiled canvas, as `run`'s options (`add_run_options`) ask; an ejected canvas's
    `__main__` runs here too (`canvas2graph.eject.main`)."""
    from runtime.printers import JsonlPrinter, PrettyPrinter

    inputs = read_json_file(args.inputs, "inputs file") if args.inputs else None
    if inputs is not None and not isinstance(inputs, dict):
        raise UsageError(f"inputs file {args.inputs} must hold a JSON object of field: value")
    files, inputs = upload_files(args.upload or [], inputs)
    environment = run_environment(args)
    session = args.session or str(uuid.uuid4())
    printer = JsonlPrinter() if args.format == "jsonl" else PrettyPrinter(session, show_thinking=args.show_thinking)
    try:
        return asyncio.run(_run(compiled, environment, session, args, inputs, printer, files))
    finally:
        from runtime.tracing import flush
        flush()         # the process ends next: send what the tracers hold (nothing when tracing is off)


def upload_files(specs: list[str], inputs: dict | None) -> tuple[list | None, dict | None]:
    """`--file PATH` and `--file FIELD=PATH`: each file goes into the local file store (runtime.files);
    plain ones become the request's files (sys.files), named ones a Begin file field's value."""
    if not specs:
        return None, inputs
    from runtime.files import FileStoreError, default_store
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
    from runtime.environment import RunEnvironment, RunSettings
    from runtime.mcp import MCPConfigError
    try:
        return RunEnvironment(RunSettings(llm_script=args.llm_script, models_config=args.models,
                                          mcp_config=args.mcp_config, retrieval=args.retrieval, db=args.db,
                                          code={"unsafe_local": True} if args.unsafe_local_code else {}))
    except MCPConfigError as e:
        raise UsageError(str(e))


async def _run(compiled, environment, session, args, inputs, printer, files=None) -> int:
    from runtime.checkpoint import open_checkpointer
    from runtime.session import Runner, TurnFailed, TurnRequest

    async with open_checkpointer(args.db) as saver:
        context = environment.context(session, compiled.plan.dsl.components)
        runner = Runner(compiled, saver, context.models, context.script, services=context.services,
                        name=agent_name(compiled, args.file))
        runner.preflight()
        # a new session's first turn: with no query, its first model call would be empty (a continued
        # session keeps its last query, or resumes a paused or interrupted turn, as RAGFlow's do)
        if not args.query and inputs is None and _converses(compiled) \
                and await saver.aget_tuple({"configurable": {"thread_id": session}}) is None:
            raise UsageError(f"{args.file} is a conversational agent: give the user's message with --query \"...\" "
                             "(or answer a paused form with --session ID --inputs FILE)")
        interrupts = _on_ctrl_c(runner, printer)
        try:
            request = TurnRequest(query=args.query or "", inputs=inputs, files=files)
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
        return {"finished": 0, "paused": 0, "cancelled": 130}.get(runner.outcome.status, 1)


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
            self.runner.cancel()
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
    from runtime.trace import ForkError
    config: dict[str, Any] = {"configurable": {"thread_id": args.session}}
    if args.checkpoint:
        config["configurable"]["checkpoint_id"] = args.checkpoint
    try:
        if args.dsl:
            from runtime.checkpoint import open_checkpointer
            source = read_source(args.dsl)
            async with open_checkpointer(args.db) as saver:
                turns = await _trace_turns(source, saver, config, args)
        else:
            from runtime.store import open_store
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
    from compiler import compile_dsl
    from runtime.trace import atrace
    graph = compile_dsl(source, default_llm=args.default_llm).graph(saver)
    return await atrace(graph, config)


# --- the argument tree ------------------------------------------------------------------------
def add_default_llm(command: argparse.ArgumentParser, what: str = "the model of") -> None:
    """`--default-llm` (fill_default_llm), defaulting to $CANVAS2GRAPH_DEFAULT_LLM."""
    command.add_argument("--default-llm", metavar="MODEL@FACTORY", default=os.environ.get("CANVAS2GRAPH_DEFAULT_LLM"),
                         help=f"{what} LLM, Agent and Categorize components whose llm_id is empty "
                              "(RAGFlow's templates leave some empty); default $CANVAS2GRAPH_DEFAULT_LLM")


def add_mcp_config(command: argparse.ArgumentParser) -> None:
    command.add_argument("--mcp-config", default=os.environ.get("CANVAS2GRAPH_MCP_CONFIG"),
                         help="JSON file of the MCP servers Agents call, by mcp_id; default $CANVAS2GRAPH_MCP_CONFIG")


def add_db(command: argparse.ArgumentParser, help: str) -> None:
    command.add_argument("--db", default=default_db(), help=help + " (default %(default)s, or $CANVAS2GRAPH_DB)")


def add_run_options(r: argparse.ArgumentParser) -> None:
    """The options of one turn: `run`'s, and those of an ejected canvas's module (`python agent.py ...`)."""
    r.add_argument("--query", default="", help="the user's message for this turn (sys.query)")
    r.add_argument("--inputs", help="JSON file with the request's inputs (Begin form or a pending UserFillUp)")
    r.add_argument("--session", help="conversation id; reuse it to continue a conversation")
    r.add_argument("--file", dest="upload", action="append", metavar="[FIELD=]PATH",
                   help="upload a file for this turn: PATH goes to sys.files, FIELD=PATH to the Begin file field "
                        "FIELD (repeatable); stored in $CANVAS2GRAPH_FILES_DIR, default ~/.canvas2graph/files")
    add_db(r, "sessions database: a SQLite file or a postgresql:// URL")
    r.add_argument("--llm-script", help="JSON script of model replies; replaces every model (offline runs)")
    r.add_argument("--models", help="models config file (TOML); default $CANVAS2GRAPH_MODELS")
    r.add_argument("--format", choices=["jsonl", "pretty"], default="pretty",
                   help="pretty: a live view for people (default); jsonl: RAGFlow's events, one per line")
    r.add_argument("--show-thinking", action="store_true",
                   help="pretty format: show the model's reasoning (dimmed, apart from the answer); hidden by default")
    add_mcp_config(r)
    r.add_argument("--retrieval", help="retrieval backend: elasticsearch://[user:pass@]host:port or sqlite:///path "
                                       "(default: retrieval.db beside the sessions database)")
    add_default_llm(r)
    r.add_argument("--unsafe-local-code", action="store_true",
                   help="run CodeExec scripts on this machine WITHOUT the bubblewrap sandbox: they can read your "
                        "files and reach your network; only for canvases you trust, where bubblewrap is unavailable")


def add_agent_test_commands(sub) -> None:
    """`test`, `record` and `eval`: regression cases and datasets (runtime/agent_tests, docs/testing.md)."""
    te = sub.add_parser("test", help="run regression case folders and say what differs (docs/testing.md)")
    te.add_argument("paths", nargs="+", metavar="PATH", help="case folders, or folders holding them")
    te.add_argument("--dsl", help="run the cases against this DSL (the changed agent) instead of their own")
    te.add_argument("--junit", metavar="FILE", help="also write a JUnit XML report")
    te.add_argument("--update", action="store_true", help="rewrite the expectations from what the agent does now")
    add_db(te, "the database of the stored agents cases name with `agent`")
    te.set_defaults(func="runtime.agent_tests.commands:cmd_test")

    rc = sub.add_parser("record", help="turn a session that ran into a regression case folder")
    rc.add_argument("--session", required=True, help="the session id (a run's --session, or a server session)")
    add_db(rc, "sessions database: a SQLite file or a postgresql:// URL")
    rc.add_argument("--dsl", help="the session's DSL file (default: the DSL a server stored with the session)")
    rc.add_argument("--out", required=True, metavar="DIR", help="the case folder to write")
    rc.add_argument("--name", help="the case's name (default: after the session)")
    rc.set_defaults(func="runtime.agent_tests.commands:cmd_record")

    ev = sub.add_parser("eval", help="run a DSL over a dataset (CSV or JSONL), score every row and report")
    ev.add_argument("file", metavar="DSL", help="the DSL: a JSON file, or agent:ID[@VERSION], a stored agent "
                                                "(its current DSL, or a saved version) read from --db")
    ev.add_argument("--dataset", required=True, help="the rows: a .csv file or a .jsonl file")
    ev.add_argument("--metric", choices=["exact", "contains", "regex", "json", "judge"], default="contains",
                    help="how an answer is scored against the row's expected one (default %(default)s)")
    ev.add_argument("--judge", metavar="MODEL@FACTORY", help="the model the judge metric asks (docs/testing.md)")
    ev.add_argument("--concurrency", type=int, default=1, help="rows run side by side (default %(default)s)")
    ev.add_argument("--out", metavar="FILE", help="write the report: report.json, or report.html")
    ev.add_argument("--compare", metavar="DSL2", help="run this DSL (a file or agent:ID[@VERSION]) on the same rows "
                                                      "too and show the rows that differ")
    add_db(ev, "the database of the stored agents DSL and DSL2 may name")
    ev.add_argument("--query-column", default="query", help="the column holding the message (default %(default)s)")
    ev.add_argument("--expected-column", default="expected", help="the column holding the expected answer "
                                                                  "(default %(default)s)")
    ev.add_argument("--llm-script", help="JSON script of model replies; replaces every model, the judge's too")
    ev.add_argument("--models", help="models config file (TOML, with [prices]); default $CANVAS2GRAPH_MODELS")
    add_default_llm(ev)
    ev.add_argument("--quiet", action="store_true", help="no progress line")
    ev.set_defaults(func="runtime.agent_tests.evaluate_cli:cmd_eval")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="canvas2graph", description="Compile and run RAGFlow agent DSLs on LangGraph.")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND",
                           help="compile, run, trace, index, export, serve or tokens; COMMAND --help says more")

    c = sub.add_parser("compile", help="check a DSL and print its diagnostics")
    c.add_argument("file", help="the DSL: a JSON file (a bare DSL, a RAGFlow template or an agent record), or - for stdin")
    c.add_argument("--format", choices=["text", "json"], default="text", help="text for people (default) or JSON")
    add_default_llm(c)
    c.set_defaults(func="runtime.cli:cmd_compile")

    r = sub.add_parser("run", help="run one turn of a DSL and print RAGFlow's events")
    r.add_argument("file", help="the DSL: a JSON file, or - for stdin")
    add_run_options(r)
    r.set_defaults(func="runtime.cli:cmd_run")

    t = sub.add_parser("trace", help="print a session's step trace (every step of every turn) as JSON")
    t.add_argument("--session", required=True, help="the session id (a run's --session, or a server session)")
    add_db(t, "sessions database: a SQLite file or a postgresql:// URL")
    t.add_argument("--dsl", help="the session's DSL file (default: the DSL a server stored with the session)")
    t.add_argument("--checkpoint", help="trace the branch that leads to this checkpoint (one a fork left behind)")
    add_default_llm(t)
    t.set_defaults(func="runtime.cli:cmd_trace")

    i = sub.add_parser("index", help="chunk local files (Markdown, text, HTML, PDF) into the embedded retrieval store")
    i.add_argument("paths", nargs="+", metavar="PATH", help="files or folders")
    i.add_argument("--kb", required=True, help="dataset id the chunks belong to (what a DSL lists in dataset_ids)")
    i.add_argument("--retrieval", help="retrieval store URL (default: retrieval.db beside the sessions database)")
    add_db(i, "sessions database; the default store lives in its folder")
    i.add_argument("--embd-id", help="embedding model (model@Factory) to store vectors with; text only without")
    i.add_argument("--quiet", action="store_true", help="no progress bar")
    i.set_defaults(func="runtime.retrieval.service:cmd_index")

    from runtime.ingest.cli import add_ingest_command
    add_ingest_command(sub)

    x = sub.add_parser("export", help="print or draw the compiled graph")
    x.add_argument("file", help="the DSL: a JSON file, or - for stdin")
    x.add_argument("--format", choices=["mermaid", "json", "dot", "svg", "png", "python"], default="mermaid",
                   help="mermaid: a flowchart with every branch labelled (default); json: nodes and edges; "
                        "dot: Graphviz source; svg, png: the picture, laid out by Graphviz's dot (installed apart); "
                        "python: a module that builds the same StateGraph explicitly and runs like `run` (eject)")
    x.add_argument("--out", "-o", metavar="FILE", help="write to FILE instead of stdout")
    add_default_llm(x)
    x.set_defaults(func="runtime.cli:cmd_export")

    g = sub.add_parser("langgraph", help="write a folder that LangGraph Server (langgraph dev, a deployment) serves")
    g.add_argument("files", nargs="+", metavar="DSL", help="the DSLs, one graph each (JSON files)")
    g.add_argument("--out", required=True, metavar="DIR",
                   help="the folder to write: langgraph.json, agents.py and the DSLs (created if missing)")
    add_default_llm(g, "written into the folder as the model of")
    g.set_defaults(func="runtime.langgraph_server:cmd_langgraph")

    s = sub.add_parser("serve", help="serve the HTTP API (RAGFlow-compatible agent routes, compile-and-run)")
    s.add_argument("--host", default="127.0.0.1", help="address to listen on (default %(default)s)")
    s.add_argument("--port", type=int, default=9380, help="port to listen on (default %(default)s, RAGFlow's)")
    add_db(s, "agents, sessions, tokens and checkpoints: a SQLite file or a postgresql:// URL (several servers can share it)")
    s.add_argument("--llm-script", default=os.environ.get("CANVAS2GRAPH_LLM_SCRIPT"),
                   help="testing aid: every model answers from this script, a fresh copy per turn "
                        "(default $CANVAS2GRAPH_LLM_SCRIPT)")
    s.add_argument("--models", help="models config file (TOML); default $CANVAS2GRAPH_MODELS")
    s.add_argument("--retrieval", help="retrieval backend: elasticsearch://[user:pass@]host:port or sqlite:///path "
                                       "(default: retrieval.db beside a SQLite --db)")
    add_default_llm(s, "stored with agents as the model of")
    add_mcp_config(s)
    s.add_argument("--allow-local-code", action="store_true",
                   help="let CodeExec run scripts on this machine, in the bubblewrap sandbox (refused unless set)")
    s.add_argument("--allow-browser", action="store_true",
                   help="let the Browser component drive Chromium on this machine (refused unless set)")
    s.add_argument("--max-body-mb", type=float, default=16.0,
                   help="largest request body accepted, uploads included (default 16)")
    s.add_argument("--files-dir", default=os.environ.get("CANVAS2GRAPH_FILES_DIR") or None,
                   help="the run file store: uploads, and files runs download (default $CANVAS2GRAPH_FILES_DIR, "
                        "else ~/.canvas2graph/files)")
    s.add_argument("--upload-limits", default=os.environ.get("CANVAS2GRAPH_UPLOAD_LIMITS") or None,
                   help="TOML file of upload limits per tenant: file size, files per request, types, stored "
                        "files and bytes (default $CANVAS2GRAPH_UPLOAD_LIMITS; see docs/files.md)")
    s.add_argument("--busy-wait", type=float, default=30.0,
                   help="seconds a request waits for its session's running turn to end before it is refused "
                        "(default 30)")
    s.add_argument("--compile-timeout", type=float, default=10.0,
                   help="seconds one request's DSL may take to compile, in a worker process (default %(default)s)")
    s.add_argument("--compile-memory-mb", type=int, default=1024,
                   help="memory one request's DSL may take to compile, beyond the worker's own (default %(default)s)")
    s.add_argument("--compile-workers", type=int, default=1,
                   help="worker processes compiling requests' DSLs side by side (default %(default)s)")
    s.add_argument("--session-ttl", metavar="DURATION", default=None,
                   help="delete sessions idle this long (30d, 12h, ...; runtime/lifecycle.py); off by default")
    s.add_argument("--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"],
                   help="server log level (default %(default)s)")
    s.set_defaults(func="server.cli:cmd_serve")

    t = sub.add_parser("tokens", help="create, list and revoke API tokens (one tenant per token)")
    tsub = t.add_subparsers(dest="tokens_command", required=True, metavar="ACTION", help="create, list or revoke")
    tc = tsub.add_parser("create", help="print a new token for a tenant (shown once: only its hash is stored)")
    tc.add_argument("--tenant", required=True, help="the tenant the token acts for")
    tl = tsub.add_parser("list", help="list tokens (ids, tenants, dates), never the tokens themselves")
    tl.add_argument("--tenant", help="only this tenant's tokens")
    tr = tsub.add_parser("revoke", help="revoke a token, given the token or its id")
    tr.add_argument("token", help="the token, or its id from `tokens list`")
    tr.add_argument("--tenant", help="only revoke it if it belongs to this tenant")
    for command in (tc, tl, tr):
        add_db(command, "the server's database")
    t.set_defaults(func="server.cli:cmd_tokens")

    add_agent_test_commands(sub)

    tp = sub.add_parser("templates", help="the agent templates canvas2graph ships: list, export, or create an agent")
    tpsub = tp.add_subparsers(dest="templates_command", required=True)
    tpl = tpsub.add_parser("list", help="list the templates (file name, id, source, title)")
    tpl.add_argument("--format", choices=["text", "json"], default="text", help="text (default) or JSON")
    tpx = tpsub.add_parser("export", help="write a template's DSL (to run, compile or edit it)")
    tpx.add_argument("template", help="the template's name or id (see `templates list`)")
    tpx.add_argument("--output", "-o", help="file to write (default: standard output)")
    tpc = tpsub.add_parser("create", help="store a template as an agent of a tenant in the server's database")
    tpc.add_argument("template", help="the template's name or id (see `templates list`)")
    tpc.add_argument("--tenant", required=True, help="the tenant the agent belongs to")
    tpc.add_argument("--title", help="the agent's title (default: the template's)")
    add_db(tpc, "the server's database")
    add_default_llm(tpc, "stored with the agent as the model of")
    tp.set_defaults(func="runtime.templates:cmd_templates")

    from runtime.sessions_cli import register as register_sessions     # its own module (issue 21)
    register_sessions(sub)
    return p


def command(path: str):
    """The function a command names as "module:function"."""
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


def _printable_streams() -> None:
    """Whatever a DSL, a query or a model holds, printing it must not fail: text the terminal's encoding
    cannot show (a lone surrogate, or anything beyond ASCII on an ASCII terminal) is escaped."""
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            try:
                stream.reconfigure(errors="backslashreplace")
            except (ValueError, OSError):
                pass


def _quiet_broken_pipe() -> int:
    """The reader went away (`run ... | head`): stop quietly, as command-line tools do (128 + SIGPIPE)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())       # so the exit flush does not complain again
    except (OSError, ValueError):
        pass
    return 141


def _explain_stem_only() -> None:
    """Retrieval ran without WordNet: say so once, in words (the logger line is for servers)."""
    tokenizer = sys.modules.get("runtime.retrieval.tokenizer")
    if tokenizer is not None and getattr(tokenizer, "STEM_ONLY", False):
        print("canvas2graph: note: WordNet is not installed, so retrieval matched words by their stems only "
              "(about 3% of English words then differ from RAGFlow's index); to match RAGFlow exactly, "
              "install it: apt-get install wordnet-base wordnet-sense-index", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    _printable_streams()
    args = parser().parse_args(argv)
    try:
        return _main(args)
    except BrokenPipeError:
        return _quiet_broken_pipe()


def _main(args) -> int:
    from canvas2graph.types import CompileError
    try:
        status = command(args.func)(args)
        _explain_stem_only()
        return status
    except CompileError as e:
        for d in e.diagnostics:
            print(f"{args.file}: {d}", file=sys.stderr)
        return 1
    except UsageError as e:
        print(f"canvas2graph: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("canvas2graph: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        raise
    except UnicodeEncodeError as e:     # an argument (a path, a URL) holds a lone surrogate
        print(f"canvas2graph: an argument is not valid text: {e.object[e.start:e.end]!r} cannot be encoded",
              file=sys.stderr)
        return 2
    except Exception as e:      # the last line of defence: one line, no traceback
        if _is_user_error(e):
            print(f"canvas2graph: {e}", file=sys.stderr)
            return 2
        print(f"canvas2graph: internal error: {type(e).__name__}: {e}", file=sys.stderr)
        if os.environ.get("CANVAS2GRAPH_DEBUG"):
            raise
        return 3


def _is_user_error(e: Exception) -> bool:
    """Errors that name something the user configured (a model, a script, a backend, a paused session)."""
    from runtime.models import ModelConfigError
    from runtime.retrieval.protocol import RetrievalError
    from runtime.scripted import ScriptError
    from runtime.session import TurnRejected
    return isinstance(e, (ModelConfigError, ScriptError, RetrievalError, TurnRejected))


if __name__ == "__main__":
    sys.exit(main())

"""The `canvas2graph` command: compile, run and export RAGFlow agent DSLs.

    canvas2graph compile FILE [--format text|json]
    canvas2graph run DSL [--query Q] [--inputs FILE] [--session ID] [--db PATH] [--llm-script FILE] [--mcp-config FILE] [--format jsonl|pretty]
    canvas2graph export DSL [--format mermaid|json]

Every failure is a message on stderr and a non-zero exit, never a traceback.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import uuid
from pathlib import Path
from typing import Any

from compiler import CompileError, compile_dsl, diagnose
from runtime.session import TurnRejected

DEFAULT_DB = os.path.join(os.path.expanduser("~"), ".canvas2graph", "sessions.db")


class UsageError(Exception):
    """A wrong command line or unreadable file: printed as one line."""


def read_source(path: str) -> bytes:
    try:
        return Path(path).read_bytes() if path != "-" else sys.stdin.buffer.read()
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror}")


def read_json_file(path: str, what: str) -> Any:
    try:
        return json.loads(read_source(path))
    except json.JSONDecodeError as e:
        raise UsageError(f"{what} {path} is not valid JSON: {e.msg} at line {e.lineno}, column {e.colno}")


# --- compile ---------------------------------------------------------------------------------
def cmd_compile(args) -> int:
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
def cmd_export(args) -> int:
    from compiler.export import to_json, to_mermaid
    compiled = compile_dsl(read_source(args.file), default_llm=args.default_llm)
    if args.format == "mermaid":
        sys.stdout.write(to_mermaid(compiled.plan))
    else:
        print(json.dumps(to_json(compiled.plan), ensure_ascii=False, indent=2))
    return 0


# --- run -------------------------------------------------------------------------------------
def cmd_run(args) -> int:
    from runtime.models import ModelFactory
    from runtime.scripted import Script

    compiled = compile_dsl(read_source(args.file), default_llm=args.default_llm)
    inputs = read_json_file(args.inputs, "inputs file") if args.inputs else None
    if inputs is not None and not isinstance(inputs, dict):
        raise UsageError(f"inputs file {args.inputs} must hold a JSON object of field: value")
    script = Script.load(args.llm_script) if args.llm_script else None
    models = ModelFactory(script=script, config_path=args.models)
    session = args.session or str(uuid.uuid4())
    printer = JsonlPrinter() if args.format == "jsonl" else PrettyPrinter(session)
    mcp = load_mcp_config(args.mcp_config) if args.mcp_config else None
    return asyncio.run(_run(compiled, models, script, session, args, inputs, printer, mcp))


def load_mcp_config(path: str):
    from runtime.mcp import MCPConfigError, MCPServers
    try:
        return MCPServers.load(path)
    except MCPConfigError as e:
        raise UsageError(str(e))


async def _run(compiled, models, script, session, args, inputs, printer, mcp=None) -> int:
    from runtime.checkpoint import open_checkpointer
    from runtime.session import Runner, TurnFailed, TurnRequest

    from runtime.retrieval.service import retrieval_service

    async with open_checkpointer(args.db) as saver, \
            retrieval_service(compiled, args.retrieval, args.db) as services:
        runner = Runner(compiled, saver, models, script, services={**services, **({"mcp": mcp} if mcp else {})})
        runner.preflight()
        interrupts = _on_ctrl_c(runner, printer)
        try:
            async for event in runner.run_turn(session, TurnRequest(query=args.query or "", inputs=inputs)):
                printer.event(event)
        except TurnFailed:          # closed by the Runner; the outcome says why
            pass
        except asyncio.CancelledError:
            printer.note("stopped at once; the session resumes from its last checkpoint")
            return 130
        finally:
            interrupts.close()
        printer.done(runner.outcome)
        return {"finished": 0, "paused": 0, "cancelled": 130}.get(runner.outcome.status, 1)


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


class JsonlPrinter:
    """One event per line, flushed at once so tokens reach the reader while the model writes."""

    def event(self, event: dict) -> None:
        sys.stdout.write(json.dumps(event, ensure_ascii=False, default=str) + "\n")
        sys.stdout.flush()

    def note(self, text: str) -> None:
        print(text, file=sys.stderr)

    def done(self, outcome) -> None:
        if outcome.error:
            print(f"stopped: {outcome.error}", file=sys.stderr)


class PrettyPrinter:
    """A live view for people: steps, streamed text and the outcome, coloured on a terminal."""

    def __init__(self, session: str):
        self.color = sys.stdout.isatty() and not os.environ.get("NO_COLOR")
        self.in_message = False
        self.session = session
        self.out(self.c("2", f"session {session}") + "\n")

    def c(self, code: str, text: str) -> str:
        return f"\033[{code}m{text}\033[0m" if self.color else text

    def out(self, text: str) -> None:
        sys.stdout.write(text)
        sys.stdout.flush()

    def _end_message(self) -> None:
        if self.in_message:
            self.out("\n")
            self.in_message = False

    def event(self, e: dict) -> None:
        kind, d = e["event"], e["data"]
        if kind == "node_started":
            self._end_message()
            name = d.get("component_name") or d["component_id"]
            self.out(self.c("36", f"▶ {name}") + self.c("2", f" ({d['component_type']})") + "\n")
        elif kind == "node_finished":
            self._end_message()
            mark = self.c("31", "✗") if d.get("error") else self.c("32", "✓")
            shown = {k: v for k, v in d["outputs"].items() if not k.startswith("_")}
            text = json.dumps(shown, ensure_ascii=False, default=str)
            self.out(f"{mark} {d.get('component_name') or d['component_id']} "
                     + self.c("2", f"{d['elapsed_time'] * 1000:.0f} ms ") + self.c("2", text[:200]) + "\n")
            if d.get("error"):
                self.out(self.c("31", f"  error: {d['error']}") + "\n")
        elif kind == "message":
            if d.get("start_to_think"):
                self.out(self.c("2;3", "[thinking] "))
            elif d.get("end_to_think"):
                self.out(self.c("2;3", " [/thinking] "))
            else:
                if not self.in_message:
                    self.out(self.c("1", "│ "))
                    self.in_message = True
                self.out(d.get("content", "").replace("\n", "\n│ "))
        elif kind == "message_end":
            self._end_message()
        elif kind == "user_inputs":
            self._end_message()
            self.out(self.c("33", f"? {d.get('tips', '')}") + "\n")
            for key, spec in (d.get("inputs") or {}).items():
                self.out(self.c("33", f"  - {key} ({spec.get('type', 'line')})") + "\n")
        elif kind == "workflow_finished" and not isinstance(d.get("outputs"), dict):
            self._end_message()
            self.out(self.c("33", f"■ {d.get('outputs')}") + "\n")
        elif kind == "workflow_finished":
            self._end_message()
            u = d.get("usage") or {}
            self.out(self.c("32", f"■ finished in {d['elapsed_time']:.2f} s") +
                     self.c("2", f", {u.get('calls', 0)} model call(s), {u.get('total_tokens', 0)} tokens") + "\n")

    def note(self, text: str) -> None:
        self._end_message()
        self.out(self.c("33", text) + "\n")

    def done(self, outcome) -> None:
        self._end_message()
        if outcome.status == "paused":
            self.out(self.c("33", f"■ paused: answer with --session {self.session} --inputs FILE") + "\n")
        if outcome.status == "stopped":
            self.out(self.c("31", f"■ stopped: {outcome.error or 'the run ended early'}") + "\n")


# --- entry -----------------------------------------------------------------------------------
def add_default_llm(command: argparse.ArgumentParser, what: str = "the model of") -> None:
    """`--default-llm` (fill_default_llm), defaulting to $CANVAS2GRAPH_DEFAULT_LLM."""
    command.add_argument("--default-llm", metavar="MODEL@FACTORY", default=os.environ.get("CANVAS2GRAPH_DEFAULT_LLM"),
                         help=f"{what} LLM, Agent and Categorize components whose llm_id is empty "
                              "(RAGFlow's templates leave some empty); default $CANVAS2GRAPH_DEFAULT_LLM")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="canvas2graph", description="Compile and run RAGFlow agent DSLs on LangGraph.")
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("compile", help="check a DSL and print its diagnostics")
    c.add_argument("file")
    c.add_argument("--format", choices=["text", "json"], default="text")
    add_default_llm(c)
    c.set_defaults(func=cmd_compile)
    r = sub.add_parser("run", help="run one turn of a DSL and print RAGFlow's events")
    r.add_argument("file")
    r.add_argument("--query", default="")
    r.add_argument("--inputs", help="JSON file with the request's inputs (Begin form or a pending UserFillUp)")
    r.add_argument("--session", help="conversation id; reuse it to continue a conversation")
    r.add_argument("--db", default=os.environ.get("CANVAS2GRAPH_DB", DEFAULT_DB),
                   help="sessions database: a SQLite file (default %(default)s) or a postgresql:// URL")
    r.add_argument("--llm-script", help="JSON script of model replies; replaces every model (offline runs)")
    r.add_argument("--models", help="models config file (TOML); default $CANVAS2GRAPH_MODELS")
    r.add_argument("--format", choices=["jsonl", "pretty"], default="pretty")
    r.add_argument("--mcp-config", default=os.environ.get("CANVAS2GRAPH_MCP_CONFIG"),
                   help="JSON file of the MCP servers Agents call, by mcp_id; default $CANVAS2GRAPH_MCP_CONFIG")
    r.add_argument("--retrieval", help="retrieval backend: elasticsearch://[user:pass@]host:port or sqlite:///path "
                                       "(default: retrieval.db beside the sessions database)")
    add_default_llm(r)
    r.set_defaults(func=cmd_run)
    from runtime.retrieval.service import add_index_parser
    add_index_parser(sub, os.environ.get("CANVAS2GRAPH_DB", DEFAULT_DB))
    x = sub.add_parser("export", help="print the compiled graph")
    x.add_argument("file")
    x.add_argument("--format", choices=["mermaid", "json"], default="mermaid")
    add_default_llm(x)
    x.set_defaults(func=cmd_export)
    from server.cli import add_server_commands     # serve, tokens (the server package adds its own commands)
    add_server_commands(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.func(args)
    except CompileError as e:
        for d in e.diagnostics:
            print(f"{args.file}: {d}", file=sys.stderr)
        return 1
    except UsageError as e:
        print(f"canvas2graph: {e}", file=sys.stderr)
        return 2
    except TurnRejected as e:
        print(f"canvas2graph: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("canvas2graph: interrupted", file=sys.stderr)
        return 130
    except Exception as e:      # the last line of defence: one line, no traceback
        from runtime.models import ModelConfigError
        from runtime.scripted import ScriptError
        from runtime.retrieval.protocol import RetrievalError
        if isinstance(e, (ModelConfigError, ScriptError, RetrievalError)):
            print(f"canvas2graph: {e}", file=sys.stderr)
            return 2
        print(f"canvas2graph: internal error: {type(e).__name__}: {e}", file=sys.stderr)
        if os.environ.get("CANVAS2GRAPH_DEBUG"):
            raise
        return 3


if __name__ == "__main__":
    sys.exit(main())

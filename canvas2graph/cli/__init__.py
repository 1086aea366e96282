"""The `canvas2graph` command: compile, run, export, index and serve RAGFlow agent DSLs.

    canvas2graph compile DSL [--format text|json]
    canvas2graph run DSL [--query Q] [--inputs FILE] [--file [FIELD=]PATH] [--session ID] [--db PATH] ...
    canvas2graph export DSL [--format mermaid|json|dot|svg|png|python] [--out FILE]
    canvas2graph trace --session ID [--db PATH] [--dsl DSL]
    canvas2graph langgraph DSL... --out DIR
    canvas2graph index PATH... --kb NAME
    canvas2graph serve ... / canvas2graph tokens create|list|revoke ...
    canvas2graph templates list | export TEMPLATE | create TEMPLATE --tenant NAME

Every command's options are declared in `parser.py`, and each command names the function that runs it as
"module:function", imported only when that command runs: `--help` loads neither LangGraph nor the
server, and `run` never loads FastAPI. Every failure is a message on stderr and a non-zero exit,
never a traceback.
"""
from __future__ import annotations

import argparse
import difflib
import importlib
import os
import sys

from canvas2graph.types import UsageError


def parse(p: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """Parse the command line; an option the command does not know is reported by that command, with
    its own usage and the option it probably meant (`run --qurey` -> did you mean --query?)."""
    args, unknown = p.parse_known_args(argv)
    if unknown:
        command = command_parser(p, args)
        known = [o for action in command._actions for o in action.option_strings]
        hints = []
        for arg in unknown:
            close = difflib.get_close_matches(arg.split("=", 1)[0], known, n=1) if arg.startswith("-") else []
            if close:
                hints.append(f"{arg}: did you mean {close[0]}?")
        command.error(f"unrecognized arguments: {' '.join(unknown)}" + ("".join(f"\n  {h}" for h in hints)))
    return args


def command_parser(p: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The parser of the (sub)command the arguments chose: `run`'s, `tokens create`'s, ..."""
    while True:
        chosen = next((action.choices.get(getattr(args, action.dest, None) or "")
                       for action in p._actions if isinstance(action, argparse._SubParsersAction)), None)
        if chosen is None:
            return p
        p = chosen


def command(path: str):
    """The function a command names as "module:function"."""
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


def printable_streams() -> None:
    """Whatever a DSL, a query or a model holds, printing it must not fail: text the terminal's encoding
    cannot show (a lone surrogate, or anything beyond ASCII on an ASCII terminal) is escaped."""
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            try:
                stream.reconfigure(errors="backslashreplace")
            except (ValueError, OSError):
                pass


def quiet_broken_pipe() -> int:
    """The reader went away (`run ... | head`): stop quietly, as command-line tools do (128 + SIGPIPE)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())       # so the exit flush does not complain again
    except (OSError, ValueError):
        pass
    return 141


def _explain_stem_only() -> None:
    """Retrieval ran without WordNet: say so once, in words (the logger line is for servers)."""
    tokenizer = sys.modules.get("canvas2graph.runtime.services.retrieval.tokenizer")
    if tokenizer is not None and getattr(tokenizer, "STEM_ONLY", False):
        print("canvas2graph: note: WordNet is not installed, so retrieval matched words by their stems only "
              "(about 3% of English words then differ from RAGFlow's index); to match RAGFlow exactly, "
              "install it: apt-get install wordnet-base wordnet-sense-index", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    printable_streams()
    from canvas2graph.cli.parser import parser
    args = parse(parser(), argv)
    try:
        return dispatch(args)
    except BrokenPipeError:
        return quiet_broken_pipe()


def dispatch(args) -> int:
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
        if _is_database_away(e):
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            print(f"canvas2graph: the database did not answer ({first}); is it running, and has it room for "
                  "more connections (max_connections)?", file=sys.stderr)
            return 1
        print(f"canvas2graph: internal error: {type(e).__name__}: {e}", file=sys.stderr)
        if os.environ.get("CANVAS2GRAPH_DEBUG"):
            raise
        return 3


def _is_database_away(e: Exception) -> bool:
    """PostgreSQL refused or dropped the connection, or the pool got none in time: no bug of ours."""
    try:
        import psycopg
        from psycopg_pool import PoolTimeout
    except ImportError:         # pragma: no cover - psycopg is a dependency
        return False
    return isinstance(e, (psycopg.OperationalError, PoolTimeout))


def _is_user_error(e: Exception) -> bool:
    """Errors that name something the user configured (a model, a script, a backend, a paused session)."""
    from canvas2graph.runtime.services.models import ModelConfigError
    from canvas2graph.runtime.services.retrieval.protocol import RetrievalError
    from canvas2graph.runtime.services.scripted import ScriptError
    from canvas2graph.runtime.run.runner import TurnRejected
    return isinstance(e, (ModelConfigError, ScriptError, RetrievalError, TurnRejected))

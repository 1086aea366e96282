"""Every command's options, each command naming the function that runs it as "module:function"."""
from __future__ import annotations

import argparse
import os

from canvas2graph.types import SCRIPTED_LLM

DEFAULT_DB = os.path.join(os.path.expanduser("~"), ".canvas2graph", "sessions.db")


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("canvas2graph")
    except PackageNotFoundError:        # run from a checkout that is not installed
        return "(not installed)"




def default_llm_of(args) -> str | None:
    """`run`'s `--default-llm`, or with `--llm-script` and none given, a name for the model the script stands in
    for (the script replaces every model, those a template leaves empty too). `serve` keeps reporting empty ones:
    its editor shows what a DSL lacks before it meets a real model."""
    given = getattr(args, "default_llm", None)
    return given or (SCRIPTED_LLM if getattr(args, "llm_script", None) else None)


def default_db() -> str:
    return os.environ.get("CANVAS2GRAPH_DB", DEFAULT_DB)


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
    r.add_argument("--llm-script", help="JSON script of model replies; replaces every model, those with an empty "
                                        "llm_id too (offline runs)")
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
    """`test`, `record` and `eval`: regression cases and datasets (server/backend/agent_tests, docs/testing.md)."""
    te = sub.add_parser("test", help="run regression case folders and say what differs (docs/testing.md)")
    te.add_argument("paths", nargs="+", metavar="PATH", help="case folders, or folders holding them")
    te.add_argument("--dsl", help="run the cases against this DSL (the changed agent) instead of their own")
    te.add_argument("--junit", metavar="FILE", help="also write a JUnit XML report")
    te.add_argument("--update", action="store_true", help="rewrite the expectations from what the agent does now")
    add_db(te, "the database of the stored agents cases name with `agent`")
    te.set_defaults(func="canvas2graph.cli.agent_tests:cmd_test")

    rc = sub.add_parser("record", help="turn a session that ran into a regression case folder")
    rc.add_argument("--session", required=True, help="the session id (a run's --session, or a server session)")
    add_db(rc, "sessions database: a SQLite file or a postgresql:// URL")
    rc.add_argument("--dsl", help="the session's DSL file (default: the DSL a server stored with the session)")
    rc.add_argument("--out", required=True, metavar="DIR", help="the case folder to write")
    rc.add_argument("--name", help="the case's name (default: after the session)")
    rc.set_defaults(func="canvas2graph.cli.agent_tests:cmd_record")

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
    ev.set_defaults(func="canvas2graph.cli.evaluate:cmd_eval")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="canvas2graph", description="Compile and run RAGFlow agent DSLs on LangGraph.")
    p.add_argument("--version", action="version", version=f"canvas2graph {_version()}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND",
                           help="COMMAND --help says more")      # the summary: summarize_commands

    add_dsl_commands(sub)
    add_serve_command(sub)
    add_worker_command(sub)
    add_tokens_command(sub)
    add_agent_test_commands(sub)
    add_templates_command(sub)
    from canvas2graph.cli.sessions import register as register_sessions     # its own module (issue 21)
    register_sessions(sub)
    from canvas2graph.cli.memory import register as register_memory         # its own module (issue 35)
    register_memory(sub)
    summarize_commands(sub)         # last: the summary names every command, those registered above too
    return p


def add_dsl_commands(sub) -> None:
    """The commands that take a DSL: compile, run, trace, index, ingest, export and langgraph."""
    c = sub.add_parser("compile", help="check a DSL and print its diagnostics")
    c.add_argument("file", help="the DSL: a JSON file (a bare DSL, a RAGFlow template or an agent record), or - for stdin")
    c.add_argument("--format", choices=["text", "json"], default="text", help="text for people (default) or JSON")
    add_default_llm(c)
    c.set_defaults(func="canvas2graph.cli.compile:cmd_compile")

    r = sub.add_parser("run", help="run one turn of a DSL and print RAGFlow's events")
    r.add_argument("file", help="the DSL: a JSON file, or - for stdin")
    add_run_options(r)
    r.set_defaults(func="canvas2graph.cli.run:cmd_run")

    t = sub.add_parser("trace", help="print a session's step trace (every step of every turn) as JSON")
    t.add_argument("--session", required=True, help="the session id (a run's --session, or a server session)")
    add_db(t, "sessions database: a SQLite file or a postgresql:// URL")
    t.add_argument("--dsl", help="the session's DSL file (default: the DSL a server stored with the session)")
    t.add_argument("--checkpoint", help="trace the branch that leads to this checkpoint (one a fork left behind)")
    add_default_llm(t)
    t.set_defaults(func="canvas2graph.cli.run:cmd_trace")

    i = sub.add_parser("index", help="chunk local files (Markdown, text, HTML, PDF) into the embedded retrieval store")
    i.add_argument("paths", nargs="+", metavar="PATH", help="files or folders")
    i.add_argument("--kb", required=True, help="dataset id the chunks belong to (what a DSL lists in dataset_ids)")
    i.add_argument("--retrieval", help="retrieval store URL (default: retrieval.db beside the sessions database)")
    add_db(i, "sessions database; the default store lives in its folder")
    i.add_argument("--embd-id", help="embedding model (model@Factory) to store vectors with; text only without")
    i.add_argument("--quiet", action="store_true", help="no progress bar")
    i.set_defaults(func="canvas2graph.cli.index:cmd_index")

    from canvas2graph.cli.ingest import add_ingest_command
    add_ingest_command(sub)

    x = sub.add_parser("export", help="print or draw the compiled graph")
    x.add_argument("file", help="the DSL: a JSON file, or - for stdin")
    x.add_argument("--format", choices=["mermaid", "json", "dot", "svg", "png", "python"], default="mermaid",
                   help="mermaid: a flowchart with every branch labelled (default); json: nodes and edges; "
                        "dot: Graphviz source; svg, png: the picture, laid out by Graphviz's dot (installed apart); "
                        "python: a module that builds the same StateGraph explicitly and runs like `run` (eject)")
    x.add_argument("--out", "-o", metavar="FILE", help="write to FILE instead of stdout")
    add_default_llm(x)
    x.set_defaults(func="canvas2graph.cli.compile:cmd_export")

    g = sub.add_parser("langgraph", help="write a folder that LangGraph Server (langgraph dev, a deployment) serves")
    g.add_argument("files", nargs="+", metavar="DSL", help="the DSLs, one graph each (JSON files)")
    g.add_argument("--out", required=True, metavar="DIR",
                   help="the folder to write: langgraph.json, agents.py and the DSLs (created if missing)")
    add_default_llm(g, "written into the folder as the model of")
    g.set_defaults(func="canvas2graph.cli.langgraph_server:cmd_langgraph")


def add_run_service_options(s: argparse.ArgumentParser) -> None:
    """What runs turns needs, the same for `serve` and `worker`: models, retrieval, MCP, code, files."""
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
    s.add_argument("--files-dir", default=os.environ.get("CANVAS2GRAPH_FILES_DIR") or None,
                   help="the run file store: uploads, and files runs download (default $CANVAS2GRAPH_FILES_DIR, "
                        "else ~/.canvas2graph/files)")
    s.add_argument("--queue", default="canvas2graph", metavar="NAME",
                   help="the job queue turns go to and workers take from (default %(default)s): `serve` and "
                        "`worker` processes on one database share their turns when they name the same queue")
    s.add_argument("--pool-size", type=int, default=8,
                   help="PostgreSQL connections this process keeps, at most (default %(default)s; docs/deploy.md "
                        "sizes them against max_connections)")
    s.add_argument("--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"],
                   help="log level (default %(default)s)")


def add_serve_command(sub) -> None:
    """`serve`: the HTTP API, its stores and its limits, and (unless `--workers 0`) turn slots of its own."""
    s = sub.add_parser("serve", help="serve the HTTP API (RAGFlow-compatible agent routes, compile-and-run)")
    s.add_argument("--host", default="127.0.0.1", help="address to listen on (default %(default)s)")
    s.add_argument("--port", type=int, default=9380, help="port to listen on (default %(default)s, RAGFlow's)")
    add_db(s, "agents, sessions, tokens and checkpoints: a SQLite file or a postgresql:// URL (several servers can share it)")
    add_run_service_options(s)
    s.add_argument("--workers", type=int, default=256, metavar="N",
                   help="turns this process runs at once, as a worker of its own (default %(default)s); 0 serves "
                        "the API only and leaves the turns to `canvas2graph worker` processes (PostgreSQL)")
    s.add_argument("--double-texting", choices=["enqueue", "reject"], default="enqueue",
                   help="a message to a session that is running a turn: answered after it, in arrival order "
                        "(enqueue, the default), or refused at once with code 106 (reject)")
    s.add_argument("--max-body-mb", type=float, default=16.0,
                   help="largest request body accepted, uploads included (default 16)")
    s.add_argument("--upload-limits", default=os.environ.get("CANVAS2GRAPH_UPLOAD_LIMITS") or None,
                   help="TOML file of upload limits per tenant: file size, files per request, types, stored "
                        "files and bytes (default $CANVAS2GRAPH_UPLOAD_LIMITS; see docs/files.md)")
    s.add_argument("--busy-wait", type=float, default=None, help=argparse.SUPPRESS)      # before --double-texting
    s.add_argument("--compile-timeout", type=float, default=10.0,
                   help="seconds one request's DSL may take to compile, in a worker process (default %(default)s)")
    s.add_argument("--compile-memory-mb", type=int, default=1024,
                   help="memory one request's DSL may take to compile, beyond the worker's own (default %(default)s)")
    s.add_argument("--compile-workers", type=int, default=1,
                   help="worker processes compiling requests' DSLs side by side (default %(default)s)")
    s.add_argument("--session-ttl", metavar="DURATION", default=None,
                   help="delete sessions idle this long (30d, 12h, ...; runtime/run/lifecycle.py); off by default")
    s.add_argument("--mcp-session-ttl", metavar="DURATION", default="24h",
                   help="forget MCP sessions idle this long (their conversations stay as sessions; default 24h)")
    s.set_defaults(func="canvas2graph.cli.serve:cmd_serve")


def add_worker_command(sub) -> None:
    """`worker`: runs the turns API processes queue, on the PostgreSQL they share."""
    w = sub.add_parser("worker", help="run turns (and schedules) queued by `serve` processes on one PostgreSQL")
    add_db(w, "the database the API processes use: a postgresql:// URL")
    add_run_service_options(w)
    w.add_argument("--concurrency", type=int, default=64, metavar="N",
                   help="turns this worker runs at once (default %(default)s)")
    w.add_argument("--graceful-seconds", type=float, default=30.0,
                   help="on SIGTERM, how long running turns may take to end before they go back to the queue "
                        "for another worker (default %(default)s)")
    w.add_argument("--health-port", type=int, default=None,
                   help="serve GET /health and /ready on this port of 127.0.0.1 (for a process supervisor)")
    w.set_defaults(func="canvas2graph.cli.worker:cmd_worker")


def add_tokens_command(sub) -> None:
    """`tokens create|list|revoke`: the server's API tokens."""
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
    t.set_defaults(func="canvas2graph.cli.serve:cmd_tokens")


def add_templates_command(sub) -> None:
    """`templates list|export|create`: the shipped agent templates."""
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
    tpc.add_argument("--exist-ok", action="store_true",
                     help="when the tenant has an agent of that title already, print its id instead of failing")
    add_db(tpc, "the server's database")
    add_default_llm(tpc, "stored with the agent as the model of")
    tp.set_defaults(func="canvas2graph.cli.templates:cmd_templates")


def summarize_commands(sub) -> None:
    """`--help`'s summary of the commands, from the commands themselves, so that none is left out."""
    names = list(sub.choices)
    sub.help = f"{', '.join(names[:-1])} or {names[-1]}; COMMAND --help says more"

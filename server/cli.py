"""`canvas2graph serve` and `canvas2graph tokens ...`, added to the command line by runtime/cli.py.

    canvas2graph serve [--host 127.0.0.1] [--port 9380] [--db PATH_OR_URL] [--llm-script FILE]
                       [--models FILE] [--retrieval URL] [--mcp-config FILE] [--allow-local-code]
                       [--max-body-mb N] [--busy-wait SECONDS]
    canvas2graph tokens create --tenant NAME [--db ...]
    canvas2graph tokens list [--tenant NAME] [--db ...]
    canvas2graph tokens revoke TOKEN_OR_ID [--tenant NAME] [--db ...]
"""
from __future__ import annotations

import argparse
import asyncio
import os
import time


def _default_db() -> str:
    from runtime.cli import DEFAULT_DB
    return os.environ.get("CANVAS2GRAPH_DB", DEFAULT_DB)


def add_server_commands(sub) -> None:
    from runtime.cli import add_default_llm
    s = sub.add_parser("serve", help="serve the HTTP API (RAGFlow-compatible agent routes, compile-and-run)")
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=9380)
    s.add_argument("--db", default=_default_db(),
                   help="agents, sessions, tokens and checkpoints: a SQLite file (default %(default)s) "
                        "or a postgresql:// URL (several servers can share it)")
    s.add_argument("--llm-script", default=os.environ.get("CANVAS2GRAPH_LLM_SCRIPT"),
                   help="testing aid: every model answers from this script, a fresh copy per turn "
                        "(default $CANVAS2GRAPH_LLM_SCRIPT)")
    s.add_argument("--models", help="models config file (TOML); default $CANVAS2GRAPH_MODELS")
    s.add_argument("--retrieval", help="retrieval backend: elasticsearch://[user:pass@]host:port or sqlite:///path "
                                       "(default: retrieval.db beside a SQLite --db)")
    add_default_llm(s, "stored with agents as the model of")
    s.add_argument("--mcp-config", default=os.environ.get("CANVAS2GRAPH_MCP_CONFIG"),
                   help="JSON file of the MCP servers Agents call, by mcp_id; default $CANVAS2GRAPH_MCP_CONFIG")
    s.add_argument("--allow-local-code", action="store_true",
                   help="let CodeExec run code on this machine (refused unless set)")
    s.add_argument("--max-body-mb", type=float, default=16.0, help="largest request body accepted (default 16)")
    s.add_argument("--busy-wait", type=float, default=30.0,
                   help="seconds a request waits for its session's running turn to end before it is refused "
                        "(default 30)")
    s.add_argument("--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"])
    s.set_defaults(func=cmd_serve)

    t = sub.add_parser("tokens", help="create, list and revoke API tokens (one tenant per token)")
    tsub = t.add_subparsers(dest="tokens_command", required=True)
    c = tsub.add_parser("create", help="print a new token for a tenant (shown once: only its hash is stored)")
    c.add_argument("--tenant", required=True)
    l = tsub.add_parser("list", help="list tokens (ids, tenants, dates), never the tokens themselves")
    l.add_argument("--tenant")
    r = tsub.add_parser("revoke", help="revoke a token, given the token or its id")
    r.add_argument("token")
    r.add_argument("--tenant", help="only revoke it if it belongs to this tenant")
    for p in (c, l, r):
        p.add_argument("--db", default=_default_db(), help="the server's database (default %(default)s)")
    t.set_defaults(func=cmd_tokens)


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from runtime.cli import UsageError
    from server.app import create_app
    from server.config import ServerConfig

    if args.max_body_mb <= 0:
        raise UsageError("--max-body-mb must be positive")
    if args.busy_wait < 0:
        raise UsageError("--busy-wait must be zero or more seconds")
    config = ServerConfig(db=args.db, llm_script=args.llm_script, models_config=args.models,
                          allow_local_code=args.allow_local_code, max_body_bytes=int(args.max_body_mb * 1024 * 1024),
                          busy_wait=args.busy_wait, retrieval=args.retrieval, mcp_config=args.mcp_config,
                          default_llm=args.default_llm)
    from runtime.mcp import MCPConfigError
    from runtime.sandbox import CodePolicyError
    from runtime.scripted import ScriptError
    try:
        app = create_app(config)
    except (MCPConfigError, CodePolicyError, ScriptError) as e:
        raise UsageError(str(e))
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level, timeout_graceful_shutdown=10)
    return 0


def cmd_tokens(args: argparse.Namespace) -> int:
    return asyncio.run(_tokens(args))


async def _tokens(args: argparse.Namespace) -> int:
    from runtime.cli import UsageError
    from runtime.store import StoreError, open_store

    try:
        async with open_store(args.db) as store:
            if args.tokens_command == "create":
                token_id, token = await store.create_token(args.tenant)
                print(token)
                print(f"token {token_id} for tenant {args.tenant.strip()}: keep it now, it is not shown again",
                      file=__import__("sys").stderr)
            elif args.tokens_command == "list":
                for row in await store.list_tokens(args.tenant):
                    state = "revoked " + _when(row["revoked_at"]) if row["revoked_at"] else "active"
                    print(f"{row['id']}\t{row['tenant']}\tcreated {_when(row['created_at'])}\t{state}")
            else:
                if not await store.revoke_token(args.token, args.tenant):
                    raise UsageError("no active token matches" + (f" for tenant {args.tenant}" if args.tenant else ""))
                print("revoked")
    except StoreError as e:
        raise UsageError(str(e))
    return 0


def _when(epoch: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(epoch))

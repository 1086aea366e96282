"""The `serve` and `tokens` commands (their options are declared with the others in canvas2graph/cli/main.py).

    canvas2graph serve [--host 127.0.0.1] [--port 9380] [--db PATH_OR_URL] [--llm-script FILE] ...
    canvas2graph tokens create --tenant NAME | list [--tenant NAME] | revoke TOKEN_OR_ID [--tenant NAME]
"""
from __future__ import annotations

import argparse
import asyncio
import sys
import time

from canvas2graph.types import UsageError


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from canvas2graph.server.app import create_app
    from canvas2graph.server.config import ServerConfig

    if args.max_body_mb <= 0:
        raise UsageError("--max-body-mb must be positive")
    if args.compile_timeout <= 0 or args.compile_memory_mb <= 0 or args.compile_workers < 1:
        raise UsageError("--compile-timeout, --compile-memory-mb and --compile-workers must be positive")
    if args.workers < 0:
        raise UsageError("--workers must be 0 (the API only) or more")
    check_pool_size(args)
    policy = args.double_texting
    if args.busy_wait is not None:      # the option before --double-texting: 0 refused a busy session at once
        if args.busy_wait < 0:
            raise UsageError("--busy-wait must be zero or more seconds")
        policy = "reject" if args.busy_wait == 0 else "enqueue"
    session_ttl = None
    if args.session_ttl:
        session_ttl = duration(args.session_ttl, "--session-ttl", "leave it out to keep sessions")
    mcp_session_ttl = duration(args.mcp_session_ttl, "--mcp-session-ttl", "MCP sessions cannot be kept forever")
    config = ServerConfig(db=args.db, session_ttl=session_ttl, mcp_session_ttl=mcp_session_ttl,
                          llm_script=args.llm_script, models_config=args.models,
                          allow_local_code=args.allow_local_code, allow_browser=args.allow_browser,
                          max_body_bytes=int(args.max_body_mb * 1024 * 1024), workers=args.workers,
                          double_texting=policy, pool_size=args.pool_size, queue=check_queue(args.queue),
                          retrieval=args.retrieval,
                          mcp_config=args.mcp_config, default_llm=args.default_llm,
                          compile_timeout=args.compile_timeout, compile_memory_mb=args.compile_memory_mb,
                          compile_workers=args.compile_workers, files_dir=args.files_dir,
                          upload_limits=args.upload_limits)
    from canvas2graph.runtime.services.mcp import MCPConfigError
    from canvas2graph.runtime.services.sandbox import CodePolicyError
    from canvas2graph.runtime.services.scripted import ScriptError
    from canvas2graph.server.uploads import UploadLimitsError
    try:
        app = create_app(config)
    except (MCPConfigError, CodePolicyError, ScriptError, UploadLimitsError) as e:
        raise UsageError(str(e))
    if args.allow_local_code:
        check_sandbox()
    _serve(app, args)
    return 0


def _serve(app, args: argparse.Namespace) -> None:
    import uvicorn

    class Server(uvicorn.Server):
        """uvicorn's server, telling the app when it starts to stop: the streams it then closes were not left
        by their clients, so their turns run on in their workers (a client re-attaches from another process)."""

        def handle_exit(self, sig, frame) -> None:
            conversations = getattr(app.state, "conversations", None)
            if conversations is not None:
                conversations.stopping = True
            super().handle_exit(sig, frame)

    Server(uvicorn.Config(app, host=args.host, port=args.port, log_level=args.log_level,
                          timeout_graceful_shutdown=10)).run()


def check_queue(name: str) -> str:
    if not name or len(name) > 63 or not all(c.isalnum() or c in "-_." for c in name):
        raise UsageError("--queue must be 1 to 63 letters, digits, '-', '_' or '.'")
    return name


def check_pool_size(args: argparse.Namespace) -> None:
    if args.pool_size < 2:
        raise UsageError("--pool-size must be 2 or more (a process needs a connection for its work and one to "
                         "wait on the queue)")


def duration(text: str, option: str, why_positive: str) -> float:
    """Seconds of a duration option (30d, 12h, 90s), more than 0, or a UsageError naming the option."""
    from canvas2graph.runtime.run.lifecycle import LifecycleError, parse_duration
    try:
        seconds = parse_duration(text)
    except LifecycleError as e:
        raise UsageError(f"{option}: {e}") from None
    if seconds <= 0:
        raise UsageError(f"{option} must be more than 0 ({why_positive})")
    return seconds


def check_sandbox() -> None:
    """`--allow-local-code` runs tenants' scripts in the bubblewrap sandbox, never without it: a server
    that cannot make one stops here rather than fail every CodeExec later."""
    from canvas2graph.runtime.services.sandbox import CodePolicy, SandboxUnusable
    from canvas2graph.runtime.services.sandbox.bubblewrap import find_bubblewrap

    policy = CodePolicy.resolve({"allow_local": True, "unsafe_local": False})
    if policy.remote:                   # CANVAS2GRAPH_SANDBOX_URL: scripts go there, not to this machine
        return
    try:
        asyncio.run(find_bubblewrap(policy.bwrap))
    except SandboxUnusable as e:
        raise UsageError(f"--allow-local-code runs scripts in a sandbox on this machine, and there is none: {e}")


def cmd_tokens(args: argparse.Namespace) -> int:
    return asyncio.run(_tokens(args))


async def _tokens(args: argparse.Namespace) -> int:
    from canvas2graph.server.backend.store import StoreError, open_store

    try:
        async with open_store(args.db) as store:
            if args.tokens_command == "create":
                token_id, token = await store.create_token(args.tenant)
                print(token)
                print(f"token {token_id} for tenant {args.tenant.strip()}: keep it now, it is not shown again",
                      file=sys.stderr)
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

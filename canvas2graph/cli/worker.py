"""The `worker` command (its options are declared with the others in canvas2graph/cli/parser.py).

    canvas2graph worker --db postgresql://... [--concurrency N] [--llm-script FILE] [--models FILE] ...
"""
from __future__ import annotations

import argparse
import asyncio
import logging

from canvas2graph.types import UsageError


def cmd_worker(args: argparse.Namespace) -> int:
    from canvas2graph.cli.serve import check_pool_size, check_queue
    from canvas2graph.runtime.run.checkpoint import is_postgres
    from canvas2graph.runtime.services.mcp import MCPConfigError
    from canvas2graph.runtime.services.sandbox import CodePolicyError
    from canvas2graph.runtime.services.scripted import ScriptError
    from canvas2graph.server.config import ServerConfig
    from canvas2graph.server.worker import run_worker

    if not is_postgres(args.db or ""):
        raise UsageError("a worker runs the turns that `serve` processes queue on a shared PostgreSQL database: "
                         "give --db postgresql://... (on SQLite, `serve` runs its turns itself)")
    if args.concurrency < 1:
        raise UsageError("--concurrency must be 1 or more")
    if args.graceful_seconds < 0:
        raise UsageError("--graceful-seconds must be zero or more")
    check_pool_size(args)
    config = ServerConfig(db=args.db, llm_script=args.llm_script, models_config=args.models,
                          allow_local_code=args.allow_local_code, allow_browser=args.allow_browser,
                          retrieval=args.retrieval, mcp_config=args.mcp_config, default_llm=args.default_llm,
                          files_dir=args.files_dir, pool_size=args.pool_size, workers=args.concurrency,
                          queue=check_queue(args.queue))
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.log_level != "debug":           # procrastinate logs every job's start and end at INFO
        logging.getLogger("procrastinate").setLevel(max(logging.WARNING, logging.getLogger().level))
    if args.allow_local_code:
        from canvas2graph.cli.serve import check_sandbox
        check_sandbox()
    try:
        asyncio.run(run_worker(config, args.concurrency, graceful_seconds=args.graceful_seconds,
                               health_port=args.health_port))
    except (MCPConfigError, CodePolicyError, ScriptError) as e:
        raise UsageError(str(e))
    return 0

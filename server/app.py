"""The FastAPI application: RAGFlow's agent API and the compile-and-run API over one database."""
from __future__ import annotations

import asyncio
import gc
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI

from canvas2graph.server.background import open_background
from canvas2graph.server.backend.jobs.process import open_jobs
from canvas2graph.server.backend.store import open_store
from canvas2graph.runtime.services.observability import flush as flush_traces
from canvas2graph.server.compiling import CompileWorkers
from canvas2graph.server.config import ServerConfig
from canvas2graph.server.errors import install_error_handlers
from canvas2graph.server.middleware import BodyLimit
from canvas2graph.server.backend.webhook_runs import WebhookRuns
from canvas2graph.server.routes import (agents, artifacts, builder, completions, components, datasets, evaluations, files, graphs,
                           health, memories, recordings, schedules, templates, traces, versions, webhooks)
from canvas2graph.server.routes import models as model_routes     # create_app's `models` argument is another thing
from canvas2graph.server.protocols import a2a_server, langgraph_api, langgraph_crons, langgraph_store, mcp_server
from canvas2graph.server.services import RunServices
from canvas2graph.server import ui
from canvas2graph.server.uploads import UploadPolicy

DESCRIPTION = """RAGFlow-compatible agent API (`/api/v1/agents...`) and a compile-and-run API
(`/api/v1/graphs/...`) for canvas2graph. Authenticate with `Authorization: Bearer <token>`
(`canvas2graph tokens create --tenant NAME`). Replies use RAGFlow's envelope:
`{"code": 0, "data": ...}` or `{"code": <non-zero>, "message": ...}`."""


def tune_gc() -> None:
    """Garbage collection for a long-running server with many concurrent streams.

    A busy server allocates millions of short-lived containers (events, messages, checkpoint values);
    with the default thresholds the collector ran full collections every second or so, each
    pausing every stream for 100-300 ms. Everything loaded at startup lives as long as the process,
    so it is frozen out of the collections, and collections run less often (cycles are rare here:
    nearly all garbage is freed by reference counting).
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(7000, 20, 100)


def start_expiry(store, conversations, ttl: float | None) -> asyncio.Task | None:
    """`serve --session-ttl`: delete sessions idle that long, in the background (runtime/run/lifecycle.py)."""
    if not ttl:
        return None
    import logging

    from canvas2graph.runtime.run.lifecycle import expire_sessions
    # uvicorn's own logger: the one a server's log shows at its --log-level
    logging.getLogger("uvicorn.error").info("sessions idle for %g s or more are deleted (--session-ttl)", ttl)
    return asyncio.create_task(expire_sessions(store, ttl, running=conversations.running_sessions),
                               name="session-expiry")


def create_app(config: ServerConfig, *, models: Any = None, services: dict[str, Any] | None = None) -> FastAPI:
    """The app for `config`. `models` replaces the model source (a callable returning
    `(ModelFactory, Script | None)` per turn); `services` are added to every run's `ctx.extras`."""
    run_services = RunServices(config, services)
    model_source = models or run_services.models
    upload_policy = UploadPolicy.load(config.upload_limits, max_body_bytes=config.max_body_bytes)

    compilers = CompileWorkers(config.compile_workers, config.compile_timeout, config.compile_memory_mb)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        try:
            await compilers.start()
            app.state.compilers = compilers
            async with open_store(config.db, pool_size=config.pool_size) as store:
                async with open_jobs(store, model_source, run_services, workers=config.workers,
                                     policy=config.double_texting, queue=config.queue) as jobs:
                    conversations = jobs.conversations
                    app.state.store = store
                    app.state.jobs = jobs
                    app.state.conversations = conversations
                    # stopped before the conversations: background webhook runs stay `running`, to resume;
                    # evaluations and ingestion runs are jobs, their handlers registered before the worker starts
                    async with WebhookRuns(store, conversations) as webhook_runs, \
                            open_background(jobs, run_services) as background:
                        app.state.webhooks = webhook_runs
                        app.state.background = background
                        expiry = start_expiry(store, conversations, config.session_ttl)
                        jobs.start_worker()
                        try:
                            async with run_mcp():     # MCP sessions end before the turns they run
                                tune_gc()
                                yield
                        finally:
                            if expiry is not None:
                                expiry.cancel()
                            await jobs.stop_worker()
        finally:
            await compilers.close()
            await run_services.aclose()
            await asyncio.to_thread(flush_traces)      # what the tracers still hold (nothing when tracing is off)

    app = FastAPI(title="canvas2graph", version="0.1.0", description=DESCRIPTION, lifespan=lifespan)
    install_error_handlers(app)
    # before the agents' routes: `/agents/templates`, `/agents/tags`, `/agents/download` and
    # `/agents/attachments` are not agent ids
    app.include_router(health.router)
    app.include_router(templates.router)
    app.include_router(files.router)
    app.include_router(builder.router)
    app.include_router(versions.router)
    app.include_router(schedules.router)
    app.include_router(webhooks.router)
    app.include_router(traces.router)          # before agents: /agents/rerun is no agent id
    app.include_router(recordings.router)
    app.include_router(evaluations.router)
    app.include_router(agents.router)
    app.include_router(completions.router)
    app.include_router(graphs.router)
    app.include_router(artifacts.router)
    app.include_router(components.router)      # the params schemas, for the canvas editor
    app.include_router(model_routes.router)    # the models the editor's model picker offers
    app.include_router(datasets.router)        # ingestion pipelines into datasets
    app.include_router(memories.router)        # RAGFlow's memories and their messages
    run_mcp = mcp_server.install(app, config.mcp_session_ttl)   # before the UI, which serves every other path
    a2a_server.install(app)
    langgraph_api.install(app)
    langgraph_crons.install(app)
    langgraph_store.install(app)
    ui.install(app)             # the run inspector at `/` (static files only)
    app.state.code_policy = run_services.code_policy
    app.state.files = run_services.files
    app.state.run_services = run_services
    app.state.upload_policy = upload_policy
    app.state.default_llm = config.default_llm

    app.add_middleware(BodyLimit, max_bytes=config.max_body_bytes)
    return app

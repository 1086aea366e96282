"""What a server process is configured with: its database, its models and its limits."""
from __future__ import annotations

from dataclasses import dataclass

DEFAULT_MAX_BODY = 16 * 1024 * 1024
# where the server serves the files components stored (routes/artifacts.py); runs link answers there
ARTIFACT_ROUTE = "/api/v1/documents/artifact"


@dataclass
class ServerConfig:
    db: str                                   # SQLite path or postgresql:// URL (agents, sessions, tokens, checkpoints)
    llm_script: str | None = None             # testing aid: every model of every turn answers from this script
    models_config: str | None = None          # the models TOML (default $CANVAS2GRAPH_MODELS)
    allow_local_code: bool = False            # CodeExec may run code on this machine only when set
    allow_browser: bool = False               # the Browser component may drive Chromium only when set
    max_body_bytes: int = DEFAULT_MAX_BODY
    workers: int = 256                        # turn slots this process runs (0: the API only; turns run in workers)
    double_texting: str = "enqueue"           # a message to a busy session: "enqueue" (after the running turn) or "reject"
    pool_size: int = 8                        # PostgreSQL connections this process keeps (docs/deploy.md)
    queue: str = "canvas2graph"               # the job queue its turns go to and its workers take from
    retrieval: str | None = None              # retrieval backend URL (default: the embedded store beside db)
    mcp_config: str | None = None             # JSON file of the MCP servers Agents call, by mcp_id
    default_llm: str | None = None            # model@Factory for components stored with an empty llm_id
    compile_timeout: float = 10.0             # seconds one DSL may take to compile (in a worker process)
    compile_memory_mb: int = 1024             # memory one compile may use beyond the worker's own
    compile_workers: int = 1                  # worker processes that compile requests' DSLs
    files_dir: str | None = None              # the run file store (default $CANVAS2GRAPH_FILES_DIR, ~/.canvas2graph/files)
    session_ttl: float | None = None          # seconds a session may stay idle before it is deleted; None keeps them
    mcp_session_ttl: float = 24 * 3600.0      # seconds an MCP session may stay idle before it is forgotten
    upload_limits: str | None = None          # TOML of per-tenant upload limits (default $CANVAS2GRAPH_UPLOAD_LIMITS)

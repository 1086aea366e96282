"""Retrieval settings: which backend, dataset tenants, embedding and rerank endpoints, the timeout.

The backend comes from a URL (`--retrieval` on the CLI, a setting on the server):
- `elasticsearch://[user:pass@]host:port` (`elasticsearchs://` for HTTPS): indexes RAGFlow built;
- `sqlite:///path/to/retrieval.db`: the embedded store.
Without one, the embedded store lives beside the session database (`retrieval.db` in its folder).

Everything else comes from an optional TOML file named by $CANVAS2GRAPH_RETRIEVAL_CONFIG:

    timeout = 12                 # seconds per retrieval (RAGFlow's COMPONENT_EXEC_TIMEOUT)
    strict = false               # true: no embedding model is an error, not the BM25 fallback
    default_embd_id = "bge-m3@OpenAI-API-Compatible"   # for datasets that do not name one
    verify_certs = true

    [datasets."<dataset id>"]    # RAGFlow's knowledge-base id
    tenant = "<tenant id>"       # Elasticsearch index ragflow_<tenant>; discovered when absent
    embd_id = "bge-m3@OpenAI-API-Compatible"

    [embeddings."bge-m3@OpenAI-API-Compatible"]   # optional: otherwise the models config's factory
    base_url = "http://127.0.0.1:8080/v1"
    api_key_env = "EMBEDDING_KEY"
    model = "BAAI/bge-m3"        # default: the part of the id before the last '@'

    [rerank."bge-reranker-v2-m3@OpenAI-API-Compatible"]
    base_url = "http://127.0.0.1:8081/v1"       # POST {base_url}/rerank (Jina, Cohere and TEI shapes)
    api_key_env = "RERANK_KEY"
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from canvas2graph.runtime.services.retrieval.protocol import DEFAULT_TIMEOUT_S, RetrievalError
from canvas2graph.runtime.services.toml_config import read_toml

CONFIG_ENV = "CANVAS2GRAPH_RETRIEVAL_CONFIG"
URL_ENV = "CANVAS2GRAPH_RETRIEVAL"
EMBEDDED_FILE = "retrieval.db"


@dataclass(frozen=True)
class Endpoint:
    base_url: str | None = None
    api_key_env: str | None = None
    api_key: str | None = None
    model: str | None = None


@dataclass
class RetrievalConfig:
    timeout: float = DEFAULT_TIMEOUT_S
    strict: bool = False
    verify_certs: bool = True
    default_embd_id: str | None = None
    tenants: dict[str, str] = field(default_factory=dict)        # dataset id -> tenant id
    embd_ids: dict[str, str] = field(default_factory=dict)       # dataset id -> embd_id
    embeddings: dict[str, Endpoint] = field(default_factory=dict)
    rerankers: dict[str, Endpoint] = field(default_factory=dict)
    models_config: str | None = None                             # the chat models' TOML (providers)

    @classmethod
    def load(cls, path: str | os.PathLike[str] | None = None) -> "RetrievalConfig":
        path = path or os.environ.get(CONFIG_ENV)
        if not path:
            return cls()
        return cls.from_dict(read_toml(path, "retrieval config", RetrievalError), where=str(path))

    @classmethod
    def from_dict(cls, data: dict[str, Any], where: str = "retrieval config") -> "RetrievalConfig":
        known = {"timeout", "strict", "verify_certs", "default_embd_id", "datasets", "embeddings", "rerank"}
        unknown = set(data) - known
        if unknown:
            raise RetrievalError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
        cfg = cls()
        try:
            cfg.timeout = float(data.get("timeout", DEFAULT_TIMEOUT_S))
        except (TypeError, ValueError):
            raise RetrievalError(f"{where}: timeout must be a number of seconds") from None
        if cfg.timeout <= 0:
            raise RetrievalError(f"{where}: timeout must be positive")
        cfg.strict = bool(data.get("strict", False))
        cfg.verify_certs = bool(data.get("verify_certs", True))
        cfg.default_embd_id = data.get("default_embd_id") or None
        for kb, entry in (data.get("datasets") or {}).items():
            if not isinstance(entry, dict):
                raise RetrievalError(f"{where}: datasets.{kb} must be a table")
            if entry.get("tenant"):
                cfg.tenants[kb] = str(entry["tenant"])
            if entry.get("embd_id"):
                cfg.embd_ids[kb] = str(entry["embd_id"])
        for table, target in (("embeddings", cfg.embeddings), ("rerank", cfg.rerankers)):
            for name, entry in (data.get(table) or {}).items():
                if not isinstance(entry, dict):
                    raise RetrievalError(f"{where}: {table}.{name} must be a table")
                extra = set(entry) - {"base_url", "api_key_env", "api_key", "model"}
                if extra:
                    raise RetrievalError(f"{where}: {table}.{name}: unknown key(s) {', '.join(sorted(extra))}")
                target[name] = Endpoint(**{k: str(v) for k, v in entry.items()})
        return cfg

    def embd_id_for(self, kb_id: str) -> str | None:
        return self.embd_ids.get(kb_id) or self.default_embd_id


@dataclass(frozen=True)
class BackendURL:
    kind: str                      # "elasticsearch" or "sqlite"
    hosts: list[str] = field(default_factory=list)
    username: str | None = None
    password: str | None = None
    path: str | None = None

    def describe(self) -> str:
        """The URL without credentials, for messages."""
        if self.kind == "sqlite":
            return sqlite_url(self.path or "")
        return "elasticsearch " + ",".join(self.hosts)


def parse_backend_url(url: str) -> BackendURL:
    """`elasticsearch://[user:pass@]host:port[,host2:port]`, `elasticsearchs://...` or `sqlite:///path`."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme == "sqlite":
        path = unquote(parts.path)
        if parts.netloc or not path or path == "/":
            raise RetrievalError("a sqlite retrieval URL names a file: sqlite:///path/to/retrieval.db")
        return BackendURL("sqlite", path=path)
    if scheme in ("elasticsearch", "elasticsearchs", "es", "http", "https"):
        secure = scheme in ("elasticsearchs", "https")
        netloc = parts.netloc
        user = password = None
        if "@" in netloc:
            creds, netloc = netloc.rsplit("@", 1)
            user, _, password = creds.partition(":")
            user, password = unquote(user), unquote(password)
        if not netloc:
            raise RetrievalError("an elasticsearch retrieval URL names a host: elasticsearch://host:9200")
        hosts = [f"{'https' if secure else 'http'}://{h if ':' in h else h + ':9200'}" for h in netloc.split(",")]
        return BackendURL("elasticsearch", hosts=hosts, username=user or None, password=password or None)
    shown = f"{scheme}://..." if scheme else url.split("@")[-1]
    raise RetrievalError(f"unsupported retrieval URL {shown}: use elasticsearch://[user:pass@]host:port or sqlite:///path")


def default_url(session_db: str | None) -> str:
    """The embedded store beside the session database (or in ~/.canvas2graph for a PostgreSQL one)."""
    if session_db and "://" not in session_db:
        folder = Path(session_db).expanduser().resolve().parent
    else:
        folder = Path.home() / ".canvas2graph"
    return sqlite_url(str(folder / EMBEDDED_FILE))


def sqlite_url(path: str) -> str:
    """sqlite:///relative/path, or sqlite:///abs/path for an absolute one (its own slash is the third)."""
    return f"sqlite://{path}" if path.startswith("/") else f"sqlite:///{path}"

"""One test suite against every checkpointer: in-memory, a SQLite file and PostgreSQL.

Fixtures (made visible to every test by `tests/conftest.py`):
- `checkpointer_url`: `None` (in memory), a SQLite file path, or the PostgreSQL URL: for tests that
  stay in one process;
- `durable_url`: a SQLite file path or the PostgreSQL URL: for tests that continue a session in
  another process.

Each value is what `canvas2graph.runtime.run.checkpoint.open_checkpointer` and the CLI's `--db` accept. PostgreSQL
is `$CANVAS2GRAPH_TEST_POSTGRES` (default `postgresql://postgres@127.0.0.1:5432/test`); when it is
unreachable its tests skip, saying why, except under CI=true, where they fail. Tests isolate
themselves with unique session ids (`new_session()`), never by dropping LangGraph's tables, so
reruns against the same database do not collide.
"""
from __future__ import annotations

import functools
import os
import uuid

import pytest

POSTGRES_URL = os.environ.get("CANVAS2GRAPH_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")


@functools.cache
def _postgres_problem(url: str) -> str | None:
    """Why PostgreSQL at `url` cannot be used, or None when it answers."""
    try:
        import psycopg
    except ImportError as e:            # pragma: no cover - psycopg is a project dependency
        return f"psycopg is not installed ({e})"
    try:
        with psycopg.connect(url, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except Exception as e:
        return f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"
    return None


def postgres_url() -> str:
    """The PostgreSQL URL; skip the test when the server is unreachable (fail under CI=true)."""
    problem = _postgres_problem(POSTGRES_URL)
    if problem:
        message = f"PostgreSQL at {POSTGRES_URL} is unreachable ({problem}); set CANVAS2GRAPH_TEST_POSTGRES to test it"
        if os.environ.get("CI") == "true":
            pytest.fail(message + " - CI must run these tests against PostgreSQL")
        pytest.skip(message)
    return POSTGRES_URL


def new_session() -> str:
    """A session id no other test run uses, even against a shared database."""
    return f"test-{uuid.uuid4()}"


def _url(kind: str, tmp_path) -> str | None:
    if kind == "memory":
        return None
    if kind == "sqlite":
        return str(tmp_path / "sessions.db")
    return postgres_url()


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def checkpointer_url(request, tmp_path) -> str | None:
    """Every checkpointer, for a test that stays in one process."""
    return _url(request.param, tmp_path)


@pytest.fixture(params=["sqlite", "postgres"])
def durable_url(request, tmp_path) -> str:
    """Every checkpointer that outlives a process: a SQLite file and PostgreSQL."""
    return _url(request.param, tmp_path)

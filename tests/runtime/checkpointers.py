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


class PrivatePostgres:
    """A PostgreSQL server of a test's own, in a temporary folder on a free port: a test that restarts its
    database restarts this one, never the machine's, which other tests (and test processes) are using.

    Made with the machine's `initdb` (run as the `postgres` user when the tests run as root, which PostgreSQL
    refuses to run as); skips (fails under CI=true) where PostgreSQL's server programs are not installed."""

    def __init__(self) -> None:
        import glob
        import shutil
        import socket
        import tempfile
        found = shutil.which("initdb") or next(iter(sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))[-1:]), None)
        if found is None:
            message = "PostgreSQL's server programs (initdb, pg_ctl) are not installed: no private server to restart"
            if os.environ.get("CI") == "true":
                pytest.fail(message)
            pytest.skip(message)
        self.bin = os.path.dirname(os.path.realpath(found))
        # (not under pytest's tmp_path: its folders are the test user's alone, and the server may run as postgres)
        self.folder = tempfile.mkdtemp(prefix="c2g-postgres-")
        self.as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        if self.as_user:
            shutil.chown(self.folder, "postgres")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        self._run("initdb", "-D", self.data, "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8")
        self.start()

    @property
    def data(self) -> str:
        return os.path.join(self.folder, "data")

    def _run(self, program: str, *args: str) -> None:
        import subprocess
        subprocess.run([*self.as_user, os.path.join(self.bin, program), *args], check=True, capture_output=True,
                       timeout=120)

    def start(self) -> None:
        self._run("pg_ctl", "-D", self.data, "-l", os.path.join(self.folder, "log"), "-w", "start", "-o",
                  f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c fsync=off")

    def stop(self) -> None:
        self._run("pg_ctl", "-D", self.data, "-m", "fast", "-w", "stop")

    def restart(self) -> None:
        self.stop()
        self.start()

    def remove(self) -> None:
        import shutil
        try:
            self.stop()
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)

"""Real servers for the retrieval tests, all on 127.0.0.1: an Elasticsearch 8 API (noida-db), an
OpenAI-compatible embeddings endpoint, and a server that accepts connections but never answers."""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.conftest import REPO

DIMS = 512


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def vec(*xs: float, dims: int = DIMS) -> list[float]:
    """A vector whose first components are `xs` and the rest 0 (cosines are then easy to compute by hand)."""
    return list(xs) + [0.0] * (dims - len(xs))


def _unavailable(reason: str):
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    pytest.skip(reason)


def noida_exe() -> str | None:
    venv_bin = Path(os.sys.executable).parent
    return shutil.which("noida-db") or (str(venv_bin / "noida-db") if (venv_bin / "noida-db").exists() else None)


def start_noida(exe: str, data_dir: Path, timeout: float = 30.0) -> tuple[subprocess.Popen, str]:
    """noida-db's Elasticsearch 8 API on a free port: (process, URL). Raises RuntimeError when it
    does not come up. Its launcher runs the server as a child, so it gets its own process group,
    which `stop_group` ends as a whole."""
    port = free_port()
    proc = subprocess.Popen([exe, "start", "--only", "elasticsearch", "--elasticsearch-port", str(port),
                             "--data-dir", str(data_dir), "--host", "127.0.0.1"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            stop_group(proc)
            raise RuntimeError(f"noida-db exited at start: {proc.stderr.read().decode(errors='replace')[-500:]}")
        try:
            with urllib.request.urlopen(url, timeout=1) as r:
                if json.load(r).get("version", {}).get("number", "").startswith("8."):
                    return proc, url
        except OSError:
            time.sleep(0.2)
    stop_group(proc)
    raise RuntimeError(f"noida-db did not answer within {timeout:g} s")


def stop_group(proc: subprocess.Popen) -> None:
    """End a process started with start_new_session and every process it started: SIGTERM, then
    SIGKILL for whatever is left after 10 s."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            proc.poll()                                  # reap the launcher, so it does not count as alive
            try:
                os.killpg(proc.pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
        else:
            continue
        break
    proc.wait()


@pytest.fixture(scope="session")
def es_url(tmp_path_factory) -> str:
    """A noida-db Elasticsearch 8 API on a free port (CI fails when it cannot start; elsewhere skips)."""
    exe = noida_exe()
    if exe is None:
        _unavailable("noida-db is not installed (pip install 'noida-db>=0.2.3,<0.3'): no Elasticsearch API to test against")
    try:
        proc, url = start_noida(exe, tmp_path_factory.mktemp("noida"))
    except RuntimeError as e:
        _unavailable(str(e))
    yield url
    stop_group(proc)


class EmbeddingServer:
    """OpenAI's POST /v1/embeddings, answering from a table of text -> vector (`default` otherwise)."""

    def __init__(self) -> None:
        self.vectors: dict[str, list[float]] = {}
        self.default: list[float] = vec(0.0, 0.0, 1.0)
        self.requests: list[dict] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
                server.requests.append(body)
                inputs = body.get("input")
                inputs = inputs if isinstance(inputs, list) else [inputs]
                data = [{"object": "embedding", "index": i, "embedding": server.vectors.get(t, server.default)}
                        for i, t in enumerate(inputs)]
                out = json.dumps({"object": "list", "data": data, "model": body.get("model"),
                                  "usage": {"prompt_tokens": 1, "total_tokens": 1}}).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def embedding_server():
    server = EmbeddingServer()
    yield server
    server.close()


@pytest.fixture
def silent_server():
    """Accepts TCP connections and never answers: a cluster that hangs."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept():
        sock.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = sock.accept()
                held.append(conn)
            except OSError:
                continue

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    yield f"127.0.0.1:{sock.getsockname()[1]}"
    stop.set()
    t.join(2)
    for c in held:
        c.close()
    sock.close()


def ragflow_mapping() -> dict:
    """RAGFlow's conf/mapping.json, as recorded in ../shared (settings, dynamic templates)."""
    from tests.conftest import shared_dir
    return json.loads((shared_dir() / "ragflow" / "es-mapping.json").read_text())


REPO_FIXTURES = REPO / "fixtures"

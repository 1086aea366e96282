"""Real servers for the retrieval tests, all on 127.0.0.1: an Elasticsearch 8 API (noida-db), an
OpenAI-compatible embeddings endpoint, and a server that accepts connections but never answers."""
from __future__ import annotations

import json
import os
import shutil
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


@pytest.fixture(scope="session")
def es_url(tmp_path_factory) -> str:
    """A noida-db Elasticsearch 8 API on a free port (CI fails when it cannot start; elsewhere skips)."""
    venv_bin = Path(os.sys.executable).parent
    exe = shutil.which("noida-db") or (str(venv_bin / "noida-db") if (venv_bin / "noida-db").exists() else None)
    if exe is None:
        _unavailable("noida-db is not installed (pip install 'noida-db>=0.2.3,<0.3'): no Elasticsearch API to test against")
    port = free_port()
    data = tmp_path_factory.mktemp("noida")
    proc = subprocess.Popen([exe, "start", "--only", "elasticsearch", "--elasticsearch-port", str(port),
                             "--data-dir", str(data), "--host", "127.0.0.1"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            _unavailable(f"noida-db exited at start: {proc.stderr.read().decode(errors='replace')[-500:]}")
        try:
            with urllib.request.urlopen(url, timeout=1) as r:
                if json.load(r).get("version", {}).get("number", "").startswith("8."):
                    break
        except OSError:
            time.sleep(0.2)
    else:
        proc.terminate()
        _unavailable("noida-db did not answer within 30 s")
    yield url
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()


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

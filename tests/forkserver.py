"""A warm Python for the processes the tests start: it imports once, then forks a child per process.

A new `python -m canvas2graph.cli ...` spends nearly all of its start importing LangGraph, LangChain, LangSmith,
FastAPI and the protocol SDKs (3 to 5 s of CPU each on CI's 2-core machine), and the suite starts hundreds:
a `serve` per server fixture, a `run` per recorded parity turn. A child forked from a process that has
imported those modules runs the same code from the same state as a new process, minus the imports. canvas2graph's
own modules are imported ahead too: they read their settings from the environment when called, never when
imported, and a child's environment is its own. (README.md, "Run the tests".)

Two ways in:
- `shared().spawn(argv, env=..., cwd=..., stdout=...)`: a child as a `subprocess.Popen`-like handle (`pid`,
  `poll`, `wait`, `send_signal`, `terminate`, `kill`, `returncode`); it can be signalled and SIGKILLed like any
  process (tests/server/helpers.py's servers and workers);
- `[*python(), "-m", MODULE, ...]` where a test would write `[sys.executable, "-m", MODULE, ...]` (joined, in a
  command line a program runs: the parity checker's), for a short run the test does not signal. Its client
  hands its stdin, stdout, stderr, environment and working directory to the child, passes SIGTERM and SIGINT
  on, and exits with the child's status.
"""
from __future__ import annotations

import atexit
import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

PRELOAD = ["langgraph.graph", "langgraph.pregel", "langgraph.checkpoint.sqlite.aio", "langchain_core.language_models",
           "canvas2graph.cli", "canvas2graph.cli.compile", "canvas2graph.cli.printers", "canvas2graph.compiler.canvas",
           "canvas2graph.nodes.registry", "canvas2graph.runtime.run.runner", "canvas2graph.runtime.run.checkpoint",
           "canvas2graph.runtime.services.scripted", "canvas2graph.runtime.services.llm_script",
           "uvicorn", "canvas2graph.server.app", "canvas2graph.cli.serve", "canvas2graph.cli.worker"]
NUMBER = struct.Struct("!i")        # the child's pid, then its exit code (-N: killed by signal N)


# --- the server ----------------------------------------------------------------------------------------
def serve(path: str) -> None:
    """Import PRELOAD, then fork a child for each connection: it sends the child's pid, then its exit code."""
    import importlib
    import threading

    sys.path[0] = os.getcwd()          # not tests/, whose `canvas2graph` folder would hide the package
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError:             # an optional extra that is not installed: a run that needs it imports it
            pass
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(128)
    sys.stdout.write("ready\n")
    sys.stdout.flush()

    def wait_child(conn: socket.socket, pid: int) -> None:
        _, raw = os.waitpid(pid, 0)
        try:
            conn.sendall(NUMBER.pack(os.waitstatus_to_exitcode(raw)))
        except OSError:
            pass
        conn.close()

    while True:
        conn, _ = listener.accept()
        message, fds, _flags, _addr = socket.recv_fds(conn, 1 << 20, 3)
        while not message.endswith(b"\n"):
            message += conn.recv(1 << 20)
        request = json.loads(message)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            listener.close()
            conn.close()
            _run_child(request, fds)
        for fd in fds:
            os.close(fd)
        conn.sendall(NUMBER.pack(pid))
        threading.Thread(target=wait_child, args=(conn, pid), daemon=True).start()


def _run_child(request: dict, fds: list[int]) -> None:
    """In the forked child: become `python ARGV` with the request's streams, environment and folder."""
    import importlib.util
    import runpy

    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    argv = request["argv"]
    status = 0
    try:
        if argv[0] == "-m":
            spec = importlib.util.find_spec(argv[1])
            name = f"{argv[1]}.__main__" if spec and spec.submodule_search_locations else argv[1]
            sys.path[0] = os.getcwd()
            sys.argv = [name, *argv[2:]]
            runpy.run_module(name, run_name="__main__", alter_sys=True)
        else:
            sys.path[0] = str(Path(argv[0]).resolve().parent)
            sys.argv = list(argv)
            runpy.run_path(argv[0], run_name="__main__")
    except SystemExit as e:
        if isinstance(e.code, int) or e.code is None:
            status = e.code or 0
        else:
            print(e.code, file=sys.stderr)
            status = 1
    except BaseException:               # noqa: BLE001 - reported as Python reports an uncaught error
        import traceback
        traceback.print_exc()
        status = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:               # noqa: BLE001 - a closed pipe: nothing more to say
            pass
    os._exit(status)


# --- asking it for a child -------------------------------------------------------------------------------
def _request(path: str, argv: list[str], env: dict, cwd: str, fds: list[int]) -> tuple[socket.socket, int]:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(path)
    message = json.dumps({"argv": argv, "env": env, "cwd": cwd}).encode() + b"\n"
    socket.send_fds(conn, [message[:1]], fds)
    conn.sendall(message[1:])
    return conn, _read_number(conn)


def _read_number(conn: socket.socket) -> int:
    raw = b""
    while len(raw) < NUMBER.size:
        chunk = conn.recv(NUMBER.size - len(raw))
        if not chunk:
            raise ConnectionError("the fork server went away")
        raw += chunk
    return NUMBER.unpack(raw)[0]


def client(path: str, argv: list[str]) -> int:
    """`python forkserver.py SOCKET ARGV...`: run `python ARGV` as a child of the server; its exit status."""
    conn, pid = _request(path, argv, dict(os.environ), os.getcwd(), [0, 1, 2])
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda n, _f: os.kill(pid, n))
    try:
        code = _read_number(conn)
    except ConnectionError:
        return 1
    return 128 - code if code < 0 else code     # killed by a signal: as a shell reports it


class ForkedProcess:
    """A child of the fork server, handled as `subprocess.Popen` handles a process."""

    def __init__(self, conn: socket.socket, pid: int, args: list[str]):
        self.conn, self.pid, self.args = conn, pid, args
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None and select.select([self.conn], [], [], 0)[0]:
            self._collect()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            if not select.select([self.conn], [], [], timeout)[0]:
                raise subprocess.TimeoutExpired(self.args, timeout)
            self._collect()
        return self.returncode

    def _collect(self) -> None:
        try:
            self.returncode = _read_number(self.conn)
        except ConnectionError:
            self.returncode = -signal.SIGKILL
        self.conn.close()

    def send_signal(self, signum: int) -> None:
        if self.returncode is None:
            try:
                os.kill(self.pid, signum)
            except ProcessLookupError:
                pass

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class ForkServer:
    def __init__(self, proc: subprocess.Popen, path: str):
        self.proc, self.path = proc, path
        self.command = f"{sys.executable} {Path(__file__).resolve()} {path}"

    @classmethod
    def start(cls, folder: Path) -> "ForkServer":
        path = str(folder / "forkserver.sock")
        proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--serve", path],
                                stdout=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parent.parent)
        if proc.stdout.readline().strip() != "ready":
            proc.kill()
            raise RuntimeError(f"the fork server did not start (exit status {proc.wait()})")
        return cls(proc, path)

    def spawn(self, argv: list[str], *, env: dict | None = None, cwd: str | Path | None = None,
              stdout=None, stderr=None) -> ForkedProcess:
        """`python ARGV` as a child; `stdout`/`stderr`: open files (default: this process's), stdin is empty.
        `stderr=subprocess.STDOUT` sends it where stdout goes."""
        out = stdout.fileno() if stdout is not None else 1
        err = out if stderr == subprocess.STDOUT else stderr.fileno() if stderr is not None else 2
        with open(os.devnull, "rb") as devnull:
            conn, pid = _request(self.path, argv, dict(os.environ if env is None else env),
                                 str(cwd or os.getcwd()), [devnull.fileno(), out, err])
        return ForkedProcess(conn, pid, argv)

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()


_shared: ForkServer | None = None


def shared() -> ForkServer:
    """This test process's fork server, started on first use and stopped when the process exits."""
    global _shared
    if _shared is None or _shared.proc.poll() is not None:
        _shared = ForkServer.start(Path(tempfile.mkdtemp(prefix="forkserver-")))
        atexit.register(_shared.stop)
    return _shared


def python() -> list[str]:
    """What to put where a test's command line would put `sys.executable`: the shared fork server's client."""
    return shared().command.split()


if __name__ == "__main__":
    if sys.argv[1] == "--serve":
        serve(sys.argv[2])
    else:
        sys.exit(client(sys.argv[1], sys.argv[2:]))

"""Hostile scripts, in Python and JavaScript, against CodeExec's local sandbox (runtime/services/sandbox/bubblewrap.py).

Each attack is what a tenant could send through an Agent's `execute_code` or a CodeExec node: read the
secrets of the process that runs it, read the sessions database or the machine's files, write outside
its scratch folder, reach the network, exhaust processes, memory or disk, outlive the run, or never
end. Each is stopped, and the run says why: the script's own error (what `_ERROR` carries) or the
limit it ran into. The machine is checked from outside too: no file appears, no connection arrives,
no process is left.
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from canvas2graph.runtime.services.sandbox import CodePolicy, run_code
from tests.runtime.services.test_code_exec import gone, marker, need_node

SECRET = "sk-canvas2graph-test-secret-4242"


@pytest.fixture(autouse=True)
def secrets_in_this_process(monkeypatch, sandboxed):
    """The process running the scripts holds keys, as a server does."""
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("CANVAS2GRAPH_TEST_SECRET", SECRET)


def policy(**limits) -> CodePolicy:
    return CodePolicy(**{"timeout": 20, **limits})


async def attack(language: str, code: str, arguments: dict | None = None, **limits):
    if language == "javascript":
        need_node()
    return await run_code(language, code, arguments or {}, policy(**limits))


# --- other processes' secrets --------------------------------------------------------------------

PY_ENVIRONS = '''
import os
def main():
    seen = {}
    targets = ["/proc/self/environ", f"/proc/{os.getppid()}/environ", "/proc/1/environ"]
    targets += [f"/proc/{p}/environ" for p in os.listdir("/proc") if p.isdigit()]
    for path in targets:
        try:
            seen[path] = open(path, "rb").read().decode(errors="replace")
        except OSError as e:
            seen[path] = f"{type(e).__name__}: {e.strerror}"
    return {"seen": seen, "pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit())}
'''
JS_ENVIRONS = '''
const fs = require('fs');
function main() {
  const seen = {};
  const pids = fs.readdirSync('/proc').filter((p) => /^\\d+$/.test(p));
  for (const path of ['/proc/self/environ', `/proc/${process.ppid}/environ`, '/proc/1/environ',
                      ...pids.map((p) => `/proc/${p}/environ`)]) {
    try { seen[path] = fs.readFileSync(path, 'latin1'); } catch (e) { seen[path] = e.code; }
  }
  return { seen, pids: pids.map(Number) };
}
'''


@pytest.mark.parametrize("language, code", [("python", PY_ENVIRONS), ("javascript", JS_ENVIRONS)])
async def test_no_process_the_script_can_see_holds_the_callers_environment(language, code):
    run = await attack(language, code)
    assert run.ok, run.error_message()
    seen = run.result["seen"]
    assert SECRET not in json.dumps(seen) and "OPENAI_API_KEY" not in json.dumps(seen)
    assert "/proc/1/environ" in seen                       # tried: the sandbox's own first process, empty-handed
    assert len(run.result["pids"]) <= 6                    # its own PID namespace: bubblewrap, supervisor, runner


# --- files of the machine ---------------------------------------------------------------------------

@pytest.fixture
def sessions_db(tmp_path) -> Path:
    """A sessions database as a server keeps it: token hashes and conversations."""
    path = tmp_path / "sessions.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE tokens (tenant TEXT, token_hash TEXT)")
        db.execute("INSERT INTO tokens VALUES ('alice', ?)", (SECRET,))
    return path


@pytest.mark.parametrize("language, code", [
    ("python", "def main(path):\n    return open(path, 'rb').read().hex()\n"),
    ("javascript", "const fs = require('fs');\nfunction main({ path }) { return fs.readFileSync(path, 'hex'); }"),
])
@pytest.mark.parametrize("target", ["sessions", "/etc/passwd", "/etc/shadow", "home"])
async def test_the_sessions_database_and_the_machines_files_do_not_exist_for_the_script(language, code, target,
                                                                                       sessions_db):
    path = {"sessions": str(sessions_db), "home": str(Path.home() / ".bash_history")}.get(target, target)
    run = await attack(language, code, {"path": path})
    assert not run.ok
    assert ("No such file or directory" if language == "python" else "ENOENT") in run.error_message()
    assert SECRET.encode().hex() not in run.stdout + run.error_message()


async def test_the_filesystem_holds_only_the_interpreter_the_job_and_the_scratch_folder():
    code = ("import os, sys\ndef main():\n"
            "    return {'root': sorted(os.listdir('/')), 'etc': sorted(os.listdir('/etc')), 'job': sorted(os.listdir('/job')),\n"
            "            'tmp': os.listdir('/tmp') if os.path.isdir('/tmp') else []}\n")
    run = await attack("python", code)
    assert run.ok, run.error_message()
    assert {"usr", "proc", "dev", "scratch", "job", "etc"} <= set(run.result["root"])
    assert not {"home", "var", "srv", "opt", "mnt", "boot", "run"} & set(run.result["root"])
    # an empty, read-only mount point (for the inner bubblewrap as root), but for the way down to the
    # interpreter's own folders when they live under /tmp (a checkout cloned there keeps its .venv there)
    interpreter_under_tmp = {Path(p).resolve().relative_to("/tmp").parts[0] for p in (sys.prefix, sys.base_prefix)
                             if Path(p).resolve().is_relative_to("/tmp")}
    assert set(run.result["tmp"]) == interpreter_under_tmp
    assert "passwd" not in run.result["etc"] and "shadow" not in run.result["etc"]
    assert run.result["job"] == ["args.json", "config.json", "main.py", "runner.py", "supervisor.py"]


# --- writing outside the scratch folder --------------------------------------------------------------

PY_WRITES = '''
import os, sys
def main(outside):
    tried = {}
    for path in [outside, "/escape", "/usr/escape", "/etc/escape", "/job/main.py", "/job/escape", "/proc/escape",
                 "/dev/escape", os.path.join(sys.prefix, "escape"), os.path.join(sys.base_prefix, "escape")]:
        try:
            with open(path, "w") as f:
                f.write("escaped")
            tried[path] = "written"
        except OSError as e:
            tried[path] = e.strerror
    writable = []
    for folder, dirs, _ in os.walk("/"):
        if folder.startswith(("/proc", "/sys")):
            dirs[:] = []
            continue
        probe = os.path.join(folder, ".probe")
        try:
            with open(probe, "w"):
                pass
            os.unlink(probe)
            writable.append(folder)
        except OSError:
            pass
    return {"tried": tried, "writable": writable}
'''
JS_WRITES = '''
const fs = require('fs');
function main({ outside }) {
  const tried = {};
  for (const path of [outside, '/escape', '/usr/escape', '/etc/escape', '/job/main.js', '/dev/escape']) {
    try { fs.writeFileSync(path, 'escaped'); tried[path] = 'written'; } catch (e) { tried[path] = e.code; }
  }
  return { tried };
}
'''


@pytest.mark.parametrize("language, code", [("python", PY_WRITES), ("javascript", JS_WRITES)])
async def test_nothing_outside_the_scratch_folder_can_be_written(language, code, tmp_path):
    outside = tmp_path / "escaped.txt"
    run = await attack(language, code, {"outside": str(outside)})
    assert run.ok, run.error_message()
    assert "written" not in run.result["tried"].values(), run.result["tried"]
    assert not outside.exists()
    if language == "python":      # every folder of the sandbox was tried: only its two memory-backed ones take files
        assert set(run.result["writable"]) <= {"/scratch", "/scratch/artifacts", "/dev/shm"}, run.result["writable"]


# --- the network ------------------------------------------------------------------------------------

@pytest.fixture
def listener():
    """A TCP server on this machine's 127.0.0.1 that counts the connections it gets."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.2)
    accepted = []
    stop = threading.Event()

    def serve():
        while not stop.is_set():
            try:
                accepted.append(server.accept()[0])
            except OSError:
                continue
    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1], accepted
    stop.set()
    thread.join()
    server.close()


@pytest.mark.parametrize("language, code, reason", [
    ("python", "import socket\ndef main(host, port):\n    socket.create_connection((host, port), timeout=5)\n",
     {"127.0.0.1": "ConnectionRefusedError", "1.1.1.1": "Network is unreachable"}),
    ("javascript", "const net = require('net');\nfunction main({ host, port }) {\n"
                   "  return new Promise((ok, fail) => { const s = net.connect(port, host, ok); s.on('error', fail); });\n}",
     {"127.0.0.1": "ECONNREFUSED", "1.1.1.1": "ENETUNREACH"}),
])
@pytest.mark.parametrize("host", ["127.0.0.1", "1.1.1.1"])
async def test_no_address_outside_the_sandbox_can_be_reached(language, code, reason, host, listener):
    port, accepted = listener
    run = await attack(language, code, {"host": host, "port": port if host == "127.0.0.1" else 53})
    assert not run.ok and reason[host] in run.error_message()
    assert accepted == []


async def test_names_do_not_resolve_in_the_sandbox():
    run = await attack("python", "import socket\ndef main():\n    return socket.getaddrinfo('example.com', 443)\n")
    assert not run.ok and "socket.gaierror" in run.error_message()


# --- processes ----------------------------------------------------------------------------------------

PY_FORK_BOMB = '''
import os, time
def main(mark):
    for _ in range(2000):                 # bounded: the limit stops it long before
        if os.fork() == 0:
            os.execvp("sleep", ["sleep", mark])
'''
JS_FORK_BOMB = '''
const { spawn } = require('child_process');
async function main({ mark }) {
  for (let i = 0; i < 2000; i++) {
    await new Promise((ok, fail) => { const c = spawn('sleep', [mark]); c.on('spawn', ok); c.on('error', fail); });
  }
}
'''


@pytest.mark.parametrize("language, code, reason", [
    ("python", PY_FORK_BOMB, "BlockingIOError: [Errno 11] Resource temporarily unavailable"),
    ("javascript", JS_FORK_BOMB, "spawn sleep EAGAIN"),
])
async def test_a_fork_bomb_stops_at_the_process_limit_and_its_processes_die_with_the_run(language, code, reason):
    mark = marker()
    run = await attack(language, code, {"mark": mark}, max_processes=24)
    assert not run.ok and reason in run.error_message()
    assert await gone(mark)


PY_SETSID = '''
import os
def main(mark):
    if os.fork() == 0:                    # a daemon: new session, double fork, parent gone
        os.setsid()
        if os.fork() == 0:
            os.execvp("sleep", ["sleep", mark])
        os._exit(0)
    os.wait()
    return "left a grandchild behind"
'''
JS_SETSID = '''
const { spawn } = require('child_process');
function main({ mark }) {
  spawn('sleep', [mark], { detached: true, stdio: 'ignore' }).unref();
  return 'left a grandchild behind';
}
'''


@pytest.mark.parametrize("language, code", [("python", PY_SETSID), ("javascript", JS_SETSID)])
async def test_a_setsid_grandchild_does_not_outlive_the_run(language, code):
    mark = marker()
    run = await attack(language, code, {"mark": mark})
    assert run.ok and run.result == "left a grandchild behind"
    assert await gone(mark)


@pytest.mark.parametrize("language, code", [
    ("python", "import subprocess, time\ndef main(mark):\n    subprocess.Popen(['sleep', mark])\n    time.sleep(600)\n"),
    ("javascript", "const { spawn } = require('child_process');\n"
                   "function main({ mark }) { spawn('sleep', [mark]); return new Promise(() => {}); }"),
])
async def test_a_script_that_never_ends_is_stopped_at_the_time_limit_with_everything_it_started(language, code):
    mark = marker()
    run = await attack(language, code, {"mark": mark}, timeout=2)
    assert (run.status, run.limit, run.error_message()) == ("resource_limit_exceeded", "time",
                                                             "Execution timed out after 2 s")
    assert await gone(mark)


# --- memory and disk --------------------------------------------------------------------------------------

@pytest.mark.parametrize("language, code, message", [
    ("python", "def main():\n    return len(bytearray(2 * 1024 ** 3))\n", "Memory limit exceeded (128 MB): MemoryError"),
    ("javascript", "function main() { const a = []; for (;;) a.push('x'.repeat(1000) + a.length); }",
     "Memory limit exceeded (128 MB of JavaScript heap)"),
])
async def test_memory_is_limited(language, code, message):
    run = await attack(language, code, memory_mb=128, timeout=60)
    assert (run.status, run.limit, run.error_message()) == ("resource_limit_exceeded", "memory", message)


@pytest.mark.parametrize("language, code, reason", [
    ("python", "def main(folder):\n    chunk = b'x' * 1024 * 1024\n    for i in range(10_000):\n"
               "        with open(f'{folder}/fill{i}', 'wb') as f:\n            f.write(chunk)\n",
     "No space left on device"),
    ("javascript", "const fs = require('fs');\nfunction main({ folder }) {\n  const chunk = Buffer.alloc(1 << 20);\n"
                   "  for (let i = 0; i < 10000; i++) fs.writeFileSync(`${folder}/fill${i}`, chunk);\n}",
     "ENOSPC"),
])
@pytest.mark.parametrize("folder", ["/scratch", "/dev/shm"])
async def test_the_disk_cannot_be_filled(language, code, reason, folder):
    run = await attack(language, code, {"folder": folder}, disk_mb=8)
    assert not run.ok and reason in run.error_message()


# --- privileges ---------------------------------------------------------------------------------------------

PY_PRIVILEGES = '''
import ctypes, os, subprocess
def main():
    status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines() if ":" in line)
    libc = ctypes.CDLL(None, use_errno=True)
    tried = {}
    for name, flag in [("user", 0x10000000), ("mount", 0x00020000), ("net", 0x40000000)]:
        tried[name] = "created" if libc.unshare(flag) == 0 else os.strerror(ctypes.get_errno())
    return {"uid": os.getuid(), "caps": status["CapEff"].strip(), "no_new_privs": status["NoNewPrivs"].strip(),
            "unshare": tried, "hostname": os.uname().nodename}
'''


async def test_the_script_has_no_privileges_and_cannot_make_namespaces_of_its_own():
    """No capabilities and no user namespace of its own: it cannot mount a filesystem past the disk
    limit, nor reach the kernel's namespace code beyond what unprivileged users can."""
    run = await attack("python", PY_PRIVILEGES)
    assert run.ok, run.error_message()
    assert run.result["uid"] != 0 and run.result["caps"] == "0000000000000000" and run.result["no_new_privs"] == "1"
    assert "created" not in run.result["unshare"].values(), run.result["unshare"]
    assert run.result["hostname"] == "sandbox"


UNPRIVILEGED_CALLER = '''
import asyncio, json, site, sys
sys.path[:0] = [sys.argv[1]]
site.addsitedir(sys.argv[2])      # its .pth files too: the editable install maps the package's folders
from canvas2graph.runtime.services.sandbox import CodePolicy, run_code
code = open(sys.argv[3]).read()
run = asyncio.run(run_code("python", code, {"mark": sys.argv[4]}, CodePolicy(python=sys.executable, timeout=20,
                                                                              max_processes=12)))
print(json.dumps({"ok": run.ok, "result": run.result, "error": "" if run.ok else run.error_message()}))
'''
PY_SURVEY = '''
import os, subprocess
def main(mark):
    seen = {"uid": os.getuid(), "init_environ": open("/proc/1/environ").read()}
    seen["unshare"] = subprocess.run(["unshare", "-U", "true"], capture_output=True).returncode
    subprocess.Popen(["sleep", mark])
    children = 0
    try:
        for _ in range(100):
            if os.fork() == 0:
                os.execvp("sleep", ["sleep", mark])
            children += 1
    except OSError as e:
        seen["fork"] = [children, e.strerror]
    return seen
'''


def reachable_by_others(path: str) -> bool:
    """Whether another user can reach `path`: every folder on the way lets others through."""
    return all(parent.stat().st_mode & 0o001 for parent in [Path(path), *Path(path).parents] if parent.is_dir())


async def test_an_unprivileged_caller_gets_the_same_sandbox():
    """As an ordinary user (the usual deployment), bubblewrap makes the user namespace itself. Run here
    as `nobody` with the system's Python, which can read neither root's home nor this checkout's venv
    interpreter."""
    system_python = "/usr/bin/python3"
    if os.geteuid() != 0 or not shutil.which("setpriv") or not os.path.exists(system_python):
        pytest.skip("needs root (to become nobody) and the system's python3")
    repo = str(Path(__file__).resolve().parents[3])
    site = next(p for p in sys.path if p.endswith("site-packages"))
    same = subprocess.run([system_python, "-c", "import sys; print(sys.version_info[:2])"], capture_output=True, text=True)
    if same.stdout.strip() != str(sys.version_info[:2]):
        pytest.skip("the system's python3 is another version than this one's packages")
    if not (reachable_by_others(repo) and reachable_by_others(site)):
        pytest.skip("this checkout or its packages cannot be read by another user")
    folder = Path(tempfile.mkdtemp(prefix="canvas2graph-caller-"))
    try:
        folder.chmod(0o755)
        for name, text in (("caller.py", UNPRIVILEGED_CALLER), ("survey.py", PY_SURVEY)):
            (folder / name).write_text(text)
            (folder / name).chmod(0o644)
        mark = marker()
        done = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", system_python, "-I",
                               str(folder / "caller.py"), repo, site, str(folder / "survey.py"), mark],
                              capture_output=True, text=True, timeout=120,
                              env={"PATH": "/usr/bin:/bin", "SECRET": SECRET})
    finally:
        shutil.rmtree(folder)
    assert done.returncode == 0, done.stderr
    run = json.loads(done.stdout)
    assert run["ok"], run["error"]
    seen = run["result"]
    assert seen["uid"] == 65534 and seen["init_environ"] == "" and seen["unshare"] != 0
    assert seen["fork"][1] == "Resource temporarily unavailable" and seen["fork"][0] < 12
    assert await gone(mark)

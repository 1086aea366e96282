"""Run a script on this machine, in the bubblewrap sandbox, with RAGFlow's calling convention and limits.

The convention (RAGFlow's sandbox): the script defines `main`. Python calls `main(**arguments)`;
JavaScript calls `main(arguments)` with one object (an exported `main`, or a top-level function named
`main`) and awaits a promise. The return value, as JSON, is the result. Files the script writes into
its working directory's `artifacts/` folder, or beside it, with an allowed extension (PNG, JPEG, SVG,
PDF, CSV, JSON, HTML) are collected as artifacts.

A run is three processes deep. bubblewrap (`bubblewrap.py`) makes the sandbox; in it the supervisor
(`inside/supervisor.py`) starts the language runner (`inside/runner.py`, `inside/runner.js`) under the
resource limits, waits for it, collects the artifacts from the scratch folder and reports them on a
pipe, where the runner has reported the value `main` returned. The job's files (the script, its
arguments, the runners) reach the sandbox as read-only copies; nothing is written on the host.

Limits: wall-clock time (bubblewrap is killed, and with it every process of the sandbox), the
address space of each process (RLIMIT_AS for Python; Node's heap limit, since V8 reserves far more
address space than it uses), processes and threads (RLIMIT_NPROC, counted per sandbox), CPU seconds,
the scratch folder's size and any one file's (RLIMIT_FSIZE), open files, and the size of stdout,
stderr and the report kept.

`unsafe_local` (only by explicit choice: `canvas2graph run --unsafe-local-code`) runs the same
supervisor as a plain child process in a scratch folder on the host: same convention and limits
(except processes and the folder's size), an environment without this process's secrets, its
process group killed at the end, but no isolation at all.
"""
from __future__ import annotations

import asyncio
import json
import math
import os
import shutil
import signal
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from canvas2graph.runtime.services.sandbox.bubblewrap import (JOB, SANDBOX_PATH, SCRATCH, Bubblewrap, find_bubblewrap, interpreter_roots,
                                        python_prefixes, run_uid, sandbox_argv)
from canvas2graph.runtime.services.sandbox.policy import CodePolicy
from canvas2graph.runtime.services.sandbox.types import (ARTIFACT_TYPES, LIMIT_EXCEEDED, PROGRAM_ERROR, RUNNER_ERROR, SUCCESS, Artifact,
                                   Execution)

INSIDE = Path(__file__).parent / "inside"
NODE_RESERVE_MB = 2048        # V8 reserves code and heap ranges up front; it cannot start under ~1 GB of address space
MAX_OPEN_FILES = 256
RESULT_BYTES = 16 * 1024 * 1024     # the value main() returns, as JSON, beside the artifacts on the report pipe
DRAIN_SECONDS = 5.0           # how long the pipes may stay open after the run ended (an unsandboxed straggler)
_MEMORY_SIGNS = ("MemoryError", "heap out of memory", "Fatal process OOM", "std::bad_alloc")

# Appended to a JavaScript script so a top-level `function main` works without being exported.
NODE_EXPORT_HOOK = "\n;try { if (typeof main === 'function' && module.exports) { module.exports.__canvas2graphMain = main; } } catch (e) {}\n"


@dataclass
class Job:
    """One run's files (name -> text), the runner's command line and the environment, with paths as the
    processes of the run see them."""

    files: dict[str, str]
    python: str                   # the interpreter of the supervisor (and of Python scripts)
    runner: list[str]
    env: dict[str, str]
    folder: str                   # where the job's files are: /job in the sandbox
    scratch: str                  # the working directory: /scratch in the sandbox
    binds: list[str] = field(default_factory=list)      # host folders the interpreters need (sandbox only)


async def run_local(language: str, code: str, arguments: dict[str, Any], policy: CodePolicy) -> Execution:
    """Run `code` (language "python" or "nodejs") with `arguments`; never raises for the script's own failures.

    Raises `SandboxUnusable` when bubblewrap is missing or cannot work here (and the policy does not opt
    out of the sandbox).
    """
    if policy.unsafe_local:
        return await _run_unconfined(language, code, arguments, policy)
    bwrap = await find_bubblewrap(policy.bwrap)
    job = await _job(language, code, arguments, policy, JOB, SCRATCH)
    if isinstance(job, Execution):
        return job
    fds = {}
    try:
        for name, text in job.files.items():
            fds[f"{JOB}/{name}"] = _memory_file(name, text)
        report = _Pipe()
        config_fd = _memory_file("config.json", json.dumps(_config(job, language, policy, report.child_fd)))
        fds[f"{JOB}/config.json"] = config_fd
        argv = sandbox_argv(bwrap, uid=run_uid(), binds=job.binds, data=fds, scratch_mb=policy.disk_mb,
                            command=_supervisor(job))
        return await _execute(argv, env={}, cwd="/", pass_fds=[report.child_fd, *fds.values()], report=report,
                              policy=policy, language=language, sandboxed=True)
    finally:
        for fd in fds.values():
            os.close(fd)


async def _run_unconfined(language: str, code: str, arguments: dict[str, Any], policy: CodePolicy) -> Execution:
    folder = Path(tempfile.mkdtemp(prefix="canvas2graph-code-"))
    try:
        work = folder / "work"
        work.mkdir()
        job = await _job(language, code, arguments, policy, str(folder), str(work))
        if isinstance(job, Execution):
            return job
        for name, text in job.files.items():
            (folder / name).write_text(text, encoding="utf-8")
        report = _Pipe()
        (folder / "config.json").write_text(json.dumps(_config(job, language, policy, report.child_fd)), encoding="utf-8")
        return await _execute(_supervisor(job), env=job.env, cwd=str(work), pass_fds=[report.child_fd],
                              report=report, policy=policy, language=language, sandboxed=False)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


async def _job(language: str, code: str, arguments: dict[str, Any], policy: CodePolicy, folder: str,
               scratch: str) -> Job | Execution:
    python = shutil.which(policy.python)
    if python is None:
        return Execution(RUNNER_ERROR, stderr=f"the Python interpreter {policy.python!r} was not found "
                                              "(CANVAS2GRAPH_CODE_PYTHON names it)", exit_code=-1)
    files = {"args.json": json.dumps(arguments, ensure_ascii=False),
             "supervisor.py": (INSIDE / "supervisor.py").read_text(encoding="utf-8")}
    binds = interpreter_roots(python, await python_prefixes(python))
    if language == "python":
        files.update({"main.py": code, "runner.py": (INSIDE / "runner.py").read_text(encoding="utf-8")})
        runner = [python, "-I", "-B", f"{folder}/runner.py", f"{folder}/main.py"]
    else:
        node = shutil.which(policy.node)
        if node is None:
            return Execution(RUNNER_ERROR, stderr=f"JavaScript needs Node.js, and {policy.node!r} was not found "
                                                  "(CANVAS2GRAPH_CODE_NODE names the executable)", exit_code=-1)
        files.update({"main.js": code + NODE_EXPORT_HOOK, "runner.js": (INSIDE / "runner.js").read_text(encoding="utf-8")})
        runner = [node, f"--max-old-space-size={policy.memory_mb}", f"{folder}/runner.js", f"{folder}/main.js"]
        binds += [root for root in interpreter_roots(node) if root not in binds]
    runner.append(f"{folder}/args.json")
    env = {
        "PATH": SANDBOX_PATH if folder == JOB else (os.environ.get("PATH") or os.defpath),
        "LANG": os.environ.get("LANG") or "C.UTF-8",
        "HOME": scratch,
        "TMPDIR": scratch,
        "MPLBACKEND": "Agg",                  # matplotlib without a display
        "OPENBLAS_NUM_THREADS": "1",          # numeric libraries reserve memory per thread
        "OMP_NUM_THREADS": "1",
    }
    return Job(files, python, runner, env, folder, scratch, binds)


def _config(job: Job, language: str, policy: CodePolicy, report_fd: int) -> dict[str, Any]:
    """What the supervisor is told: the runner's command line (the report pipe last), its environment and limits."""
    memory_mb = policy.memory_mb + (NODE_RESERVE_MB if language == "nodejs" else 0)
    limits = {"memory_bytes": memory_mb << 20, "cpu_seconds": math.ceil(policy.timeout) + 1,
              "file_bytes": policy.disk_mb << 20, "open_files": MAX_OPEN_FILES}
    if job.folder == JOB:
        limits["processes"] = policy.max_processes     # outside a sandbox it would count all of this user's processes
    return {"argv": [*job.runner, str(report_fd)], "env": job.env, "report_fd": report_fd, "limits": limits,
            "artifact_types": ARTIFACT_TYPES, "max_artifacts": policy.max_artifacts,
            "max_artifact_bytes": policy.max_artifact_bytes}


def _supervisor(job: Job) -> list[str]:
    return [job.python, "-I", "-S", "-B", f"{job.folder}/supervisor.py", f"{job.folder}/config.json"]


def _memory_file(name: str, text: str) -> int:
    """An anonymous in-memory file holding `text`, read from the start: bubblewrap copies it into the sandbox."""
    fd = os.memfd_create(name, 0)
    data = text.encode("utf-8")
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


class _Pipe:
    """The report pipe: the child end is passed to the run, this process reads the other."""

    def __init__(self) -> None:
        self.read_fd, self.child_fd = os.pipe()

    async def reader(self) -> asyncio.StreamReader:
        reader = asyncio.StreamReader()
        await asyncio.get_running_loop().connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader),
                                                           os.fdopen(self.read_fd, "rb", 0))
        return reader


class _Capture:
    """Everything a stream carries, the first `cap` bytes kept (the rest drained so the writer never blocks)."""

    def __init__(self, cap: int):
        self.cap = cap
        self.data = bytearray()
        self.cut = False

    async def pump(self, stream: asyncio.StreamReader) -> None:
        while chunk := await stream.read(65536):
            room = self.cap - len(self.data)
            if room > 0:
                self.data += chunk[:room]
            if len(chunk) > room:
                self.cut = True

    def text(self, label: str) -> str:
        text = self.data.decode("utf-8", errors="replace")
        return text + f"\n[{label} cut at {self.cap} bytes]" if self.cut else text


async def _execute(argv: list[str], *, env: dict[str, str], cwd: str, pass_fds: list[int], report: _Pipe,
                   policy: CodePolicy, language: str, sandboxed: bool) -> Execution:
    try:
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv, cwd=cwd, env=env, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, start_new_session=True, pass_fds=pass_fds)
        finally:
            os.close(report.child_fd)         # the run holds the only writer: EOF when its last process is gone
        report_stream = await report.reader()
    except OSError as e:
        os.close(report.read_fd)
        return Execution(RUNNER_ERROR, stderr=f"cannot start {argv[0]}: {e.strerror or e}", exit_code=-1)
    out, err = _Capture(policy.max_output_bytes), _Capture(policy.max_output_bytes)
    reply = _Capture(2 * policy.max_artifacts * policy.max_artifact_bytes + RESULT_BYTES)
    pumps = asyncio.gather(out.pump(proc.stdout), err.pump(proc.stderr), reply.pump(report_stream))
    try:
        async with asyncio.timeout(policy.timeout):
            await proc.wait()
    except TimeoutError:
        _kill(proc)
        await proc.wait()
        await _drain(pumps)
        return Execution(LIMIT_EXCEEDED, stdout=out.text("stdout"), exit_code=-1, limit="time",
                         stderr=f"Execution timed out after {policy.timeout:g} s", detail=err.text("stderr"))
    except BaseException:          # the turn was cancelled or the component timed out: leave nothing running
        _kill(proc)
        pumps.cancel()
        raise
    _kill(proc)               # the sandbox is gone with bubblewrap; unsandboxed, whatever the script left running
    await _drain(pumps)
    return _outcome(proc.returncode, out, err, reply, policy, language, sandboxed)


async def _drain(pumps: asyncio.Future) -> None:
    try:
        await asyncio.wait_for(asyncio.shield(pumps), DRAIN_SECONDS)
    except TimeoutError:      # a process that escaped the process group holds a pipe (unsandboxed only)
        pumps.cancel()
        await asyncio.gather(pumps, return_exceptions=True)


def _kill(proc: asyncio.subprocess.Process) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _outcome(status: int, out: _Capture, err: _Capture, reply: _Capture, policy: CodePolicy, language: str,
             sandboxed: bool) -> Execution:
    stdout, stderr = out.text("stdout"), err.text("stderr")
    if reply.cut:
        return Execution(LIMIT_EXCEEDED, stdout=stdout, exit_code=-1, limit="output",
                         stderr=f"The value main() returned and the artifacts exceed {reply.cap >> 20} MB")
    result, final = _report(reply.data)
    if final is None:              # the supervisor never reported: the sandbox did not start, or the script ended it
        if sandboxed and stderr.lstrip().startswith("bwrap:"):
            return Execution(RUNNER_ERROR, stderr=f"the sandbox could not start: {stderr.strip()}", exit_code=status)
        return Execution(PROGRAM_ERROR, stdout=stdout, exit_code=status,
                         stderr=stderr or f"the run ended before the script finished (exit status {status})")
    code = final.get("exit_code")
    code = code if isinstance(code, int) else -1
    if code == -signal.SIGXCPU:
        return Execution(LIMIT_EXCEEDED, stderr=f"Execution used more than {math.ceil(policy.timeout)} s of CPU",
                         exit_code=code, limit="time")
    if code == -signal.SIGXFSZ:
        return Execution(LIMIT_EXCEEDED, stderr=f"File size limit exceeded ({policy.disk_mb} MB)", exit_code=code,
                         limit="disk")
    if code == -signal.SIGKILL or (code != 0 and any(sign in stderr for sign in _MEMORY_SIGNS)):
        if language == "nodejs":
            message = f"Memory limit exceeded ({policy.memory_mb} MB of JavaScript heap)"
        else:
            last = next((line for line in reversed(stderr.splitlines()) if line.strip()), "")
            message = f"Memory limit exceeded ({policy.memory_mb} MB)" + (f": {last.strip()}" if last else "")
        return Execution(LIMIT_EXCEEDED, stderr=message, exit_code=code, limit="memory")
    if code != 0:
        return Execution(PROGRAM_ERROR, stdout=stdout, stderr=stderr or f"the script exited with status {code}",
                         exit_code=code)
    execution = Execution(SUCCESS, stdout=stdout, stderr=stderr, exit_code=0)
    if isinstance(result, dict) and result.get("present") is True:
        execution.result_present, execution.result = True, result.get("value")
    execution.artifacts = _artifacts(final.get("artifacts"), policy)
    return execution


def _report(data: bytes) -> tuple[Any, dict | None]:
    """(the runner's result record, the supervisor's final record) from the report pipe; the last of each
    wins. The script could write there too: it is read like any untrusted reply."""
    result, final = None, None
    for line in bytes(data).splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and "result" in record:
            result = record["result"]
        elif isinstance(record, dict) and "exit_code" in record:
            final = record
    return result, final


def _artifacts(items: Any, policy: CodePolicy) -> list[Artifact]:
    found: list[Artifact] = []
    for item in items if isinstance(items, list) else []:
        artifact = Artifact.from_wire(item)
        suffix = Path(artifact.name).suffix.lower() if artifact else ""
        if artifact is None or suffix not in ARTIFACT_TYPES or artifact.size > policy.max_artifact_bytes:
            continue
        found.append(Artifact(artifact.name, ARTIFACT_TYPES[suffix], artifact.data))
        if len(found) >= policy.max_artifacts:
            break
    return found

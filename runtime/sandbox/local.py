"""Run a script as a local child process, with RAGFlow's calling convention and a few limits.

The convention (RAGFlow's sandbox): the script defines `main`. Python calls `main(**arguments)`;
JavaScript calls `main(arguments)` with one object (an exported `main`, or a top-level function named
`main`) and awaits a promise. The return value, as JSON, is the result. Files the script writes into
its working directory's `artifacts/` folder, or beside it, with an allowed extension (PNG, JPEG, SVG,
PDF, CSV, JSON, HTML) are collected as artifacts.

Each run gets a fresh job directory: the script, a small runner, the arguments and the result file
there, and `work/` (the working directory, HOME and TMPDIR of the script) below it. The directory
is removed when the run ends. Limits: wall-clock time (the whole process group is killed), address
space (RLIMIT_AS for Python; Node's heap limit, since V8 reserves far more address space than it
uses), CPU seconds, file size, open files, and the size of stdout and stderr kept. The child's
environment holds only PATH, LANG, HOME, TMPDIR and settings that keep numeric libraries small and
headless: nothing of this process's environment (keys, tokens, database URLs) reaches it.
"""
from __future__ import annotations

import asyncio
import json
import math
import os
import resource
import shutil
import signal
import tempfile
from pathlib import Path
from typing import Any

from runtime.sandbox.policy import CodePolicy
from runtime.sandbox.types import (ARTIFACT_TYPES, LIMIT_EXCEEDED, PROGRAM_ERROR, RUNNER_ERROR, SUCCESS, Artifact,
                                   Execution)

NODE_RESERVE_MB = 2048        # V8 reserves code and heap ranges up front; it cannot start under ~1 GB of address space
MAX_OPEN_FILES = 256
_MEMORY_SIGNS = ("MemoryError", "heap out of memory", "Fatal process OOM", "std::bad_alloc")

PYTHON_RUNNER = '''\
import importlib.util
import json
import sys


def fail(message):
    sys.stderr.write(message + "\\n")
    sys.exit(1)


code_path, args_path, result_path = sys.argv[1:4]
del sys.argv[1:]
with open(args_path, encoding="utf-8") as f:
    arguments = json.load(f)
spec = importlib.util.spec_from_file_location("main", code_path)
module = importlib.util.module_from_spec(spec)
sys.modules["main"] = module
spec.loader.exec_module(module)
entry = getattr(module, "main", None)
if not callable(entry):
    fail("The script defines no function named main(); CodeExec calls main(**arguments) and uses its return value.")
value = entry(**arguments)
try:
    text = json.dumps({"present": True, "value": value}, ensure_ascii=False)
except (TypeError, ValueError) as e:
    fail(f"main() returned a value that cannot be written as JSON: {e}")
with open(result_path, "w", encoding="utf-8") as f:
    f.write(text)
'''

NODE_RUNNER = '''\
'use strict';
const fs = require('fs');
const path = require('path');
const [codePath, argsPath, resultPath] = process.argv.slice(2);
process.argv.splice(2);
const args = JSON.parse(fs.readFileSync(argsPath, 'utf8'));

function fail(message) {
  process.stderr.write(message + '\\n');
  process.exitCode = 1;
}

function finish(value) {
  if (value === undefined) {     // nothing returned: what the script printed is the result
    fs.writeFileSync(resultPath, JSON.stringify({ present: false }));
    return;
  }
  let text;
  try {
    text = JSON.stringify({ present: true, value: value });
  } catch (err) {
    fail('main() returned a value that cannot be written as JSON: ' + err.message);
    return;
  }
  fs.writeFileSync(resultPath, text);
}

const loaded = require(path.resolve(codePath));
const entry = (loaded && loaded.__canvas2graphMain) || (typeof loaded === 'function' ? loaded : loaded && loaded.main);
if (typeof entry !== 'function') {
  fail('The script defines no function named main; CodeExec calls main(args) and uses its return value.');
} else {
  Promise.resolve().then(() => entry(args)).then(finish, (err) => fail(err && err.stack ? String(err.stack) : String(err)));
}
'''

# Appended to a JavaScript script so a top-level `function main` works without being exported.
NODE_EXPORT_HOOK = "\n;try { if (typeof main === 'function' && module.exports) { module.exports.__canvas2graphMain = main; } } catch (e) {}\n"


async def run_local(language: str, code: str, arguments: dict[str, Any], policy: CodePolicy) -> Execution:
    """Run `code` (language "python" or "nodejs") with `arguments`; never raises for the script's own failures."""
    job = Path(tempfile.mkdtemp(prefix="canvas2graph-code-"))
    try:
        work = job / "work"
        (work / "artifacts").mkdir(parents=True)
        args_path, result_path = job / "args.json", job / "result.json"
        args_path.write_text(json.dumps(arguments, ensure_ascii=False), encoding="utf-8")
        if language == "python":
            code_path, runner = job / "main.py", job / "runner.py"
            code_path.write_text(code, encoding="utf-8")
            runner.write_text(PYTHON_RUNNER, encoding="utf-8")
            argv = [policy.python, "-I", "-B", str(runner)]
            address_space = policy.memory_mb
        else:
            node = shutil.which(policy.node)
            if node is None:
                return Execution(RUNNER_ERROR, stderr=f"JavaScript needs Node.js, and {policy.node!r} was not found "
                                                      "(CANVAS2GRAPH_CODE_NODE names the executable)", exit_code=-1)
            code_path, runner = job / "main.js", job / "runner.js"
            code_path.write_text(code + NODE_EXPORT_HOOK, encoding="utf-8")
            runner.write_text(NODE_RUNNER, encoding="utf-8")
            argv = [node, f"--max-old-space-size={policy.memory_mb}", str(runner)]
            address_space = policy.memory_mb + NODE_RESERVE_MB
        argv += [str(code_path), str(args_path), str(result_path)]
        execution = await _execute(argv, work, address_space, policy)
        if execution.status == LIMIT_EXCEEDED and execution.limit == "memory" and language == "nodejs":
            execution.stderr = f"Memory limit exceeded ({policy.memory_mb} MB of JavaScript heap)"
        if execution.ok:
            execution.result_present, execution.result = _read_result(result_path)
            execution.artifacts = collect_artifacts(work, policy)
        return execution
    finally:
        shutil.rmtree(job, ignore_errors=True)


async def _execute(argv: list[str], work: Path, address_space_mb: int, policy: CodePolicy) -> Execution:
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv, cwd=str(work), env=child_environment(work), stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, start_new_session=True,
            preexec_fn=lambda: _apply_limits(address_space_mb, policy))
    except OSError as e:
        return Execution(RUNNER_ERROR, stderr=f"cannot start {argv[0]}: {e.strerror or e}", exit_code=-1)
    cap = policy.max_output_bytes
    try:
        async with asyncio.timeout(policy.timeout):
            (out, out_cut), (err, err_cut), code = await asyncio.gather(
                _read_capped(proc.stdout, cap), _read_capped(proc.stderr, cap), proc.wait())
    except TimeoutError:
        _kill_group(proc)
        await proc.wait()
        return Execution(LIMIT_EXCEEDED, stderr=f"Execution timed out after {policy.timeout:g} s",
                         exit_code=-1, limit="time")
    except BaseException:          # the turn was cancelled or the component timed out: leave nothing running
        _kill_group(proc)
        raise
    _kill_group(proc)               # whatever the script left running in the background
    if out_cut:
        out += f"\n[stdout cut at {cap} bytes]"
    if err_cut:
        err += f"\n[stderr cut at {cap} bytes]"
    if code == 0:
        return Execution(SUCCESS, stdout=out, stderr=err, exit_code=0)
    if code == -signal.SIGXCPU:
        return Execution(LIMIT_EXCEEDED, stderr=f"Execution used more than {math.ceil(policy.timeout)} s of CPU",
                         exit_code=code, limit="time")
    if code == -signal.SIGKILL or any(sign in err for sign in _MEMORY_SIGNS):
        last = next((line for line in reversed(err.splitlines()) if line.strip()), "")
        message = f"Memory limit exceeded ({policy.memory_mb} MB)" + (f": {last.strip()}" if last else "")
        return Execution(LIMIT_EXCEEDED, stderr=message, exit_code=code, limit="memory")
    return Execution(PROGRAM_ERROR, stdout=out, stderr=err or f"the script exited with status {code}", exit_code=code)


def child_environment(work: Path) -> dict[str, str]:
    """The script's whole environment: nothing inherited but PATH and the locale."""
    return {
        "PATH": os.environ.get("PATH") or os.defpath,
        "LANG": os.environ.get("LANG") or "C.UTF-8",
        "HOME": str(work),
        "TMPDIR": str(work),
        "MPLBACKEND": "Agg",                  # matplotlib without a display
        "OPENBLAS_NUM_THREADS": "1",          # numeric libraries reserve memory per thread
        "OMP_NUM_THREADS": "1",
    }


def _apply_limits(address_space_mb: int, policy: CodePolicy) -> None:
    """Runs in the child between fork and exec, so it only calls setrlimit."""
    cpu = math.ceil(policy.timeout) + 1         # a backstop: the wall clock normally stops the script first
    _limit(resource.RLIMIT_AS, address_space_mb * 1024 * 1024)
    _limit(resource.RLIMIT_CPU, cpu, cpu + 1)   # SIGXCPU at the soft limit, SIGKILL one second later
    _limit(resource.RLIMIT_FSIZE, policy.max_file_bytes)
    _limit(resource.RLIMIT_NOFILE, MAX_OPEN_FILES)
    _limit(resource.RLIMIT_CORE, 0)


def _limit(kind: int, soft: int, hard: int | None = None) -> None:
    _, current = resource.getrlimit(kind)
    hard = soft if hard is None else hard
    if current != resource.RLIM_INFINITY:
        soft, hard = min(soft, current), min(hard, current)
    resource.setrlimit(kind, (soft, hard))


async def _read_capped(stream: asyncio.StreamReader, cap: int) -> tuple[str, bool]:
    """Read to the end, keeping the first `cap` bytes (the rest is drained so the script never blocks)."""
    kept = bytearray()
    cut = False
    while chunk := await stream.read(65536):
        room = cap - len(kept)
        if room > 0:
            kept += chunk[:room]
        if len(chunk) > room:
            cut = True
    return kept.decode("utf-8", errors="replace"), cut


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _read_result(path: Path) -> tuple[bool, Any]:
    """(present, value) from the runner's result file; absent when the script exited before returning."""
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False, None
    if not isinstance(record, dict) or record.get("present") is not True:
        return False, None
    return True, record.get("value")


def collect_artifacts(work: Path, policy: CodePolicy) -> list[Artifact]:
    """Files in `work/artifacts/` and, as RAGFlow's sandbox promotes them, files of an allowed type in `work/`.

    Symlinks, hidden and empty files, other types and files over the size limit are left out; at most
    `max_artifacts` are kept, `artifacts/` first, each name once.
    """
    found: dict[str, Artifact] = {}
    for folder in (work / "artifacts", work):
        try:
            entries = sorted(folder.iterdir(), key=lambda p: p.name)
        except OSError:
            continue
        for path in entries:
            if len(found) >= policy.max_artifacts:
                return list(found.values())
            mime = ARTIFACT_TYPES.get(path.suffix.lower())
            if mime is None or path.name in found or path.name.startswith(".") or path.is_symlink() or not path.is_file():
                continue
            size = path.stat().st_size
            if size == 0 or size > policy.max_artifact_bytes:
                continue
            found[path.name] = Artifact(path.name, mime, path.read_bytes())
    return list(found.values())

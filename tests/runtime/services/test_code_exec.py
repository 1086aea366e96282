"""Code execution for CodeExec (canvas2graph.runtime.services.sandbox): RAGFlow's `main` convention run in the local bubblewrap
sandbox with limits, or sent to a RAGFlow sandbox executor manager; and the policy that chooses between
them. What a hostile script cannot do in the sandbox is in test_sandbox_hostile.py."""
from __future__ import annotations

import asyncio
import base64
import os
import shutil
import struct
import time
import uuid
import zlib
from pathlib import Path

import pytest

from canvas2graph.runtime.services.sandbox import CodePolicy, CodePolicyError, CodeRefused, SandboxUnavailable, SandboxUnusable, run_code
from tests.conftest import need_sandbox
from tests.runtime.sandbox_server import SandboxServer

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

CHART_SCRIPT = '''
import struct, zlib

def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xffffffff)

def main(width, height):
    rows = b"".join(b"\\x00" + b"\\xff\\x80\\x00" * width for _ in range(height))
    png = (b"\\x89PNG\\r\\n\\x1a\\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
           + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))
    with open("artifacts/chart.png", "wb") as f:
        f.write(png)
    with open("table.csv", "w") as f:
        f.write("x,y\\n1,2\\n")
    with open("notes.txt", "w") as f:
        f.write("not an artifact type")
    return {"rows": height}
'''


def need_node() -> str:
    node = shutil.which("node")
    if node is None:
        if os.environ.get("CI") == "true":
            pytest.fail("node is missing: CI must run the JavaScript tests")
        pytest.skip("node (Node.js) is not installed")
    return node


@pytest.fixture
def policy(tmp_path, sandboxed) -> CodePolicy:
    return CodePolicy(timeout=20, artifacts_dir=str(tmp_path / "artifacts"))


def marker() -> str:
    """A `sleep` duration no other process on the machine has in its command line."""
    return f"300.{uuid.uuid4().int % 10**9:09d}"


def processes_with(mark: str) -> list[int]:
    """Host processes whose command line holds `mark` (zombies waiting for a reaper do not count)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if mark in (entry / "cmdline").read_bytes().decode(errors="replace") and \
                    "\nState:\tZ" not in (entry / "status").read_text():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


async def gone(mark: str, seconds: float = 5.0) -> bool:
    """Whether every process holding `mark` disappears within `seconds` (SIGKILL takes a moment)."""
    for _ in range(int(seconds / 0.05)):
        if not processes_with(mark):
            return True
        await asyncio.sleep(0.05)
    return not processes_with(mark)


# --- Python: the main(**arguments) convention ------------------------------------------------------

async def test_python_main_gets_the_arguments_as_keywords_and_its_return_value_is_the_result(policy):
    code = "def main(a, b):\n    print('working')\n    return {'sum': a + b, 'items': [a, b], 'ok': True}\n"
    run = await run_code("python", code, {"a": 2, "b": 3}, policy)
    assert run.ok and run.result_present
    assert run.result == {"sum": 5, "items": [2, 3], "ok": True}
    assert run.stdout == "working\n"


@pytest.mark.parametrize("value", ["'text'", "42", "2.5", "True", "None", "[1, 'a', None]"])
async def test_any_json_value_can_be_returned(policy, value):
    run = await run_code("python3", f"def main():\n    return {value}\n", {}, policy)
    assert run.ok and run.result_present
    assert run.result == eval(value)


async def test_a_failing_script_reports_its_traceback(policy):
    run = await run_code("python", "def main():\n    raise ValueError('no data for this quarter')\n", {}, policy)
    assert run.status == "program_error" and not run.ok
    assert "ValueError: no data for this quarter" in run.error_message()


async def test_a_script_without_main_is_told_to_define_one(policy):
    run = await run_code("python", "x = 1\n", {}, policy)
    assert not run.ok and "main" in run.error_message()


async def test_a_result_that_is_not_json_is_an_error(policy):
    run = await run_code("python", "def main():\n    return {1, 2}\n", {}, policy)
    assert not run.ok and "cannot be written as JSON" in run.error_message()


async def test_python_runs_isolated_in_a_fresh_scratch_directory(policy):
    code = ("import os, sys\ndef main():\n    open('left.txt', 'w').write('x')\n"
            "    return {'cwd': os.getcwd(), 'flags': sys.flags.isolated, 'files': sorted(os.listdir('.'))}\n")
    run = await run_code("python", code, {}, policy)
    assert run.result["flags"] == 1                      # -I: no user site, no PYTHON* variables, no script dir
    assert run.result["cwd"] == "/scratch"
    assert run.result["files"] == ["artifacts", "left.txt"]     # the script and runner live outside it
    again = await run_code("python", code, {}, policy)
    assert again.result["files"] == ["artifacts", "left.txt"]   # each run starts from an empty folder


async def test_the_parent_environment_does_not_reach_the_script(policy, monkeypatch):
    monkeypatch.setenv("CANVAS2GRAPH_TEST_SECRET", "hunter2")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-for-scripts")
    code = "import os\ndef main():\n    return {'env': dict(os.environ), 'cwd': os.getcwd()}\n"
    run = await run_code("python", code, {}, policy)
    env = run.result["env"]
    assert "CANVAS2GRAPH_TEST_SECRET" not in env and "OPENAI_API_KEY" not in env
    assert "hunter2" not in str(env) and "sk-test" not in str(env)
    assert set(env) <= {"PATH", "LANG", "HOME", "TMPDIR", "MPLBACKEND", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS",
                        "LC_CTYPE"}
    assert env["HOME"] == run.result["cwd"] == "/scratch"


# --- limits ---------------------------------------------------------------------------------------

async def test_a_script_over_its_time_limit_is_killed_with_its_children(policy):
    mark = marker()
    code = ("import subprocess, time\n"
            "def main(mark):\n"
            "    subprocess.Popen(['sleep', mark])\n"
            "    while True:\n"
            "        time.sleep(0.05)\n")
    run = await run_code("python", code, {"mark": mark}, CodePolicy(timeout=2))
    assert (run.status, run.limit) == ("resource_limit_exceeded", "time")
    assert run.error_message() == "Execution timed out after 2 s"
    assert await gone(mark)


async def test_a_cancelled_run_leaves_no_process_behind(policy):
    """A turn cancelled, or a component over COMPONENT_EXEC_TIMEOUT, cancels the run mid-script."""
    mark = marker()
    code = "import subprocess\ndef main(mark):\n    subprocess.run(['sleep', mark])\n"
    task = asyncio.create_task(run_code("python", code, {"mark": mark}, CodePolicy(timeout=600)))
    for _ in range(400):
        if processes_with(mark):
            break
        await asyncio.sleep(0.05)
    assert processes_with(mark), "the script did not start"
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await gone(mark)


async def test_a_script_over_its_memory_limit_stops_with_a_memory_error(sandboxed):
    run = await run_code("python", "def main():\n    return len(bytearray(1024 * 1024 * 1024))\n", {},
                         CodePolicy(timeout=20, memory_mb=256))
    assert (run.status, run.limit) == ("resource_limit_exceeded", "memory")
    assert run.error_message() == "Memory limit exceeded (256 MB): MemoryError"


async def test_output_beyond_the_cap_is_cut_and_the_run_still_succeeds(sandboxed):
    code = "def main():\n    print('x' * 3_000_000)\n    return 'done'\n"
    run = await run_code("python", code, {}, CodePolicy(timeout=20, max_output_bytes=1000))
    assert run.ok and run.result == "done"
    assert run.stdout == "x" * 1000 + "\n[stdout cut at 1000 bytes]"


async def test_what_a_script_writes_is_limited_by_the_scratch_folders_size(sandboxed):
    one_file = "def main():\n    with open('big.csv', 'w') as f:\n        f.write('x' * 3_000_000)\n"
    run = await run_code("python", one_file, {}, CodePolicy(timeout=20, disk_mb=2))
    assert not run.ok and "OSError: [Errno 27] File too large" in run.error_message()
    many_files = "def main():\n    for i in range(3):\n        open(f'part{i}.csv', 'w').write('x' * 1_500_000)\n"
    run = await run_code("python", many_files, {}, CodePolicy(timeout=20, disk_mb=2))
    assert not run.ok and "OSError: [Errno 28] No space left on device" in run.error_message()


# --- artifacts ------------------------------------------------------------------------------------

async def test_files_written_to_artifacts_or_beside_it_are_collected(policy):
    run = await run_code("python", CHART_SCRIPT, {"width": 4, "height": 3}, policy)
    assert run.ok and run.result == {"rows": 3}
    by_name = {a.name: a for a in run.artifacts}
    assert sorted(by_name) == ["chart.png", "table.csv"]          # notes.txt is no artifact type
    png = by_name["chart.png"]
    assert png.mime_type == "image/png" and png.data.startswith(PNG_SIGNATURE)
    assert struct.unpack(">II", png.data[16:24]) == (4, 3)
    assert zlib.decompress(png.data[41:41 + struct.unpack(">I", png.data[33:37])[0]])[:4] == b"\x00\xff\x80\x00"
    assert by_name["table.csv"].mime_type == "text/csv" and by_name["table.csv"].data == b"x,y\n1,2\n"


async def test_artifacts_over_the_count_or_size_limit_are_left_out(sandboxed):
    code = ("def main():\n"
            "    for i in range(5):\n"
            "        open(f'artifacts/part{i}.csv', 'w').write('a\\n' * (i + 1))\n"
            "    open('artifacts/big.json', 'w').write('[' + '0,' * 600 + '0]')\n"
            "    return None\n")
    run = await run_code("python", code, {}, CodePolicy(timeout=20, max_artifacts=3, max_artifact_bytes=1000))
    assert run.ok and run.result_present and run.result is None
    assert [a.name for a in run.artifacts] == ["part0.csv", "part1.csv", "part2.csv"]


# --- JavaScript -----------------------------------------------------------------------------------

async def test_javascript_main_gets_one_arguments_object(policy):
    need_node()
    run = await run_code("javascript", "function main(args) { return { doubled: args.x * 2 }; }", {"x": 21}, policy)
    assert run.ok and run.result == {"doubled": 42}


async def test_javascript_may_export_an_async_main(policy):
    need_node()
    code = "module.exports = { main: async ({ items }) => items.map((n) => n + 1) };"
    run = await run_code("nodejs", code, {"items": [1, 2]}, policy)
    assert run.ok and run.result == [2, 3]


async def test_javascript_main_returning_nothing_leaves_its_printed_output(policy):
    need_node()
    run = await run_code("javascript", "async function main() { console.log(JSON.stringify({ n: 7 })); }", {}, policy)
    assert run.ok and not run.result_present
    assert run.stdout == '{"n":7}\n'


async def test_javascript_does_not_see_the_parent_environment(policy, monkeypatch):
    need_node()
    monkeypatch.setenv("CANVAS2GRAPH_TEST_SECRET", "hunter2")
    run = await run_code("javascript", "function main() { return process.env; }", {}, policy)
    assert "CANVAS2GRAPH_TEST_SECRET" not in run.result and "hunter2" not in str(run.result)


async def test_javascript_errors_time_limits_and_heap_limits(policy):
    need_node()
    failed = await run_code("javascript", "function main() { throw new Error('bad input'); }", {}, policy)
    assert failed.status == "program_error" and "Error: bad input" in failed.error_message()
    slow = await run_code("javascript", "function main() { for (;;) {} }", {}, CodePolicy(timeout=2))
    assert (slow.status, slow.limit) == ("resource_limit_exceeded", "time")
    hungry = await run_code("javascript", "function main() { const a = []; for (;;) a.push('x'.repeat(100) + a.length); }",
                            {}, CodePolicy(timeout=60, memory_mb=64))
    assert (hungry.status, hungry.limit) == ("resource_limit_exceeded", "memory")
    assert hungry.error_message() == "Memory limit exceeded (64 MB of JavaScript heap)"


async def test_javascript_artifacts_are_collected(policy):
    need_node()
    code = "const fs = require('fs');\nfunction main() { fs.writeFileSync('artifacts/data.json', '[1,2]'); return 'ok'; }"
    run = await run_code("javascript", code, {}, policy)
    assert [(a.name, a.mime_type, a.data) for a in run.artifacts] == [("data.json", "application/json", b"[1,2]")]


async def test_an_unknown_language_is_refused(policy):
    with pytest.raises(ValueError, match="unsupported language 'ruby'"):
        await run_code("ruby", "def main; end", {}, policy)


# --- a remote sandbox (RAGFlow's executor manager API) ------------------------------------------------

async def test_a_configured_sandbox_runs_the_code_with_ragflows_request_shape():
    with SandboxServer(token="sandbox-token") as server:
        policy = CodePolicy(sandbox_url=server.url, sandbox_token="sandbox-token", allow_local=False)
        run = await run_code("python", CHART_SCRIPT, {"width": 2, "height": 2}, policy)
    assert run.ok and run.result == {"rows": 2}
    assert sorted(a.name for a in run.artifacts) == ["chart.png", "table.csv"]
    sent = server.requests[0]
    assert set(sent) == {"code_b64", "language", "arguments"}
    assert base64.b64decode(sent["code_b64"]).decode() == CHART_SCRIPT
    assert (sent["language"], sent["arguments"]) == ("python", {"width": 2, "height": 2})
    assert server.headers[0]["authorization"] == "Bearer sandbox-token"


async def test_the_sandbox_gets_nodejs_for_javascript_and_its_limits_come_back_as_executions():
    need_node()
    with SandboxServer(policy=CodePolicy(timeout=2)) as server:
        policy = CodePolicy(sandbox_url=server.url + "/run")
        run = await run_code("javascript", "function main() { for (;;) {} }", {}, policy)
    assert server.requests[0]["language"] == "nodejs"
    assert (run.status, run.limit, run.error_message()) == ("resource_limit_exceeded", "time",
                                                             "Execution timed out after 2 s")


async def test_a_sandbox_reply_without_status_follows_ragflows_reading():
    with SandboxServer() as server:
        server.reply = (200, {"stdout": "", "stderr": "Traceback: boom", "exit_code": 1})
        failed = await run_code("python", "def main(): pass", {}, CodePolicy(sandbox_url=server.url))
        server.reply = (200, {"stdout": "[1, 2]\n", "stderr": "a warning", "exit_code": 0})
        printed = await run_code("python", "def main(): pass", {}, CodePolicy(sandbox_url=server.url))
    assert not failed.ok and failed.error_message() == "Traceback: boom"
    assert printed.ok and not printed.result_present and printed.stdout == "[1, 2]\n"


async def test_a_refused_or_unreachable_sandbox_is_reported():
    with SandboxServer(token="right") as server:
        with pytest.raises(SandboxUnavailable, match="HTTP 401"):
            await run_code("python", "def main(): return 1", {}, CodePolicy(sandbox_url=server.url, sandbox_token="wrong"))
    with pytest.raises(SandboxUnavailable, match="cannot reach the code sandbox"):
        await run_code("python", "def main(): return 1", {}, CodePolicy(sandbox_url=server.url))


# --- the policy -----------------------------------------------------------------------------------

async def test_local_execution_can_be_switched_off():
    with pytest.raises(CodeRefused, match="disabled"):
        await run_code("python", "def main(): return 1", {}, CodePolicy(allow_local=False))


async def test_without_bubblewrap_local_execution_is_refused_saying_what_to_install():
    with pytest.raises(SandboxUnusable, match=r"bubblewrap \('no-such-bwrap'\) was not found: install bubblewrap "
                                              r"\(Debian and Ubuntu: apt-get install bubblewrap.*--unsafe-local-code"):
        await run_code("python", "def main(): return 1", {}, CodePolicy(bwrap="no-such-bwrap"))


async def test_the_unsafe_mode_runs_the_same_convention_without_the_sandbox(tmp_path, monkeypatch):
    """`--unsafe-local-code`: no bubblewrap needed, same results and limits, but none of the isolation
    (the script sees this machine's files), which is why it is an explicit opt-in."""
    monkeypatch.setenv("CANVAS2GRAPH_TEST_SECRET", "hunter2")
    (tmp_path / "visible.txt").write_text("host file")
    code = ("import os\ndef main(path):\n    open('artifacts/t.csv', 'w').write('a\\n1\\n')\n"
            "    return {'read': open(path).read(), 'secret': os.environ.get('CANVAS2GRAPH_TEST_SECRET')}\n")
    policy = CodePolicy(timeout=20, unsafe_local=True, bwrap="no-such-bwrap")
    run = await run_code("python", code, {"path": str(tmp_path / "visible.txt")}, policy)
    assert run.ok and run.result == {"read": "host file", "secret": None}
    assert [(a.name, a.data) for a in run.artifacts] == [("t.csv", b"a\n1\n")]
    slow = await run_code("python", "import time\ndef main():\n    time.sleep(60)\n", {},
                          CodePolicy(timeout=1, unsafe_local=True))
    assert (slow.status, slow.limit) == ("resource_limit_exceeded", "time")


def test_the_policy_defaults_to_local_execution_in_the_sandbox_and_reads_the_environment():
    default = CodePolicy.resolve(None, environ={})
    assert default.allow_local is True and default.unsafe_local is False
    assert CodePolicy.resolve(None, environ={"CANVAS2GRAPH_UNSAFE_LOCAL_CODE": "1"}).unsafe_local is False   # no such switch
    policy = CodePolicy.resolve(None, environ={"CANVAS2GRAPH_SANDBOX_URL": "http://sandbox:9385",
                                               "CANVAS2GRAPH_ALLOW_LOCAL_CODE": "false",
                                               "CANVAS2GRAPH_CODE_TIMEOUT": "5", "CANVAS2GRAPH_CODE_MEMORY_MB": "128",
                                               "CANVAS2GRAPH_CODE_MAX_PROCESSES": "8", "CANVAS2GRAPH_CODE_DISK_MB": "20"})
    assert (policy.sandbox_url, policy.allow_local, policy.timeout, policy.memory_mb) == ("http://sandbox:9385", False, 5.0, 128)
    assert (policy.max_processes, policy.disk_mb) == (8, 20)


def test_values_a_server_passes_win_over_the_environment():
    policy = CodePolicy.resolve({"allow_local": False}, environ={"CANVAS2GRAPH_ALLOW_LOCAL_CODE": "1",
                                                                 "CANVAS2GRAPH_SANDBOX_URL": "http://sandbox:9385"})
    assert policy.allow_local is False and policy.sandbox_url == "http://sandbox:9385"
    given = CodePolicy(timeout=3)
    assert CodePolicy.resolve(given, environ={"CANVAS2GRAPH_CODE_TIMEOUT": "9"}) is given


def test_bad_policy_values_are_named():
    with pytest.raises(CodePolicyError, match="CANVAS2GRAPH_CODE_TIMEOUT='soon'"):
        CodePolicy.resolve(None, environ={"CANVAS2GRAPH_CODE_TIMEOUT": "soon"})
    with pytest.raises(CodePolicyError, match="unknown field 'allow_remote'"):
        CodePolicy.resolve({"allow_remote": True}, environ={})
    with pytest.raises(CodePolicyError, match="timeout must be a positive"):
        CodePolicy(timeout=0)

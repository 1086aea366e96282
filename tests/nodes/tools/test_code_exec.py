"""CodeExec runs a script's `main` and type-checks what it returns against the one business output the
DSL declares (SPEC 3.17): as a canvas node (arguments read from the state, failures are component
errors) and as the Agent tool `execute_code` (the model writes the code and reads the outputs, errors
included). Artifacts the script writes are stored and linked; the run's code policy decides where the
code runs."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from canvas2graph.compiler.canvas import compile_dsl, diagnose
from canvas2graph.nodes.base import ComponentError
from canvas2graph.runtime.run.checkpoint import open_checkpointer
from canvas2graph.runtime.services.models import ModelFactory
from canvas2graph.runtime.services.scripted import Script
from canvas2graph.runtime.run.runner import Runner, TurnRequest
from tests.conftest import cpn, dsl
from tests.nodes.helpers import build, context, errors, state
from tests.nodes.tools.support import CODE_TOOL, agent_dsl, finished, node_dsl
from tests.runtime.sandbox_server import SandboxServer
from tests.runtime.services.test_code_exec import CHART_SCRIPT, PNG_SIGNATURE, need_node

REPO = Path(__file__).resolve().parents[3]
SOURCE = {"Src:A": {"component_name": "Message", "params": {"content": ["numbers"]}}}
SUM_SCRIPT = "def main(numbers, label):\n    return sum(numbers)\n"
CODE_ENV = ["CANVAS2GRAPH_SANDBOX_URL", "CANVAS2GRAPH_SANDBOX_TOKEN", "CANVAS2GRAPH_ALLOW_LOCAL_CODE",
            "CANVAS2GRAPH_CODE_TIMEOUT", "CANVAS2GRAPH_CODE_MEMORY_MB", "CANVAS2GRAPH_ARTIFACT_URL", "CANVAS2GRAPH_BWRAP"]


@pytest.fixture(autouse=True)
def code_env(monkeypatch, tmp_path, sandboxed):
    """No sandbox or policy setting of the machine applies; artifacts go to this test's folder. Scripts
    run in the local sandbox (bubblewrap), so without one these tests skip (fail under CI=true)."""
    for name in CODE_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CANVAS2GRAPH_ARTIFACTS_DIR", str(tmp_path / "artifacts"))


def code_node(script: str = SUM_SCRIPT, outputs: dict | None = None, lang: str = "python", **arguments):
    params = {"lang": lang, "script": script, "arguments": arguments or {"numbers": "Src:A@json", "label": "sys.query"},
              "outputs": outputs or {"total": {"type": "Number", "value": ""}}}
    return build("CodeExec:C", "CodeExec", params, **SOURCE)


def run_ctx(**policy):
    ctx = context()
    if policy:
        ctx.extras["code"] = policy
    return ctx


def numbers_state(numbers) -> dict:
    return state("sum these", Src__A={"json": numbers})


# --- params: RAGFlow's checks, reported at compile time ------------------------------------------------

@pytest.mark.parametrize("params, field, words", [
    ({"lang": "ruby"}, "params.lang", "lang must be one of python, python3, nodejs, javascript"),
    ({"script": "   "}, "params.script", "the script is empty"),
    ({"arguments": {"x": "42"}}, "params.arguments", "argument 'x' must be a variable reference"),
    ({"arguments": {"x": 42}}, "params.arguments", "not the constant 42"),
    ({"outputs": {"a": {"type": "Number"}, "b": {"type": "String"}}}, "params.outputs", "exactly one output"),
    ({"outputs": {"content": {"type": "String"}, "attachments": {"type": "Array<String>"}}}, "params.outputs",
     "found none"),
    ({"outputs": {"content": {"type": "String"}}}, "params.outputs", "'content' is a reserved output name"),
    ({"outputs": {"a.b": {"type": "String"}}}, "params.outputs", "may not contain '.'"),
    ({"outputs": {"n": {"type": "Integer"}}}, "params.outputs", "unsupported output type 'Integer'"),
])
def test_bad_params_are_reported_with_the_field(params, field, words):
    found = errors("CodeExec", params)
    assert [d.field for d in found] == [field]
    assert words in found[0].message


def test_ragflows_defaults_declare_an_object_result_beside_the_attachments():
    node = build("CodeExec:C", "CodeExec", {})
    assert (node.business, node.expected) == ("result", "Object")
    assert node.params.lang == "python" and "def main" in node.params.script


def test_an_argument_naming_a_missing_component_is_a_dangling_reference():
    _, diags = diagnose({"components": {
        "begin": {"obj": {"component_name": "Begin", "params": {}}, "downstream": ["CodeExec:C"]},
        "CodeExec:C": {"obj": {"component_name": "CodeExec", "params": {"arguments": {"x": "Gone:A@content"}}},
                       "downstream": []}}})
    assert [(d.code, d.field) for d in diags if d.severity == "error"] == [("dangling-reference", "params.arguments.x")]


def test_an_empty_argument_is_allowed_and_passes_none():
    node = build("CodeExec:C", "CodeExec", {"arguments": {"x": ""}, "script": "def main(x):\n    return {'x': x}\n"})
    assert node.argument_refs == {"x": None}


def test_every_output_is_known_to_the_reference_check():
    _, diags = diagnose({"components": {
        "begin": {"obj": {"component_name": "Begin", "params": {}}, "downstream": ["CodeExec:C"]},
        "CodeExec:C": {"obj": {"component_name": "CodeExec", "params": {}}, "downstream": ["Message:M"]},
        "Message:M": {"obj": {"component_name": "Message", "params": {"content": [
            "{CodeExec:C@result} {CodeExec:C@content} {CodeExec:C@actual_type} {CodeExec:C@_ARTIFACTS} "
            "{CodeExec:C@attachments} {CodeExec:C@raw_result} {CodeExec:C@_ATTACHMENT_CONTENT}"]}}, "downstream": []}}})
    assert [d for d in diags if d.code == "unknown-output"] == []


# --- as a node ------------------------------------------------------------------------------------

async def test_arguments_are_read_from_the_state_and_the_result_fills_the_business_output():
    result = await code_node().run(numbers_state([1, 2, 3]), run_ctx())
    assert result.outputs == {"_ERROR": "", "raw_result": 6, "actual_type": "Number", "total": 6, "_ARTIFACTS": None,
                              "_ATTACHMENT_CONTENT": "", "attachments": [], "content": "6"}
    assert result.inputs == {"lang": "python", "script": SUM_SCRIPT}


async def test_the_script_is_code_not_a_template():
    script = "import sys\ndef main(numbers, label):\n    return f'{sys.version_info.major} {{braces}} {len(\"{sys.query}\")}'\n"
    result = await code_node(script, {"text": {"type": "String"}}, numbers="", label="").run(state("q"), run_ctx())
    assert result.outputs["text"] == "3 {braces} 11"


async def test_objects_and_arrays_become_indented_json_content():
    script = "def main(numbers, label):\n    return {'label': label, 'doubled': [n * 2 for n in numbers]}\n"
    result = await code_node(script, {"summary": {"type": "Object"}}).run(numbers_state([1, 2]), run_ctx())
    assert result.outputs["summary"] == {"label": "sum these", "doubled": [2, 4]}
    assert result.outputs["content"] == '{\n  "doubled": [\n    2,\n    4\n  ],\n  "label": "sum these"\n}'
    assert result.outputs["actual_type"] == "Object"


async def test_a_result_of_another_type_than_declared_is_a_component_error():
    with pytest.raises(ComponentError) as failed:
        await code_node(outputs={"total": {"type": "String"}}).run(numbers_state([1, 2, 3]), run_ctx())
    out = failed.value.outputs
    assert out["_ERROR"] == "the result does not match output 'total': the result should be String but is Number"
    assert (out["total"], out["raw_result"], out["actual_type"], out["content"]) == (None, 6, "Number", "6")
    assert failed.value.inputs["lang"] == "python"


async def test_array_items_are_checked_one_by_one():
    script = "def main(numbers, label):\n    return numbers\n"
    node = code_node(script, {"values": {"type": "Array<Number>"}})
    ok = await node.run(numbers_state([1, 2.5]), run_ctx())
    assert (ok.outputs["values"], ok.outputs["actual_type"]) == ([1, 2.5], "Array<Number>")
    with pytest.raises(ComponentError, match=re.escape("the result[1] should be Number but is String")):
        await node.run(numbers_state([1, "2"]), run_ctx())


async def test_a_failing_script_is_a_component_error_with_its_traceback():
    with pytest.raises(ComponentError, match="ZeroDivisionError"):
        await code_node("def main(numbers, label):\n    return 1 / 0\n").run(numbers_state([]), run_ctx())


async def test_time_and_memory_limits_are_component_errors():
    slow = code_node("def main(numbers, label):\n    while True:\n        pass\n")
    with pytest.raises(ComponentError, match="^Execution timed out after 1 s$"):
        await slow.run(numbers_state([]), run_ctx(timeout=1))
    hungry = code_node("def main(numbers, label):\n    return len(bytearray(2 * 1024 ** 3))\n")
    with pytest.raises(ComponentError, match=r"^Memory limit exceeded \(256 MB\): MemoryError$"):
        await hungry.run(numbers_state([]), run_ctx(memory_mb=256))


async def test_javascript_gets_the_arguments_as_one_object():
    need_node()
    node = code_node("function main({ numbers, label }) { return numbers.reduce((a, b) => a + b, 0); }", lang="javascript")
    result = await node.run(numbers_state([4, 5]), run_ctx())
    assert result.outputs["total"] == 9


async def test_a_javascript_main_that_returns_nothing_gives_what_it_printed():
    need_node()
    node = code_node("function main(args) { console.log(JSON.stringify({ n: args.numbers.length })); }",
                     {"printed": {"type": "Object"}}, lang="javascript")
    result = await node.run(numbers_state([1, 2, 3]), run_ctx())
    assert result.outputs["printed"] == {"n": 3}


# --- artifacts ------------------------------------------------------------------------------------

async def test_artifacts_are_stored_linked_and_described(tmp_path):
    node = code_node(CHART_SCRIPT, {"summary": {"type": "Object"}}, width="Src:A@json", height="Src:A@json")
    result = await node.run(state("chart", Src__A={"json": 3}), run_ctx(artifacts_dir=str(tmp_path / "store")))
    out = result.outputs
    arts = out["_ARTIFACTS"]
    assert [(a["name"], a["mime_type"]) for a in arts] == [("chart.png", "image/png"), ("table.csv", "text/csv")]
    png = Path(arts[0]["url"].removeprefix("file://"))
    assert png.parent == tmp_path / "store" and png.read_bytes().startswith(PNG_SIGNATURE)
    assert arts[0]["size"] == png.stat().st_size
    assert out["attachments"] == [f"![chart.png]({arts[0]['url']})", f"[Download table.csv]({arts[1]['url']})"]
    assert out["_ATTACHMENT_CONTENT"] == (f"attachment_count: 2\n\nattachment1 (image): chart.png\n"
                                          f"image file, {arts[0]['size']} bytes: {arts[0]['url']}\n\n"
                                          "attachment2 (csv): table.csv\nx,y\n1,2")
    assert out["content"] == '{\n  "rows": 3\n}\n\n' + out["_ATTACHMENT_CONTENT"]


async def test_a_server_can_link_artifacts_by_its_own_url_prefix(tmp_path):
    node = code_node(CHART_SCRIPT, {"summary": {"type": "Object"}}, width="Src:A@json", height="Src:A@json")
    result = await node.run(state("chart", Src__A={"json": 2}),
                            run_ctx(artifacts_dir=str(tmp_path), artifact_url="/api/v1/documents/artifact/"))
    url = result.outputs["_ARTIFACTS"][0]["url"]
    assert re.fullmatch(r"/api/v1/documents/artifact/[0-9a-f]{32}\.png", url)
    assert (tmp_path / url.rsplit("/", 1)[1]).is_file()


# --- the policy -----------------------------------------------------------------------------------

async def test_with_local_execution_switched_off_the_node_fails_and_runs_nothing(tmp_path):
    marker = tmp_path / "ran"
    script = f"def main(numbers, label):\n    open({str(marker)!r}, 'w').close()\n    return 1\n"
    with pytest.raises(ComponentError, match="running code on this machine is disabled"):
        await code_node(script).run(numbers_state([]), run_ctx(allow_local=False))
    assert not marker.exists()


async def test_a_configured_sandbox_runs_the_code_even_when_local_execution_is_off():
    with SandboxServer(token="t0k") as server:
        result = await code_node().run(numbers_state([10, 20]), run_ctx(allow_local=False, sandbox_url=server.url,
                                                                        sandbox_token="t0k"))
    assert result.outputs["total"] == 30
    assert server.requests[0]["arguments"] == {"numbers": [10, 20], "label": "sum these"}


async def test_a_sandbox_reply_without_a_structured_result_falls_back_to_stdout():
    with SandboxServer() as server:
        server.reply = (200, {"status": "success", "stdout": "{'total': 5}\n", "stderr": "", "exit_code": 0})
        result = await code_node(outputs={"total": {"type": "Object"}}).run(numbers_state([]),
                                                                           run_ctx(sandbox_url=server.url))
    assert result.outputs["total"] == {"total": 5}


async def test_an_unreachable_sandbox_is_a_component_error():
    from tests.nodes.tools.support import closed_port_url
    with pytest.raises(ComponentError, match="cannot reach the code sandbox"):
        await code_node().run(numbers_state([]), run_ctx(sandbox_url=closed_port_url()))


# --- through the runtime: a node, and the Agent tool execute_code_0 ---------------------------------------

async def run(dsl: dict, query: str, script: dict, services: dict | None = None) -> tuple[list[dict], Script]:
    s = Script.load(script)
    async with open_checkpointer(None) as saver:
        runner = Runner(compile_dsl(dsl), saver, ModelFactory(script=s), s, services=services)
        return [e async for e in runner.run_turn("s", TurnRequest(query=query))], s


def tool_results(script: Script) -> list[dict]:
    """The tool messages the model read, parsed (CodeExec hands the model its outputs as JSON)."""
    return [json.loads(text) for text in tool_messages(script)]


def tool_messages(script: Script) -> list[str]:
    seen: list[str] = []
    for request in script.requests:
        for m in request["messages"]:
            if m["role"] == "tool" and m["content"] not in seen:
                seen.append(m["content"])
    return seen




def calls(*scripts: str, lang: str = "python") -> dict:
    return {"tool_calls": [{"name": "execute_code_0", "arguments": {"lang": lang, "script": s}} for s in scripts]}


async def test_as_a_node_it_reports_its_thoughts_inputs_and_outputs():
    dsl = node_dsl("CodeExec:C", "CodeExec", {"script": "def main(q):\n    return q.upper()\n", "arguments": {"q": "sys.query"},
                                              "outputs": {"shout": {"type": "String", "value": ""}}}, show="shout")
    events, _ = await run(dsl, "hello", {"replies": []})
    started = next(e["data"] for e in events if e["event"] == "node_started" and e["data"]["component_id"] == "CodeExec:C")
    assert started["thoughts"] == "Running a short script to process data."
    data = finished(events, "CodeExec:C")
    assert data["error"] is None and data["outputs"]["shout"] == "HELLO" and data["outputs"]["_ERROR"] == ""
    assert data["inputs"] == {"lang": "python", "script": "def main(q):\n    return q.upper()\n"}
    assert events[-1]["data"]["outputs"]["content"] == "HELLO"


async def test_a_failing_node_stops_the_turn_with_its_error():
    dsl = node_dsl("CodeExec:C", "CodeExec", {"script": "def main():\n    raise RuntimeError('no rows')\n"}, show="result")
    events, _ = await run(dsl, "go", {"replies": []})
    data = finished(events, "CodeExec:C")
    assert "RuntimeError: no rows" in data["error"] and data["outputs"]["_ERROR"] == data["error"]


async def test_the_agent_offers_execute_code_and_the_model_reads_the_outputs():
    script = {"replies": [calls("def main():\n    return {'answer': 6 * 7}\n"), "The answer is 42."]}
    dsl = agent_dsl(CODE_TOOL)
    events, s = await run(dsl, "What is 6 times 7?", script)
    assert s.requests[0]["tools"] == ["execute_code_0"]
    offered = compile_dsl(dsl).plan.nodes["Agent:A"].tools[0].schema["function"]
    assert offered["name"] == "execute_code_0" and "MUST define a function named `main`" in offered["description"]
    assert offered["parameters"]["required"] == ["lang", "script"]
    assert offered["parameters"]["properties"]["lang"]["enum"] == ["python", "javascript"]
    [read] = tool_results(s)
    assert read["result"] == {"answer": 42} and read["_ERROR"] == "" and read["actual_type"] == "Object"
    assert read["content"] == '{\n  "answer": 42\n}'
    assert events[-1]["data"]["outputs"]["content"].endswith("The answer is 42.")


async def test_the_model_reads_errors_and_can_try_again():
    script = {"replies": [calls("def main():\n    return 42\n"), calls("def main():\n    return 1 / 0\n"),
                          calls("def main():\n    return {'n': 42}\n"), "Done: 42."]}
    agent = agent_dsl(CODE_TOOL)
    agent["components"]["Agent:A"]["obj"]["params"]["max_rounds"] = 3
    events, s = await run(agent, "compute", script)
    mismatch, crash, ok = tool_results(s)
    assert mismatch["_ERROR"] == "the result does not match output 'result': the result should be Object but is Number"
    assert mismatch["raw_result"] == 42 and mismatch["result"] is None
    assert "ZeroDivisionError" in crash["_ERROR"]
    assert ok["_ERROR"] == "" and ok["result"] == {"n": 42}
    assert events[-1]["data"]["outputs"]["content"].endswith("Done: 42.")


async def test_the_agents_javascript_runs_too():
    need_node()
    script = {"replies": [calls("async function main() { return { len: 'abc'.length }; }", lang="javascript"), "3"]}
    _, s = await run(agent_dsl(CODE_TOOL), "length?", script)
    assert tool_results(s)[0]["result"] == {"len": 3}


async def test_a_server_that_refuses_local_code_gives_the_model_the_reason(tmp_path):
    marker = tmp_path / "ran"
    script = {"replies": [calls(f"def main():\n    open({str(marker)!r}, 'w').close()\n    return {{}}\n"), "Sorry."]}
    events, s = await run(agent_dsl(CODE_TOOL), "run it", script, services={"code": {"allow_local": False}})
    assert "running code on this machine is disabled" in tool_results(s)[0]["_ERROR"]
    assert not marker.exists()
    assert events[-1]["event"] == "workflow_finished" and events[-1]["data"]["outputs"]["content"].endswith("Sorry.")


async def test_scripted_tool_results_replace_the_execution(tmp_path):
    marker = tmp_path / "ran"
    script = {"replies": [calls(f"def main():\n    open({str(marker)!r}, 'w').close()\n"), "Scripted."],
              "tool_results": {"CodeExec": [{"outputs": {"result": {"mean": 2.5}}, "return": "mean is 2.5"}]}}
    _, s = await run(agent_dsl(CODE_TOOL), "mean?", script)
    assert tool_messages(s) == ["mean is 2.5"]
    assert not marker.exists()


CHART_CALL = calls(CHART_SCRIPT.replace("def main(width, height):", "def main(width=3, height=2):"))


async def test_the_agents_answer_ends_with_the_artifacts_it_streams_as_markdown(tmp_path):
    events, _ = await run(agent_dsl(CODE_TOOL, cite=False), "plot", {"replies": [CHART_CALL, "Here is the chart."]})
    answer = events[-1]["data"]["outputs"]["content"]
    png, csv = sorted((tmp_path / "artifacts").iterdir(), key=lambda p: p.suffix != ".png")
    assert answer.endswith(f"Here is the chart.\n\n![chart.png](file://{png})\n\n[Download table.csv](file://{csv})")
    assert "".join(e["data"]["content"] for e in events if e["event"] == "message") == answer


async def test_a_blocking_agent_adds_the_artifacts_to_its_content(tmp_path):
    dsl = agent_dsl(CODE_TOOL, cite=False)
    dsl["components"]["Agent:A"]["downstream"] = []
    del dsl["components"]["Message:M"]
    events, _ = await run(dsl, "plot", {"replies": [CHART_CALL, "Done."]})
    content = finished(events, "Agent:A")["outputs"]["content"]
    assert content.startswith("Done.\n\n![chart.png](file://") and "[Download table.csv](file://" in content


async def test_the_agents_code_reads_its_arguments_from_the_canvas():
    tool = {**CODE_TOOL, "params": {"arguments": {"question": "sys.query"}}}
    script = {"replies": [calls("def main(question):\n    return {'asked': question}\n"), "ok"]}
    _, s = await run(agent_dsl(tool), "how tall is K2?", script)
    assert tool_results(s)[0]["result"] == {"asked": "how tall is K2?"}


def test_the_command_line_runs_an_agent_whose_code_writes_a_chart(tmp_path):
    """`canvas2graph run` as a user runs it: the default policy runs the code locally, the chart is stored."""
    dsl_path, script_path, store = tmp_path / "agent.json", tmp_path / "script.json", tmp_path / "charts"
    dsl_path.write_text(json.dumps(agent_dsl(CODE_TOOL, cite=False)))
    # the script also saves the environment it sees, as an artifact the test can read
    chart = "import json, os\n" + CHART_SCRIPT.replace("def main(width, height):", (
        "def main(width=3, height=2):\n    json.dump(dict(os.environ), open('artifacts/env.json', 'w'))"))
    script_path.write_text(json.dumps({"replies": [calls(chart), "Here is the chart."]}))
    env = {k: v for k, v in os.environ.items() if k not in CODE_ENV}
    env.update({"CANVAS2GRAPH_ARTIFACTS_DIR": str(store), "CANVAS2GRAPH_TEST_SECRET": "hunter2"})
    done = subprocess.run([sys.executable, "-m", "canvas2graph.cli", "run", str(dsl_path), "--llm-script", str(script_path),
                           "--format", "jsonl", "--db", str(tmp_path / "sessions.db"), "--query", "Plot it"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert events[-1]["event"] == "workflow_finished"
    assert "Here is the chart.\n\n![chart.png](file://" in events[-1]["data"]["outputs"]["content"]
    assert sorted(p.suffix for p in store.iterdir()) == [".csv", ".json", ".png"]
    assert next(store.glob("*.png")).read_bytes().startswith(PNG_SIGNATURE)
    seen_env = json.loads(next(store.glob("*.json")).read_text())
    assert "CANVAS2GRAPH_TEST_SECRET" not in seen_env and "hunter2" not in json.dumps(seen_env)
    assert seen_env["HOME"] == "/scratch"


def test_without_bubblewrap_the_command_line_refuses_local_code_unless_told_to_run_it_unsandboxed(tmp_path):
    """Where no sandbox can be made, `canvas2graph run` says what to install; `--unsafe-local-code` is the
    explicit way to run the script anyway, with no isolation."""
    dsl_path = tmp_path / "code.json"
    dsl_path.write_text(json.dumps(dsl(**{"CodeExec:C": cpn("CodeExec", {
        "lang": "python", "script": "import os\ndef main():\n    return os.getcwd()\n", "arguments": {},
        "outputs": {"where": {"type": "String", "value": ""}}})})))
    env = {k: v for k, v in os.environ.items() if k not in CODE_ENV}
    env["CANVAS2GRAPH_BWRAP"] = "no-such-bwrap"
    command = [sys.executable, "-m", "canvas2graph.cli", "run", str(dsl_path), "--format", "jsonl",
               "--db", str(tmp_path / "sessions.db")]
    refused = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    error = json.loads(refused.stdout.splitlines()[-1])["data"]["outputs"]["_ERROR"]
    assert "bubblewrap ('no-such-bwrap') was not found: install bubblewrap" in error
    assert "--unsafe-local-code" in error
    unsafe = subprocess.run(command + ["--unsafe-local-code"], cwd=REPO, env=env, capture_output=True, text=True,
                            timeout=120)
    assert unsafe.returncode == 0, unsafe.stderr
    where = [json.loads(line) for line in unsafe.stdout.splitlines() if '"node_finished"' in line][-1]
    assert where["data"]["outputs"]["where"].startswith(tempfile.gettempdir() + "/canvas2graph-code-")

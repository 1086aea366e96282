"""An ejected canvas is code the user owns: edited (a node added, an edge moved), it runs as edited.

The module is run as a user runs it, `python agent.py --query ... --format jsonl`, in a child
process; its events are RAGFlow's, as `canvas2graph run` prints them.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from canvas2graph.eject import Canvas, EjectError
from canvas2graph.compiler.canvas import compile_dsl
from canvas2graph.compiler.python_writer import to_python
from tests.conftest import REPO

ECHO = {"components": {
    "begin": {"obj": {"component_name": "Begin", "params": {"mode": "conversational"}}, "downstream": ["Message:Echo"]},
    "Message:Echo": {"obj": {"component_name": "Message", "params": {"content": ["You said: {sys.query}"]}},
                     "upstream": ["begin"]},
}}


def ejected(tmp_path: Path, dsl: dict, name: str = "echo.py") -> Path:
    path = tmp_path / name
    path.write_text(to_python(compile_dsl(json.dumps(dsl)), source="echo.json"), encoding="utf-8")
    return path


def run(module: Path, *args: str) -> tuple[int, list[dict], str]:
    proc = subprocess.run([sys.executable, str(module), "--db", str(module.parent / "sessions.db"),
                           "--format", "jsonl", *args], capture_output=True, text=True, timeout=120,
                          cwd=module.parent, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    return proc.returncode, [json.loads(line) for line in proc.stdout.splitlines() if line.strip()], proc.stderr


def said(events: list[dict]) -> str:
    return "".join(e["data"].get("content") or "" for e in events if e["event"] == "message")


def components(events: list[dict]) -> list[str]:
    return [e["data"]["component_id"] for e in events if e["event"] == "node_started"]


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, old
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def test_the_ejected_module_runs_a_turn_like_canvas2graph_run(tmp_path: Path):
    status, events, err = run(ejected(tmp_path, ECHO), "--query", "hello")
    assert status == 0, err
    (tmp_path / "echo.json").write_text(json.dumps(ECHO), encoding="utf-8")
    cli = subprocess.run([sys.executable, "-m", "canvas2graph.cli", "run", str(tmp_path / "echo.json"), "--query", "hello",
                          "--format", "jsonl", "--db", str(tmp_path / "cli.db")], capture_output=True, text=True,
                         cwd=REPO, timeout=120)
    expected = [json.loads(line) for line in cli.stdout.splitlines()]
    assert [e["event"] for e in events] == [e["event"] for e in expected]
    assert said(events) == said(expected) == "You said:hello"     # Message trims around a reference, as RAGFlow does


def test_a_python_function_added_between_two_components_runs_in_the_turn(tmp_path: Path):
    module = ejected(tmp_path, ECHO)
    edit(module, "builder = canvas.state_graph()\n", '''builder = canvas.state_graph()


def shout(state):
    """Read the user's message louder."""
    return {"globals": {"sys.query": state["globals"]["sys.query"].upper()}}


builder.add_node("shout", shout)
''')
    edit(module, "builder.add_edge('begin', 'Message.Echo')",
         "builder.add_edge('begin', 'shout')\nbuilder.add_edge('shout', 'Message.Echo')")
    status, events, err = run(module, "--query", "hello")
    assert status == 0, err
    assert said(events) == "You said:HELLO"
    assert components(events) == ["begin", "Message:Echo"]      # a node of the user's own is no RAGFlow component
    assert events[-1]["event"] == "workflow_finished"


def test_a_component_added_to_the_module_runs_as_a_node_of_the_canvas(tmp_path: Path):
    module = ejected(tmp_path, ECHO)
    edit(module, "\n# --- Nodes", '''
canvas.component("StringTransform:Frame", "StringTransform", name="Frame",
                 params={"method": "merge", "script": "<<{sys.query}>>"})

# --- Nodes''')
    edit(module, "builder.add_edge('begin', 'Message.Echo')", "\n".join([
        "builder.add_node('StringTransform.Frame', canvas.node('StringTransform:Frame'), "
        "**canvas.options('StringTransform:Frame'))",
        "builder.add_edge('begin', 'StringTransform.Frame')",
        "builder.add_edge('StringTransform.Frame', 'Message.Echo')",
    ]))
    edit(module, "'content': ['You said: {sys.query}']", "'content': ['You said: {StringTransform:Frame@result}']")
    status, events, err = run(module, "--query", "hello")
    assert status == 0, err
    assert said(events) == "You said:<<hello>>"
    assert components(events) == ["begin", "StringTransform:Frame", "Message:Echo"]


def test_a_session_continues_across_runs_of_the_module(tmp_path: Path):
    module = ejected(tmp_path, ECHO)
    run(module, "--query", "first", "--session", "s1")
    edit(module, "'content': ['You said: {sys.query}']", "'content': ['Turn {sys.conversation_turns}: {sys.query}']")
    status, events, err = run(module, "--query", "second", "--session", "s1")
    assert status == 0, err
    assert said(events) == "Turn2:second"


def test_the_modules_options_are_runs(tmp_path: Path):
    proc = subprocess.run([sys.executable, str(ejected(tmp_path, ECHO)), "--help"], capture_output=True, text=True,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0
    for option in ("--query", "--inputs", "--session", "--db", "--llm-script", "--format", "--file"):
        assert option in proc.stdout


def test_a_broken_edit_is_a_message_not_a_traceback(tmp_path: Path):
    module = ejected(tmp_path, ECHO)
    edit(module, "'content': ['You said: {sys.query}']", "'content': 42")
    status, events, err = run(module, "--query", "hello")
    assert status == 1 and events == []
    assert err.splitlines() == ["echo.py: error: Message:Echo / params: the params cannot be used: TypeError: "
                                "'int' object is not iterable [invalid-param]"]


def test_components_are_declared_before_the_graph_is_built():
    canvas = Canvas()
    canvas.component("begin", "Begin", params={})
    canvas.state_graph()
    with pytest.raises(EjectError, match="declare every component before"):
        canvas.component("Message:Late", "Message", params={"content": ["x"]})
    with pytest.raises(EjectError, match="no component 'Message:Late'"):
        canvas.node("Message:Late")
    with pytest.raises(EjectError, match="does not route"):
        canvas.chosen("begin")


def test_a_default_model_is_given_when_ejecting_not_when_running(tmp_path: Path):
    status, events, err = run(ejected(tmp_path, ECHO), "--query", "hello", "--default-llm", "qwen@Tongyi")
    assert status == 2 and events == []
    assert "--default-llm cannot change the models of a built graph" in err

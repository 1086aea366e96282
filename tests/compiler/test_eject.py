"""Eject: `canvas2graph export DSL --format python` writes a module that builds the compiled graph by hand.

The module's graph has the compiled graph's nodes and edges, for every canvas we know (the parity
cases, canvas2graph's templates, RAGFlow's templates and examples); the module is valid Python that
ruff passes with its default rules. That it runs as `canvas2graph run` does is
tests/parity/test_ejected_parity.py; that a user can edit it, tests/canvas2graph/test_eject.py.
"""
from __future__ import annotations

import json
import py_compile
import subprocess
import sys
from pathlib import Path

import pytest

from canvas2graph.compiler.canvas import compile_dsl, diagnose
from canvas2graph.compiler.python_writer import literal, to_python
from canvas2graph.cli import main
from tests.conftest import REPO, shared_dir

DEFAULT_LLM = "gpt-4o-mini@OpenAI"      # RAGFlow's templates leave some llm_ids for the user to choose
SHARED = REPO.parent / "shared"
# ruff's classic default rules: pycodestyle's errors and pyflakes (named, as newer ruff versions add more)
RUFF_RULES = "E4,E7,E9,F"


def canvases() -> list:
    """Every DSL file we know of that compiles: ours always, ../shared's when it is there."""
    ours = sorted((REPO / "canvas2graph" / "templates").glob("*/*.json")) + \
        sorted((REPO / "tests" / "parity" / "cases").glob("*/dsl.json")) + sorted((REPO / "fixtures" / "demo").glob("*[!t].json"))
    shared = sorted((SHARED / "parity" / "cases").glob("*/dsl.json")) + \
        sorted((SHARED / "ragflow" / "templates").glob("*.json")) + sorted((SHARED / "ragflow" / "examples").glob("*.json"))
    found = []
    for path in ours + shared:
        compiled, _ = diagnose(path.read_bytes(), default_llm=DEFAULT_LLM)
        if compiled is not None:
            found.append(pytest.param(path, id=str(path.relative_to(REPO.parent))))
    return found


CANVASES = canvases()


def eject(path: Path) -> tuple[str, dict]:
    """The ejected module's text, and its namespace once run as a module (not as __main__)."""
    text = to_python(compile_dsl(path.read_bytes(), default_llm=DEFAULT_LLM), source=path.name)
    namespace: dict = {"__name__": "ejected"}
    exec(compile(text, path.name, "exec"), namespace)
    return text, namespace


def shape(graph) -> tuple[list, list]:
    drawn = graph.get_graph()
    return sorted(drawn.nodes), sorted({(e.source, e.target, e.conditional) for e in drawn.edges})


def test_the_shared_canvases_are_among_those_checked():
    shared_dir()            # skips (fails under CI) without ../shared: then only our own canvases are ejected
    assert sum("shared" in p.id for p in CANVASES) >= 25


@pytest.mark.parametrize("path", CANVASES)
def test_the_ejected_graph_has_the_compiled_graphs_nodes_and_edges(path: Path, monkeypatch):
    # an ejected module keeps a node per component, as the compiler builds them without fusion
    # (compiler/fusion.py: fusing chains is the compiler's own optimization, not code for users to edit)
    monkeypatch.setenv("CANVAS2GRAPH_FUSION", "0")
    compiled = compile_dsl(path.read_bytes(), default_llm=DEFAULT_LLM)
    _, module = eject(path)
    assert shape(module["builder"].compile()) == shape(compiled.builder().compile())
    # every node keeps the compiled node's name and metadata (checkpoints, Studio, events)
    ours, theirs = module["builder"].nodes, compiled.builder().nodes
    assert {n: s.metadata for n, s in ours.items()} == {n: s.metadata for n, s in theirs.items()}
    assert {n: s.defer for n, s in ours.items()} == {n: s.defer for n, s in theirs.items()}
    assert {n: (s.error_handler_node, getattr(s.input_schema, "__name__", None), s.retry_policy is not None) for n, s in ours.items()} == \
        {n: (s.error_handler_node, getattr(s.input_schema, "__name__", None), s.retry_policy is not None) for n, s in theirs.items()}


def test_every_ejected_file_compiles_and_passes_ruff(tmp_path: Path):
    for param in CANVASES:
        path = param.values[0]
        text, _ = eject(path)
        name = f"{path.parent.name}_{path.stem}".replace("-", "_") + ".py"
        (tmp_path / name).write_text(text, encoding="utf-8")
        py_compile.compile(str(tmp_path / name), doraise=True)
    # with no configuration around the files taken into account (--isolated)
    lint = subprocess.run([sys.executable, "-m", "ruff", "check", "--isolated", "--no-cache", "--select", RUFF_RULES, str(tmp_path)],
                          capture_output=True, text=True)
    assert lint.returncode == 0, lint.stdout + lint.stderr


def test_the_module_reads_like_a_graph_built_by_hand():
    text, _ = eject(REPO / "fixtures" / "demo" / "support_desk.json")
    # a component: its type, display name, wiring on the canvas and params as the DSL writes them
    assert "canvas.component('LLM:Billing', 'LLM', name='Billing desk', downstream=['Message:Answer'], params={" in text
    assert "'content': ['Desk: ({Categorize:Desk@category_name})\\n{LLM:Billing@content}{LLM:Technical@content}']," in text
    # a node per component, named as the compiled graph names it; a join waits for its branches
    assert "builder.add_node('LLM.Billing', canvas.node('LLM:Billing'), **canvas.options('LLM:Billing'))" in text
    assert "builder.add_node('Message.Answer', canvas.node('Message:Answer'), defer=True," in text
    # the route with its path map written out, each branch labelled with its category
    assert ("builder.add_conditional_edges('Categorize.Desk', canvas.chosen('Categorize:Desk'), {\n"
            "    'LLM:Billing': 'LLM.Billing',   # billing\n") in text
    assert "builder.add_edge('LLM.Billing', 'Message.Answer')" in text
    assert text.rstrip().endswith('if __name__ == "__main__":\n    raise SystemExit(main(canvas, builder))')


def test_containers_and_error_handlers_are_written_out():
    text, _ = eject(shared_dir() / "parity" / "cases" / "iteration" / "dsl.json")
    assert "# Iteration:" in text and "canvas.passes('IterationItem:" in text
    assert "# inside Iteration:" in text
    text, _ = eject(SHARED / "parity" / "cases" / "exception_goto" / "dsl.json")
    assert "error_handler=canvas.on_error(" in text


def test_literals_keep_every_json_value_and_break_long_ones():
    value = {"a": [1, 2.5, None, True, False], "b": "x\n\"y\"\\z", "c": "\ud800", "d": {"e": ["f" * 30] * 5}}
    text = literal(value)
    assert eval(text) == value
    assert text.count("\n") > 1 and all(len(line) <= 100 for line in text.splitlines())


def test_odd_titles_and_ids_still_make_a_valid_module(tmp_path: Path):
    dsl = {"title": 'A """quoted"""\\ title\ud800', "dsl": {"components": {
        "begin": {"obj": {"component_name": "Begin", "params": {}}, "downstream": ["Message:x\\y\ud800"]},
        "Message:x\\y\ud800": {"obj": {"component_name": "Message", "params": {"content": ["hi"]}}},
    }}}
    path = tmp_path / "odd.py"
    path.write_text(to_python(compile_dsl(dsl)), encoding="utf-8")
    py_compile.compile(str(path), doraise=True)
    lint = subprocess.run([sys.executable, "-m", "ruff", "check", "--isolated", "--no-cache", "--select", RUFF_RULES, str(path)],
                          capture_output=True, text=True)
    assert lint.returncode == 0, lint.stdout


def test_export_writes_the_module_to_stdout_or_a_file(tmp_path: Path, capsys):
    dsl = REPO / "fixtures" / "demo" / "support_desk.json"
    assert main(["export", str(dsl), "--format", "python"]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith('"""A RAGFlow agent canvas ejected to Python from support_desk.json')
    assert main(["export", str(dsl), "--format", "python", "--out", str(tmp_path / "desk.py")]) == 0
    assert (tmp_path / "desk.py").read_text(encoding="utf-8") == printed


def test_a_default_model_given_when_ejecting_is_written_into_the_module():
    dsl = json.loads((REPO / "fixtures" / "demo" / "support_desk.json").read_text(encoding="utf-8"))
    dsl["components"]["LLM:Billing"]["obj"]["params"]["llm_id"] = ""
    text = to_python(compile_dsl(json.dumps(dsl), default_llm="qwen@Tongyi"))
    assert "'llm_id': 'qwen@Tongyi'" in text

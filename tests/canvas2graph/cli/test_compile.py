"""`canvas2graph compile FILE [--format text|json]`, run as a real subprocess.

It prints every diagnostic, exits 0 when the DSL compiles and 1 when it does not (2 for a file it
cannot read), and never prints a traceback.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.compiler.test_templates import COMPILES, REAL_DEFECTS
from tests.conftest import REPO, cpn, dsl, require_shared_file, shared_dir, shared_json_params

VALID = dsl(**{"Message:A": cpn("Message", {"content": ["hi {sys.query}"]})})
WARNS = dsl(**{"Message:A": cpn("Message", {"content": ["hi"]}), "Message:Orphan": cpn("Message", {"content": ["x"]})})
BROKEN = dsl(**{"LLM:A": cpn("LLM", {"llm_id": ""}, ["Message:Gone"]), "Message:Orphan": cpn("Message", {"content": ["x"]})})


def command() -> list[str]:
    """The installed console script, or the module when the venv has no script."""
    script = Path(sys.executable).with_name("canvas2graph")
    return [str(script)] if script.exists() else [sys.executable, "-m", "canvas2graph.cli"]


def compile_cli(target, *args: str, tmp_path: Path | None = None, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    """Run `canvas2graph compile`; `target` is a path, or a DSL (dict/str/bytes) written to a temp file."""
    if not isinstance(target, Path) and target != "-":
        path = tmp_path / "dsl.json"
        data = target if isinstance(target, bytes) else (target if isinstance(target, str) else json.dumps(target)).encode()
        path.write_bytes(data)
        target = path
    env = {k: v for k, v in os.environ.items() if k != "CANVAS2GRAPH_DEBUG"}
    result = subprocess.run([*command(), "compile", str(target), *args], cwd=REPO, input=stdin,
                            capture_output=True, env=env, timeout=120)
    result.stdout, result.stderr = result.stdout.decode(), result.stderr.decode()
    assert "Traceback" not in result.stdout + result.stderr
    return result


def as_json(result: subprocess.CompletedProcess) -> dict:
    out = json.loads(result.stdout)
    assert set(out) == {"ok", "diagnostics"}
    for d in out["diagnostics"]:
        assert {"code", "message", "severity"} <= set(d) <= {"code", "message", "severity", "component_id", "field",
                                                             "line", "column"}
        assert d["severity"] in ("error", "warning")
    return out


# --- exit codes and text output ----------------------------------------------------------------

def test_a_dsl_that_compiles_exits_0_and_says_so(tmp_path):
    result = compile_cli(VALID, tmp_path=tmp_path)
    assert result.returncode == 0 and result.stderr == ""
    assert result.stdout.strip().endswith("compiles (2 components, 0 warning(s))")


def test_warnings_are_printed_but_the_dsl_still_compiles(tmp_path):
    result = compile_cli(WARNS, tmp_path=tmp_path)
    assert result.returncode == 0
    assert "warning: Message:Orphan: no path from 'begin' leads here, so it never runs [unreachable]" in result.stdout
    assert "compiles (3 components, 1 warning(s))" in result.stdout


def test_errors_exit_1_with_one_line_per_diagnostic_naming_file_component_and_field(tmp_path):
    result = compile_cli(BROKEN, tmp_path=tmp_path)
    lines = result.stdout.splitlines()
    assert result.returncode == 1
    file = str(tmp_path / "dsl.json")
    assert all(line.startswith(f"{file}: ") for line in lines)
    assert any("error: LLM:A / params.llm_id: llm_id is empty" in line and "[invalid-param]" in line for line in lines)
    assert any("error: LLM:A / downstream:" in line and "'Message:Gone'" in line for line in lines)
    assert lines[-1] == f"{file}: does not compile (2 error(s), 1 warning(s))"


def test_invalid_json_prints_line_and_column(tmp_path):
    result = compile_cli('{\n  "components": {\n    "begin": }\n}', tmp_path=tmp_path)
    assert result.returncode == 1
    assert "error: line 3, column 14: invalid JSON:" in result.stdout and "[invalid-json]" in result.stdout


def test_a_file_that_is_not_utf8_exits_1(tmp_path):
    result = compile_cli(b"\x89PNG\r\n\x1a\n\x00\xff", tmp_path=tmp_path)
    assert result.returncode == 1 and "[invalid-encoding]" in result.stdout


def test_a_10000_deep_document_exits_1_without_a_traceback(tmp_path):
    text = '{"components": {"begin": {"obj": {"component_name": "Begin", "params": {"x": ' + "[" * 10000 + "]" * 10000 + "}}}}}"
    result = compile_cli(text, tmp_path=tmp_path)
    assert result.returncode == 1 and "[too-deep]" in result.stdout


def test_the_dsl_can_come_from_stdin():
    result = compile_cli("-", stdin=json.dumps(VALID).encode())
    assert result.returncode == 0 and "-: compiles" in result.stdout


def test_a_missing_file_exits_2_with_one_line(tmp_path):
    result = compile_cli(tmp_path / "nope.json")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.strip().count("\n") == 0 and "cannot read" in result.stderr


def test_a_directory_exits_2(tmp_path):
    result = compile_cli(tmp_path)
    assert result.returncode == 2 and "cannot read" in result.stderr


# --- --format json -----------------------------------------------------------------------------

def test_json_format_for_a_dsl_that_compiles(tmp_path):
    result = compile_cli(WARNS, "--format", "json", tmp_path=tmp_path)
    assert result.returncode == 0
    assert as_json(result) == {"ok": True, "diagnostics": [
        {"code": "unreachable", "message": "no path from 'begin' leads here, so it never runs",
         "component_id": "Message:Orphan", "severity": "warning"}]}


def test_json_format_for_a_dsl_that_does_not_compile(tmp_path):
    result = compile_cli(BROKEN, "--format", "json", tmp_path=tmp_path)
    out = as_json(result)
    assert result.returncode == 1 and out["ok"] is False
    assert {(d["code"], d.get("component_id"), d.get("field"), d["severity"]) for d in out["diagnostics"]} == {
        ("invalid-param", "LLM:A", "params.llm_id", "error"),
        ("dangling-downstream", "LLM:A", "downstream", "error"),
        ("unreachable", "Message:Orphan", None, "warning")}


def test_json_format_reports_line_and_column_of_invalid_json(tmp_path):
    out = as_json(compile_cli('{"components": {"begin": [}}', "--format", "json", tmp_path=tmp_path))
    [d] = out["diagnostics"]
    assert (d["code"], d["line"], d["column"]) == ("invalid-json", 1, 27)


def test_json_format_keeps_non_ascii_text(tmp_path):
    doc = dsl(**{"消息:A": cpn("Message", {"content": []})})
    out = as_json(compile_cli(doc, "--format", "json", tmp_path=tmp_path))
    assert out["diagnostics"][0]["component_id"] == "消息:A"


def test_an_unknown_format_is_a_usage_error(tmp_path):
    result = compile_cli(VALID, "--format", "yaml", tmp_path=tmp_path)
    assert result.returncode == 2 and "invalid choice" in result.stderr


# --- every shipped template and example --------------------------------------------------------

@pytest.mark.parametrize("path", shared_json_params("templates", "examples"))
def test_every_shared_file_compiles_or_prints_real_defects(path):
    path = require_shared_file(path)
    text = compile_cli(path)
    out = as_json(compile_cli(path, "--format", "json"))
    expected_exit = 0 if path.name in COMPILES else 1
    assert text.returncode == expected_exit and out["ok"] == (expected_exit == 0)
    errors = {(d["code"], d.get("component_id"), d.get("field")) for d in out["diagnostics"]
              if d["severity"] == "error" and d["code"] != "unsupported"}
    assert errors == REAL_DEFECTS.get(path.name, set())
    assert text.stdout.count("\n") == len(out["diagnostics"]) + 1      # one line each, plus the summary


def test_web_search_assistant_prints_bing_as_removed_with_its_substitutes():
    result = compile_cli(shared_dir() / "ragflow" / "templates" / "web_search_assistant.json")
    assert result.returncode == 1
    assert ("error: Agent:WildGoatsRule / params.tools.3.component_name: tool 'Bing' was removed in RAGFlow 0.20"
            in result.stdout)
    assert "[removed-tool]" in result.stdout


def test_a_default_model_fills_empty_llm_ids_from_the_option_or_the_environment(tmp_path, monkeypatch):
    empty_model = dsl(**{"LLM:A": cpn("LLM", {"llm_id": "", "prompts": [{"role": "user", "content": "{sys.query}"}]})})
    refused = compile_cli(empty_model, tmp_path=tmp_path)
    assert refused.returncode == 1 and "LLM:A / params.llm_id" in refused.stdout and "--default-llm" in refused.stdout
    assert compile_cli(empty_model, "--default-llm", "gpt-4o-mini@OpenAI", tmp_path=tmp_path).returncode == 0
    monkeypatch.setenv("CANVAS2GRAPH_DEFAULT_LLM", "gpt-4o-mini@OpenAI")
    assert compile_cli(empty_model, tmp_path=tmp_path).returncode == 0

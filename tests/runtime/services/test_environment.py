"""Runs take their models and services from the environment when their caller does not name them,
the same way for `serve`, `run`, LangGraph Server and a plain `graph.invoke` without a context."""
from __future__ import annotations

import json

import pytest
from langgraph.runtime import RunControl, Runtime

from canvas2graph.types import RunContext
from canvas2graph.runtime.services.environment import ModelSource, RunEnvironment, RunSettings, resolve_context
from canvas2graph.runtime.services.mcp import MCPConfigError
from canvas2graph.runtime.services.models import ModelFactory
from canvas2graph.runtime.services.scripted import Script, ScriptError
from tests.conftest import cpn


def write(tmp_path, name: str, value) -> str:
    path = tmp_path / name
    path.write_text(value if isinstance(value, str) else json.dumps(value))
    return str(path)


def test_the_settings_come_from_the_variables_serve_reads(tmp_path):
    environ = {"CANVAS2GRAPH_LLM_SCRIPT": "s.json", "CANVAS2GRAPH_MODELS": "m.toml", "CANVAS2GRAPH_MCP_CONFIG": "mcp.json",
               "CANVAS2GRAPH_RETRIEVAL": "sqlite:///kb.db", "CANVAS2GRAPH_DB": "/data/sessions.db"}
    settings = RunSettings.from_env(environ)
    assert (settings.llm_script, settings.models_config, settings.mcp_config, settings.retrieval, settings.db) == (
        "s.json", "m.toml", "mcp.json", "sqlite:///kb.db", "/data/sessions.db")


def test_a_server_s_runs_refuse_local_code_and_the_browser_unless_the_environment_allows_them():
    closed = RunEnvironment(RunSettings.from_env({}))
    assert closed.code_policy.allow_local is False and closed.base["browser"] == {"allow": False}
    opened = RunEnvironment(RunSettings.from_env({"CANVAS2GRAPH_ALLOW_LOCAL_CODE": "1", "CANVAS2GRAPH_ALLOW_BROWSER": "1"}))
    assert opened.code_policy.allow_local is True and "browser" not in opened.base    # the environment decides
    assert opened.code_policy.unsafe_local is False                  # never without the sandbox on a server
    assert RunEnvironment(RunSettings()).code_policy.allow_local is True          # the command line's default


def test_every_run_gets_its_own_copy_of_the_script_and_without_one_the_models_are_shared(tmp_path):
    source = ModelSource(write(tmp_path, "script.json", ["first"]))
    (_, one), (_, two) = source(), source()
    assert one is not two and one.replies == two.replies
    shared = ModelSource()
    assert shared()[0] is shared()[0] and shared()[1] is None


def test_a_broken_script_or_mcp_file_fails_when_the_environment_is_read_naming_the_file(tmp_path):
    with pytest.raises(ScriptError, match="script file .*bad.json is not valid JSON"):
        RunEnvironment(RunSettings(llm_script=write(tmp_path, "bad.json", "{")))
    with pytest.raises(MCPConfigError, match="mcp.json"):
        RunEnvironment(RunSettings(mcp_config=write(tmp_path, "mcp.json", {"servers": {"x": {"url": "ftp://no"}}})))


async def test_the_retrieval_backend_opens_once_and_only_for_canvases_that_retrieve(tmp_path):
    from canvas2graph.compiler.dsl.model import ComponentEntry
    env = RunEnvironment(RunSettings(retrieval=f"sqlite:///{tmp_path / 'kb.db'}"))
    retrieving = {"Retrieval:R": ComponentEntry("Retrieval:R", "Retrieval", {}, [])}
    chatting = {"Message:M": ComponentEntry("Message:M", "Message", cpn("Message")["obj"]["params"], [])}
    try:
        assert "retrieval" not in env.services(chatting)
        backend = env.services(retrieving)["retrieval"]
        assert env.context("s", retrieving).services["retrieval"] is backend
    finally:
        await env.aclose()


def test_a_run_without_a_context_gets_one_context_for_all_its_nodes(monkeypatch, tmp_path):
    monkeypatch.setenv("CANVAS2GRAPH_LLM_SCRIPT", write(tmp_path, "script.json", ["hi"]))
    from canvas2graph.runtime.services import environment
    environment.reset_default_environment()
    try:
        run, other = RunControl(), RunControl()
        first = resolve_context(Runtime(context=None, control=run))
        assert resolve_context(Runtime(context=None, control=run)) is first          # the next node of the run
        second = resolve_context(Runtime(context=None, control=other))
        assert second is not first and second.script is not first.script           # another run, a fresh script
        assert isinstance(first.models, ModelFactory) and first.script.replies
    finally:
        environment.reset_default_environment()


def test_a_partial_context_keeps_what_it_names_and_a_complete_one_is_used_as_given():
    script = Script.load(["scripted"])
    partial = RunContext(script=script, services={"allow_private": True}, session_id="s1")
    resolved = resolve_context(Runtime(context=partial, control=RunControl()))
    assert resolved.script is script and resolved.session_id == "s1"
    assert resolved.services["allow_private"] is True and "code" in resolved.services
    complete = RunContext(models=ModelFactory(script=script), script=script)
    assert resolve_context(Runtime(context=complete, control=RunControl())) is complete

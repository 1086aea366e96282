"""Tracing (runtime/services/observability.py): a `canvas2graph run` shows up in LangSmith and in Langfuse named after the
agent, grouped by its session, with each component's id and type on its node's run, each model call
with its token usage, and each Agent tool call as a tool run; with tracing off, nothing is added.

The collectors are local stand-ins on 127.0.0.1 (tests/runtime/trace_collectors.py): LangSmith's run
ingestion (LANGSMITH_ENDPOINT) and Langfuse's OTLP endpoint (LANGFUSE_HOST).
"""
from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time

import pytest
from langsmith.run_helpers import tracing_context

from canvas2graph.compiler.canvas import compile_dsl
from canvas2graph.runtime.services.models import ModelFactory
from canvas2graph.runtime.services.scripted import Script
from canvas2graph.runtime.run.runner import Runner, TurnRequest
from canvas2graph.runtime.services.observability import trace_config, tool_run
from tests.conftest import REPO
from tests.runtime.trace_collectors import LangfuseCollector, LangSmithCollector

DEMO = REPO / "fixtures" / "demo" / "data_analyst.json"          # an Agent that calls CodeExec, then a Message
DEMO_SCRIPT = REPO / "fixtures" / "demo" / "data_analyst.script.json"
QUERY = "Mean and median of 3, 8, 8, 12, 40?"
COMPONENTS = {"begin": ("begin", "Begin"), "Agent.Analyst": ("Agent:Analyst", "Agent"),
              "Message.Answer": ("Message:Answer", "Message")}
PUBLIC_KEY, SECRET_KEY = "pk-lf-test", "sk-lf-test"


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without any tracer settings, plus `extra`."""
    prefixes = ("LANGSMITH_", "LANGCHAIN_", "LANGFUSE_")
    return {**{k: v for k, v in os.environ.items() if not k.startswith(prefixes)}, "PYTHONPATH": str(REPO), **extra}


def langsmith_env(collector: LangSmithCollector) -> dict[str, str]:
    return {"LANGSMITH_TRACING": "true", "LANGSMITH_ENDPOINT": collector.url, "LANGSMITH_API_KEY": "ls-test-key",
            "LANGSMITH_PROJECT": "canvas2graph-tests"}


def langfuse_env(collector: LangfuseCollector) -> dict[str, str]:
    return {"LANGFUSE_PUBLIC_KEY": PUBLIC_KEY, "LANGFUSE_SECRET_KEY": SECRET_KEY, "LANGFUSE_HOST": collector.url}


def run_cli(tmp_path, env: dict[str, str], session: str) -> list[dict]:
    """One `canvas2graph run` turn of the demo; its RAGFlow events."""
    result = subprocess.run([sys.executable, "-m", "canvas2graph.cli", "run", str(DEMO), "--llm-script", str(DEMO_SCRIPT),
                             "--query", QUERY, "--session", session, "--db", str(tmp_path / "sessions.db"),
                             "--format", "jsonl"], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr and "Exception" not in result.stderr, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


def usage_of(events: list[dict]) -> dict:
    return events[-1]["data"]["usage"]


# --- what LangSmith receives ----------------------------------------------------------------------

def langsmith_turns(ls: LangSmithCollector, turns: int) -> list[dict]:
    """Each turn's runs (root first), once every run of `turns` turns has ended."""
    ls.wait_for(lambda: len(ls.finished_roots()) == turns
                and all(r.get("end_time") for r in ls.runs.values()))
    roots = sorted(ls.finished_roots(), key=lambda r: r["start_time"])
    return [[root] + [r for r in ls.runs.values() if r.get("trace_id") == root["id"] and r is not root]
            for root in roots]


def metadata(run: dict) -> dict:
    return (run.get("extra") or {}).get("metadata") or {}


def ai_message(run: dict) -> dict:
    """The reply of an `llm` run, as LangChain serialises it."""
    return run["outputs"]["generations"][0][0]["message"]["kwargs"]


def check_langsmith_turn(runs: list[dict], name: str, session: str, usage: dict | None) -> None:
    root = runs[0]
    assert root["name"] == name and root["run_type"] == "chain"
    assert metadata(root)["thread_id"] == session and metadata(root)["session_id"] == session
    assert metadata(root)["agent"] == name and "canvas2graph" in root["tags"]
    nodes = {r["name"]: r for r in runs if r.get("parent_run_id") == root["id"]}
    for node, (cid, ctype) in COMPONENTS.items():
        assert metadata(nodes[node])["component_id"] == cid and metadata(nodes[node])["component_type"] == ctype
        assert metadata(nodes[node])["thread_id"] == session
    if usage is None:
        return
    # the Agent's model calls: streamed by the Message, and named after the Agent that owns them
    calls = [r for r in runs if r["run_type"] == "llm"]
    assert len(calls) == usage["calls"] == 2
    assert all(metadata(c)["llm_component_id"] == "Agent:Analyst" for c in calls)
    assert sum(ai_message(c)["usage_metadata"]["total_tokens"] for c in calls) == usage["total_tokens"]
    assert sum(ai_message(c)["usage_metadata"]["input_tokens"] for c in calls) == usage["prompt_tokens"]
    first = min(calls, key=lambda c: c["start_time"])
    assert [t["name"] for t in ai_message(first)["tool_calls"]] == ["execute_code_0"]
    [tool] = [r for r in runs if r["run_type"] == "tool"]
    assert tool["name"] == "execute_code_0" and "statistics.mean" in tool["inputs"]["script"]
    assert "14.2" in json.dumps(tool["outputs"]) and tool["extra"]["tool_call_id"] == "call_1_0"
    assert metadata(tool)["agent_component_id"] == "Agent:Analyst"


def test_a_run_reaches_langsmith_named_after_the_agent_with_its_session_as_thread(tmp_path):
    with LangSmithCollector() as ls:
        env = clean_env(**langsmith_env(ls))
        first = run_cli(tmp_path, env, "thread-ls-1")
        run_cli(tmp_path, env, "thread-ls-1")
        turns = langsmith_turns(ls, 2)
    check_langsmith_turn(turns[0], "data_analyst", "thread-ls-1", usage_of(first))
    check_langsmith_turn(turns[1], "data_analyst", "thread-ls-1", None)     # the same thread, turn 2


# --- what Langfuse receives -----------------------------------------------------------------------

def attribute(span: dict, key: str):
    """A Langfuse span attribute; metadata values are JSON-encoded."""
    value = span["attributes"].get(key)
    return json.loads(value) if key.startswith("langfuse.observation.metadata.") and value is not None else value


def langfuse_traces(lf: LangfuseCollector, turns: int) -> list[list[dict]]:
    lf.wait_for(lambda: len([s for s in lf.spans if not s["parent_id"]]) == turns)
    roots = [s for s in lf.spans if not s["parent_id"]]
    return [[root] + [s for s in lf.spans if s["trace_id"] == root["trace_id"] and s is not root] for root in roots]


def check_langfuse_trace(spans: list[dict], name: str, session: str, usage: dict, user: str = "") -> None:
    root = spans[0]
    assert root["name"] == name
    assert root["attributes"]["langfuse.trace.name"] == name and root["attributes"]["session.id"] == session
    if user:
        assert root["attributes"]["user.id"] == user
    nodes = {s["name"]: s for s in spans if s["parent_id"] == root["span_id"]}
    for node, (cid, ctype) in COMPONENTS.items():
        assert attribute(nodes[node], "langfuse.observation.metadata.component_id") == cid
        assert attribute(nodes[node], "langfuse.observation.metadata.component_type") == ctype
    generations = [s for s in spans if s["attributes"].get("langfuse.observation.type") == "generation"]
    assert len(generations) == usage["calls"]
    assert all(attribute(g, "langfuse.observation.metadata.llm_component_id") == "Agent:Analyst" for g in generations)
    totals = [json.loads(g["attributes"]["langfuse.observation.usage_details"]) for g in generations]
    assert sum(t["total"] for t in totals) == usage["total_tokens"]
    assert sum(t["input"] for t in totals) == usage["prompt_tokens"]
    assert any("execute_code_0" in g["attributes"]["langfuse.observation.output"] for g in generations)
    [tool] = [s for s in spans if s["attributes"].get("langfuse.observation.type") == "tool"]
    assert tool["name"] == "execute_code_0" and "14.2" in tool["attributes"]["langfuse.observation.output"]
    assert attribute(tool, "langfuse.observation.metadata.agent_component_id") == "Agent:Analyst"


def test_a_run_reaches_langfuse_with_the_same_names_session_and_usage(tmp_path):
    with LangfuseCollector() as lf:
        events = run_cli(tmp_path, clean_env(**langfuse_env(lf)), "thread-lf-1")
        [trace] = langfuse_traces(lf, 1)
    check_langfuse_trace(trace, "data_analyst", "thread-lf-1", usage_of(events))
    expected = "Basic " + base64.b64encode(f"{PUBLIC_KEY}:{SECRET_KEY}".encode()).decode()
    assert set(lf.auth) == {expected}


def test_langsmith_and_langfuse_trace_the_same_run_together(tmp_path):
    with LangSmithCollector() as ls, LangfuseCollector() as lf:
        events = run_cli(tmp_path, clean_env(**langsmith_env(ls), **langfuse_env(lf)), "thread-both")
        [ls_turn] = langsmith_turns(ls, 1)
        [lf_trace] = langfuse_traces(lf, 1)
    check_langsmith_turn(ls_turn, "data_analyst", "thread-both", usage_of(events))
    check_langfuse_trace(lf_trace, "data_analyst", "thread-both", usage_of(events))


def test_a_template_title_names_the_trace(tmp_path):
    template = tmp_path / "analyst.json"
    template.write_text(json.dumps({"title": {"en": "Data analyst"}, "dsl": json.loads(DEMO.read_text())}))
    with LangSmithCollector() as ls:
        env = clean_env(**langsmith_env(ls))
        result = subprocess.run([sys.executable, "-m", "canvas2graph.cli", "run", str(template), "--llm-script",
                                 str(DEMO_SCRIPT), "--query", QUERY, "--db", str(tmp_path / "s.db")],
                                cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stderr
        [turn] = langsmith_turns(ls, 1)
    assert turn[0]["name"] == "Data analyst"


# --- tracing off ----------------------------------------------------------------------------------

def test_with_tracing_off_nothing_is_sent(tmp_path):
    """Collectors configured, tracers not enabled: LANGSMITH_TRACING unset, Langfuse switched off."""
    with LangSmithCollector() as ls, LangfuseCollector() as lf:
        env = clean_env(LANGSMITH_ENDPOINT=ls.url, LANGSMITH_API_KEY="ls-test-key", **langfuse_env(lf),
                        LANGFUSE_TRACING_ENABLED="false")
        events = run_cli(tmp_path, env, "thread-off")
        time.sleep(1.0)
    assert events[-1]["event"] == "workflow_finished"
    assert ls.requests == [] and lf.requests == []


@pytest.fixture
def tracing_off(monkeypatch):
    from langsmith.utils import get_env_var
    for key in list(os.environ):
        if key.startswith(("LANGSMITH_", "LANGCHAIN_", "LANGFUSE_")):
            monkeypatch.delenv(key)
    get_env_var.cache_clear()           # langsmith caches what it read of the environment
    yield
    get_env_var.cache_clear()


def test_trace_config_is_empty_when_tracing_is_off(tracing_off):
    assert trace_config("Support desk", "s-1", user_id="u", tenant="t") == {}


def test_trace_config_names_the_run_and_its_thread_for_langsmith(tracing_off):
    with tracing_context(enabled=True):
        config = trace_config("Support desk", "s-1", user_id="u-7", tenant="acme")
        assert trace_config("  ", "s-2")["run_name"] == "canvas2graph"
    assert config == {"run_name": "Support desk", "tags": ["canvas2graph"],
                      "metadata": {"agent": "Support desk", "session_id": "s-1", "thread_id": "s-1",
                                   "user_id": "u-7", "tenant": "acme"}}


async def test_the_runner_adds_no_callback_machinery_when_tracing_is_off(tracing_off, tmp_path):
    """The graph is streamed with the plain thread config: no callbacks, metadata, tags or run name (the run's
    message id names its checkpoints, for the step trace)."""
    compiled = compile_dsl(DEMO.read_bytes())
    script = Script.load(str(DEMO_SCRIPT))
    runner = Runner(compiled, None, ModelFactory(script=script), script, services={"code": {"allow_local": True}})
    seen = []
    stream = runner.graph.astream

    def spy(graph_input, config, **kw):
        seen.append(config)
        return stream(graph_input, config, **kw)

    runner.graph.astream = spy
    events = [e async for e in runner.run_turn("s-off", TurnRequest(query=QUERY))]
    assert runner.outcome.status == "finished" and events[-1]["event"] == "workflow_finished"
    assert seen == [{"configurable": {"thread_id": "s-off", "message_id": events[0]["message_id"]},
                     "recursion_limit": compiled.recursion_limit}]


async def test_a_tool_call_outside_any_traced_run_is_just_the_call():
    async def call() -> str:
        return "42"
    assert await tool_run("calc_0", {"x": 1}, "call-1", call) == "42"

"""Tracing through `canvas2graph serve`: each turn reaches LangSmith and Langfuse named after the agent's
title, with the session as its thread, the tenant and user, component metadata, the tool call and the
token usage, as a `canvas2graph run` does (tests/runtime/services/test_observability.py checks the details)."""
from __future__ import annotations

import json

from tests.runtime.services.test_observability import (DEMO, DEMO_SCRIPT, QUERY, check_langfuse_trace, check_langsmith_turn, clean_env,
                                        langfuse_env, langfuse_traces, langsmith_env, langsmith_turns, metadata,
                                        usage_of)
from tests.runtime.trace_collectors import LangfuseCollector, LangSmithCollector
from tests.server.helpers import Api, Server, make_token

CHAT = "/agents/chat/completions"


def test_agent_sessions_and_graph_runs_are_traced_by_title_tenant_and_session(tmp_path):
    script = json.loads(DEMO_SCRIPT.read_text())
    dsl = json.loads(DEMO.read_text())
    db = str(tmp_path / "server.db")
    with LangSmithCollector() as ls, LangfuseCollector() as lf:
        env = clean_env(**langsmith_env(ls), **langfuse_env(lf), LANGFUSE_FLUSH_INTERVAL="0.2")
        with Server(db, tmp_path, script, "--allow-local-code", env=env) as server:
            api = Api(server, make_token(db, "acme"))
            try:
                agent_id = api.agent(dsl, title="Data analyst desk")
                session = api.session(agent_id)["id"]
                events = api.stream(CHAT, {"agent_id": agent_id, "session_id": session, "query": QUERY,
                                           "stream": True, "user_id": "u-42"})
                [ls_turn] = langsmith_turns(ls, 1)
                [lf_trace] = langfuse_traces(lf, 1)
                # the compile-and-run route: a template's title names its runs too
                graph_events = api.stream("/graphs/run", {"dsl": {"title": "Ad hoc analyst", "dsl": dsl}, "query": QUERY})
                graph_turn = langsmith_turns(ls, 2)[1]
            finally:
                api.close()
    check_langsmith_turn(ls_turn, "Data analyst desk", session, usage_of(events))
    assert metadata(ls_turn[0])["tenant"] == "acme" and metadata(ls_turn[0])["user_id"] == "u-42"
    check_langfuse_trace(lf_trace, "Data analyst desk", session, usage_of(events), user="u-42")
    assert graph_turn[0]["name"] == "Ad hoc analyst" and metadata(graph_turn[0])["thread_id"] == graph_events[0]["session_id"]

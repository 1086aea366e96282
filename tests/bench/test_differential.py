"""The differential tester (`python -m bench.differential`): what it generates, how it shrinks, what it excuses.

Its generator must draw DSLs that are valid in both engines (a difference should never be "this DSL is
broken"), its shrinker must keep a DSL runnable while removing components, and every difference it
counts as deliberate must be a row of docs/compatibility.md. The run against RAGFlow's engine needs the
oracle (`../shared/oracle`, set up in ~/.cache/ragflow-oracle) and is skipped, saying why, without it.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from bench.differential.engines import missing, run_canvas2graph
from bench.differential.generate import Case, cases
from bench.differential.known import KNOWN, REWRITES
from bench.differential.shrink import without
from canvas2graph.compiler.canvas import diagnose

REPO = Path(__file__).resolve().parent.parent.parent


def test_every_difference_the_tester_excuses_is_a_row_of_the_compatibility_document():
    document = (REPO / "docs" / "compatibility.md").read_text(encoding="utf-8")
    for known in [*KNOWN, *REWRITES]:
        assert known.row in document, f"{known.name}: docs/compatibility.md has no row saying {known.row!r}"


@settings(max_examples=12, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(cases(max_steps=6))
def test_generated_dsls_compile_and_run_every_turn(case: Case):
    compiled, diagnostics = diagnose(case.dsl)
    assert compiled is not None, [str(d) for d in diagnostics if d.severity == "error"]
    turns = run_canvas2graph(case.dsl, case.turns)
    assert 1 <= len(turns) <= len(case.turns)
    if len(turns) < len(case.turns):
        # the comparison ends where a form waits and the next request does not answer it: RAGFlow's server
        # refuses that request too (engines._c2g_turns)
        assert turns[-1][-1]["event"] == "user_inputs"
    assert all(events and events[0]["event"] in ("workflow_started", "node_started") for events in turns)


def test_removing_a_component_rewires_around_it_and_its_references_read_the_query():
    dsl = {"components": {
        "begin": {"obj": {"component_name": "Begin", "params": {}}, "downstream": ["LLM:A"]},
        "LLM:A": {"obj": {"component_name": "LLM", "params": {"llm_id": "m@OpenAI", "prompts": [
            {"role": "user", "content": "{sys.query}"}]}}, "downstream": ["Switch:S"]},
        "Switch:S": {"obj": {"component_name": "Switch", "params": {"conditions": [
            {"logical_operator": "and", "to": ["Message:M"], "items": [{"cpn_id": "LLM:A@content", "operator": "empty"}]}],
            "end_cpn_ids": ["Message:M"]}}, "downstream": []},
        "Message:M": {"obj": {"component_name": "Message", "params": {"content": ["{LLM:A@content}!"]}}, "downstream": []},
    }}
    smaller = without(dsl, "LLM:A")
    assert "LLM:A" not in smaller["components"]
    assert smaller["components"]["begin"]["downstream"] == ["Switch:S"]
    assert smaller["components"]["Switch:S"]["obj"]["params"]["conditions"][0]["items"][0]["cpn_id"] == "sys.query"
    assert smaller["components"]["Message:M"]["obj"]["params"]["content"] == ["{sys.query}!"]
    assert diagnose(smaller)[0] is not None
    assert without(dsl, "begin") is None


def test_a_short_run_against_ragflows_engine_reports_every_case(tmp_path):
    reason = missing()
    if reason:
        pytest.skip(reason)
    from bench.differential.__main__ import main
    out = tmp_path / "report.json"
    status = main(["--n", "3", "--seed", "5", "--no-shrink", "--json", str(out)])
    report = json.loads(out.read_text())
    assert report["cases"] == 3 and not report["failures"]
    assert report["reached"]["text"] <= 3
    assert status == (1 if report["kinds"] else 0)

"""RAGFlow's own templates and examples (../shared/ragflow): each compiles, or every error it gets is
a real defect of that file or a component this version does not support yet."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from compiler import diagnose
from compiler.load import load_dsl
from nodes.registry import KNOWN_ELSEWHERE
from tests.conftest import require_shared_file, shared_dir, shared_json_params

# The real defects, per file (SPEC 9, 9.1, 10.16): (code, component_id, field).
REAL_DEFECTS = {
    # the Agent's tools include Bing, a frontend operator with no engine class
    "web_search_assistant.json": {("no-engine-class", "Agent:WildGoatsRule", "params.tools.3.component_name")},
    # "a Switch target that does not exist": the fifth case leads to a deleted CodeExec
    "all.json": {("dangling-route", "Switch:Route", "params.conditions.4.to"),
                 # the frontend saved an empty loop variable, which RAGFlow rejects when the Loop runs
                 ("invalid-param", "Loop:InputUntil1", "params.loop_variables")},
}
COMPILES = {"customer_feedback_dispatcher.json"}

FILES = shared_json_params("templates", "examples")


def load(path: Path):
    text = path.read_text(encoding="utf-8")
    return text, load_dsl(text)



@pytest.mark.parametrize("path", FILES)
def test_every_error_is_a_real_defect_or_an_unsupported_component(path):
    path = require_shared_file(path)
    compiled, diags = diagnose(path.read_text(encoding="utf-8"))
    errors = {(d.code, d.component_id, d.field) for d in diags if d.severity == "error" and d.code != "unsupported"}
    assert errors == REAL_DEFECTS.get(path.name, set()), [str(d) for d in diags]
    assert (compiled is not None) == (path.name in COMPILES)


@pytest.mark.parametrize("path", FILES)
def test_unsupported_is_reported_exactly_for_the_components_this_version_cannot_run(path):
    path = require_shared_file(path)
    _, model = load(path)
    _, diags = diagnose(path.read_bytes())
    reported = {d.component_id for d in diags if d.code == "unsupported"}
    expected = {cid for cid, e in model.components.items() if e.component_name in KNOWN_ELSEWHERE}
    assert reported == expected
    assert all(d.field == "obj.component_name" for d in diags if d.code == "unsupported")


@pytest.mark.parametrize("path", FILES)
def test_shipped_files_get_no_spurious_warnings(path):
    _, diags = diagnose(require_shared_file(path).read_bytes())
    assert [str(d) for d in diags if d.severity == "warning"] == []


def test_web_search_assistant_reports_bing_on_the_agent_that_lists_it():
    path = shared_dir() / "ragflow" / "templates" / "web_search_assistant.json"
    doc = json.loads(path.read_text(encoding="utf-8"))
    [d] = [d for d in diagnose(doc)[1] if d.code == "no-engine-class"]
    assert d.component_id == "Agent:WildGoatsRule" and d.field == "params.tools.3.component_name"
    tool = doc["dsl"]["components"][d.component_id]["obj"]["params"]["tools"][3]
    assert tool["component_name"] == "Bing" and "'Bing'" in d.message


def test_web_search_assistant_saved_session_state_does_not_matter():
    # the template stores a non-empty path, history and globals (SPEC 9)
    doc = json.loads((shared_dir() / "ragflow" / "templates" / "web_search_assistant.json").read_text(encoding="utf-8"))
    assert doc["dsl"]["path"] and doc["dsl"]["history"]
    codes = {d.code for d in diagnose(doc)[1]}
    assert codes == {"unsupported", "no-engine-class"}


def test_customer_feedback_dispatcher_compiles_with_both_categorize_routes():
    path = shared_dir() / "ragflow" / "templates" / "customer_feedback_dispatcher.json"
    compiled, diags = diagnose(path.read_bytes())
    assert compiled is not None and diags == []
    routes = {(e.source, e.label) for e in compiled.plan.edges if e.kind == "route"}
    assert ("Categorize:RottenWallsObey", "Negative review ") in routes    # the trailing space is kept
    assert ("Categorize:FourTeamsFold", "Transportation issue") in routes


def test_customer_feedback_dispatcher_duplicate_downstream_becomes_one_edge():
    path = shared_dir() / "ragflow" / "templates" / "customer_feedback_dispatcher.json"
    compiled, _ = diagnose(path.read_bytes())
    entry = compiled.plan.dsl.components["Categorize:FourTeamsFold"]
    assert entry.downstream == ["VariableAggregator:FlatBerriesRest"]


def test_templates_and_their_bare_dsls_give_the_same_diagnostics():
    for path in sorted((shared_dir() / "ragflow" / "templates").glob("*.json")):
        doc = json.loads(path.read_text(encoding="utf-8"))
        assert diagnose(doc)[1] == diagnose(doc["dsl"])[1], path.name

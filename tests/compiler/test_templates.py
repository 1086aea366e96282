"""RAGFlow's own templates and examples (../shared/ragflow): each compiles, or every error it gets is
a real defect of that file or a component this version does not support yet."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from canvas2graph.compiler.canvas import diagnose
from canvas2graph.compiler.dsl.load import load_dsl
from canvas2graph.nodes.registry import KNOWN_ELSEWHERE
from tests.conftest import require_shared_file, shared_dir, shared_json_params

# The real defects, per file (SPEC 9, 9.1, 10.16): (code, component_id, field).
EMPTY_LLM_ID = "params.llm_id"      # templates ship Agents whose model the user must still choose (SPEC 10.16)
REAL_DEFECTS = {
    # the Agent's tools include Bing, which RAGFlow 0.20 removed (no engine class); three Agents have no model
    "web_search_assistant.json": {("removed-tool", "Agent:WildGoatsRule", "params.tools.3.component_name"),
                                  ("invalid-param", "Agent:WildGoatsRule", EMPTY_LLM_ID),
                                  ("invalid-param", "Agent:SmartSchoolsCross", EMPTY_LLM_ID),
                                  ("invalid-param", "Agent:ThreePathsDecide", EMPTY_LLM_ID)},
    # two Categorize components without a model (RAGFlow's check() lets them through; its run fails)
    "customer_feedback_dispatcher.json": {("invalid-param", cid, EMPTY_LLM_ID) for cid in (
        "Categorize:FourTeamsFold", "Categorize:RottenWallsObey")},
    "market_seo_article_writer.json": {("invalid-param", cid, EMPTY_LLM_ID) for cid in (
        "Agent:BetterSitesSend", "Agent:ClearRabbitsScream", "Agent:EagerNailsRemain", "Agent:LovelyHeadsOwn")},
    # "a Switch target that does not exist": the fifth case leads to a deleted CodeExec
    "all.json": {("dangling-route", "Switch:Route", "params.conditions.4.to"),
                 # the frontend saved an empty loop variable, which RAGFlow rejects when the Loop runs
                 ("invalid-param", "Loop:InputUntil1", "params.loop_variables")},
}
COMPILES = {"cajal_scientific_paper_agent.json", "smart_customer_service_specialist.json",
            "user_interaction.json", "agent_msg.json", "deep_research.json", "data_analysis_beginner_assistant.json"}

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
def test_unsupported_is_reported_only_for_components_and_tools_this_version_cannot_run(path):
    path = require_shared_file(path)
    _, model = load(path)
    _, diags = diagnose(path.read_bytes())
    for d in (d for d in diags if d.code == "unsupported"):
        entry = model.components[d.component_id]
        if d.field == "obj.component_name":
            assert entry.component_name in KNOWN_ELSEWHERE
        else:                      # an Agent tool, maybe a sub-agent's: params.tools.N[.params.tools.M].component_name
            tool, path = entry.params, d.field.split(".")[1:-1]      # after "params.", before ".component_name"
            for key in path:
                tool = tool[int(key)] if key.isdigit() else tool[key]
            assert tool["component_name"] in KNOWN_ELSEWHERE
    whole = {cid for cid, e in model.components.items() if e.component_name in KNOWN_ELSEWHERE}
    assert whole <= {d.component_id for d in diags if d.code == "unsupported"}


@pytest.mark.parametrize("path", FILES)
def test_shipped_files_get_no_spurious_warnings(path):
    _, diags = diagnose(require_shared_file(path).read_bytes())
    assert [str(d) for d in diags if d.severity == "warning"] == []


def test_web_search_assistant_reports_bing_on_the_agent_that_lists_it():
    path = shared_dir() / "ragflow" / "templates" / "web_search_assistant.json"
    doc = json.loads(path.read_text(encoding="utf-8"))
    [d] = [d for d in diagnose(doc)[1] if d.code == "removed-tool"]
    assert d.component_id == "Agent:WildGoatsRule" and d.field == "params.tools.3.component_name"
    tool = doc["dsl"]["components"][d.component_id]["obj"]["params"]["tools"][3]
    assert tool["component_name"] == "Bing" and "'Bing'" in d.message and "DuckDuckGo" in d.message


def test_web_search_assistant_saved_session_state_does_not_matter():
    # the template stores a non-empty path, history and globals (SPEC 9)
    doc = json.loads((shared_dir() / "ragflow" / "templates" / "web_search_assistant.json").read_text(encoding="utf-8"))
    assert doc["dsl"]["path"] and doc["dsl"]["history"]
    codes = {d.code for d in diagnose(doc)[1]}
    assert codes == {"invalid-param", "removed-tool"}


def test_customer_feedback_dispatcher_compiles_with_both_categorize_routes():
    path = shared_dir() / "ragflow" / "templates" / "customer_feedback_dispatcher.json"
    compiled, diags = diagnose(path.read_bytes(), default_llm="gpt-4o@OpenAI")      # its Categorizes have no model
    assert compiled is not None and diags == []
    routes = {(e.source, e.label) for e in compiled.plan.edges if e.kind == "route"}
    assert ("Categorize:RottenWallsObey", "Negative review ") in routes    # the trailing space is kept
    assert ("Categorize:FourTeamsFold", "Transportation issue") in routes


def test_customer_feedback_dispatcher_duplicate_downstream_becomes_one_edge():
    path = shared_dir() / "ragflow" / "templates" / "customer_feedback_dispatcher.json"
    compiled, _ = diagnose(path.read_bytes(), default_llm="gpt-4o@OpenAI")
    entry = compiled.plan.dsl.components["Categorize:FourTeamsFold"]
    assert entry.downstream == ["VariableAggregator:FlatBerriesRest"]


def test_templates_and_their_bare_dsls_give_the_same_diagnostics():
    for path in sorted((shared_dir() / "ragflow" / "templates").glob("*.json")):
        doc = json.loads(path.read_text(encoding="utf-8"))
        assert diagnose(doc)[1] == diagnose(doc["dsl"])[1], path.name


def test_web_search_assistant_web_tools_compile_once_models_are_chosen_and_bing_is_removed():
    # Tavily search and extract, Google (its key still empty: checked when it runs), DuckDuckGo, Wikipedia
    doc = json.loads((shared_dir() / "ragflow" / "templates" / "web_search_assistant.json").read_text(encoding="utf-8"))
    for entry in doc["dsl"]["components"].values():
        params = entry["obj"]["params"]
        if entry["obj"]["component_name"] == "Agent":
            params["llm_id"] = "gpt-4o@OpenAI"
            params["tools"] = [t for t in params.get("tools", []) if t["component_name"] != "Bing"]
    compiled, diags = diagnose(doc)
    assert compiled is not None, [str(d) for d in diags]
    tools = {t.name for n in compiled.plan.nodes.values() for t in getattr(n, "tools", [])}
    assert {"tavily_search_0", "tavily_extract_1", "google_search_2", "duckduckgo_search_3", "wikipedia_search_4"} <= tools


@pytest.mark.parametrize("path", FILES)
def test_with_a_default_model_no_empty_llm_id_is_left(path):
    """--default-llm is the model choice RAGFlow's editor asks for: no template keeps an empty-model error."""
    _, diags = diagnose(require_shared_file(path).read_bytes(), default_llm="gpt-4o-mini@OpenAI")
    assert [str(d) for d in diags if d.field == EMPTY_LLM_ID] == []


def test_market_seo_article_writer_compiles_with_a_default_model():
    path = shared_dir() / "ragflow" / "templates" / "market_seo_article_writer.json"
    assert diagnose(path.read_bytes())[0] is None
    compiled, diags = diagnose(path.read_bytes(), default_llm="gpt-4o-mini@OpenAI")
    assert compiled is not None, [str(d) for d in diags]
    models = {n.params.llm_id for n in compiled.plan.nodes.values() if hasattr(n.params, "llm_id")}
    assert models == {"gpt-4o-mini@OpenAI"}
